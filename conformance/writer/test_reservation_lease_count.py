"""Writer spec tests: an attempt without exactly one reservation lease.

Every attempt the writer reserves gets exactly one reservation lease, and leases are never
deleted (SPEC.md section 6, Leases), so an attempt with none was written behind the
writer's back. Every guarded call on it, and recovery, is refused with ``database_error``
before any write, as with two reservation leases (``test_leases.py``), never with a raw
Python error. The model cannot follow a row written around the writer, so these check the
store alone.
"""

from __future__ import annotations

import sqlite3

from runstore import AttemptState
from runstore import OwnedAttempt
from runstore import canonical
from runstore.attempt_record import attempt_document
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

S = AttemptState


def attempt_without_lease(world: World) -> OwnedAttempt:
    """A reserved attempt (retry 0 of a registered slot) inserted through a separate
    connection with no lease, event or transition, and the guard its reservation would
    have returned."""
    fixture = world.registered()
    guard = OwnedAttempt.reserved(fixture.slot_id, 0, sc.lease("reservation-0", EXPIRES))
    record = attempt_document(
        attempt_id=guard.attempt_id,
        slot_id=guard.slot_id,
        retry_index=0,
        state=S.RESERVED,
        revision=0,
        started_at_ns=1_000,
        updated_at_ns=1_000,
    )
    connection = sqlite3.connect(world.database_path, isolation_level=None)
    try:
        connection.execute(
            "INSERT INTO attempts (id, slot_id, retry_index, state, revision, started_at_ns, "
            "updated_at_ns, record_json) VALUES (?, ?, 0, 'reserved', 0, 1000, 1000, ?)",
            (guard.attempt_id, guard.slot_id, canonical.encode(record).decode()),
        )
    finally:
        connection.close()
    return guard


def test_an_attempt_with_no_reservation_lease_is_refused_as_a_database_error(
    world: World,
) -> None:
    """SPEC.md section 6, Leases (an attempt has one reservation lease) and section 9
    (``database_error``): every guarded call on an attempt with none refuses with
    ``database_error`` naming the count, and writes nothing."""
    guard = attempt_without_lease(world)
    error = world.refused("database_error", world.store.advance, guard, S.MATERIALIZING, 1_100)
    assert "0 reservation leases" in error.message
    world.refused("database_error", world.store.renew, guard, EXPIRES + 1, 1_100)
    lease = sc.lease("claim-0", EXPIRES, guard.owner_token)
    world.refused("database_error", world.store.begin_finalization, guard, lease, 1_100)


def test_recovery_refuses_an_attempt_with_no_reservation_lease_as_a_database_error(
    world: World,
) -> None:
    """SPEC.md section 6, Leases, and section 9: recovery, which judges each nonterminal
    attempt by its reservation lease, refuses a store holding an attempt with none with
    ``database_error`` and writes nothing."""
    attempt_without_lease(world)
    error = world.refused("database_error", world.store.recover, lambda: EXPIRES + 10)
    assert "0 reservation leases" in error.message
