"""Numeric ranges: nonnegative 64-bit nanosecond timestamps, and retry indices and
revisions within the canonical JSON integer range."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from conformance.schema.rows import MAX_JSON_INT
from conformance.schema.rows import MAX_NS
from conformance.schema.rows import Rows
from conformance.schema.rows import World
from conformance.schema.rows import check_failed
from conformance.schema.rows import insert
from conformance.schema.rows import transaction

# (constraint, writer of the value) for every nanosecond column a writer sets directly.
NS_COLUMNS: dict[str, tuple[str, Callable[[Rows, World, int], object]]] = {
    "artifacts.verified_at_ns": (
        "artifact_verified_at_range",
        lambda rows, world, ns: rows.artifact("dataset", verified_at_ns=ns),
    ),
    "attempts.started_at_ns": (
        "attempt_started_at_range",
        lambda rows, world, ns: rows.reserve(world.slot, started_at_ns=ns),
    ),
    "events.at_ns": (
        "event_at_range",
        lambda rows, world, ns: rows.event("attempt_transition", None, ns),
    ),
    "leases.acquired_at_ns": (
        "lease_acquired_at_range",
        lambda rows, world, ns: rows.lease(
            acquired_at_ns=ns, expires_at_ns=ns + 1 if ns < MAX_NS else ns
        ),
    ),
    "finalization_claims.claimed_at_ns": (
        "claim_claimed_at_range",
        lambda rows, world, ns: rows.claim(
            rows.attempt_in(world.slot, "finalizing"), claimed_at_ns=ns
        ),
    ),
    "observations.registered_at_ns": (
        "observation_registered_at_range",
        lambda rows, world, ns: rows.observation(
            rows.attempt_in(world.slot, "executing"), world.obs_slot, registered_at_ns=ns
        ),
    ),
    "selected_observations.selected_at_ns": (
        "selection_selected_at_range",
        lambda rows, world, ns: rows.select(
            world.obs_slot,
            rows.observation(rows.attempt_in(world.slot, "executing"), world.obs_slot),
            selected_at_ns=ns,
        ),
    ),
}


@pytest.mark.parametrize("column", sorted(NS_COLUMNS))
def test_negative_timestamps_are_refused(rows: Rows, column: str) -> None:
    constraint, write = NS_COLUMNS[column]
    world = rows.world()
    table = column.split(".")[0]
    before = rows.conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    with check_failed(constraint):
        write(rows, world, -1)
    assert rows.conn.execute(f"SELECT count(*) FROM {table}").fetchone() == before


@pytest.mark.parametrize("column", sorted(NS_COLUMNS))
@pytest.mark.parametrize("ns", [0, MAX_NS])
def test_the_full_nonnegative_range_is_stored(rows: Rows, column: str, ns: int) -> None:
    _constraint, write = NS_COLUMNS[column]
    world = rows.world()
    if column == "leases.acquired_at_ns" and ns == MAX_NS:
        # expiry must be strictly later, which the 64-bit range cannot hold
        with check_failed("lease_expires_after_acquired"):
            write(rows, world, ns)
        return
    write(rows, world, ns)
    table, name = column.split(".")
    assert (
        rows.conn.execute(f"SELECT count(*) FROM {table} WHERE {name} = ?", (ns,)).fetchone()[0]
        >= 1
    )


def test_timestamps_beyond_64_bits_cannot_be_stored(rows: Rows) -> None:
    with pytest.raises(OverflowError):
        rows.artifact("dataset", verified_at_ns=MAX_NS + 1)
    row = rows.artifact_row("dataset")
    row.pop("verified_at_ns")
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    # As an SQL literal the value becomes REAL, which a STRICT INTEGER column refuses.
    with pytest.raises(sqlite3.IntegrityError, match="cannot store REAL value in INTEGER"):
        rows.conn.execute(
            f"INSERT INTO artifacts ({columns}, verified_at_ns) "
            f"VALUES ({marks}, 9223372036854775808)",
            tuple(row.values()),
        )


def test_finish_and_release_times_are_bounded_below(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot, started_at_ns=0)
    rows.advance(attempt, "finalizing", at_ns=0)
    with check_failed("attempt_finished_at_range"):
        rows.advance(attempt, "failed", at_ns=0, finished_at_ns=-1)
    lease = rows.lease(acquired_at_ns=0, expires_at_ns=1)
    with check_failed("lease_released_after_acquired"):
        rows.conn.execute("UPDATE leases SET released_at_ns = -1 WHERE id = ?", (lease,))
    with check_failed("lease_expires_after_acquired"):
        rows.lease(acquired_at_ns=0, expires_at_ns=-1)


def test_revision_and_retry_ranges_hold_beneath_the_triggers(rows: Rows) -> None:
    """Revisions only grow by one from zero, so the range CHECKs are unreachable through the
    triggers; they still hold when the triggers are gone (defence in depth)."""
    conn = rows.conn
    world = rows.world()
    conn.execute("DROP TRIGGER attempts_insert_is_reservation")
    conn.execute("DROP TRIGGER attempt_transitions_insert_is_next_step")
    with check_failed("attempt_revision_range"):
        rows.reserve(world.slot, revision=MAX_JSON_INT + 1)
    with check_failed("attempt_revision_range"):
        rows.reserve(world.slot, revision=-1)
    attempt = rows.reserve(world.slot)
    for revision, constraint in (
        (MAX_JSON_INT + 1, "transition_revision_range"),
        (-1, "transition_revision_range"),
    ):
        with check_failed(constraint), transaction(conn):
            rows.transition(attempt, revision, "reserved", "finalizing", rows.now())
    with check_failed("transition_at_range"), transaction(conn):
        sequence = rows.event("attempt_finalizing", attempt, 0)
        rows.transition(attempt, 1, "reserved", "finalizing", -1, event_sequence=sequence)
    with check_failed("attempt_retry_index_range"):
        insert(conn, "attempts", rows.attempt_row(world.slot, retry_index=MAX_JSON_INT + 1))


def test_state_lists_and_update_order_hold_beneath_the_triggers(rows: Rows) -> None:
    """The state-list CHECKs and updated >= started are unreachable through the triggers;
    they still hold when the triggers are gone (defence in depth)."""
    conn = rows.conn
    world = rows.world()
    conn.execute("DROP TRIGGER attempts_insert_is_reservation")
    conn.execute("DROP TRIGGER attempt_transitions_insert_is_next_step")
    with check_failed("attempt_state"):
        insert(conn, "attempts", rows.attempt_row(world.slot, state="paused"))
    with check_failed("attempt_updated_at_range"):
        insert(conn, "attempts", rows.attempt_row(world.slot, started_at_ns=10, updated_at_ns=9))
    attempt = rows.reserve(world.slot)
    for source, target, constraint in (
        ("reserved", "paused", "transition_to_state"),
        ("paused", "finalizing", "transition_from_state"),
    ):
        at = rows.now()
        with check_failed(constraint), transaction(conn):
            sequence = rows.event("attempt_transition", attempt, at)
            rows.transition(attempt, 1, source, target, at, event_sequence=sequence)
