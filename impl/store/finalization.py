"""Finalization: begin_finalization (the slot's success claim), commit_finalization (the
terminal outcome), the acceptance rules, and the terminal commit shared with recovery.

Rules of this file: runs inside the caller's write transaction and never commits. The leaf
rules (edges, payloads, reference shapes) are the value layer's; the check sequence and its
SQL mirror :mod:`runstore.model.finalization` check for check, written twice on purpose
(the lockstep tests hold the two together). The writer validates metadata and
relationships only: its trusted caller has already verified, synced and published every
artifact directory it registers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore import edges
from runstore import payloads
from runstore import rules
from runstore import sql
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import LeasePurpose
from runstore.enums import SlotRole
from runstore.errors import AcceptanceUnsatisfiedError
from runstore.errors import DuplicateLeaseError
from runstore.errors import IllegalTransitionError
from runstore.errors import InvalidRecordError
from runstore.errors import OwnerMismatchError
from runstore.errors import RegistrationConflictError
from runstore.errors import RunStoreError
from runstore.errors import UnknownArtifactError
from runstore.receipts import ClaimDisposition
from runstore.receipts import CommittedEvent
from runstore.receipts import OwnedAttempt
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.requests import Accepted
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome
from runstore.shapes import references_refusal
from runstore.store.artifacts import artifact_conflicts
from runstore.store.artifacts import artifact_exists
from runstore.store.artifacts import insert_artifact
from runstore.store.attempts import transition
from runstore.store.guard import AttemptRecord
from runstore.store.guard import check_guard
from runstore.store.leases import insert_lease
from runstore.store.leases import release_attempt_leases

_BEGIN_SQL = (
    "SELECT EXISTS (SELECT 1 FROM leases WHERE id = ?), "
    "EXISTS (SELECT 1 FROM finalization_claims WHERE slot_id = ?), "
    "EXISTS (SELECT 1 FROM attempts WHERE slot_id = ? AND state = 'accepted')"
)
"""What :func:`begin_finalization` decides on after the guard, in one statement: whether
the requested lease id is taken (``lease_exists``), whether the slot's claim is held (by
any attempt, even an expired claim), and whether the slot is satisfied
(``slot_satisfied``). Reading the three together changes no refusal: the statement only
reads, and the checks still run in their order on its row."""


def begin_finalization(
    connection: sqlite3.Connection, guard: OwnedAttempt, lease: LeaseRequest, now_ns: int
) -> tuple[ClaimDisposition, CommittedEvent]:
    """Enter finalizing and decide the slot's success claim in the same transaction.

    Check order: the guarded sequence, illegal_transition (already finalizing), then the
    lease request: owner_mismatch, duplicate_lease, expiry_not_after_now (checked even when
    the decision is superseded). Superseded when the slot has an accepted attempt or
    another attempt holds its claim (even an expired one); a superseded decision creates
    no lease.
    """
    checked = check_guard(connection, guard, now_ns)
    before = checked.attempt
    if not edges.can_finalize(before.state):
        raise IllegalTransitionError(f"attempt is already {before.state.value}")
    if lease.owner_token != guard.owner_token:
        raise OwnerMismatchError("the finalization lease needs the same owner")
    taken, held, satisfied = sql.execute(
        connection, _BEGIN_SQL, (lease.lease_id, before.slot_id, before.slot_id)
    )[0]
    if taken:
        raise DuplicateLeaseError(f"lease {lease.lease_id} already exists")
    refusal = rules.expiry_refusal(lease.expires_at_ns, checked.now_ns)
    if refusal is not None:
        raise refusal
    claimed = not held and not satisfied
    decision = payloads.CLAIMED if claimed else payloads.SUPERSEDED
    payload = payloads.finalizing_payload(before.state, before.revision + 1, decision)
    after, event = transition(
        connection,
        before,
        checked.now_ns,
        AttemptState.FINALIZING,
        payloads.ATTEMPT_FINALIZING,
        payload,
    )
    if not claimed:
        return ClaimDisposition(
            attempt=guard.moved(after.state, after.revision, None), claimed=False
        ), event
    insert_lease(
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
    disposition = ClaimDisposition(
        attempt=guard.moved(after.state, after.revision, lease.lease_id), claimed=True
    )
    return disposition, event


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


def finalizing_decision(connection: sqlite3.Connection, attempt: AttemptRecord) -> str | None:
    """How the finalizing attempt entered finalizing: the ``claim`` of its current
    ``attempt_finalizing`` event (``"claimed"`` or ``"superseded"``), or None when it
    entered without contending (``advance`` or recovery)."""
    rows = sql.execute(
        connection,
        "SELECT json_extract(e.payload_json, '$.claim') FROM attempt_transitions AS t "
        "JOIN events AS e ON e.sequence = t.event_sequence "
        "WHERE t.attempt_id = ? AND t.revision = ?",
        (attempt.id, attempt.revision),
    )
    decision = rows[0][0]
    assert decision is None or isinstance(decision, str)
    return decision


def commit_finalization(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    finished_at_ns: int,
    now_ns: int,
) -> tuple[TerminalAttempt, CommittedEvent]:
    """Commit the terminal outcome with its published attempt artifact.

    ``finished_at_ns`` is the immutable finish time (clamped up to the preceding
    transition); ``now_ns`` the commit time (clamped up to the finish time), at which the
    leases and the claim are checked and the leases released.

    Check order: out_of_range (now_ns, finished_at_ns), invalid_record (artifact not of
    kind attempt; bad references), the guarded sequence at the commit time,
    illegal_transition (not finalizing), the outcome against how the attempt entered
    finalizing (claim_required / outcome_not_permitted), acceptance_unsatisfied for
    Accepted; then registration_conflict (artifact digests; the artifact is already
    another attempt's final artifact) and unknown_artifact. Commits as :func:`finish`.
    """
    attempt, finished, now = check_commit(
        connection, guard, outcome, artifact, references, finished_at_ns, now_ns
    )
    return finish(connection, attempt, finished, now, outcome, artifact, references)


def check_commit(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    finished_at_ns: int,
    now_ns: int,
) -> tuple[AttemptRecord, int, int]:
    """:func:`commit_finalization`'s checks, in its order (the artifact's kind and the
    references' shape first, with the ranges); returns the attempt, the effective finish
    time and the effective commit time."""
    shape: RunStoreError | None = None
    if artifact.kind is not ArtifactKind.ATTEMPT:
        shape = InvalidRecordError("the final artifact must be of kind attempt")
    checked = check_guard(
        connection,
        guard,
        now_ns,
        ns=[("finished_at_ns", finished_at_ns)],
        shape=shape or references_refusal(references),
        not_before_ns=finished_at_ns,
    )
    attempt = checked.attempt
    check_finishing(connection, attempt, outcome)
    check_final_artifact(connection, artifact)
    for role, artifact_id in (reference.pair for reference in references):
        if artifact_id != artifact.id and not artifact_exists(connection, artifact_id):
            raise UnknownArtifactError(f"{role} artifact {artifact_id} is unknown")
    finished = rules.effective_now(finished_at_ns, attempt.updated_at_ns)
    return attempt, finished, checked.now_ns


def check_final_artifact(connection: sqlite3.Connection, artifact: ArtifactRegistration) -> None:
    """registration_conflict when ``artifact`` is registered with other digests, or is
    already another attempt's final artifact (shared with recovery's commits)."""
    if artifact_conflicts(connection, artifact):
        raise RegistrationConflictError(f"artifact {artifact.id} is registered with other digests")
    if sql.execute(
        connection, "SELECT 1 FROM attempts WHERE final_artifact_id = ?", (artifact.id,)
    ):
        raise RegistrationConflictError(f"artifact {artifact.id} is another attempt's final one")


def check_finishing(
    connection: sqlite3.Connection, attempt: AttemptRecord, outcome: TerminalOutcome
) -> None:
    """Whether ``attempt`` may finish with ``outcome`` now: illegal_transition (not
    finalizing), the outcome against how it entered finalizing (claim_required /
    outcome_not_permitted), acceptance_unsatisfied for Accepted."""
    if attempt.state is not AttemptState.FINALIZING:
        raise IllegalTransitionError(f"attempt is {attempt.state.value}, not finalizing")
    refusal = rules.outcome_refusal(
        finalizing_decision(connection, attempt),
        isinstance(outcome, Accepted),
        isinstance(outcome, Superseded),
    )
    if refusal is not None:
        raise refusal
    if isinstance(outcome, Accepted):
        unsatisfied = acceptance_refusal(connection, attempt)
        if unsatisfied is not None:
            raise AcceptanceUnsatisfiedError(unsatisfied)


def finish(
    connection: sqlite3.Connection,
    attempt: AttemptRecord,
    finished_at_ns: int,
    commit_ns: int,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
) -> tuple[TerminalAttempt, CommittedEvent]:
    """The terminal commit (shared with recovery), after every check has passed (including
    :func:`runstore.store.artifacts.artifact_conflicts` for ``artifact``): register the final
    artifact and references, append the terminal transition and event at
    ``finished_at_ns`` (already effective), delete the attempt's claim, and release every
    lease of the attempt at ``commit_ns`` (at or after the finish time)."""
    assert commit_ns >= finished_at_ns >= attempt.updated_at_ns
    insert_artifact(connection, artifact)
    for reference in references:
        sql.execute(
            connection,
            "INSERT INTO attempt_artifacts (attempt_id, role, artifact_id) VALUES (?, ?, ?)",
            (attempt.id, reference.role, reference.artifact_id),
        )
    payload = payloads.finished_payload(outcome, attempt.revision + 1)
    after, event = transition(
        connection,
        attempt,
        finished_at_ns,
        outcome.state,
        payloads.ATTEMPT_FINISHED,
        payload,
        outcome=outcome,
        final_artifact_id=artifact.id,
    )
    sql.execute(connection, "DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt.id,))
    release_attempt_leases(connection, attempt.id, commit_ns)
    receipt = TerminalAttempt(
        attempt_id=after.id,
        slot_id=after.slot_id,
        retry_index=after.retry_index,
        state=after.state,
        revision=after.revision,
        finished_at_ns=finished_at_ns,
        event_sequence=event.sequence,
    )
    return receipt, event
