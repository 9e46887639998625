"""The scalar leaf rules both the writer and the model apply: integer ranges, clock clamping,
lease liveness with exclusive expiry, retry authorization and renewal.

Rules of this file: value layer (imports only canonical's bounds, the errors and the
request values); pure functions over integers, booleans and requests. Each rule exists here
once: the writer
(:mod:`runstore.store.guard`, :mod:`runstore.store.attempts`, :mod:`runstore.store.leases`) and the
model (:mod:`runstore.model`) call these functions, so the rules ``crosshair check runstore.rules``
verifies are the rules both use. A refusal is returned, never raised, as the
:class:`~runstore.errors.RunStoreError` the writer raises for it (and the model turns into a
``Refusal`` with the same code and message); ``None`` means the rule allows the call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from runstore.canonical import MAX_NS
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.errors import ClaimRequiredError
from runstore.errors import ExpiryNotAfterNowError
from runstore.errors import InvalidRecordError
from runstore.errors import LeaseExpiredError
from runstore.errors import LeaseReleasedError
from runstore.errors import OutcomeNotPermittedError
from runstore.errors import OutOfRangeError
from runstore.errors import RenewalShortensError
from runstore.errors import RetryBoundExceededError
from runstore.errors import RetryNotAuthorizedError
from runstore.errors import RunStoreError
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.requests import Retry

MAX_INDEX: Final = MAX_SAFE_INTEGER
"""Largest retry index or revision (the canonical JSON integer range)."""


def ns_in_range(value: int) -> bool:
    """Whether ``value`` is a storable nanosecond timestamp.

    post: __return__ == (0 <= value <= 2**63 - 1)
    """
    return 0 <= value <= MAX_NS


def index_in_range(value: int) -> bool:
    """Whether ``value`` is a storable retry index or revision.

    post: __return__ == (0 <= value <= 2**53 - 1)
    """
    return 0 <= value <= MAX_INDEX


def range_refusal(
    *, ns: Iterable[tuple[str, int]] = (), indices: Iterable[tuple[str, int]] = ()
) -> RunStoreError | None:
    """``out_of_range`` for the first named timestamp (then index) outside its range."""
    for name, value in ns:
        if not ns_in_range(value):
            return OutOfRangeError(f"{name}={value} is outside 0..2**63-1")
    for name, value in indices:
        if not index_in_range(value):
            return OutOfRangeError(f"{name}={value} is outside 0..2**53-1")
    return None


def effective_now(now_ns: int, floor_ns: int) -> int:
    """The operation time: the caller's clock, clamped up to ``floor_ns`` (the attempt's
    preceding transition time, or a stage's acquisition time) when the clock went backward.

    pre: 0 <= now_ns and 0 <= floor_ns
    post: __return__ >= now_ns and __return__ >= floor_ns
    post: __return__ == now_ns or __return__ == floor_ns
    """
    return max(now_ns, floor_ns)


def lease_live(expires_at_ns: int, released: bool, now_ns: int) -> bool:
    """Whether a lease authorizes a write at ``now_ns``. Expiry is exclusive: at the
    expiry instant the lease is already expired.

    post: implies(now_ns == expires_at_ns, not __return__)
    post: implies(released, not __return__)
    post: __return__ == (not released and now_ns < expires_at_ns)
    """
    return not released and now_ns < expires_at_ns


def lease_live_at(expires_at_ns: int, released_at_ns: int | None, at_ns: int) -> bool:
    """Whether a lease was live at the past instant ``at_ns``, as its row reads now: not
    yet released then (a release at ``at_ns`` already counts) and not yet expired. Renewal
    never shortens and never revives an expired lease, so a current expiry after ``at_ns``
    means the lease was live then.

    post: implies(released_at_ns is None, __return__ == lease_live(expires_at_ns, False, at_ns))
    post: implies(released_at_ns is not None and released_at_ns <= at_ns, not __return__)
    """
    released = released_at_ns is not None and released_at_ns <= at_ns
    return lease_live(expires_at_ns, released, at_ns)


EXPIRED: Final = LeaseExpiredError
"""A short name for :func:`lease_refusal`'s contract."""


def lease_refusal(
    label: str, expires_at_ns: int, released: bool, now_ns: int
) -> RunStoreError | None:
    """The refusal for presenting the lease ``label`` names at ``now_ns``: ``lease_released``
    is reported before ``lease_expired``.

    post: implies(__return__ is None, lease_live(expires_at_ns, released, now_ns))
    post: implies(released, type(__return__) is LeaseReleasedError)
    post: implies(not released and now_ns >= expires_at_ns, type(__return__) is EXPIRED)
    """
    if released:
        return LeaseReleasedError(f"{label} was released")
    if not lease_live(expires_at_ns, released, now_ns):
        return LeaseExpiredError(f"{label} expired at {expires_at_ns}")
    return None


BOUND: Final = RetryBoundExceededError
"""A short name for :func:`retry_refusal`'s contract."""


def retry_refusal(
    actual_next: int, first_only: bool, exact_next: int | None, max_index: int | None
) -> type[RunStoreError] | None:
    """The refusal for reserving retry index ``actual_next`` (the slot's attempt count),
    or None when the authorization permits it.

    ``first_only`` models ``FirstAttempt`` and ``Next(retry=False)``; ``exact_next`` and
    ``max_index`` model ``Retry(next_index, max_index)``; ``Next(retry=True)`` passes
    neither. The bound is checked before the exact index, so a retry past the bound is
    reported as ``retry_bound_exceeded`` even though its index is also not the next one.

    pre: actual_next >= 0
    pre: (exact_next is None) == (max_index is None)
    pre: exact_next is None or max_index is None or 0 <= exact_next <= max_index
    pre: not (first_only and max_index is not None)
    post: implies(__return__ is None, not first_only or actual_next == 0)
    post: implies(__return__ is None and max_index is not None, actual_next == exact_next)
    post: implies(max_index is not None and actual_next > max_index, __return__ is BOUND)
    post: implies(first_only and actual_next > 0, __return__ is RetryNotAuthorizedError)
    """
    if first_only and actual_next != 0:
        return RetryNotAuthorizedError
    if max_index is not None and actual_next > max_index:
        return RetryBoundExceededError
    if exact_next is not None and actual_next != exact_next:
        return RetryNotAuthorizedError
    return None


