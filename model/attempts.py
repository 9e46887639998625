"""Attempts: reserving them (``reserve``), moving them through their execution phases
(``advance``), and the one projection update every transition makes.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. The leaf rules (edges, ranges, retry
authorization, payloads) are the value layer's, shared with the writer
(:mod:`runstore.store.attempts`); the composition below is the model's own. Guarded operations
first run the check sequence of :mod:`runstore.model.guard`, then their own checks, in the
order their docstrings give.
"""

from __future__ import annotations

import attrs
from runstore import arguments
from runstore import edges
from runstore import payloads
from runstore import rules
from runstore.canonical import JSON
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.enums import LeasePurpose
from runstore.errors import DuplicateLeaseError
from runstore.errors import IllegalTransitionError
from runstore.errors import SlotSatisfiedError
from runstore.errors import UnknownSlotError
from runstore.identity import run_attempt_id
from runstore.model import events
from runstore.model.guard import check_guard
from runstore.model.state import AttemptRow
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import put
from runstore.model.state import refuse
from runstore.model.state import refused
from runstore.receipts import OwnedAttempt
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import LeaseRequest
from runstore.requests import RetryAuthorization
from runstore.requests import TerminalOutcome


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
    ``retry_bound_exceeded`` (:func:`runstore.rules.authorization_refusal`: ``FirstAttempt`` and
    ``Next(retry=False)`` permit only index 0, ``Next(retry=True)`` any next index,
    ``Retry(next_index, max_index)`` the next index only if it is at most ``max_index``
    and equals ``next_index``) -> ``out_of_range`` (the index would pass 2**53-1) ->
    ``duplicate_lease`` (the lease id exists) -> ``expiry_not_after_now``.

    Commits: the attempt (reserved, revision 0, started and updated at now), the
    reservation lease (next fencing token), the ``attempt_reserved`` event and the
    revision-0 transition. Result: the attempt's first guard.
    """
    error = arguments.reserve_arguments(slot_id, authorization, lease, now_ns)
    if error is not None:
        return state, refused(error)
    error = rules.range_refusal(ns=[("now_ns", now_ns)])
    if error is not None:
        return state, refused(error)
    if slot_id not in state.attempt_slots:
        return state, refuse(UnknownSlotError, f"attempt slot {slot_id} is not registered")
    if state.slot_satisfied(slot_id):
        return state, refuse(SlotSatisfiedError, "the slot already has an accepted attempt")
    retry_index = len(state.slot_attempts(slot_id))
    error = rules.authorization_refusal(authorization, retry_index) or rules.range_refusal(
        indices=[("retry_index", retry_index)]
    )
    if error is not None:
        return state, refused(error)
    if lease.lease_id in state.leases:
        return state, refuse(DuplicateLeaseError, f"lease {lease.lease_id} already exists")
    error = rules.expiry_refusal(lease.expires_at_ns, now_ns)
    if error is not None:
        return state, refused(error)
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
        kind=payloads.ATTEMPT_RESERVED,
        attempt_id=attempt.id,
        revision=0,
        source=None,
        target=AttemptState.RESERVED,
        at_ns=now_ns,
        payload=payloads.reserved_payload(slot_id, retry_index),
    )
    guard = OwnedAttempt.reserved(slot_id, retry_index, lease)
    return new_state, guard


def transition(
    state: ModelState,
    before: AttemptRow,
    now_ns: int,
    target: AttemptState,
    kind: str,
    payload: dict[str, JSON],
    *,
    outcome: TerminalOutcome | None = None,
    final_artifact_id: str | None = None,
) -> tuple[ModelState, AttemptRow, int]:
    """Move an attempt one edge to ``target`` at ``now_ns`` (already effective): revision
    plus one, ``updated_at_ns`` = now, one event of ``kind`` with ``payload`` and its
    transition. Entering a terminal state also sets ``finished_at_ns`` = now, the
    ``outcome`` and its terminal columns and the final artifact. The caller has checked
    the edge. Returns the new state, the new attempt row and the event's sequence."""
    revision = before.revision + 1
    assert payload["revision"] == revision
    assert edges.is_legal_edge(before.state, target)
    assert (target in TERMINAL_STATES) == (outcome is not None) == (final_artifact_id is not None)
    after = attrs.evolve(before, state=target, revision=revision, updated_at_ns=now_ns)
    if outcome is not None:
        after = attrs.evolve(
            after,
            finished_at_ns=now_ns,
            failure_code=outcome.code if isinstance(outcome, Failed) else None,
            censor_reason=outcome.reason if isinstance(outcome, Censored) else None,
            final_artifact_id=final_artifact_id,
            outcome=outcome,
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
    """Move the attempt to ``phase``: an execution phase, or finalizing without contending.

    Check order: the guarded sequence, then ``illegal_transition`` unless
    :func:`runstore.edges.is_advance_edge` allows ``(state, phase)`` (an execution edge, or
    any execution phase -> finalizing; the terminal states are reached only through
    ``commit_finalization``).

    Commits one transition and an ``attempt_transition`` event, or for finalizing an
    ``attempt_finalizing`` event without a ``claim`` key (no claim is contended: the
    attempt may then commit Failed or Censored, never Accepted); leases are unchanged
    (advancing does not renew). Result: the new guard.
    """
    error = arguments.advance_arguments(guard, phase, now_ns)
    if error is not None:
        return state, refused(error)
    checked = check_guard(state, guard, now_ns)
    if isinstance(checked, Refusal):
        return state, checked
    if not edges.is_advance_edge(checked.attempt.state, phase):
        return state, refuse(
            IllegalTransitionError,
            f"advance cannot move {checked.attempt.state.value} -> {phase.value}",
        )
    before = checked.attempt
    revision = before.revision + 1
    if phase is AttemptState.FINALIZING:
        kind = payloads.ATTEMPT_FINALIZING
        payload = payloads.finalizing_payload(before.state, revision, None)
    else:
        kind = payloads.ATTEMPT_TRANSITION
        payload = payloads.transition_payload(before.state, phase, revision)
    new_state, after, _ = transition(state, before, checked.now_ns, phase, kind, payload)
    return new_state, guard.moved(after.state, after.revision, guard.claim_lease_id)
