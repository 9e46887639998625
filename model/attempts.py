"""Reserving attempts and moving them through their execution phases: reserve, advance,
renew.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Guarded operations first run the check
sequence of :mod:`runstore.model.guard`, then their own checks, in the order their
docstrings give.
"""

from __future__ import annotations

import attrs
from runstore.canonical import JSON
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
from runstore.model import edges, events, rules
from runstore.model.guard import check_guard, owned_attempt, range_refusal
from runstore.model.state import AttemptRow, LeaseRow, ModelState, Refusal, put, refuse
from runstore.records import (
    AttemptState,
    FirstAttempt,
    LeasePurpose,
    LeaseRequest,
    Next,
    OwnedAttempt,
    Retry,
    RetryAuthorization,
    run_attempt_id,
)

_RETRY_ERRORS = {
    RetryNotAuthorizedError.code: RetryNotAuthorizedError,
    RetryBoundExceededError.code: RetryBoundExceededError,
}


def _retry_refusal(authorization: RetryAuthorization, next_index: int) -> Refusal | None:
    """Map an authorization onto :func:`rules.retry_refusal`."""
    first_only = isinstance(authorization, FirstAttempt) or (
        isinstance(authorization, Next) and not authorization.retry
    )
    exact = authorization.next_index if isinstance(authorization, Retry) else None
    bound = authorization.max_index if isinstance(authorization, Retry) else None
    code = rules.retry_refusal(next_index, first_only, exact, bound)
    if code is None:
        return None
    return refuse(_RETRY_ERRORS[code], f"{authorization!r} does not permit retry {next_index}")


def reserve(
    state: ModelState,
    slot_id: str,
    authorization: RetryAuthorization,
    lease: LeaseRequest,
    now_ns: int,
) -> tuple[ModelState, OwnedAttempt | Refusal]:
    """Reserve the slot's next attempt under a new reservation lease.

    The next retry index is the number of attempts the slot already has. There is no
    preceding transition, so the effective now is ``now_ns`` itself.

    Check order: ``out_of_range`` (``now_ns``) -> ``unknown_slot`` -> ``slot_satisfied``
    (the slot has an accepted attempt) -> ``retry_not_authorized`` /
    ``retry_bound_exceeded`` (:func:`rules.retry_refusal`: ``FirstAttempt`` and
    ``Next(retry=False)`` permit only index 0, ``Next(retry=True)`` any next index,
    ``Retry(next_index, max_index)`` the next index only if it is at most ``max_index``
    and equals ``next_index``) -> ``out_of_range`` (the index would pass 2**53-1) ->
    ``duplicate_lease`` (the lease id exists) -> ``expiry_not_after_now``.

    Commits: the attempt (reserved, revision 0, started and updated at now), the
    reservation lease (next fencing token), the ``attempt_reserved`` event and the
    revision-0 transition. Result: the attempt's first guard.
    """
    refusal = range_refusal(ns=[("now_ns", now_ns)])
    if refusal is not None:
        return state, refusal
    if slot_id not in state.attempt_slots:
        return state, refuse(UnknownSlotError, f"attempt slot {slot_id} is not registered")
    if state.slot_satisfied(slot_id):
        return state, refuse(SlotSatisfiedError, "the slot already has an accepted attempt")
    retry_index = len(state.slot_attempts(slot_id))
    refusal = _retry_refusal(authorization, retry_index) or range_refusal(
        indices=[("retry_index", retry_index)]
    )
    if refusal is not None:
        return state, refusal
    if lease.lease_id in state.leases:
        return state, refuse(DuplicateLeaseError, f"lease {lease.lease_id} already exists")
    if lease.expires_at_ns <= now_ns:
        return state, refuse(ExpiryNotAfterNowError, "the lease must expire after now")
    attempt = AttemptRow(
        id=run_attempt_id(slot_id, retry_index),
        slot_id=slot_id,
        retry_index=retry_index,
        state=AttemptState.RESERVED,
        revision=0,
        started_at_ns=now_ns,
        updated_at_ns=now_ns,
    )
    lease_row = LeaseRow(
        id=lease.lease_id,
        fencing_token=state.next_fencing_token(),
        owner_token=lease.owner_token,
        attempt_id=attempt.id,
        purpose=LeasePurpose.RESERVATION,
        acquired_at_ns=now_ns,
        expires_at_ns=lease.expires_at_ns,
    )
    new_state = attrs.evolve(
        state,
        attempts=put(state.attempts, attempt.id, attempt),
        leases=put(state.leases, lease_row.id, lease_row),
    )
    new_state, _ = events.append_history(
        new_state,
        kind=events.ATTEMPT_RESERVED,
        attempt_id=attempt.id,
        revision=0,
        source=None,
        target=AttemptState.RESERVED,
        at_ns=now_ns,
        payload=events.reserved_payload(slot_id, retry_index),
    )
    guard = OwnedAttempt(
        attempt_id=attempt.id,
        slot_id=slot_id,
        retry_index=retry_index,
        state=AttemptState.RESERVED,
        revision=0,
        owner_token=lease.owner_token,
        lease_id=lease.lease_id,
    )
    return new_state, guard


