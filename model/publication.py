"""Publication in the model: the database steps of the publisher's ``publish_artifact``
(register a stage's staging lease; later register the published artifact, root it under
the reservation lease and release the stage's lease). The store's counterpart,
``runstore.store.publication.publish``, arrives with transactional publication.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Filesystem work (staging directories,
hashing, renames) is outside the model: the caller hands in the verified registration.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from runstore import arguments
from runstore import rules
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.enums import LeasePurpose
from runstore.errors import DuplicateLeaseError
from runstore.errors import InvalidRecordError
from runstore.errors import LeaseMismatchError
from runstore.errors import SnapshotChangedError
from runstore.errors import UnknownArtifactError
from runstore.model import outcome_document
from runstore.model.artifacts import with_artifact
from runstore.model.finalization import check_commit
from runstore.model.finalization import finish
from runstore.model.finalization import finishing_refusal
from runstore.model.guard import check_guard
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import put
from runstore.model.state import refuse
from runstore.model.state import refused
from runstore.receipts import OwnedAttempt
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.requests import Reference
from runstore.requests import TerminalOutcome
from runstore.shapes import references_refusal
from runstore.validation import check_store_path


def begin_staging(
    state: ModelState, guard: OwnedAttempt, lease_id: str, staging_path: str, now_ns: int
) -> tuple[ModelState, LeaseRow | Refusal]:
    """Register a staging lease for a new stage of this attempt.

    The lease inherits the reservation's owner and expiry and is acquired at the effective
    now. Check order: ``invalid_record`` (argument types), ``out_of_range`` (``now_ns``),
    ``invalid_record`` (the staging path is not a normalized store path), the guarded
    sequence, ``duplicate_lease``.
    Result: the new lease row.
    """
    error = arguments.begin_staging_arguments(guard, lease_id, staging_path, now_ns)
    if error is not None:
        return state, refused(error)
    shape = None
    try:
        check_store_path(staging_path, "staging_path")
    except InvalidRecordError as bad_path:
        shape = refuse(InvalidRecordError, bad_path.message)
    checked = check_guard(state, guard, now_ns, shape=shape)
    if isinstance(checked, Refusal):
        return state, checked
    if lease_id in state.leases:
        return state, refuse(DuplicateLeaseError, f"lease {lease_id} already exists")
    lease = LeaseRow(
        id=lease_id,
        fencing_token=state.next_fencing_token(),
        owner_token=checked.reservation.owner_token,
        attempt_id=checked.attempt.id,
        purpose=LeasePurpose.STAGING,
        acquired_at_ns=checked.now_ns,
        expires_at_ns=checked.reservation.expires_at_ns,
        staging_path=staging_path,
    )
    return attrs.evolve(state, leases=put(state.leases, lease.id, lease)), lease


def publish_staged_artifact(
    state: ModelState,
    guard: OwnedAttempt,
    staging_lease_id: str,
    artifact: ArtifactRegistration,
    now_ns: int,
) -> tuple[ModelState, str | Refusal]:
    """Register an independently published artifact from a stage.

    The effective now is also clamped to the stage's acquisition time. Check order:
    ``invalid_record`` (argument types), ``out_of_range`` (``now_ns``), ``invalid_record`` (an
    artifact of kind attempt: final
    artifacts go through ``commit_finalization``), the guarded sequence, then the stage's
    lease: ``lease_mismatch`` (unknown, another attempt's, or not a staging lease),
    ``lease_released``, ``lease_expired``; then ``registration_conflict``.

    Commits the artifact (reused when identical), its root under the reservation lease,
    and the release of the staging lease. Result: the artifact id.
    """
    error = arguments.publish_staged_artifact_arguments(guard, staging_lease_id, artifact, now_ns)
    if error is not None:
        return state, refused(error)
    shape = None
    if artifact.kind is ArtifactKind.ATTEMPT:
        shape = refuse(InvalidRecordError, "attempt artifacts are registered by finalization")
    checked = check_guard(state, guard, now_ns, shape=shape)
    if isinstance(checked, Refusal):
        return state, checked
    stage = state.leases.get(staging_lease_id)
    stale = stage_refusal(stage, checked.attempt.id, staging_lease_id, checked.now_ns)
    if stale is not None:
        return state, stale
    assert stage is not None
    now = rules.effective_now(checked.now_ns, stage.acquired_at_ns)
    registered = with_artifact(state, artifact)
    if isinstance(registered, Refusal):
        return state, registered
    new_state = attrs.evolve(
        registered,
        leases=put(registered.leases, stage.id, attrs.evolve(stage, released_at_ns=now)),
        leased_artifacts=registered.leased_artifacts | {(checked.reservation.id, artifact.id)},
    )
    return new_state, artifact.id


def stage_refusal(
    stage: LeaseRow | None, attempt_id: str, staging_lease_id: str, now_ns: int
) -> Refusal | None:
    """The stage's lease at ``now_ns`` (clamped up to its acquisition): ``lease_mismatch``
    (unknown, another attempt's, or not a staging lease), ``lease_released``,
    ``lease_expired``."""
    if stage is None or (stage.attempt_id, stage.purpose) != (attempt_id, LeasePurpose.STAGING):
        return refuse(LeaseMismatchError, f"{staging_lease_id} is not this attempt's stage")
    now = rules.effective_now(now_ns, stage.acquired_at_ns)
    error = rules.lease_refusal(
        "the staging lease", stage.expires_at_ns, stage.released_at_ns is not None, now
    )
    return None if error is None else refused(error)


def check_finalization(
    state: ModelState,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    now_ns: int,
) -> tuple[ModelState, int | Refusal]:
    """The publisher's check before it writes ``outcome.json`` (``publish_finalization``;
    commits nothing). ``now_ns`` is the finish-time sample, already clamped by the
    publisher up to its stage's acquisition.

    Check order: ``invalid_record`` (argument types), ``out_of_range``, ``invalid_record``
    (:func:`references_refusal`), the guarded sequence, then
    :func:`~runstore.model.finalization.finishing_refusal` (``illegal_transition``,
    ``claim_required`` / ``outcome_not_permitted``, ``acceptance_unsatisfied``), then
    ``unknown_artifact`` for a reference naming no registered artifact.
    Result: the effective finish time (also clamped up to the preceding transition).
    """
    error = arguments.check_finalization_arguments(guard, outcome, references, now_ns)
    if error is not None:
        return state, refused(error)
    error = references_refusal(references)
    checked = check_guard(state, guard, now_ns, shape=None if error is None else refused(error))
    if isinstance(checked, Refusal):
        return state, checked
    unfinishable = finishing_refusal(state, checked.attempt, outcome)
    if unfinishable is not None:
        return state, unfinishable
    for role, artifact_id in (reference.pair for reference in references):
        if artifact_id not in state.artifacts:
            return state, refuse(UnknownArtifactError, f"{role} artifact {artifact_id} is unknown")
    return state, checked.now_ns


def publish_finalization_commit(
    state: ModelState,
    guard: OwnedAttempt,
    staging_lease_id: str,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    snapshot: dict[str, JSON],
    finished_at_ns: int,
    now_ns: int,
) -> tuple[ModelState, TerminalAttempt | Refusal]:
    """The publisher's final transaction for ``publish_finalization``: commit the terminal
    outcome whose published artifact was staged under ``staging_lease_id``.

    Check order: ``invalid_record`` (argument types; then the artifact is not of kind
    attempt; then :func:`references_refusal`), then
    :func:`~runstore.model.finalization.check_commit` (``out_of_range``, the guarded
    sequence at the commit time, the outcome's checks, ``registration_conflict``,
    ``unknown_artifact``), then the stage's lease (:func:`stage_refusal`), then
    ``snapshot_changed`` when ``snapshot`` (the one written into the outcome document)
    is no longer what :func:`runstore.model.outcome_document.snapshot` gives.

    Commits as :func:`~runstore.model.finalization.finish` (which also releases the stage's
    lease with the attempt's others). Result: the terminal receipt.
    """
    error = arguments.publish_finalization_commit_arguments(
        guard, staging_lease_id, outcome, artifact, references, snapshot, finished_at_ns, now_ns
    )
    if error is not None:
        return state, refused(error)
    checked = check_commit(state, guard, outcome, artifact, references, finished_at_ns, now_ns)
    if isinstance(checked, Refusal):
        return state, checked
    attempt, finished, now = checked
    stale = stage_refusal(state.leases.get(staging_lease_id), attempt.id, staging_lease_id, now)
    if stale is not None:
        return state, stale
    if outcome_document.snapshot(state, attempt.id, outcome) != snapshot:
        return state, refuse(
            SnapshotChangedError, "the records the outcome's snapshot describes have changed"
        )
    return finish(state, attempt, finished, now, outcome, artifact, references)
