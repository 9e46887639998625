"""Reserving attempts and moving them through their execution phases: reserve, advance,
renew.

Rules of this file: runs inside the caller's write transaction and never commits. The
checks and their order are the model's (``runstore.model.attempts``): the same codes for
the same calls. Finalizing and the terminal states are reached only through
:mod:`runstore.finalization`.
"""

from __future__ import annotations

import sqlite3

from runstore import canonical, history, sql
from runstore.canonical import JSON
from runstore.enums import AttemptState, LeasePurpose
from runstore.errors import (
    DuplicateLeaseError,
    ExpiryNotAfterNowError,
    IllegalTransitionError,
    RenewalShortensError,
    RetryBoundExceededError,
    RetryNotAuthorizedError,
    SlotSatisfiedError,
    UnknownSlotError,
)
from runstore.guards import (
    FirstAttempt,
    LeaseRequest,
    Next,
    OwnedAttempt,
    Retry,
    RetryAuthorization,
)
from runstore.identity import run_attempt_id
from runstore.ownership import AttemptRecord, check_guard, check_ranges

# The execution-phase edges ``advance`` may take (finalizing and terminal states excluded).
EXECUTION_EDGES = frozenset(
    {
        (AttemptState.RESERVED, AttemptState.MATERIALIZING),
        (AttemptState.MATERIALIZING, AttemptState.STARTING),
        (AttemptState.STARTING, AttemptState.PREPARING),
        (AttemptState.PREPARING, AttemptState.EXECUTING),
        (AttemptState.EXECUTING, AttemptState.CHECKPOINTING),
        (AttemptState.CHECKPOINTING, AttemptState.VALIDATING),
        (AttemptState.EXECUTING, AttemptState.VALIDATING),
        (AttemptState.VALIDATING, AttemptState.EVALUATING),
        (AttemptState.EVALUATING, AttemptState.EXECUTING),
    }
)


def slot_satisfied(connection: sqlite3.Connection, slot_id: str) -> bool:
    """Whether the attempt slot has an accepted attempt."""
    return bool(
        sql.execute(
            connection,
            "SELECT 1 FROM attempts WHERE slot_id = ? AND state = 'accepted'",
            (slot_id,),
        )
    )


def _check_authorization(authorization: RetryAuthorization, next_index: int) -> None:
    first_only = isinstance(authorization, FirstAttempt) or (
        isinstance(authorization, Next) and not authorization.retry
    )
    if first_only and next_index != 0:
        raise RetryNotAuthorizedError(f"{authorization!r} does not permit retry {next_index}")
    if isinstance(authorization, Retry):
        if next_index > authorization.max_index:
            raise RetryBoundExceededError(
                f"retry {next_index} is past the authorized bound {authorization.max_index}"
            )
        if next_index != authorization.next_index:
            raise RetryNotAuthorizedError(
                f"the next retry is {next_index}, not {authorization.next_index}"
            )


