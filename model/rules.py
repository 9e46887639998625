"""Scalar rules shared by the model's operations: ranges, clock clamping, lease liveness,
retry authorization and renewal.

Rules of this file: plain functions over integers, booleans and code strings; no records,
no state. Each carries PEP 316 contracts that ``crosshair check runstore.model.rules``
verifies. The operations call these functions, so the verified rules are the ones used.
Refusal codes are written here as the strings of ``runstore.errors``; a test checks that
every one of them is a declared error code.
"""

from __future__ import annotations

MAX_NS = 2**63 - 1
"""Largest timestamp (SQLite's signed 64-bit integer)."""
MAX_INDEX = 2**53 - 1
"""Largest retry index or revision (the canonical JSON integer range)."""


RETRY_NOT_AUTHORIZED = "retry_not_authorized"
BOUND_EXCEEDED = "retry_bound_exceeded"


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


def lease_refusal(expires_at_ns: int, released: bool, now_ns: int) -> str | None:
    """The refusal for presenting a lease at ``now_ns``: released is checked before expiry.

    post: implies(__return__ is None, lease_live(expires_at_ns, released, now_ns))
    post: implies(released, __return__ == "lease_released")
    post: implies(not released and now_ns >= expires_at_ns, __return__ == "lease_expired")
    """
    if released:
        return "lease_released"
    if now_ns >= expires_at_ns:
        return "lease_expired"
    return None


def retry_refusal(
    actual_next: int, first_only: bool, exact_next: int | None, max_index: int | None
) -> str | None:
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
    post: implies(max_index is not None and actual_next > max_index, __return__ == BOUND_EXCEEDED)
    post: implies(first_only and actual_next > 0, __return__ == "retry_not_authorized")
    """
    if first_only and actual_next != 0:
        return "retry_not_authorized"
    if max_index is not None and actual_next > max_index:
        return "retry_bound_exceeded"
    if exact_next is not None and actual_next != exact_next:
        return "retry_not_authorized"
    return None


def renewal_refusal(requested_ns: int, current_expiry_ns: int, now_ns: int) -> str | None:
    """The refusal for renewing leases whose latest expiry is ``current_expiry_ns`` to
    ``requested_ns`` at ``now_ns`` (already clamped), or None when the renewal is allowed.
    A renewal to the same expiry is allowed (it changes nothing).

    post: implies(__return__ is None, requested_ns > now_ns and requested_ns >= current_expiry_ns)
    post: implies(requested_ns <= now_ns, __return__ == "expiry_not_after_now")
    """
    if requested_ns <= now_ns:
        return "expiry_not_after_now"
    if requested_ns < current_expiry_ns:
        return "renewal_shortens"
    return None


def implies(premise: bool, conclusion: bool) -> bool:
    """Material implication, for the contracts above."""
    return (not premise) or conclusion
