"""Writer spec tests: the guarded checks.

Backward clock adjustments (clamped to the preceding transition, and the lease checks use
the clamped time), stale guards (from the same handle, a second handle on the same root,
and a separate process), expired owners at the exact expiry instant, released owners
after the terminal commit, and an expired finalization claim.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator

import attrs
import pytest
from runstore import Accepted
from runstore import AttemptState
from runstore import Failed
from runstore import Next
from runstore import OwnedAttempt
from runstore import RunStore
from runstore import RunStoreError
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import Workers
from conformance.writer.world import World

S = AttemptState
LEASES = (
    "SELECT id, acquired_at_ns, expires_at_ns, released_at_ns FROM leases "
    "WHERE attempt_id = ? ORDER BY fencing_token"
)


def transition_times(world: World, attempt_id: str) -> list[int]:
    rows = world.rows(
        "SELECT at_ns FROM attempt_transitions WHERE attempt_id = ? ORDER BY revision",
        (attempt_id,),
    )
    return [row[0] for row in rows]


def every_guarded_call(
    world: World, guard: OwnedAttempt, now: int
) -> dict[str, Callable[[], object]]:
    """One call of each guarded operation with ``guard`` at ``now`` (as thunks)."""
    fixture = sc.slot_fixture()
    member = fixture.observation_slots[0]
    return {
        "advance": lambda: world.advance(guard, S.MATERIALIZING, now),
        "renew": lambda: world.renew(guard, EXPIRES * 3, now),
        "begin_finalization": lambda: world.claim(guard, "claim-x", now, expires=EXPIRES * 3),
        "register_observation": lambda: world.publish(guard, member, "result-x", now),
        "commit_finalization": lambda: world.finish(guard, Accepted(), "attempt-x", now),
    }


# --- backward clocks ------------------------------------------------------------------------


def test_a_backward_clock_is_clamped_to_the_preceding_transition(world: World) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", expires=3_000)
    guard = world.advance(guard, S.MATERIALIZING, 2_500)
    guard = world.advance(guard, S.STARTING, 500)
    assert transition_times(world, guard.attempt_id) == [1_000, 2_500, 2_500]
    assert world.rows("SELECT updated_at_ns FROM attempts") == [(2_500,)]
    assert [e.at_ns for e in world.delivered] == [1_000, 2_500, 2_500]

    # The lease checks use the clamped time: an expiry after the caller's clock but not
    # after the clamped time is refused, and shortening is judged against the lease.
    world.refused("expiry_not_after_now", lambda: world.renew(guard, 2_400, 100))
    world.refused("expiry_not_after_now", lambda: world.renew(guard, 2_500, 100))
    world.refused("renewal_shortens", lambda: world.renew(guard, 2_600, 100))
    world.refused("expiry_not_after_now", lambda: world.claim(guard, "claim-0", 100, expires=2_500))
    world.renew(guard, 3_500, 100)

    # A claim and an observation taken with a backward clock carry the clamped time too,
    # and so does the terminal commit (finish time and lease release).
    guard = world.claim(guard, "claim-0", 100, expires=3_500).attempt
    world.publish(guard, fixture.observation_slots[0], "result-0", 7)
    receipt = world.finish(guard, Accepted(), "attempt-0", 0)
    assert receipt.finished_at_ns == 2_500
    assert transition_times(world, guard.attempt_id) == [1_000, 2_500, 2_500, 2_500, 2_500]
    assert world.rows(LEASES, (guard.attempt_id,)) == [
        ("reservation-0", 1_000, 3_500, 2_500),
        ("claim-0", 2_500, 3_500, 2_500),
    ]
    assert world.rows("SELECT claimed_at_ns FROM finalization_claims") == []
    assert world.rows("SELECT registered_at_ns FROM observations") == [(2_500,)]
    assert world.rows("SELECT selected_at_ns FROM selected_observations") == [(2_500,)]
    world.check()


def test_a_backward_clock_cannot_revive_an_expired_lease(world: World) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", expires=3_000)
    guard = world.advance(guard, S.MATERIALIZING, 2_999)
    # now 0 is clamped to 2_999, still before the expiry.
    guard = world.advance(guard, S.STARTING, 0)
    assert transition_times(world, guard.attempt_id) == [1_000, 2_999, 2_999]
    world.refused("lease_expired", lambda: world.advance(guard, S.PREPARING, 3_000))
    world.check()


def test_times_outside_their_range_are_refused_first(world: World) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    stale = guard
    guard = world.advance(guard, S.MATERIALIZING, 1_100)
    for now in (-1, 2**63):
        request = sc.lease("reservation-1", EXPIRES)
        world.refused(
            "out_of_range", world.reserve, fixture.slot_id, Next(retry=True), request, now
        )
        # out_of_range comes before every guard check, even for a stale guard.
        world.refused("out_of_range", world.advance, stale, S.STARTING, now)
        world.refused("out_of_range", world.renew, guard, EXPIRES + 1, now)
    world.refused("out_of_range", lambda: world.renew(guard, 2**63, 1_200))
    world.check()


# --- stale guards ---------------------------------------------------------------------------


def test_reusing_an_earlier_guard_is_stale_for_every_operation(world: World) -> None:
    fixture = world.registered()
    reserved = world.start(fixture, "reservation-0")
    executing = world.walk(reserved, sc.EXECUTION_PATH, 1_100)
    for call in every_guarded_call(world, reserved, 1_200).values():
        world.refused("stale_revision", call)
    finalizing = world.claim(executing, "claim-0", 1_300).attempt
    for call in every_guarded_call(world, executing, 1_400).values():
        world.refused("stale_revision", call)
    # A guard at the right revision that does not name the held claim: lease_mismatch.
    unclaimed = attrs.evolve(finalizing, claim_lease_id=None)
    world.refused("lease_mismatch", lambda: world.finish(unclaimed, Accepted(), "attempt-0", 1_500))
    world.check()


def test_a_guard_used_from_a_second_handle_is_checked_against_the_database(
    world: World,
) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    with RunStore.open(world.store.root) as second:
        # The second handle moves the attempt on (the model takes the same step).
        moved = world.lockstep(lambda w: w.advance(guard, S.MATERIALIZING, 1_100), store=second)
        # The first handle's reuse of the old guard is stale...
        world.refused("stale_revision", lambda: world.advance(guard, S.MATERIALIZING, 1_200))
        # ...and so is the second handle's reuse, after the first moved on.
        world.advance(moved, S.STARTING, 1_300)
        with pytest.raises(RunStoreError) as info:
            second.advance(moved, S.STARTING, 1_400)
        assert info.value.code == "stale_revision"
    world.check()


@pytest.fixture(scope="module")
def worker() -> Iterator[Workers]:
    workers = Workers(1)
    yield workers
    workers.close()


def test_a_stale_guard_is_refused_from_a_separate_process(world: World, worker: Workers) -> None:
    fixture = world.registered()
    root = str(world.store.root)
    guard = world.start(fixture, "reservation-0")
    moved = world.advance(guard, S.MATERIALIZING, 1_100)
    before = world.projection()
    [outcome] = worker.run([(root, "advance", (guard, S.STARTING, 1_200))])
    assert outcome == ("refused", "stale_revision")
    assert world.projection() == before
    # The other process may use the current guard; then this process's copy is stale.
    [outcome] = worker.run([(root, "advance", (moved, S.STARTING, 1_200))])
    assert outcome[0] == "ok"
    assert outcome[1] == attrs.evolve(moved, state=S.STARTING, revision=2)
    with pytest.raises(RunStoreError) as info:
        world.store.advance(moved, S.STARTING, 1_300)
    assert info.value.code == "stale_revision"


# --- expired and released owners ------------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    ["advance", "renew", "begin_finalization", "register_observation", "commit_finalization"],
)
def test_the_exact_expiry_instant_is_refused(world: World, operation: str) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", expires=2_000)
    if operation in ("register_observation", "commit_finalization"):
        guard = world.claim(guard, "claim-0", 1_500, expires=2_000).attempt
    # One nanosecond before the expiry the owner is live (renew to the same expiry).
    world.renew(guard, 2_000, 1_999)
    world.refused("lease_expired", every_guarded_call(world, guard, 2_000)[operation])
    world.refused("lease_expired", every_guarded_call(world, guard, 2_001)[operation])
    world.check()


def test_after_the_terminal_commit_the_leases_are_released_and_the_guard_is_dead(
    world: World,
) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200, expires=8_000).attempt
    world.finish(guard, Failed(code="oom", details={"rss": 1}), "attempt-0", 1_300)
    assert world.rows(LEASES, (guard.attempt_id,)) == [
        ("reservation-0", 1_000, EXPIRES, 1_300),
        ("claim-0", 1_200, 8_000, 1_300),
    ]
    for call in every_guarded_call(world, guard, 1_400).values():
        world.refused("attempt_terminal", call)
    # Released leases stay: their ids cannot be taken again.
    world.refused(
        "duplicate_lease",
        lambda: world.reserve(
            fixture.slot_id, Next(retry=True), sc.lease("claim-0", EXPIRES), 1_500
        ),
    )
    world.check()


def test_an_expired_claim_refuses_its_holder_and_blocks_other_contenders(world: World) -> None:
    fixture = world.registered()
    holder = world.start(fixture, "reservation-0", expires=20_000)
    holder = world.claim(holder, "claim-0", 1_100, expires=1_500).attempt
    # Live one nanosecond before the claim's expiry.
    world.publish(holder, fixture.observation_slots[0], "result-0", 1_499)
    for name, call in every_guarded_call(world, holder, 1_500).items():
        if name != "begin_finalization":
            world.refused("claim_expired", call)
    world.refused("illegal_transition", lambda: world.claim(holder, "claim-9", 1_499))
    # The expired claim is never stolen: a new contender is superseded.
    other = world.start(
        fixture, "reservation-1", authorization=Next(retry=True), now=1_600, owner=sc.OTHER_OWNER
    )
    disposition = world.claim(other, "claim-1", 1_700)
    assert not disposition.claimed
    assert world.rows("SELECT attempt_id, lease_id FROM finalization_claims") == [
        (holder.attempt_id, "claim-0")
    ]
    world.check()


def test_a_foreign_owner_or_lease_is_refused(world: World) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    foreign = attrs.evolve(guard, owner_token=sc.OTHER_OWNER)
    forged = attrs.evolve(guard, lease_id="reservation-forged")
    for call in every_guarded_call(world, foreign, 1_100).values():
        world.refused("owner_mismatch", call)
    for call in every_guarded_call(world, forged, 1_100).values():
        world.refused("lease_mismatch", call)
    world.refused(
        "owner_mismatch",
        lambda: world.finalize(guard, sc.lease("claim-0", EXPIRES, sc.OTHER_OWNER), 1_100),
    )
    world.check()


def test_renewal_extends_the_reservation_and_the_claim_together(world: World) -> None:
    fixture = world.registered()
    guard = world.walk(
        world.start(fixture, "reservation-0", expires=5_000), sc.EXECUTION_PATH, 1_100
    )
    guard = world.claim(guard, "claim-0", 1_200, expires=4_000).attempt
    history = world.rows("SELECT count(*) FROM events")
    # Shorter than the reservation (though longer than the claim) is refused; the same
    # expiry as the longest is allowed and brings the claim up to it.
    world.refused("renewal_shortens", world.renew, guard, 4_999, 1_300)
    assert world.renew(guard, 5_000, 1_300) == guard
    assert world.rows(LEASES, (guard.attempt_id,)) == [
        ("reservation-0", 1_000, 5_000, None),
        ("claim-0", 1_200, 5_000, None),
    ]
    assert world.renew(guard, 9_000, 1_400) == guard
    assert world.rows(LEASES, (guard.attempt_id,)) == [
        ("reservation-0", 1_000, 9_000, None),
        ("claim-0", 1_200, 9_000, None),
    ]
    # Renewal is no transition: no event, no revision change.
    assert world.rows("SELECT count(*) FROM events") == history
    assert world.rows("SELECT revision FROM attempts") == [(guard.revision,)]
    world.check()


def test_the_largest_timestamp_is_usable_and_bounds_expiry(world: World) -> None:
    fixture = world.registered()
    top = 2**63 - 1
    request = sc.lease("reservation-0", top)
    world.refused(
        "expiry_not_after_now", world.reserve, fixture.slot_id, Next(retry=True), request, top
    )
    guard = world.reserve(fixture.slot_id, Next(retry=True), request, top - 2)
    guard = world.advance(guard, S.MATERIALIZING, top - 1)
    world.refused("lease_expired", world.advance, guard, S.STARTING, top)
    assert world.rows("SELECT updated_at_ns FROM attempts") == [(top - 1,)]
    world.check()
