"""References and the guards around them: the three reference tables are history, no
reference is added once its attempt (or lease) is done, an observation always names its
own directory, no two attempts share a final artifact, and the event log knows the
attempt-scoped ``observation_registered`` kind.

Each guard has a refusal test (the forbidden write is refused with the guard's own message
and changes nothing) next to a test that the legitimate write still succeeds.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.contract import STATES
from conformance.contract import TERMINAL_STATES
from conformance.schema.rows import Rows
from conformance.schema.rows import count
from conformance.schema.rows import insert
from conformance.schema.rows import refused
from conformance.schema.rows import rolled_back
from conformance.schema.rows import row_of
from conformance.schema.rows import transaction

OPEN_STATES = tuple(state for state in STATES if state not in TERMINAL_STATES)


# --- the reference tables are history ------------------------------------------------------


# Each builder inserts one reference under a fresh, open holder and returns the holder's
# key column and value.


def _attempt_reference(rows: Rows) -> tuple[str, str]:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    rows.attempt_reference(attempt, rows.artifact("dataset"))
    return "attempt_id", attempt


def _observation_reference(rows: Rows) -> tuple[str, str]:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    observation = rows.observation(attempt, world.obs_slot)
    rows.observation_reference(observation, rows.artifact("metrics"))
    return "observation_id", observation


def _leased_root(rows: Rows) -> tuple[str, str]:
    world = rows.world()
    lease = rows.lease(rows.attempt_in(world.slot, "executing"))
    rows.leased_root(lease, rows.artifact("dataset"))
    return "lease_id", lease


REFERENCE_BUILDERS: dict[str, Callable[[Rows], tuple[str, str]]] = {
    "attempt_artifacts": _attempt_reference,
    "observation_artifacts": _observation_reference,
    "leased_artifacts": _leased_root,
}


@pytest.mark.parametrize("table", REFERENCE_BUILDERS)
def test_references_are_insert_only(rows: Rows, table: str) -> None:
    column, key = REFERENCE_BUILDERS[table](rows)
    where = f"{column} = ?"
    conn = rows.conn
    before = row_of(conn, table, where, key)
    other = rows.artifact("other")
    with refused(f"{table}: rows are insert-only"):
        conn.execute(f"UPDATE {table} SET artifact_id = ? WHERE {where}", (other, key))
    with refused(f"{table}: rows are insert-only"):
        conn.execute(f"DELETE FROM {table} WHERE {where}", (key,))
    # The primary key is the whole row, so REPLACE meets its own twin: with
    # recursive_triggers=ON the implicit delete is refused.
    names = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
    with refused(f"{table}: rows are insert-only"):
        insert(conn, table, dict(zip(names, before, strict=True)), "INSERT OR REPLACE")
    assert row_of(conn, table, where, key) == before


@pytest.mark.parametrize("table", REFERENCE_BUILDERS)
def test_references_accumulate(rows: Rows, table: str) -> None:
    """Insert-only is not insert-once: a holder may gain further references."""
    column, key = REFERENCE_BUILDERS[table](rows)
    row = {column: key, "artifact_id": rows.artifact("source")}
    if table != "leased_artifacts":
        row["role"] = "source"
    insert(rows.conn, table, row)
    assert count(rows.conn, table, f"{column} = ?", key) == 2


# --- no attempt reference added late --------------------------------------------------------


@pytest.mark.parametrize("state", OPEN_STATES)
def test_an_open_attempt_takes_references(rows: Rows, state: str) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, state)
    rows.attempt_reference(attempt, rows.artifact("dataset"))
    assert count(rows.conn, "attempt_artifacts", "attempt_id = ?", attempt) == 1


@pytest.mark.parametrize("state", TERMINAL_STATES)
def test_a_terminal_attempt_takes_no_reference(rows: Rows, state: str) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, state)
    dataset = rows.artifact("dataset")
    with refused("attempt_artifacts: the attempt is terminal"):
        rows.attempt_reference(attempt, dataset)
    with refused("attempt_artifacts: the attempt is terminal"):
        insert(
            rows.conn,
            "attempt_artifacts",
            {"attempt_id": attempt, "role": "dataset", "artifact_id": dataset},
            "INSERT OR IGNORE",
        )
    assert count(rows.conn, "attempt_artifacts") == 0


def test_references_commit_with_the_terminal_step(rows: Rows) -> None:
    """The writer's order: references first, then the terminal update, one transaction."""
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "finalizing")
    dataset = rows.artifact("dataset")
    with transaction(rows.conn):
        rows.attempt_reference(attempt, dataset)
        rows.step(attempt, "failed")
    assert rows.current(attempt)[2] == "failed"
    assert count(rows.conn, "attempt_artifacts", "attempt_id = ?", attempt) == 1


