"""Finalization: begin_finalization (the success claim), register_observation (with
optional selection), commit_finalization (the terminal outcome) and acceptance.

Rules of this file: runs inside the caller's write transaction and never commits. The
checks and their order are the model's (``runstore.model.finalization``). The writer
validates metadata and relationships only: its trusted caller has already verified,
synced and published every artifact directory it registers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore import canonical, history, sql
from runstore.enums import (
    ArtifactKind,
    AttemptState,
    Completion,
    ExecutionKind,
    LeasePurpose,
    SlotRole,
)
from runstore.errors import (
    AcceptanceUnsatisfiedError,
    ClaimRequiredError,
    DuplicateLeaseError,
    ExpiryNotAfterNowError,
    IllegalTransitionError,
    InvalidRecordError,
    ObservationSlotMismatchError,
    OwnerMismatchError,
    RegistrationConflictError,
    RunStoreError,
    UnknownArtifactError,
    UnknownSlotError,
)
from runstore.guards import (
    Accepted,
    Censored,
    ClaimDisposition,
    Failed,
    LeaseRequest,
    OwnedAttempt,
    TerminalAttempt,
    TerminalOutcome,
)
from runstore.ownership import AttemptRecord, check_guard
from runstore.records import ArtifactRegistration, Observation
from runstore.reservation import EXECUTION_EDGES, next_guard, slot_satisfied

FINAL_ROLE = "final"
CLAIMED = "claimed"
SUPERSEDED = "superseded"
_FINALIZABLE = frozenset(source for source, _ in EXECUTION_EDGES)


def begin_finalization(
    connection: sqlite3.Connection, guard: OwnedAttempt, lease: LeaseRequest, now_ns: int
) -> tuple[ClaimDisposition, history.CommittedEvent]:
    """Enter finalizing and decide the slot's success claim in the same transaction.

    Check order: the guarded sequence, illegal_transition (already finalizing), then the
    lease request: owner_mismatch, duplicate_lease, expiry_not_after_now (checked even when
    the decision is superseded). Superseded when the slot has an accepted attempt or
    another attempt holds its claim (even an expired one); a superseded decision creates
    no lease.
    """
    checked = check_guard(connection, guard, now_ns)
    before = checked.attempt
    if before.state not in _FINALIZABLE:
        raise IllegalTransitionError(f"attempt is already {before.state.value}")
    if lease.owner_token != guard.owner_token:
        raise OwnerMismatchError("the finalization lease needs the same owner")
    if history.lease_exists(connection, lease.lease_id):
        raise DuplicateLeaseError(f"lease {lease.lease_id} already exists")
    if lease.expires_at_ns <= checked.now_ns:
        raise ExpiryNotAfterNowError("the lease must expire after now")
    held = sql.execute(
        connection, "SELECT 1 FROM finalization_claims WHERE slot_id = ?", (before.slot_id,)
    )
    claimed = not held and not slot_satisfied(connection, before.slot_id)
    payload = history.finalizing_payload(
        before.state, before.revision + 1, CLAIMED if claimed else SUPERSEDED
    )
    after, event = history.transition(
        connection,
        before,
        checked.now_ns,
        AttemptState.FINALIZING,
        history.ATTEMPT_FINALIZING,
        payload,
    )
    if not claimed:
        return ClaimDisposition(attempt=next_guard(guard, after, None), claimed=False), event
    history.insert_lease(
        connection,
        lease_id=lease.lease_id,
        owner_token=lease.owner_token,
        attempt_id=after.id,
        purpose=LeasePurpose.FINALIZATION,
        acquired_at_ns=checked.now_ns,
        expires_at_ns=lease.expires_at_ns,
    )
    sql.execute(
        connection,
        "INSERT INTO finalization_claims (slot_id, attempt_id, lease_id, claimed_at_ns, "
        "lease_purpose) VALUES (?, ?, ?, ?, 'finalization')",
        (after.slot_id, after.id, lease.lease_id, checked.now_ns),
    )
    return ClaimDisposition(attempt=next_guard(guard, after, lease.lease_id), claimed=True), event


def register_observation(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    observation: Observation,
    artifact: ArtifactRegistration,
    select: bool,
    now_ns: int,
) -> OwnedAttempt:
    """Register a published observation of this attempt, optionally selecting it.

    Check order: out_of_range, invalid_record (artifact not of kind observation), the
    guarded sequence, unknown_slot (observation slot), observation_slot_mismatch,
    registration_conflict (artifact digests; observation registered with another
    artifact), then for ``select``: claim_required, invalid_record (not valid). An
    existing selection is preserved. No event, no transition.
    """
    shape = None
    if artifact.kind is not ArtifactKind.OBSERVATION:
        shape = InvalidRecordError("an observation artifact must be of kind observation")
    checked = check_guard(connection, guard, now_ns, shape=shape)
    slot = sql.execute(
        connection,
        "SELECT attempt_slot_id FROM attempt_observation_slots WHERE observation_slot_id = ?",
        (observation.slot_id,),
    )
    if not slot:
        raise UnknownSlotError(f"observation slot {observation.slot_id} is unknown")
    if observation.attempt_id != guard.attempt_id or slot[0][0] != guard.slot_id:
        raise ObservationSlotMismatchError("the observation is not this attempt's, for its slots")
    if history.artifact_conflicts(connection, artifact):
        raise RegistrationConflictError(f"artifact {artifact.id} is registered with other digests")
    existing = sql.execute(
        connection, "SELECT artifact_id FROM observations WHERE id = ?", (observation.id,)
    )
    if existing and existing[0][0] != artifact.id:
        raise RegistrationConflictError("the observation is registered with another artifact")
    if select and checked.claim_lease is None:
        raise ClaimRequiredError("selecting needs the slot's finalization claim")
    if select and not observation.valid:
        raise InvalidRecordError("an invalid observation cannot be selected")
    history.insert_artifact(connection, artifact)
    if not existing:
        sql.execute(
            connection,
            "INSERT INTO observations (id, slot_id, attempt_id, attempt_slot_id, valid, "
            "completion, artifact_id, artifact_kind, registered_at_ns, record_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'observation', ?, ?)",
            (
                observation.id,
                observation.slot_id,
                observation.attempt_id,
                guard.slot_id,
                int(observation.valid),
                observation.completion.value,
                artifact.id,
                checked.now_ns,
                canonical.encode(observation.to_json()).decode("utf-8"),
            ),
        )
    if select:
        sql.execute(
            connection,
            "INSERT INTO selected_observations (slot_id, observation_id, valid, selected_at_ns) "
            "VALUES (?, ?, 1, ?) ON CONFLICT (slot_id) DO NOTHING",
            (observation.slot_id, observation.id, checked.now_ns),
        )
    return guard


def acceptance_refusal(connection: sqlite3.Connection, attempt: AttemptRecord) -> str | None:
    """Why the attempt's slot may not be accepted, or None. A warm-up needs nothing; a
    stream needs a selection in every checkpoint slot; a one-shot or fresh-observation slot
    needs, per observation slot, a selection and a valid, reached observation produced by
    this attempt (not necessarily the selected one)."""
    kind, role = sql.execute(
        connection,
        "SELECT execution_kind, role FROM attempt_slots WHERE id = ?",
        (attempt.slot_id,),
    )[0]
    if role == SlotRole.WARMUP.value:
        return None
    members = sql.execute(
        connection,
        "SELECT m.observation_slot_id, s.logical_slot, "
        "EXISTS (SELECT 1 FROM selected_observations AS x "
        "WHERE x.slot_id = m.observation_slot_id), "
        "EXISTS (SELECT 1 FROM observations AS o WHERE o.slot_id = m.observation_slot_id "
        "AND o.attempt_id = ? AND o.valid = 1 AND o.completion = ?) "
        "FROM attempt_observation_slots AS m JOIN observation_slots AS s "
        "ON s.id = m.observation_slot_id WHERE m.attempt_slot_id = ? "
        "ORDER BY m.observation_slot_id",
        (attempt.id, Completion.REACHED.value, attempt.slot_id),
    )
    for _, logical_slot, selected, produced in members:
        if not selected:
            return f"slot {logical_slot} has no selection"
        if kind != ExecutionKind.STREAM.value and not produced:
            return f"the attempt produced no valid, complete observation for {logical_slot}"
    return None


def references_refusal(references: Sequence[tuple[str, str]]) -> RunStoreError | None:
    if any(not role or role == FINAL_ROLE for role, _ in references):
        return InvalidRecordError("reference roles must be nonempty and not 'final'")
    if len(set(references)) != len(references):
        return InvalidRecordError("a reference repeats an artifact within a role")
    return None


def commit_finalization(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[tuple[str, str]],
    now_ns: int,
) -> tuple[TerminalAttempt, history.CommittedEvent]:
    """Commit the terminal outcome with its published attempt artifact.

    Check order: out_of_range, invalid_record (artifact not of kind attempt; bad
    references), the guarded sequence, illegal_transition (not finalizing); for Accepted:
    claim_required, acceptance_unsatisfied; then registration_conflict and
    unknown_artifact. Commits as :func:`finish`.
    """
    shape = None
    if artifact.kind is not ArtifactKind.ATTEMPT:
        shape = InvalidRecordError("the final artifact must be of kind attempt")
    checked = check_guard(connection, guard, now_ns, shape=shape or references_refusal(references))
    attempt = checked.attempt
    if attempt.state is not AttemptState.FINALIZING:
        raise IllegalTransitionError(f"attempt is {attempt.state.value}, not finalizing")
    if isinstance(outcome, Accepted):
        if checked.claim_lease is None:
            raise ClaimRequiredError("acceptance needs the slot's claim")
        unsatisfied = acceptance_refusal(connection, attempt)
        if unsatisfied is not None:
            raise AcceptanceUnsatisfiedError(unsatisfied)
    if history.artifact_conflicts(connection, artifact):
        raise RegistrationConflictError(f"artifact {artifact.id} is registered with other digests")
    for role, artifact_id in references:
        if artifact_id != artifact.id and not history.artifact_exists(connection, artifact_id):
            raise UnknownArtifactError(f"{role} artifact {artifact_id} is unknown")
    return finish(connection, attempt, checked.now_ns, outcome, artifact, references)


def finish(
    connection: sqlite3.Connection,
    attempt: AttemptRecord,
    now_ns: int,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[tuple[str, str]],
) -> tuple[TerminalAttempt, history.CommittedEvent]:
    """The terminal commit (shared with recovery), after every check has passed (including
    :func:`history.artifact_conflicts` for ``artifact``): register the final artifact and
    references, append the terminal transition and event, delete the
    attempt's claim, and release every lease of the attempt."""
    history.insert_artifact(connection, artifact)
    for role, artifact_id in references:
        sql.execute(
            connection,
            "INSERT INTO attempt_artifacts (attempt_id, role, artifact_id) VALUES (?, ?, ?)",
            (attempt.id, role, artifact_id),
        )
    payload = history.finished_payload(outcome, attempt.revision + 1)
    after, event = history.transition(
        connection,
        attempt,
        now_ns,
        outcome.state,
        history.ATTEMPT_FINISHED,
        payload,
        final_artifact_id=artifact.id,
        failure_code=outcome.code if isinstance(outcome, Failed) else None,
        censor_reason=outcome.reason if isinstance(outcome, Censored) else None,
    )
    sql.execute(connection, "DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt.id,))
    history.release_attempt_leases(connection, attempt.id, now_ns)
    receipt = TerminalAttempt(
        attempt_id=after.id,
        slot_id=after.slot_id,
        retry_index=after.retry_index,
        state=after.state,
        revision=after.revision,
        finished_at_ns=now_ns,
        event_sequence=event.sequence,
    )
    return receipt, event
