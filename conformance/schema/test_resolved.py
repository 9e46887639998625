"""Resolved records: applicability, runs, slots, memberships, and their immutability."""

from __future__ import annotations

import pytest

from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import count
from conformance.schema.rows import fk_failed
from conformance.schema.rows import insert
from conformance.schema.rows import refused
from conformance.schema.rows import row_of

# --- applicability -----------------------------------------------------------------------


def test_run_follows_an_applicable_decision_for_its_candidate(rows: Rows) -> None:
    decision = rows.decision(candidate_id="candidate-a")
    run = rows.run(decision, candidate_id="candidate-a")
    assert count(rows.conn, "resolved_runs", "id = ?", run) == 1


def test_run_refuses_an_exclusion_decision(rows: Rows) -> None:
    excluded = rows.decision(applicable=0)
    with fk_failed():
        rows.run(excluded)
    assert count(rows.conn, "resolved_runs") == 0


def test_run_refuses_a_decision_for_another_candidate(rows: Rows) -> None:
    decision = rows.decision(candidate_id="candidate-a")
    with fk_failed():
        rows.run(decision, candidate_id="candidate-b")
    assert count(rows.conn, "resolved_runs") == 0


def test_run_refuses_a_missing_decision(rows: Rows) -> None:
    with fk_failed():
        rows.run("decision:v1:" + "0" * 64)


def test_run_must_claim_applicability(rows: Rows) -> None:
    excluded = rows.decision(applicable=0)
    with check_failed("run_requires_applicable_decision"):
        rows.run(excluded, applicable=0)
    assert count(rows.conn, "resolved_runs") == 0


def test_decision_applicability_is_boolean(rows: Rows) -> None:
    with check_failed("decision_applicable_is_boolean"):
        rows.decision(applicable=2)


# --- slots -------------------------------------------------------------------------------


def test_logical_slots_occur_once_per_run(rows: Rows) -> None:
    world = rows.world()
    rows.attempt_slot(world.run, logical_slot="same")
    with refused("UNIQUE constraint failed: attempt_slots.run_id, attempt_slots.logical_slot"):
        rows.attempt_slot(world.run, logical_slot="same")
    rows.observation_slot(world.run, logical_slot="same")
    with refused(
        "UNIQUE constraint failed: observation_slots.run_id, observation_slots.logical_slot"
    ):
        rows.observation_slot(world.run, logical_slot="same")
    # Another run may reuse the logical name.
    other_run = rows.run(world.decision)
    rows.attempt_slot(other_run, logical_slot="same")


@pytest.mark.parametrize(("column", "value"), [("execution_kind", "batch"), ("role", "baseline")])
def test_attempt_slot_enumerations(rows: Rows, column: str, value: str) -> None:
    world = rows.world()
    name = "attempt_slot_execution_kind" if column == "execution_kind" else "attempt_slot_role"
    with check_failed(name):
        rows.attempt_slot(world.run, **{column: value})


@pytest.mark.parametrize(
    ("kind", "index", "ok"),
    [
        ("result", None, True),
        ("checkpoint", 0, True),
        ("checkpoint", 2**53 - 1, True),
        ("result", 0, False),
        ("checkpoint", None, False),
        ("checkpoint", -1, False),
        ("checkpoint", 2**53, False),
    ],
)
def test_checkpoint_index_exists_exactly_for_checkpoints(
    rows: Rows, kind: str, index: int | None, ok: bool
) -> None:
    world = rows.world()
    if ok:
        rows.observation_slot(world.run, kind=kind, checkpoint_index=index)
    else:
        with check_failed("observation_slot_checkpoint_index"):
            rows.observation_slot(world.run, kind=kind, checkpoint_index=index)


def test_observation_slot_kind(rows: Rows) -> None:
    world = rows.world()
    with check_failed("observation_slot_kind"):
        rows.observation_slot(world.run, kind="trace")


# --- memberships -------------------------------------------------------------------------


def test_one_execution_slot_owns_several_checkpoints(rows: Rows) -> None:
    world = rows.world(execution_kind="stream")
    for index in range(3):
        rows.owned_slot(world, kind="checkpoint", checkpoint_index=index)
    assert count(rows.conn, "attempt_observation_slots", "attempt_slot_id = ?", world.slot) == 4


def test_membership_slots_belong_to_the_same_run(rows: Rows) -> None:
    world = rows.world()
    other_run = rows.run(world.decision)
    foreign_obs = rows.observation_slot(other_run)
    foreign_slot = rows.attempt_slot(other_run)
    for obs_slot, slot, run in [
        (foreign_obs, world.slot, world.run),  # observation slot of another run
        (foreign_obs, world.slot, other_run),  # execution slot of another run
        (rows.observation_slot(world.run), foreign_slot, world.run),
    ]:
        with fk_failed():
            rows.membership(obs_slot, slot, run)
    assert count(rows.conn, "attempt_observation_slots") == 1


def test_an_observation_slot_has_one_producer(rows: Rows) -> None:
    world = rows.world()
    second = rows.attempt_slot(world.run)
    with refused("UNIQUE constraint failed: attempt_observation_slots.observation_slot_id"):
        rows.membership(world.obs_slot, second, world.run)


def test_a_warmup_slot_owns_no_observation_slot(rows: Rows) -> None:
    world = rows.world(role="warmup")
    obs_slot = rows.observation_slot(world.run)
    with refused("attempt_observation_slots: a warmup slot owns no observation slot"):
        rows.membership(obs_slot, world.slot, world.run)
    assert count(rows.conn, "attempt_observation_slots") == 0


# --- immutability ------------------------------------------------------------------------

RESOLVED = [
    ("applicability_decisions", "id", "problem_id = 'changed'"),
    ("resolved_runs", "id", "logical_spec_id = 'changed'"),
    ("attempt_slots", "id", "role = 'warmup'"),
    ("observation_slots", "id", "record_json = '{\"x\":1}'"),
    ("attempt_observation_slots", "observation_slot_id", "run_id = run_id"),
]


@pytest.mark.parametrize(("table", "key", "assignment"), RESOLVED)
def test_resolved_records_are_immutable_and_undeletable(
    rows: Rows, table: str, key: str, assignment: str
) -> None:
    rows.world()
    conn = rows.conn
    (row_key,) = conn.execute(f"SELECT {key} FROM {table}").fetchone()
    before = row_of(conn, table, f"{key} = ?", row_key)
    with refused(f"{table}: rows are immutable"):
        conn.execute(f"UPDATE {table} SET {assignment} WHERE {key} = ?", (row_key,))
    with refused(f"{table}: rows cannot be deleted"):
        conn.execute(f"DELETE FROM {table} WHERE {key} = ?", (row_key,))
    names = [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
    with refused(f"{table}: rows cannot be deleted"):
        insert(conn, table, dict(zip(names, before, strict=True)), verb="INSERT OR REPLACE")
    assert row_of(conn, table, f"{key} = ?", row_key) == before
