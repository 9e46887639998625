"""Writer spec tests: guards a caller forged or kept past their attempt.

A guard is opaque to callers and the writer checks every field of it against the database
(SPEC.md section 6). These pin the cases the usual stale-guard tests do not reach, in
lockstep with the model: a guard at the attempt's current revision but in another state, a
guard that is wrong about both its owner and its lease (the owner is reported first), and a
well-formed guard of an attempt that was never reserved; and the claim checks of step 7
on claim rows no writer call leaves behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import attrs
import pytest
from runstore import AttemptState
from runstore import OwnedAttempt
from runstore import RunStoreError
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

S = AttemptState


def materializing(world: World) -> tuple[sc.SlotFixture, OwnedAttempt]:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    return fixture, world.advance(guard, S.MATERIALIZING, 1_100)


def test_a_guard_at_the_current_revision_in_another_state_is_stale(world: World) -> None:
    _, guard = materializing(world)
    # Revision 1 is the attempt's; materializing, not starting, is its state.
    forged = attrs.evolve(guard, state=S.STARTING)
    before = world.projection()
    world.refused("stale_revision", world.advance, forged, S.PREPARING, 1_200)
    world.refused("stale_revision", world.renew, forged, EXPIRES + 1, 1_200)
    world.refused("stale_revision", world.claim, forged, "claim-0", 1_200)
    assert world.projection() == before
    # The real guard still works.
    world.advance(guard, S.STARTING, 1_300)
    world.check()


def test_a_guard_wrong_about_owner_and_lease_is_an_owner_mismatch(world: World) -> None:
    _, guard = materializing(world)
    forged = attrs.evolve(guard, owner_token=sc.OTHER_OWNER, lease_id="reservation-x")
    world.refused("owner_mismatch", world.advance, forged, S.STARTING, 1_200)
    world.refused("owner_mismatch", world.renew, forged, EXPIRES + 1, 1_200)
    # Only the lease wrong: lease_mismatch.
    world.refused(
        "lease_mismatch", world.advance, attrs.evolve(guard, lease_id="x"), S.STARTING, 1_200
    )
    world.check()


def test_a_guard_of_an_attempt_never_reserved_is_an_unknown_slot(world: World) -> None:
    fixture, _ = materializing(world)
    # A well-formed guard of retry 3 of a registered slot, and of retry 0 of a slot that
    # was never registered: neither attempt exists.
    unregistered = sc.slot_fixture(name="never-registered")
    for ghost in (
        OwnedAttempt.reserved(fixture.slot_id, 3, sc.lease("reservation-3", EXPIRES)),
        OwnedAttempt.reserved(unregistered.slot_id, 0, sc.lease("reservation-9", EXPIRES)),
    ):
        world.refused("unknown_slot", world.advance, ghost, S.MATERIALIZING, 1_200)
        world.refused("unknown_slot", world.renew, ghost, EXPIRES + 1, 1_200)
    world.check()


# --- claims the writer never leaves, which step 7 of the sequence still names ---------------
#
# begin_finalization refuses a claim lease of another owner, and a terminal commit deletes
# the claim and releases its lease together, so no writer call leaves either state. SPEC.md
# section 6 names the refusals all the same (step 7): these rows are written through a
# separate connection, as the schema allows, and the model cannot follow them.


def tamper(world: World, statement: str, params: tuple[object, ...] = ()) -> None:
    connection = sqlite3.connect(world.database_path, isolation_level=None)
    try:
        connection.execute(statement, params)
    finally:
        connection.close()


def guarded_calls(world: World, guard: OwnedAttempt) -> list[Callable[[], object]]:
    """Calls that run the guarded sequence first and would otherwise succeed (or refuse
    only after it)."""
    return [
        lambda: world.store.renew(guard, EXPIRES + 1, 1_400),
        lambda: world.store.advance(guard, S.VALIDATING, 1_400),
    ]


def refused_by_the_store(world: World, code: str, call: Callable[[], object]) -> None:
    before = world.projection()
    with pytest.raises(RunStoreError) as refused:
        call()
    assert refused.value.code == code, refused.value
    assert world.projection() == before


def test_a_claim_whose_lease_was_released_refuses_its_holder(world: World) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200).attempt
    tamper(world, "UPDATE leases SET released_at_ns = 1300 WHERE id = 'claim-0'")
    for call in guarded_calls(world, guard):
        refused_by_the_store(world, "lease_released", call)


@pytest.mark.parametrize(
    ("owner", "code"), [(sc.OTHER_OWNER, "owner_mismatch"), (sc.OWNER, "lease_mismatch")]
)
def test_a_claim_whose_lease_has_another_owner_refuses_the_attempt(
    world: World, owner: str, code: str
) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    tamper(
        world,
        "INSERT INTO leases (id, fencing_token, owner_token, attempt_id, purpose, "
        "acquired_at_ns, expires_at_ns) VALUES ('claim-x', "
        "(SELECT max(fencing_token) + 1 FROM leases), ?, ?, 'finalization', 1200, 9000)",
        (owner, guard.attempt_id),
    )
    tamper(
        world,
        "INSERT INTO finalization_claims (slot_id, attempt_id, lease_id, claimed_at_ns, "
        "lease_purpose) VALUES (?, ?, 'claim-x', 1200, 'finalization')",
        (guard.slot_id, guard.attempt_id),
    )
    # The guard holds no claim lease: with the owner's own lease that is lease_mismatch
    # (step 9); with another owner's, step 7 refuses first.
    for call in guarded_calls(world, guard):
        refused_by_the_store(world, code, call)
