"""Writer spec tests: renewal extends an attempt's leases together, all or nothing.

``renew`` extends the reservation, the claim's lease and the live staging leases to one
expiry, judged against the later of the reservation's and the claim lease's expiry, at the
effective (clamped) time (SPEC.md section 6). The claim case runs in lockstep with the
model. The writer has no operation that opens a stage yet (the model's ``begin_staging``),
so the staging cases insert their lease rows through a separate connection, as a stage
would leave them, and read the result through a fresh one; the model cannot follow them.
"""

from __future__ import annotations

import sqlite3

import pytest
from runstore import AttemptState
from runstore import OwnedAttempt
from runstore import RunStoreError
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

S = AttemptState
EXPIRIES = "SELECT id, expires_at_ns, released_at_ns FROM leases ORDER BY fencing_token"


def test_renewal_is_judged_against_the_later_of_reservation_and_claim(world: World) -> None:
    fixture = world.registered()
    guard = world.walk(
        world.start(fixture, "reservation-0", expires=5_000), sc.EXECUTION_PATH, 1_100
    )
    # The claim's lease outlives the reservation.
    guard = world.claim(guard, "claim-0", 1_200, expires=9_000).attempt
    world.refused("renewal_shortens", world.renew, guard, 7_000, 1_300)
    world.refused("renewal_shortens", world.renew, guard, 8_999, 1_300)
    world.renew(guard, 9_000, 1_300)  # the claim's own expiry: allowed
    assert world.rows(EXPIRIES) == [("reservation-0", 9_000, None), ("claim-0", 9_000, None)]
    world.check()


def stage(
    world: World, guard: OwnedAttempt, lease_id: str, expires: int, released: int | None = None
) -> None:
    """A staging lease of ``guard``'s attempt acquired at 1_000, as a stage leaves it."""
    insert_lease(world, guard, lease_id, "staging", expires, released, f"artifacts/.{lease_id}")


def insert_lease(
    world: World,
    guard: OwnedAttempt,
    lease_id: str,
    purpose: str,
    expires: int,
    released: int | None = None,
    staging_path: str | None = None,
) -> None:
    """A lease row of ``guard``'s attempt acquired at 1_000, written behind the writer's
    back through a separate connection."""
    connection = sqlite3.connect(world.database_path, isolation_level=None)
    try:
        connection.execute(
            "INSERT INTO leases (id, fencing_token, owner_token, attempt_id, purpose, "
            "acquired_at_ns, expires_at_ns, released_at_ns, staging_path) VALUES (?, "
            "(SELECT max(fencing_token) + 1 FROM leases), ?, ?, ?, 1000, ?, ?, ?)",
            (
                lease_id,
                guard.owner_token,
                guard.attempt_id,
                purpose,
                expires,
                released,
                staging_path,
            ),
        )
    finally:
        connection.close()


def materializing_at_3000(world: World) -> OwnedAttempt:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    return world.advance(guard, S.MATERIALIZING, 3_000)


def test_renewal_extends_live_stages_and_leaves_released_and_expired_ones(world: World) -> None:
    guard = materializing_at_3000(world)
    stage(world, guard, "stage-live", 8_000)
    stage(world, guard, "stage-released", 8_000, released=2_000)
    stage(world, guard, "stage-expires-now", 3_000)  # the exact expiry instant: expired
    stage(world, guard, "stage-expired", 2_000)  # live at the raw clock, not at 3_000
    # The clock reads 100; the effective time is the preceding transition's, 3_000.
    assert world.store.renew(guard, 12_000, 100) == guard
    assert world.rows(EXPIRIES) == [
        ("reservation-0", 12_000, None),
        ("stage-live", 12_000, None),
        ("stage-released", 8_000, 2_000),
        ("stage-expires-now", 3_000, None),
        ("stage-expired", 2_000, None),
    ]
    assert world.rows("SELECT revision, updated_at_ns FROM attempts") == [(1, 3_000)]


def test_a_stage_that_cannot_be_extended_fails_the_whole_renewal(world: World) -> None:
    guard = materializing_at_3000(world)
    stage(world, guard, "stage-live", 8_000)
    stage(world, guard, "stage-late", 20_000)  # would be shortened by the renewal
    before = world.rows(EXPIRIES)
    with pytest.raises(RunStoreError) as refused:
        world.store.renew(guard, 12_000, 3_100)
    assert refused.value.code == "database_error"
    assert (
        world.rows(EXPIRIES)
        == before
        == [
            ("reservation-0", EXPIRES, None),
            ("stage-live", 8_000, None),
            ("stage-late", 20_000, None),
        ]
    )
    # Past the late stage's expiry, every lease moves together.
    world.store.renew(guard, 20_000, 3_100)
    assert {row[1] for row in world.rows(EXPIRIES)} == {20_000}


def test_a_second_reservation_lease_is_a_typed_refusal_not_an_assertion(world: World) -> None:
    """Only a write behind the writer's back can give an attempt two reservation leases;
    every call that reads the reservation then refuses with ``database_error`` (no raw
    AssertionError) and changes nothing."""
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    insert_lease(world, guard, "reservation-forged", "reservation", EXPIRES)
    error = world.refused("database_error", world.store.renew, guard, EXPIRES + 1, 1_300)
    assert "2 reservation leases" in error.message
    world.refused("database_error", world.store.advance, guard, S.VALIDATING, 1_300)
    lease = sc.lease("claim-0", EXPIRES, guard.owner_token)
    world.refused("database_error", world.store.begin_finalization, guard, lease, 1_300)
    world.refused("database_error", world.store.recover, lambda: EXPIRES + 10)
