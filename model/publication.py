"""Publication in the model: the database steps of the publisher's ``publish_artifact``
(register a stage's staging lease; later register the published artifact, root it under
the reservation lease and release the stage's lease). The store's counterpart,
``runstore.publication``, arrives with transactional publication.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Filesystem work (staging directories,
hashing, renames) is outside the model: the caller hands in the verified registration.
"""

from __future__ import annotations

import attrs
from runstore import arguments, rules
from runstore.enums import ArtifactKind, LeasePurpose
from runstore.errors import DuplicateLeaseError, InvalidRecordError, LeaseMismatchError
from runstore.model.artifacts import with_artifact
from runstore.model.guard import check_guard
from runstore.model.state import LeaseRow, ModelState, Refusal, put, refuse, refused
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration
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
    if stage is None or (stage.attempt_id, stage.purpose) != (
        checked.attempt.id,
        LeasePurpose.STAGING,
    ):
        return state, refuse(LeaseMismatchError, f"{staging_lease_id} is not this attempt's stage")
    now = rules.effective_now(checked.now_ns, stage.acquired_at_ns)
    error = rules.lease_refusal(
        "the staging lease", stage.expires_at_ns, stage.released_at_ns is not None, now
    )
    if error is not None:
        return state, refused(error)
    registered = with_artifact(state, artifact)
    if isinstance(registered, Refusal):
        return state, registered
    new_state = attrs.evolve(
        registered,
        leases=put(registered.leases, stage.id, attrs.evolve(stage, released_at_ns=now)),
        leased_artifacts=registered.leased_artifacts | {(checked.reservation.id, artifact.id)},
    )
    return new_state, artifact.id