def reserve(
    connection: sqlite3.Connection,
    slot_id: str,
    authorization: RetryAuthorization,
    lease: LeaseRequest,
    now_ns: int,
) -> tuple[OwnedAttempt, history.CommittedEvent]:
    """Allocate the slot's next retry under a new reservation lease.

    Check order: out_of_range (now_ns), unknown_slot, slot_satisfied, retry_not_authorized
    / retry_bound_exceeded, out_of_range (the index), duplicate_lease,
    expiry_not_after_now. Inserts the attempt (reserved, revision 0), the reservation
    lease, the ``attempt_reserved`` event and the revision-0 transition.
    """
    check_ranges(ns=[("now_ns", now_ns)])
    if not sql.execute(connection, "SELECT 1 FROM attempt_slots WHERE id = ?", (slot_id,)):
        raise UnknownSlotError(f"attempt slot {slot_id} is not registered")
    if slot_satisfied(connection, slot_id):
        raise SlotSatisfiedError("the slot already has an accepted attempt")
    retry_index = int(
        sql.scalar(connection, "SELECT count(*) FROM attempts WHERE slot_id = ?", (slot_id,))
    )
    _check_authorization(authorization, retry_index)
    check_ranges(indices=[("retry_index", retry_index)])
    if history.lease_exists(connection, lease.lease_id):
        raise DuplicateLeaseError(f"lease {lease.lease_id} already exists")
    if lease.expires_at_ns <= now_ns:
        raise ExpiryNotAfterNowError("the lease must expire after now")
    attempt_id = run_attempt_id(slot_id, retry_index)
    record: dict[str, JSON] = {"id": attempt_id, "retry_index": retry_index, "slot_id": slot_id}
    sql.execute(
        connection,
        "INSERT INTO attempts (id, slot_id, retry_index, state, revision, started_at_ns, "
        "updated_at_ns, record_json) VALUES (?, ?, ?, 'reserved', 0, ?, ?, ?)",
        (attempt_id, slot_id, retry_index, now_ns, now_ns, canonical.encode(record).decode()),
    )
    history.insert_lease(
        connection,
        lease_id=lease.lease_id,
        owner_token=lease.owner_token,
        attempt_id=attempt_id,
        purpose=LeasePurpose.RESERVATION,
        acquired_at_ns=now_ns,
        expires_at_ns=lease.expires_at_ns,
    )
    payload = history.reserved_payload(slot_id, retry_index)
    event = history.append_event(connection, history.ATTEMPT_RESERVED, attempt_id, now_ns, payload)
    history.append_transition(connection, attempt_id, 0, None, AttemptState.RESERVED, event)
    guard = OwnedAttempt(
        attempt_id=attempt_id,
        slot_id=slot_id,
        retry_index=retry_index,
        state=AttemptState.RESERVED,
        revision=0,
        owner_token=lease.owner_token,
        lease_id=lease.lease_id,
    )
    return guard, event


def next_guard(
    guard: OwnedAttempt, after: AttemptRecord, claim_lease_id: str | None
) -> OwnedAttempt:
    """The guard describing ``after`` for the same owner."""
    return OwnedAttempt(
        attempt_id=after.id,
        slot_id=after.slot_id,
        retry_index=after.retry_index,
        state=after.state,
        revision=after.revision,
        owner_token=guard.owner_token,
        lease_id=guard.lease_id,
        claim_lease_id=claim_lease_id,
    )


def advance(
    connection: sqlite3.Connection, guard: OwnedAttempt, phase: AttemptState, now_ns: int
) -> tuple[OwnedAttempt, history.CommittedEvent]:
    """Move to the execution phase ``phase``: the guarded sequence, then
    illegal_transition unless it is an execution edge. Leases are not renewed."""
    checked = check_guard(connection, guard, now_ns)
    before = checked.attempt
    if (before.state, phase) not in EXECUTION_EDGES:
        raise IllegalTransitionError(f"advance cannot move {before.state.value} -> {phase.value}")
    payload = history.transition_payload(before.state, phase, before.revision + 1)
    after, event = history.transition(
        connection, before, checked.now_ns, phase, history.ATTEMPT_TRANSITION, payload
    )
    return next_guard(guard, after, guard.claim_lease_id), event


def renew(
    connection: sqlite3.Connection, guard: OwnedAttempt, expires_at_ns: int, now_ns: int
) -> OwnedAttempt:
    """Extend the reservation, the owned claim's lease and the live staging leases to
    ``expires_at_ns``, all or nothing.

    Check order: the guarded sequence (with expires_at_ns range-checked first), then
    expiry_not_after_now, then renewal_shortens (earlier than the reservation's or the
    claim lease's current expiry; the same expiry is allowed). Released or expired staging
    leases are left for recovery. Not a transition: no event, no revision change.
    """
    checked = check_guard(connection, guard, now_ns, ns=[("expires_at_ns", expires_at_ns)])
    renewed = [checked.reservation]
    if checked.claim_lease is not None:
        renewed.append(checked.claim_lease)
    current = max(lease.expires_at_ns for lease in renewed)
    if expires_at_ns <= checked.now_ns:
        raise ExpiryNotAfterNowError("the new expiry must be after now")
    if expires_at_ns < current:
        raise RenewalShortensError(f"the leases already expire at {current}")
    staging = sql.execute(
        connection,
        "SELECT id FROM leases WHERE attempt_id = ? AND purpose = 'staging' "
        "AND released_at_ns IS NULL AND expires_at_ns > ? ORDER BY fencing_token",
        (checked.attempt.id, checked.now_ns),
    )
    lease_ids = [lease.id for lease in renewed] + [row[0] for row in staging]
    history.extend_leases(connection, lease_ids, expires_at_ns)
    return guard
