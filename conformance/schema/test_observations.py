"""Observations and selections: membership, validity, immutable selection, retained
checkpoints."""

from __future__ import annotations

import sqlite3

import pytest

from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import count
from conformance.schema.rows import fk_failed
from conformance.schema.rows import insert
from conformance.schema.rows import open_store
from conformance.schema.rows import refused
from conformance.schema.rows import row_of


def selection(conn: sqlite3.Connection, obs_slot: str) -> tuple[object, ...]:
    return row_of(conn, "selected_observations", "slot_id = ?", obs_slot)


# --- observations ------------------------------------------------------------------------


def test_observation_of_an_owned_slot(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    rows.observation(attempt, world.obs_slot)
    rows.observation(attempt, world.obs_slot, valid=0)
    assert count(rows.conn, "observations", "slot_id = ?", world.obs_slot) == 2


def test_observation_slot_must_be_owned_by_the_producing_slot(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    other_slot = rows.attempt_slot(world.run)
    foreign_obs = rows.observation_slot(world.run)
    rows.membership(foreign_obs, other_slot, world.run)
    with fk_failed():
        rows.observation(attempt, foreign_obs)
    # Naming the owning slot does not help when the attempt belongs elsewhere.
    with fk_failed():
        rows.observation(attempt, foreign_obs, attempt_slot_id=other_slot)
    unowned = rows.observation_slot(world.run)
    with fk_failed():
        rows.observation(attempt, unowned)
    assert count(rows.conn, "observations") == 0


def test_observation_directory_is_an_observation_artifact(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    dataset = rows.artifact("dataset")
    with fk_failed():
        rows.observation(attempt, world.obs_slot, artifact_id=dataset)
    with check_failed("observation_artifact_kind"):
        rows.observation(attempt, world.obs_slot, artifact_id=dataset, artifact_kind="dataset")
    with check_failed("observation_completion"):
        rows.observation(attempt, world.obs_slot, completion="partial")
    with check_failed("observation_valid_is_boolean"):
        rows.observation(attempt, world.obs_slot, valid=2)
    assert count(rows.conn, "observations") == 0


def test_observations_are_immutable_and_undeletable(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    observation = rows.observation(attempt, world.obs_slot, valid=0)
    conn = rows.conn
    before = row_of(conn, "observations", "id = ?", observation)
    with refused("observations: rows are immutable"):
        conn.execute("UPDATE observations SET valid = 1 WHERE id = ?", (observation,))
    with refused("observations: rows cannot be deleted"):
        conn.execute("DELETE FROM observations WHERE id = ?", (observation,))
    names = [c[1] for c in conn.execute("PRAGMA table_info(observations)")]
    replacement = dict(zip(names, before, strict=True)) | {"valid": 1}
    with refused("observations: rows cannot be deleted"):
        insert(conn, "observations", replacement, "INSERT OR REPLACE")
    assert row_of(conn, "observations", "id = ?", observation) == before


def test_observation_artifact_references(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    observation = rows.observation(attempt, world.obs_slot)
    metrics = rows.artifact("metrics")
    insert(
        rows.conn,
        "observation_artifacts",
        {"observation_id": observation, "role": "metrics", "artifact_id": metrics},
    )
    with check_failed("observation_artifact_role"):
        insert(
            rows.conn,
            "observation_artifacts",
            {"observation_id": observation, "role": "", "artifact_id": metrics},
        )
    with fk_failed():
        insert(
            rows.conn,
            "observation_artifacts",
            {
                "observation_id": observation,
                "role": "result",
                "artifact_id": "run-store-v1:result-" + "0" * 64,
            },
        )
    with fk_failed():
        insert(
            rows.conn,
            "observation_artifacts",
            {"observation_id": "observation:v1:" + "0" * 64, "role": "x", "artifact_id": metrics},
        )
    assert count(rows.conn, "observation_artifacts") == 1


# --- selections --------------------------------------------------------------------------


def test_a_valid_observation_of_the_slot_is_selectable(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    observation = rows.observation(attempt, world.obs_slot, completion="not_reached")
    rows.select(world.obs_slot, observation)
    assert selection(rows.conn, world.obs_slot)[:3] == (world.obs_slot, observation, 1)


def test_an_invalid_observation_is_not_selectable(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    invalid = rows.observation(attempt, world.obs_slot, valid=0)
    with fk_failed():
        rows.select(world.obs_slot, invalid)
    with check_failed("selection_requires_valid"):
        rows.select(world.obs_slot, invalid, valid=0)
    assert count(rows.conn, "selected_observations") == 0


def test_selection_names_an_observation_of_that_exact_slot(rows: Rows) -> None:
    world = rows.world()
    second_obs = rows.owned_slot(world)
    attempt = rows.attempt_in(world.slot, "executing")
    of_second = rows.observation(attempt, second_obs)
    with fk_failed():
        rows.select(world.obs_slot, of_second)
    with fk_failed():
        rows.select(world.obs_slot, "observation:v1:" + "0" * 64)
    assert count(rows.conn, "selected_observations") == 0


def test_selection_is_immutable(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    first = rows.observation(attempt, world.obs_slot)
    later = rows.observation(attempt, world.obs_slot)
    rows.select(world.obs_slot, first)
    conn = rows.conn
    before = selection(conn, world.obs_slot)
    with refused("selected_observations: rows are insert-only"):
        conn.execute(
            "UPDATE selected_observations SET observation_id = ? WHERE slot_id = ?",
            (later, world.obs_slot),
        )
    with refused("selected_observations: rows are insert-only"):
        conn.execute("DELETE FROM selected_observations WHERE slot_id = ?", (world.obs_slot,))
    with refused("UNIQUE constraint failed: selected_observations.slot_id"):
        rows.select(world.obs_slot, later)
    with refused("selected_observations: rows are insert-only"):
        insert(
            conn,
            "selected_observations",
            {
                "slot_id": world.obs_slot,
                "observation_id": later,
                "valid": 1,
                "selected_at_ns": rows.now(),
            },
            "INSERT OR REPLACE",
        )
    with refused("selected_observations: rows are insert-only"):
        conn.execute(
            "INSERT INTO selected_observations VALUES (?, ?, 1, ?) "
            "ON CONFLICT (slot_id) DO UPDATE SET observation_id = excluded.observation_id",
            (world.obs_slot, later, rows.now()),
        )
    assert selection(conn, world.obs_slot) == before


def test_replace_is_refused_only_because_of_recursive_triggers() -> None:
    """The guard against INSERT OR REPLACE depends on the connection setting: without
    recursive_triggers the implicit delete slips past the trigger. This pins why every
    connection must enable it."""
    conn = open_store()
    rows = Rows(conn)
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "executing")
    first = rows.observation(attempt, world.obs_slot)
    later = rows.observation(attempt, world.obs_slot)
    rows.select(world.obs_slot, first)
    conn.execute("PRAGMA recursive_triggers = OFF")
    conn.execute(
        "INSERT OR REPLACE INTO selected_observations VALUES (?, ?, 1, ?)",
        (world.obs_slot, later, rows.now()),
    )
    assert selection(conn, world.obs_slot)[1] == later


# --- retained checkpoints ----------------------------------------------------------------


@pytest.mark.parametrize("fate", ["failed", "censored", "superseded"])
def test_checkpoints_survive_their_attempt(rows: Rows, fate: str) -> None:
    world = rows.world(execution_kind="stream")
    checkpoints = [
        rows.owned_slot(world, kind="checkpoint", checkpoint_index=index) for index in range(2)
    ]
    first = rows.attempt_in(world.slot, "executing")
    produced = [rows.observation(first, checkpoints[0]), rows.observation(first, checkpoints[1])]
    rows.select(checkpoints[0], produced[0])
    rows.advance(first, "checkpointing")
    rows.advance(first, "finalizing")
    rows.advance(first, fate)
    conn = rows.conn
    assert count(conn, "observations", "attempt_id = ?", first) == 2
    assert selection(conn, checkpoints[0])[1] == produced[0]

    # A retry recomputes checkpoint 0: its own observation is kept, the selection is not
    # displaced. It selects checkpoint 1 with its own result and is accepted.
    retry = rows.attempt_in(world.slot, "executing")
    recomputed = rows.observation(retry, checkpoints[0])
    with refused("UNIQUE constraint failed: selected_observations.slot_id"):
        rows.select(checkpoints[0], recomputed)
    with refused("selected_observations: rows are insert-only"):
        insert(
            conn,
            "selected_observations",
            {
                "slot_id": checkpoints[0],
                "observation_id": recomputed,
                "valid": 1,
                "selected_at_ns": rows.now(),
            },
            "INSERT OR REPLACE",
        )
    rows.select(checkpoints[1], rows.observation(retry, checkpoints[1]))
    rows.advance(retry, "finalizing")
    rows.advance(retry, "accepted")
    assert selection(conn, checkpoints[0])[1] == produced[0]
    assert count(conn, "observations", "attempt_id = ?", first) == 2
    assert count(conn, "observations", "slot_id = ?", checkpoints[0]) == 2
