"""Attempts: reserving them (``reserve``), moving them through their execution phases
(``advance``), and the one projection update every transition makes.

Rules of this file: runs inside the caller's write transaction and never commits. The leaf
rules (edges, ranges, retry authorization, payloads) are the value layer's, shared with
the model; the check sequence and its SQL are written here on purpose, mirroring
:mod:`runstore.model.attempts` check for check (the lockstep tests hold the two together).
``advance`` may enter finalizing without contending; begin_finalization (the success
contender's way in) and the terminal states are :mod:`runstore.store.finalization`'s.
"""

from __future__ import annotations

import sqlite3

import attrs
from runstore import canonical
from runstore import edges
from runstore import payloads
from runstore import rules
from runstore import sql
from runstore.attempt_record import attempt_document
from runstore.canonical import JSON
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.enums import LeasePurpose
from runstore.errors import DuplicateLeaseError
from runstore.errors import IllegalTransitionError
from runstore.errors import SlotSatisfiedError
from runstore.errors import StaleRevisionError
from runstore.errors import UnknownSlotError
from runstore.identity import run_attempt_id
from runstore.receipts import CommittedEvent
from runstore.receipts import OwnedAttempt
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import LeaseRequest
from runstore.requests import RetryAuthorization
from runstore.requests import TerminalOutcome
from runstore.store.events import append_history
from runstore.store.guard import AttemptRecord
from runstore.store.guard import check_guard
from runstore.store.leases import insert_lease
from runstore.store.leases import lease_exists


def slot_satisfied(connection: sqlite3.Connection, slot_id: str) -> bool:
    """Whether the attempt slot has an accepted attempt."""
    return bool(
        sql.execute(
            connection,
            "SELECT 1 FROM attempts WHERE slot_id = ? AND state = 'accepted'",
            (slot_id,),
        )
    )


def reserve(
    connection: sqlite3.Connection,
    slot_id: str,
    authorization: RetryAuthorization,
    lease: LeaseRequest,
    now_ns: int,
) -> tuple[OwnedAttempt, CommittedEvent]:
    """Allocate the slot's next retry under a new reservation lease.

    Check order: out_of_range (now_ns), unknown_slot, slot_satisfied, retry_not_authorized
    / retry_bound_exceeded, out_of_range (the index), duplicate_lease,
    expiry_not_after_now. Inserts the attempt (reserved, revision 0), the reservation
    lease, the ``attempt_reserved`` event and the revision-0 transition.
    """
    refusal = rules.range_refusal(ns=[("now_ns", now_ns)])
    if refusal is not None:
        raise refusal
    if not sql.execute(connection, "SELECT 1 FROM attempt_slots WHERE id = ?", (slot_id,)):
        raise UnknownSlotError(f"attempt slot {slot_id} is not registered")
    if slot_satisfied(connection, slot_id):
        raise SlotSatisfiedError("the slot already has an accepted attempt")
    retry_index = int(
        sql.scalar(connection, "SELECT count(*) FROM attempts WHERE slot_id = ?", (slot_id,))
    )
    refusal = rules.authorization_refusal(authorization, retry_index) or rules.range_refusal(
        indices=[("retry_index", retry_index)]
    )
    if refusal is not None:
        raise refusal
    if lease_exists(connection, lease.lease_id):
        raise DuplicateLeaseError(f"lease {lease.lease_id} already exists")
    refusal = rules.expiry_refusal(lease.expires_at_ns, now_ns)
    if refusal is not None:
        raise refusal
    attempt_id = run_attempt_id(slot_id, retry_index)
    record = attempt_document(
        attempt_id=attempt_id,
        slot_id=slot_id,
        retry_index=retry_index,
        state=AttemptState.RESERVED,
        revision=0,
        started_at_ns=now_ns,
        updated_at_ns=now_ns,
    )
    sql.execute(
        connection,
        "INSERT INTO attempts (id, slot_id, retry_index, state, revision, started_at_ns, "
        "updated_at_ns, record_json) VALUES (?, ?, ?, 'reserved', 0, ?, ?, ?)",
        (attempt_id, slot_id, retry_index, now_ns, now_ns, canonical.encode_built(record).decode()),
    )
    insert_lease(
        connection,
        lease_id=lease.lease_id,
        owner_token=lease.owner_token,
        attempt_id=attempt_id,
        purpose=LeasePurpose.RESERVATION,
        acquired_at_ns=now_ns,
        expires_at_ns=lease.expires_at_ns,
    )
    event = append_history(
        connection,
        payloads.ATTEMPT_RESERVED,
        attempt_id,
        0,
        None,
        AttemptState.RESERVED,
        now_ns,
        payloads.reserved_payload(slot_id, retry_index),
    )
    guard = OwnedAttempt.reserved(slot_id, retry_index, lease)
    return guard, event