def transition(
    state: ModelState,
    before: AttemptRow,
    now_ns: int,
    target: AttemptState,
    kind: str,
    payload: dict[str, JSON],
    *,
    final_artifact_id: str | None = None,
    failure_code: str | None = None,
    censor_reason: str | None = None,
) -> tuple[ModelState, AttemptRow, int]:
    """Move an attempt one edge to ``target`` at ``now_ns`` (already effective): revision
    plus one, ``updated_at_ns`` = now, one event of ``kind`` with ``payload`` and its
    transition. Entering a terminal state also sets ``finished_at_ns`` = now and the
    given terminal columns. The caller has checked the edge. Returns the new state, the
    new attempt row and the event's sequence."""
    revision = before.revision + 1
    assert payload["revision"] == revision
    assert edges.is_legal_edge(before.state.value, target.value)
    after = attrs.evolve(before, state=target, revision=revision, updated_at_ns=now_ns)
    if target.value in edges.TERMINAL_STATES:
        after = attrs.evolve(
            after,
            finished_at_ns=now_ns,
            failure_code=failure_code,
            censor_reason=censor_reason,
            final_artifact_id=final_artifact_id,
        )
    new_state = attrs.evolve(state, attempts=put(state.attempts, after.id, after))
    new_state, sequence = events.append_history(
        new_state,
        kind=kind,
        attempt_id=after.id,
        revision=revision,
        source=before.state,
        target=target,
        at_ns=now_ns,
        payload=payload,
    )
    return new_state, after, sequence


def advance(
    state: ModelState, guard: OwnedAttempt, phase: AttemptState, now_ns: int
) -> tuple[ModelState, OwnedAttempt | Refusal]:
    """Move the attempt to the execution phase ``phase``.

    Check order: the guarded sequence, then ``illegal_transition`` unless
    ``(state, phase)`` is in :data:`edges.EXECUTION_EDGES` (finalizing and the terminal
    states are reached only through ``begin_finalization`` and ``commit_finalization``).

    Commits one transition and an ``attempt_transition`` event; leases are unchanged
    (advancing does not renew). Result: the new guard.
    """
    checked = check_guard(state, guard, now_ns)
    if isinstance(checked, Refusal):
        return state, checked
    if not edges.is_execution_edge(checked.attempt.state.value, phase.value):
        return state, refuse(
            IllegalTransitionError,
            f"advance cannot move {checked.attempt.state.value} -> {phase.value}",
        )
    before = checked.attempt
    payload = events.transition_payload(before.state, phase, before.revision + 1)
    new_state, after, _ = transition(
        state, before, checked.now_ns, phase, events.ATTEMPT_TRANSITION, payload
    )
    return new_state, owned_attempt(guard, after, guard.claim_lease_id)


def renew(
    state: ModelState, guard: OwnedAttempt, expires_at_ns: int, now_ns: int
) -> tuple[ModelState, OwnedAttempt | Refusal]:
    """Extend the attempt's reservation lease, its claim's lease (if it holds a claim) and
    its live staging leases to ``expires_at_ns``, all or nothing.

    Check order: the guarded sequence with ``expires_at_ns`` range-checked in step 1 (so
    an expired reservation or claim refuses before anything is extended), then
    ``expiry_not_after_now`` (``expires_at_ns`` <= effective now), then
    ``renewal_shortens`` (earlier than the current expiry of the reservation or the owned
    claim lease; the same expiry is allowed and changes nothing).

    Staging leases that are released or already expired stay as they are: they are left
    for recovery and do not stop the owner from renewing. A live staging lease never
    expires after its reservation (it inherits the reservation's expiry and is renewed
    with it), so renewing never shortens one.

    Renewal is not a transition: no event, no revision change, ``updated_at_ns``
    unchanged. Result: the same guard.
    """
    checked = check_guard(state, guard, now_ns, ns=[("expires_at_ns", expires_at_ns)])
    if isinstance(checked, Refusal):
        return state, checked
    renewed = [checked.reservation]
    if checked.claim_lease is not None:
        renewed.append(checked.claim_lease)
    current = max(lease.expires_at_ns for lease in renewed)
    code = rules.renewal_refusal(expires_at_ns, current, checked.now_ns)
    if code == ExpiryNotAfterNowError.code:
        return state, refuse(ExpiryNotAfterNowError, "the new expiry must be after now")
    if code == RenewalShortensError.code:
        return state, refuse(RenewalShortensError, f"the leases already expire at {current}")
    renewed.extend(
        lease
        for lease in state.attempt_leases(checked.attempt.id)
        if lease.purpose is LeasePurpose.STAGING
        and rules.lease_live(lease.expires_at_ns, lease.released_at_ns is not None, checked.now_ns)
    )
    leases = state.leases
    for lease in renewed:
        leases = put(leases, lease.id, attrs.evolve(lease, expires_at_ns=expires_at_ns))
    return attrs.evolve(state, leases=leases), guard
