"""Schema v1 as an object: strict tables, version, script shape, JSON columns, atomic
initialization."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import connect
from conformance.schema.rows import count
from conformance.schema.rows import create_schema
from conformance.schema.rows import open_store
from conformance.schema.rows import schema_text
from conformance.schema.rows import split_statements

TABLES = {
    "applicability_decisions",
    "resolved_runs",
    "observation_slots",
    "attempt_slots",
    "attempt_observation_slots",
    "attempts",
    "events",
    "attempt_transitions",
    "leases",
    "finalization_claims",
    "observations",
    "selected_observations",
    "artifacts",
    "attempt_artifacts",
    "observation_artifacts",
    "leased_artifacts",
}


@pytest.fixture
def conn() -> sqlite3.Connection:
    return open_store()


def test_script_is_split_into_whole_statements_ending_with_user_version() -> None:
    statements = split_statements(schema_text())
    assert statements[-1] == "PRAGMA user_version = 1;"
    assert all(sqlite3.complete_statement(s) for s in statements)
    text = schema_text().upper()
    assert "IF NOT EXISTS" not in text
    for statement in statements:
        code = [
            line
            for line in statement.splitlines()
            if line.strip() and not line.lstrip().startswith("--")
        ]
        first = code[0].split()[0].upper()
        assert first in {"CREATE", "PRAGMA"}, statement
    # Every trigger body arrives as one statement.
    triggers = [s for s in statements if "CREATE TRIGGER" in s]
    assert triggers
    assert all(s.rstrip().endswith("END;") for s in triggers)


def test_user_version_is_one(conn: sqlite3.Connection) -> None:
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)


def test_exactly_the_sixteen_tables_and_all_strict(conn: sqlite3.Connection) -> None:
    listed = conn.execute(
        "SELECT name, strict FROM pragma_table_list "
        "WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    assert {name for name, _ in listed} == TABLES
    assert {name for name, strict in listed if strict != 1} == set()


def test_strict_tables_refuse_lossy_types(conn: sqlite3.Connection) -> None:
    rows = Rows(conn)
    with pytest.raises(sqlite3.IntegrityError) as info:
        rows.decision(applicable="yes")
    assert info.value.sqlite_errorcode == 3091  # SQLITE_CONSTRAINT_DATATYPE
    with pytest.raises(sqlite3.IntegrityError, match="cannot store REAL value in INTEGER"):
        rows.artifact(verified_at_ns=1.5)
    with pytest.raises(sqlite3.IntegrityError, match="cannot store BLOB value in TEXT"):
        rows.decision(candidate_id=b"candidate")
    assert count(conn, "applicability_decisions") == 0
    assert count(conn, "artifacts") == 0


def test_running_the_script_twice_fails(conn: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        create_schema(conn)
    assert not conn.in_transaction
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)


def test_initialization_is_atomic_including_user_version() -> None:
    fresh = connect()
    fresh.execute("BEGIN IMMEDIATE")
    for statement in split_statements(schema_text()):
        fresh.execute(statement)
    assert fresh.execute("PRAGMA user_version").fetchone() == (1,)
    fresh.execute("ROLLBACK")
    assert fresh.execute("PRAGMA user_version").fetchone() == (0,)
    assert fresh.execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,)


def test_a_broken_script_leaves_an_empty_unversioned_database() -> None:
    fresh = connect()
    script = schema_text().replace("PRAGMA user_version = 1;", "SELECT no_such_function();\n")
    with pytest.raises(sqlite3.OperationalError):
        create_schema(fresh, script + "PRAGMA user_version = 1;\n")
    assert fresh.execute("PRAGMA user_version").fetchone() == (0,)
    assert fresh.execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,)


def test_one_accepted_attempt_per_slot_is_a_partial_unique_index(
    conn: sqlite3.Connection,
) -> None:
    found = conn.execute(
        "SELECT name, \"unique\", partial FROM pragma_index_list('attempts') "
        "WHERE name = 'one_accepted_attempt_per_slot'"
    ).fetchall()
    assert found == [("one_accepted_attempt_per_slot", 1, 1)]
    columns = conn.execute(
        "SELECT name FROM pragma_index_info('one_accepted_attempt_per_slot')"
    ).fetchall()
    assert columns == [("slot_id",)]
    (sql,) = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE name = 'one_accepted_attempt_per_slot'"
    ).fetchone()
    assert "WHERE state = 'accepted'" in sql


def test_the_projection_key_is_deferred(conn: sqlite3.Connection) -> None:
    (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'attempts'").fetchone()
    assert "DEFERRABLE INITIALLY DEFERRED" in sql
    keys = conn.execute(
        'SELECT "table", "from", "to" FROM pragma_foreign_key_list(\'attempts\') '
        "WHERE \"table\" = 'attempt_transitions' ORDER BY seq"
    ).fetchall()
    assert keys == [
        ("attempt_transitions", "id", "attempt_id"),
        ("attempt_transitions", "revision", "revision"),
        ("attempt_transitions", "state", "to_state"),
        ("attempt_transitions", "updated_at_ns", "at_ns"),
    ]


JSON_CASES = [
    ("applicability_decisions", "decision_record_is_object"),
    ("resolved_runs", "run_record_is_object"),
    ("attempt_slots", "attempt_slot_record_is_object"),
    ("observation_slots", "observation_slot_record_is_object"),
    ("attempts", "attempt_record_is_object"),
    ("events", "event_payload_is_object"),
    ("observations", "observation_record_is_object"),
]


@pytest.mark.parametrize(("table", "constraint"), JSON_CASES)
@pytest.mark.parametrize("text", ["[]", "1", '"text"', "null", "{", "not json", ""])
def test_json_columns_hold_objects(
    conn: sqlite3.Connection, table: str, constraint: str, text: str
) -> None:
    rows = Rows(conn)
    world = rows.world()
    attempt = rows.reserve(world.slot)
    builders: dict[str, Callable[[], object]] = {
        "applicability_decisions": lambda: rows.decision(record_json=text),
        "resolved_runs": lambda: rows.run(world.decision, record_json=text),
        "attempt_slots": lambda: rows.attempt_slot(world.run, record_json=text),
        "observation_slots": lambda: rows.observation_slot(world.run, record_json=text),
        "attempts": lambda: rows.reserve(world.slot, record_json=text),
        "events": lambda: rows.event("attempt_transition", attempt, rows.now(), payload_json=text),
        "observations": lambda: rows.observation(attempt, world.obs_slot, record_json=text),
    }
    before = count(conn, table)
    with check_failed(constraint):
        builders[table]()
    assert count(conn, table) == before
    assert not conn.in_transaction