def test_a_reference_after_the_terminal_step_is_refused_in_the_same_transaction(
    rows: Rows,
) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "finalizing")
    dataset = rows.artifact("dataset")
    with refused("attempt_artifacts: the attempt is terminal"), rolled_back(rows.conn):
        rows.step(attempt, "failed")
        rows.attempt_reference(attempt, dataset)
    assert rows.current(attempt)[2] == "finalizing"
    assert count(rows.conn, "attempt_artifacts") == 0


def test_a_terminal_retry_does_not_close_its_sibling(rows: Rows) -> None:
    world = rows.world()
    first = rows.attempt_in(world.slot, "failed")
    retry = rows.attempt_in(world.slot, "executing")
    dataset = rows.artifact("dataset")
    rows.attempt_reference(retry, dataset)
    with refused("attempt_artifacts: the attempt is terminal"):
        rows.attempt_reference(first, dataset)
    assert count(rows.conn, "attempt_artifacts", "attempt_id = ?", retry) == 1


# --- no observation reference added late ----------------------------------------------------


@pytest.mark.parametrize("state", ["executing", "checkpointing", "finalizing"])
def test_an_observation_of_an_open_attempt_takes_references(rows: Rows, state: str) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    observation = rows.observation(attempt, world.obs_slot)
    if state != "executing":
        rows.advance(attempt, state)
    rows.observation_reference(observation, rows.artifact("metrics"))
    assert count(rows.conn, "observation_artifacts", "observation_id = ?", observation) == 1


@pytest.mark.parametrize("state", TERMINAL_STATES)
def test_an_observation_of_a_terminal_attempt_takes_no_reference(rows: Rows, state: str) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    observation = rows.observation(attempt, world.obs_slot)
    rows.drive(attempt, "finalizing", state)
    with refused("observation_artifacts: the producing attempt is terminal"):
        rows.observation_reference(observation, rows.artifact("metrics"))
    assert count(rows.conn, "observation_artifacts") == 0


def test_an_observation_reference_follows_its_own_producer(rows: Rows) -> None:
    """The producing attempt decides, not the slot or a sibling retry."""
    world = rows.world()
    first = rows.attempt_in(world.slot, "executing")
    old = rows.observation(first, world.obs_slot)
    rows.drive(first, "finalizing", "failed")
    retry = rows.attempt_in(world.slot, "executing")
    fresh = rows.observation(retry, world.obs_slot)
    metrics = rows.artifact("metrics")
    rows.observation_reference(fresh, metrics)
    with refused("observation_artifacts: the producing attempt is terminal"):
        rows.observation_reference(old, metrics)
    assert count(rows.conn, "observation_artifacts") == 1


# --- no leased root added late ---------------------------------------------------------------


@pytest.mark.parametrize("purpose", ["reservation", "finalization", "staging"])
def test_a_live_lease_takes_roots(rows: Rows, purpose: str) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "finalizing")
    lease = rows.lease(attempt, purpose=purpose)
    rows.leased_root(lease, rows.artifact("dataset"))
    assert count(rows.conn, "leased_artifacts", "lease_id = ?", lease) == 1


def test_a_lease_without_an_attempt_takes_roots(rows: Rows) -> None:
    lease = rows.lease(None, purpose="staging")
    rows.leased_root(lease, rows.artifact("dataset"))
    assert count(rows.conn, "leased_artifacts", "lease_id = ?", lease) == 1


@pytest.mark.parametrize("attempt_scoped", [True, False])
def test_a_released_lease_takes_no_root(rows: Rows, attempt_scoped: bool) -> None:
    attempt = None
    if attempt_scoped:
        attempt = rows.attempt_in(rows.world().slot, "executing")
    lease = rows.lease(attempt, purpose="staging")
    rows.release(lease)
    with refused("leased_artifacts: the lease is released"):
        rows.leased_root(lease, rows.artifact("dataset"))
    assert count(rows.conn, "leased_artifacts") == 0


