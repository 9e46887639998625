"""The publisher's database steps, twin of :mod:`runstore.model.publication`: registering a
stage's lease, registering a published artifact from its stage, checking a finalization
before its outcome is written, and the final transaction of ``publish_finalization``.

Rules of this file: each function runs inside the caller's write (or read) transaction and
never commits; the filesystem side is :mod:`runstore.store.publication.publish`. The check sequences
are written twice on purpose: here over SQL, and in :mod:`runstore.model.publication` over the
model's state, in the same order with the same codes; the lockstep tests hold the two
together.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore import rules
from runstore import sql
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.enums import LeasePurpose
from runstore.errors import DuplicateLeaseError
from runstore.errors import InvalidRecordError
from runstore.errors import LeaseMismatchError
from runstore.errors import RegistrationConflictError
from runstore.errors import SnapshotChangedError
from runstore.errors import UnknownArtifactError
from runstore.receipts import CommittedEvent
from runstore.receipts import OwnedAttempt
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.requests import Reference
from runstore.requests import TerminalOutcome
from runstore.shapes import references_refusal
from runstore.store.artifacts import artifact_conflicts
from runstore.store.artifacts import artifact_exists
from runstore.store.artifacts import insert_artifact
from runstore.store.finalization import check_commit
from runstore.store.finalization import check_finishing
from runstore.store.finalization import finish
from runstore.store.guard import check_guard
from runstore.store.leases import insert_lease
from runstore.store.leases import lease_exists
from runstore.store.publication import outcome_document
from runstore.validation import check_store_path


def register_stage(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    lease_id: str,
    staging_path: str,
    now_ns: int,
) -> int:
    """Insert the staging lease of a new stage (the model's ``begin_staging``): it inherits
    the reservation's owner and current expiry and is acquired at the effective now.

    Check order: out_of_range (now_ns), invalid_record (the staging path is not a
    normalized store path), the guarded sequence, duplicate_lease. Returns the lease's
    acquisition time.
    """
    shape = None
    try:
        check_store_path(staging_path, "staging_path")
    except InvalidRecordError as bad_path:
        shape = bad_path
    checked = check_guard(connection, guard, now_ns, shape=shape)
    if lease_exists(connection, lease_id):
        raise DuplicateLeaseError(f"lease {lease_id} already exists")
    insert_lease(
        connection,
        lease_id=lease_id,
        owner_token=checked.reservation.owner_token,
        attempt_id=checked.attempt.id,
        purpose=LeasePurpose.STAGING,
        acquired_at_ns=checked.now_ns,
        expires_at_ns=checked.reservation.expires_at_ns,
        staging_path=staging_path,
    )
    return checked.now_ns


def _check_stage(
    connection: sqlite3.Connection, attempt_id: str, staging_lease_id: str, now_ns: int
) -> int:
    """The stage's lease at ``now_ns`` (clamped up to its acquisition): lease_mismatch
    (unknown, another attempt's, or not a staging lease), lease_released, lease_expired.
    Returns the clamped time."""
    rows = sql.execute(
        connection,
        "SELECT acquired_at_ns, expires_at_ns, released_at_ns FROM leases "
        "WHERE id = ? AND attempt_id = ? AND purpose = 'staging'",
        (staging_lease_id, attempt_id),
    )
    if not rows:
        raise LeaseMismatchError(f"{staging_lease_id} is not this attempt's stage")
    acquired, expires, released = rows[0]
    now = rules.effective_now(now_ns, acquired)
    refusal = rules.lease_refusal("the staging lease", expires, released is not None, now)
    if refusal is not None:
        raise refusal
    return now


def publish_staged(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    staging_lease_id: str,
    artifact: ArtifactRegistration,
    now_ns: int,
) -> None:
    """Register an independently published artifact from its stage (the model's
    ``publish_staged_artifact``): the artifact (reused when identical), its root under the
    reservation lease, and the release of the stage's lease, at the effective now (also
    clamped up to the stage's acquisition).

    Check order: out_of_range (now_ns), invalid_record (an artifact of kind attempt), the
    guarded sequence, the stage's lease (lease_mismatch, lease_released, lease_expired),
    registration_conflict.
    """
    shape = None
    if artifact.kind is ArtifactKind.ATTEMPT:
        shape = InvalidRecordError("attempt artifacts are registered by finalization")
    checked = check_guard(connection, guard, now_ns, shape=shape)
    now = _check_stage(connection, checked.attempt.id, staging_lease_id, checked.now_ns)
    if artifact_conflicts(connection, artifact):
        raise RegistrationConflictError(f"artifact {artifact.id} is registered with other digests")
    insert_artifact(connection, artifact)
    sql.execute(
        connection,
        "INSERT INTO leased_artifacts (lease_id, artifact_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (checked.reservation.id, artifact.id),
    )
    sql.execute(
        connection, "UPDATE leases SET released_at_ns = ? WHERE id = ?", (now, staging_lease_id)
    )


def check_finalization(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    now_ns: int,
) -> int:
    """The check before ``outcome.json`` is written (the model's ``check_finalization``);
    writes nothing. Check order: out_of_range, invalid_record (references), the guarded
    sequence, illegal_transition / claim_required / outcome_not_permitted /
    acceptance_unsatisfied, unknown_artifact. Returns the effective finish time."""
    checked = check_guard(connection, guard, now_ns, shape=references_refusal(references))
    check_finishing(connection, checked.attempt, outcome)
    for role, artifact_id in (reference.pair for reference in references):
        if not artifact_exists(connection, artifact_id):
            raise UnknownArtifactError(f"{role} artifact {artifact_id} is unknown")
    return checked.now_ns


def publish_finalization_commit(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    staging_lease_id: str,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    snapshot: dict[str, JSON],
    finished_at_ns: int,
    now_ns: int,
) -> tuple[TerminalAttempt, CommittedEvent]:
    """The final transaction of ``publish_finalization`` (the model's
    ``publish_finalization_commit``): ``commit_finalization``'s checks, then the stage's lease,
    then snapshot_changed when the document's ``snapshot`` no longer describes the
    records; commits as :func:`runstore.store.finalization.finish` (releasing the stage's lease
    with the attempt's others)."""
    attempt, finished, now = check_commit(
        connection, guard, outcome, artifact, references, finished_at_ns, now_ns
    )
    _check_stage(connection, attempt.id, staging_lease_id, now)
    if outcome_document.snapshot(connection, attempt.id, outcome) != snapshot:
        raise SnapshotChangedError("the records the outcome's snapshot describes have changed")
    return finish(connection, attempt, finished, now, outcome, artifact, references)
