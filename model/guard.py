"""The guard check: the one check sequence every guarded operation runs before its own
checks.

Rules of this file: reads state, never changes it. The leaf rules (ranges, clock clamping,
lease liveness with exclusive expiry) are :mod:`runstore.rules`, shared with the writer.
The sequence itself is written twice on purpose: here over the model's state and in
:mod:`runstore.store.guard` over SQL. The order below is normative: the writer must report the
first failing check with the same code, so that the model and the store refuse the same
call in the same way.

Guarded check order (every operation that takes an ``OwnedAttempt``):

1. ``out_of_range``: ``now_ns`` (then the operation's own integer arguments) outside
   0..2**63-1; then the operation's own ``invalid_record`` argument-shape checks. (The
   guard itself was validated when it was constructed: its attempt id is derived from its
   slot and retry index, and its revision is in range.)
2. ``unknown_slot``: the guard's attempt is not registered.
3. ``attempt_terminal``: the attempt is accepted, censored, superseded or failed.
4. ``owner_mismatch``: the guard's owner token is not its reservation lease's owner.
5. ``lease_mismatch``: the guard's lease id is not the attempt's reservation lease.
6. ``lease_released`` / ``lease_expired``: the reservation lease is released, or the
   effective now is at or after its expiry (expiry is exclusive).
7. Claim checks, when the attempt holds a finalization claim: ``owner_mismatch`` if the
   claim's lease has another owner, ``lease_released`` if it was released,
   ``claim_expired`` if the effective now is at or after its expiry.
8. ``stale_revision``: the guard's revision or state is not the attempt's current one.
9. ``lease_mismatch``: the guard's claim lease id is not the lease of the claim the attempt
   holds (None when it holds none).

The effective now is ``max(now_ns, attempt.updated_at_ns)``: a clock that went backward is
clamped to the attempt's preceding transition time, and every check and every timestamp
the operation writes use it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from runstore import rules
from runstore.enums import TERMINAL_STATES
from runstore.errors import AttemptTerminalError
from runstore.errors import ClaimExpiredError
from runstore.errors import LeaseMismatchError
from runstore.errors import LeaseReleasedError
from runstore.errors import OwnerMismatchError
from runstore.errors import StaleRevisionError
from runstore.errors import UnknownSlotError
from runstore.model.state import AttemptRow
from runstore.model.state import ClaimRow
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import refuse
from runstore.model.state import refused
from runstore.receipts import OwnedAttempt


@attrs.frozen(kw_only=True)
class Guarded:
    """What a passed guard check established, for the operation to use."""

    attempt: AttemptRow
    reservation: LeaseRow
    claim: ClaimRow | None
    claim_lease: LeaseRow | None
    now_ns: int


def check_guard(
    state: ModelState,
    guard: OwnedAttempt,
    now_ns: int,
    *,
    ns: Iterable[tuple[str, int]] = (),
    indices: Iterable[tuple[str, int]] = (),
    shape: Refusal | None = None,
    not_before_ns: int = 0,
) -> Guarded | Refusal:
    """Run the guarded check sequence (module docstring) for ``guard`` at ``now_ns``,
    clamped up to ``not_before_ns`` and to the attempt's preceding transition.

    ``ns`` and ``indices`` are the operation's own integer arguments (checked in step 1
    after the guard's), ``shape`` its first argument-shape refusal, if any.
    """
    error = rules.range_refusal(ns=[("now_ns", now_ns), *ns], indices=indices)
    if error is not None:
        return refused(error)
    if shape is not None:
        return shape
    attempt = state.attempts.get(guard.attempt_id)
    if attempt is None:
        return refuse(UnknownSlotError, f"attempt {guard.attempt_id} is not registered")
    if attempt.state in TERMINAL_STATES:
        return refuse(AttemptTerminalError, f"attempt is already {attempt.state.value}")
    now = rules.effective_now(max(now_ns, not_before_ns), attempt.updated_at_ns)
    reservation = state.reservation_lease(attempt.id)
    if guard.owner_token != reservation.owner_token:
        return refuse(OwnerMismatchError, "the owner token is not the reservation's owner")
    if guard.lease_id != reservation.id:
        return refuse(LeaseMismatchError, "the lease is not the attempt's reservation lease")
    error = rules.lease_refusal(
        "the reservation lease",
        reservation.expires_at_ns,
        reservation.released_at_ns is not None,
        now,
    )
    if error is not None:
        return refused(error)
    claim = state.owned_claim(attempt.id)
    claim_lease = None if claim is None else state.leases[claim.lease_id]
    if claim_lease is not None:
        if claim_lease.owner_token != guard.owner_token:
            return refuse(OwnerMismatchError, "the claim's lease belongs to another owner")
        if claim_lease.released_at_ns is not None:
            return refuse(LeaseReleasedError, "the claim's lease was released")
        if not rules.lease_live(claim_lease.expires_at_ns, False, now):
            return refuse(ClaimExpiredError, f"the claim expired at {claim_lease.expires_at_ns}")
    if (guard.revision, guard.state) != (attempt.revision, attempt.state):
        return refuse(
            StaleRevisionError,
            f"guard is at revision {guard.revision} ({guard.state.value}); attempt is at "
            f"{attempt.revision} ({attempt.state.value})",
        )
    if guard.claim_lease_id != (None if claim is None else claim.lease_id):
        return refuse(LeaseMismatchError, "the guard's claim lease is not the attempt's claim")
    return Guarded(
        attempt=attempt, reservation=reservation, claim=claim, claim_lease=claim_lease, now_ns=now
    )