@pytest.mark.parametrize("state", TERMINAL_STATES)
def test_an_unreleased_lease_of_a_terminal_attempt_takes_no_root(rows: Rows, state: str) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    lease = rows.lease(attempt)
    rows.drive(attempt, "finalizing", state)
    assert count(rows.conn, "leases", "id = ? AND released_at_ns IS NULL", lease) == 1
    with refused("leased_artifacts: the lease's attempt is terminal"):
        rows.leased_root(lease, rows.artifact("dataset"))
    assert count(rows.conn, "leased_artifacts") == 0


# --- the observation directory is always present ---------------------------------------------


def test_an_observation_names_its_directory(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    directory = rows.artifact("observation")
    observation = rows.observation(attempt, world.obs_slot, artifact_id=directory)
    found = rows.conn.execute(
        "SELECT artifact_id, artifact_kind FROM observations WHERE id = ?", (observation,)
    ).fetchone()
    assert found == (directory, "observation")


@pytest.mark.parametrize(
    ("overrides", "column"),
    [
        ({"artifact_id": None}, "artifact_id"),
        ({"artifact_id": None, "artifact_kind": None}, "artifact_id"),
        ({"artifact_kind": None}, "artifact_kind"),
    ],
)
def test_an_observation_without_its_directory_is_refused(
    rows: Rows, overrides: dict[str, None], column: str
) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    with refused(f"NOT NULL constraint failed: observations.{column}"):
        rows.observation(attempt, world.obs_slot, **overrides)
    assert count(rows.conn, "observations") == 0


# --- one final artifact per attempt ----------------------------------------------------------


def test_attempts_finish_with_distinct_final_artifacts(rows: Rows) -> None:
    world = rows.world()
    first = rows.attempt_in(world.slot, "failed")
    retry = rows.attempt_in(world.slot, "accepted")
    other = rows.attempt_in(rows.world().slot, "censored")
    # Open attempts have no final artifact yet, and any number of them may coexist.
    rows.attempt_in(world.slot, "executing")
    rows.attempt_in(world.slot, "finalizing")
    finals = rows.conn.execute(
        "SELECT final_artifact_id FROM attempts WHERE id IN (?, ?, ?)", (first, retry, other)
    ).fetchall()
    assert len({final for (final,) in finals}) == 3
    assert count(rows.conn, "attempts", "final_artifact_id IS NULL") == 2


@pytest.mark.parametrize("same_slot", [True, False])
def test_a_final_artifact_is_taken_once(rows: Rows, same_slot: bool) -> None:
    world = rows.world()
    first = rows.attempt_in(world.slot, "failed")
    (shared,) = rows.conn.execute(
        "SELECT final_artifact_id FROM attempts WHERE id = ?", (first,)
    ).fetchone()
    second = rows.attempt_in(world.slot if same_slot else rows.world().slot, "finalizing")
    with refused("UNIQUE constraint failed: attempts.final_artifact_id"):
        rows.advance(second, "superseded", final_artifact_id=shared)
    assert rows.current(second)[2] == "finalizing"
    assert count(rows.conn, "attempts", "final_artifact_id = ?", shared) == 1


def test_one_attempt_per_final_artifact_is_a_partial_unique_index(rows: Rows) -> None:
    conn = rows.conn
    found = conn.execute(
        "SELECT name, \"unique\", partial FROM pragma_index_list('attempts') "
        "WHERE name = 'one_attempt_per_final_artifact'"
    ).fetchall()
    assert found == [("one_attempt_per_final_artifact", 1, 1)]
    columns = conn.execute(
        "SELECT name FROM pragma_index_info('one_attempt_per_final_artifact')"
    ).fetchall()
    assert columns == [("final_artifact_id",)]


# --- the observation_registered event ----------------------------------------------------


def test_observation_registered_is_an_event_kind(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    sequence = rows.event("observation_registered", attempt, rows.now())
    assert row_of(rows.conn, "events", "sequence = ?", sequence)[1] == "observation_registered"


@pytest.mark.parametrize("to_state", ["materializing", "finalizing"])
def test_observation_registered_announces_no_transition(rows: Rows, to_state: str) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    at = rows.now()
    with refused("attempt_transitions: event kind does not match"), rolled_back(rows.conn):
        sequence = rows.event("observation_registered", attempt, at)
        rows.transition(attempt, 1, "reserved", to_state, at, event_sequence=sequence)
    assert rows.current(attempt)[1] == 0
