"""Writer spec tests: a clock reading 0, the bottom of every ``*_ns`` range.

Every ``*_ns`` is an integer in 0..2^63-1 (SPEC.md section 4), and a guarded operation runs
at its effective time ``max(now_ns, attempt.updated_at_ns)`` (section 6, Clock): nothing
else raises it. So an attempt reserved at 0 and advanced at 0 moves at 0, and its lease
expiring at 1 is live then (expiry is exclusive: live at ``t`` exactly when
``t < expires_at_ns``) and expired at 1. In lockstep with the model.
"""

from __future__ import annotations

from runstore import AttemptState

from conformance.writer.world import World

S = AttemptState


def test_a_guarded_operation_at_time_zero_runs_at_zero(world: World) -> None:
    """SPEC.md section 6, Clock: the effective time is ``max(now_ns, updated_at_ns)``, so
    with both at 0 every check and every written time is 0; the reservation expiring at 1
    is live at 0 and expired at 1."""
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", now=0, expires=1)
    guard = world.advance(guard, S.MATERIALIZING, 0)
    guard = world.advance(guard, S.STARTING, 0)
    assert world.rows("SELECT revision, at_ns FROM attempt_transitions ORDER BY revision") == [
        (0, 0),
        (1, 0),
        (2, 0),
    ]
    assert world.rows("SELECT at_ns FROM events ORDER BY sequence") == [(0,), (0,), (0,)]
    assert world.rows("SELECT started_at_ns, updated_at_ns FROM attempts") == [(0, 0)]
    world.refused("lease_expired", world.advance, guard, S.PREPARING, 1)
    world.check()


def test_a_renewal_and_a_claim_at_time_zero_run_at_zero(world: World) -> None:
    """SPEC.md section 6, Clock: renewal and the claim are judged and written at the
    effective time 0 (a requested expiry of 1 is after it; the claim is taken at 0)."""
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", now=0, expires=1)
    guard = world.renew(guard, 1, 0)
    disposition = world.claim(guard, "claim-0", 0, expires=1)
    assert disposition.claimed
    assert world.rows("SELECT claimed_at_ns FROM finalization_claims") == [(0,)]
    assert world.rows("SELECT id, acquired_at_ns, expires_at_ns FROM leases ORDER BY id") == [
        ("claim-0", 0, 1),
        ("reservation-0", 0, 1),
    ]
    world.check()
