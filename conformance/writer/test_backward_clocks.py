"""Every time column the store writes, pinned against a clock that went backward.

SPEC.md section 6 ("Clock"): a guarded operation runs at its effective time
``max(now_ns, attempt.updated_at_ns)``, and every timestamp it writes uses it; ``reserve``
uses ``now_ns``; publication also clamps to the stage's acquisition (section 11); recovery
judges each attempt at ``max(t, updated_at_ns)`` and registers artifacts at ``t`` (section
14.1); an artifact registration passed to the writer keeps its own ``verified_at_ns``.

Rules of this file: the list of time columns is read from the schema at test time (every
column whose name ends in ``_ns``), and :data:`TIME_COLUMNS` maps each to every operation
that writes it, so a new time column, or a column an operation starts writing, fails
:func:`test_every_time_column_is_mapped` or the case itself until it is pinned here. Each
case runs its operation's scenario, in which the clock reads behind the attempt's last
transition (or behind an earlier sample of the same call), and checks three things: the
value in the column is SPEC.md's effective one (hand-pinned in the scenario), the
operation's own statements wrote the column (seen through the SQL seam), and they wrote no
time column the map does not give them. The scenarios are
:mod:`conformance.writer.clock_scenarios`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore.store.schema_sql import schema_statements

from conformance.publication.world import PublicationWorld
from conformance.publication.world import open_world
from conformance.writer.clock_scenarios import SCENARIOS
from conformance.writer.clock_scenarios import Column

WRITER = ("reserve", "advance", "begin_finalization", "commit_finalization")
"""The operations that append a transition (and its event) and move the projection."""
TIME_COLUMNS: dict[Column, tuple[str, ...]] = {
    ("artifacts", "verified_at_ns"): (
        "register_observation",
        "commit_finalization",
        "publish_artifact",
        "publish_finalization",
        "recover",
    ),
    ("attempts", "started_at_ns"): ("reserve",),
    ("attempts", "updated_at_ns"): (*WRITER, "publish_finalization", "recover"),
    # Every step rewrites the whole projection row: a step that is not terminal writes
    # finished_at_ns too, as NULL (finish fields exist exactly for terminal states).
    ("attempts", "finished_at_ns"): (
        "advance",
        "begin_finalization",
        "commit_finalization",
        "publish_finalization",
        "recover",
    ),
    ("attempt_transitions", "at_ns"): (*WRITER, "publish_finalization", "recover"),
    ("events", "at_ns"): (*WRITER, "register_observation", "publish_finalization", "recover"),
    ("leases", "acquired_at_ns"): (
        "reserve",
        "begin_finalization",
        "publish_artifact",
        "publish_finalization",
    ),
    ("leases", "expires_at_ns"): (
        "reserve",
        "renew",
        "begin_finalization",
        "publish_artifact",
        "publish_finalization",
    ),
    ("leases", "released_at_ns"): (
        "commit_finalization",
        "publish_artifact",
        "publish_finalization",
        "recover",
    ),
    ("finalization_claims", "claimed_at_ns"): ("begin_finalization",),
    ("observations", "registered_at_ns"): ("register_observation",),
    ("selected_observations", "selected_at_ns"): ("register_observation",),
}
"""Each time column of the schema and every operation that writes it (registration writes
none: its tables have no time column)."""


def schema_time_columns() -> set[Column]:
    """Every ``*_ns`` column of schema v1, read from a fresh in-memory instance of it."""
    connection = sqlite3.connect(":memory:")
    for statement in schema_statements():
        connection.execute(statement)
    tables = [
        row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    ]
    return {
        (table, row[1])
        for table in tables
        for row in connection.execute(f"PRAGMA table_info({table})")
        if row[1].endswith("_ns")
    }


CASES = [
    (column, operation) for column, operations in TIME_COLUMNS.items() for operation in operations
]


# --- the tests ------------------------------------------------------------------------------


@pytest.fixture
def clock_world(tmp_path: Path) -> Iterator[PublicationWorld]:
    """A store with deterministic stage tokens (the publication group's world)."""
    yield from open_world(tmp_path)


def test_every_time_column_is_mapped() -> None:
    """The schema's time columns are exactly the map's, and every operation the map names
    has a scenario here."""
    assert schema_time_columns() == set(TIME_COLUMNS)
    assert {operation for _, operation in CASES} == set(SCENARIOS)


@pytest.mark.parametrize(
    ("column", "operation"), CASES, ids=[f"{t}.{c}-{op}" for (t, c), op in CASES]
)
def test_a_backward_clock_writes_the_effective_time(
    clock_world: PublicationWorld, column: Column, operation: str
) -> None:
    """The operation, run with a clock behind its attempt's last transition (or behind an
    earlier sample of the same call), writes SPEC.md's effective time in ``column``, and
    writes no time column the map does not give it."""
    run = SCENARIOS[operation](clock_world)
    assert column in run.pinned, f"{operation}'s scenario does not pin {column}"
    actual, expected = run.pinned[column]
    assert actual == expected
    assert column in run.written, f"{operation} did not write {column}"
    mapped = {c for c, operations in TIME_COLUMNS.items() if operation in operations}
    assert run.written <= mapped, f"{operation} writes unmapped columns"