def authorization_refusal(authorization: object, next_index: int) -> RunStoreError | None:
    """Map a retry authorization onto :func:`retry_refusal` for the slot's ``next_index``:
    ``FirstAttempt`` and ``Next(retry=False)`` permit only index 0, ``Next(retry=True)``
    any next index, ``Retry(next_index, max_index)`` exactly its index within its bound.
    Fails closed: anything that is not one of the three authorizations (typed ``object`` on
    purpose) is ``invalid_record`` and authorizes nothing."""
    if not isinstance(authorization, FirstAttempt | Next | Retry):
        return InvalidRecordError(
            f"retry authorization must be FirstAttempt, Next or Retry, not "
            f"{type(authorization).__name__}"
        )
    first_only = isinstance(authorization, FirstAttempt) or (
        isinstance(authorization, Next) and not authorization.retry
    )
    exact = authorization.next_index if isinstance(authorization, Retry) else None
    bound = authorization.max_index if isinstance(authorization, Retry) else None
    refusal = retry_refusal(next_index, first_only, exact, bound)
    if refusal is None:
        return None
    return refusal(f"{authorization!r} does not permit retry {next_index}")


def renewal_refusal(requested_ns: int, current_expiry_ns: int, now_ns: int) -> RunStoreError | None:
    """The refusal for renewing leases whose latest expiry is ``current_expiry_ns`` to
    ``requested_ns`` at ``now_ns`` (already clamped), or None when the renewal is allowed.
    A renewal to the same expiry is allowed (it changes nothing).

    post: implies(__return__ is None, requested_ns > now_ns and requested_ns >= current_expiry_ns)
    post: implies(requested_ns <= now_ns, isinstance(__return__, ExpiryNotAfterNowError))
    """
    if requested_ns <= now_ns:
        return ExpiryNotAfterNowError("the new expiry must be after now")
    if requested_ns < current_expiry_ns:
        return RenewalShortensError(f"the leases already expire at {current_expiry_ns}")
    return None


def expiry_refusal(expires_at_ns: int, now_ns: int) -> RunStoreError | None:
    """``expiry_not_after_now`` for a new lease that would not outlive ``now_ns``.

    post: implies(__return__ is None, expires_at_ns > now_ns)
    """
    if expires_at_ns <= now_ns:
        return ExpiryNotAfterNowError("the lease must expire after now")
    return None


def outcome_refusal(decision: str | None, accepted: bool, superseded: bool) -> RunStoreError | None:
    """The refusal for committing an outcome after entering finalizing with ``decision``:
    ``"claimed"`` (``begin_finalization`` took the claim, which the attempt still holds),
    ``"superseded"`` (it lost the contest) or None (it entered without contending, through
    ``advance`` or recovery). ``accepted`` / ``superseded`` say which outcome is asked for
    (neither: failed or censored). Acceptance needs the claim (``claim_required``); a
    superseded contender commits ``Superseded`` and nothing else, and only it may
    (``outcome_not_permitted``).

    pre: decision in (None, "claimed", "superseded")
    pre: not (accepted and superseded)
    post: implies(__return__ is None and accepted, decision == "claimed")
    post: implies(__return__ is None, superseded == (decision == "superseded"))
    post: implies(decision is None and not accepted and not superseded, __return__ is None)
    """
    if accepted:
        if decision != "claimed":
            return ClaimRequiredError("acceptance needs the slot's claim")
        return None
    if superseded and decision != "superseded":
        return OutcomeNotPermittedError("only a superseded contender may commit superseded")
    if not superseded and decision == "superseded":
        return OutcomeNotPermittedError("a superseded contender must commit superseded")
    return None


RESERVATION_RELEASED: Final = "reservation_released"
RESERVATION_EXPIRED: Final = "reservation_expired"
CLAIM_RELEASED: Final = "claim_released"
CLAIM_EXPIRED: Final = "claim_expired"


def recovery_cause(
    held_until: int, held_released: bool, claim_until: int | None, claim_released: bool, now: int
) -> str | None:
    """Why a nonterminal attempt is recoverable at ``now`` (already clamped), or None while
    its owner keeps authority: the first of ``reservation_released``, ``reservation_expired``
    (its reservation lease expires at ``held_until``), ``claim_released``, ``claim_expired``
    (the lease of the claim it holds expires at ``claim_until``, None when it holds no
    claim). Expiry is exclusive.

    post: implies(__return__ is None, lease_live(held_until, held_released, now))
    post: implies(held_released, __return__ == "reservation_released")
    post: implies(claim_until is None and not held_released, __return__ != "claim_expired")
    post: implies(__return__ is None and claim_until is not None, now < claim_until)
    post: implies(__return__ is None, not claim_released or claim_until is None)
    """
    if held_released:
        return RESERVATION_RELEASED
    if not lease_live(held_until, False, now):
        return RESERVATION_EXPIRED
    if claim_until is None:
        return None
    if claim_released:
        return CLAIM_RELEASED
    if not lease_live(claim_until, False, now):
        return CLAIM_EXPIRED
    return None


def implies(premise: bool, conclusion: bool) -> bool:
    """Material implication, for the contracts above."""
    return (not premise) or conclusion
