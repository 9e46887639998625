"""Leases in the model: renewing an attempt's leases together.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Liveness and the renewal rule are
:mod:`runstore.rules`, shared with the writer (:mod:`runstore.store.leases`); the composition is
the model's own. Leases are never deleted or reactivated.
"""

from __future__ import annotations

import attrs
from runstore import arguments
from runstore import rules
from runstore.enums import LeasePurpose
from runstore.model.guard import check_guard
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import put
from runstore.model.state import refused
from runstore.receipts import OwnedAttempt


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
    error = arguments.renew_arguments(guard, expires_at_ns, now_ns)
    if error is not None:
        return state, refused(error)
    checked = check_guard(state, guard, now_ns, ns=[("expires_at_ns", expires_at_ns)])
    if isinstance(checked, Refusal):
        return state, checked
    renewed = [checked.reservation]
    if checked.claim_lease is not None:
        renewed.append(checked.claim_lease)
    current = max(lease.expires_at_ns for lease in renewed)
    error = rules.renewal_refusal(expires_at_ns, current, checked.now_ns)
    if error is not None:
        return state, refused(error)
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