def transition(
    connection: sqlite3.Connection,
    before: AttemptRecord,
    now_ns: int,
    target: AttemptState,
    kind: str,
    payload: dict[str, JSON],
    *,
    outcome: TerminalOutcome | None = None,
    final_artifact_id: str | None = None,
) -> tuple[AttemptRecord, CommittedEvent]:
    """Move ``before`` one edge to ``target`` at ``now_ns`` (already effective): one event,
    one transition, and the projection (columns and record) updated only if it is still at
    ``before``'s revision and state (a stale writer updates no row and fails). A terminal
    ``target`` takes its ``outcome`` and final artifact and finishes at ``now_ns``. The
    caller has checked the edge."""
    assert edges.is_legal_edge(before.state, target)
    revision = before.revision + 1
    event = append_history(
        connection, kind, before.id, revision, before.state, target, now_ns, payload
    )
    terminal = target in TERMINAL_STATES
    assert terminal == (outcome is not None) == (final_artifact_id is not None)
    record = attempt_document(
        attempt_id=before.id,
        slot_id=before.slot_id,
        retry_index=before.retry_index,
        state=target,
        revision=revision,
        started_at_ns=before.started_at_ns,
        updated_at_ns=now_ns,
        outcome=outcome,
        finished_at_ns=now_ns if terminal else None,
        final_artifact_id=final_artifact_id,
    )
    updated = sql.execute(
        connection,
        "UPDATE attempts SET state = ?, revision = ?, updated_at_ns = ?, finished_at_ns = ?, "
        "failure_code = ?, censor_reason = ?, final_artifact_id = ?, final_artifact_kind = ?, "
        "record_json = ? WHERE id = ? AND revision = ? AND state = ? RETURNING id",
        (
            target.value,
            revision,
            now_ns,
            now_ns if terminal else None,
            outcome.code if isinstance(outcome, Failed) else None,
            outcome.reason if isinstance(outcome, Censored) else None,
            final_artifact_id,
            "attempt" if final_artifact_id is not None else None,
            canonical.encode_built(record).decode(),
            before.id,
            before.revision,
            before.state.value,
        ),
    )
    if len(updated) != 1:
        raise StaleRevisionError(f"attempt {before.id} moved past revision {before.revision}")
    after = attrs.evolve(before, state=target, revision=revision, updated_at_ns=now_ns)
    return after, event


def advance(
    connection: sqlite3.Connection, guard: OwnedAttempt, phase: AttemptState, now_ns: int
) -> tuple[OwnedAttempt, CommittedEvent]:
    """Move to ``phase``: the guarded sequence, then illegal_transition unless it is an
    execution edge or an execution phase entering finalizing. Entering finalizing here
    does not contend for the slot's claim (an ``attempt_finalizing`` event without a
    ``claim`` key): such an attempt may commit Failed or Censored, never Accepted. Leases
    are not renewed."""
    checked = check_guard(connection, guard, now_ns)
    before = checked.attempt
    if not edges.is_advance_edge(before.state, phase):
        raise IllegalTransitionError(f"advance cannot move {before.state.value} -> {phase.value}")
    revision = before.revision + 1
    if phase is AttemptState.FINALIZING:
        kind, payload = (
            payloads.ATTEMPT_FINALIZING,
            payloads.finalizing_payload(before.state, revision, None),
        )
    else:
        kind, payload = (
            payloads.ATTEMPT_TRANSITION,
            payloads.transition_payload(before.state, phase, revision),
        )
    after, event = transition(connection, before, checked.now_ns, phase, kind, payload)
    return guard.moved(after.state, after.revision, guard.claim_lease_id), event
