"""Writer spec tests: the SQL seam's one-value read (``runstore.sql.scalar``).

Counts, ``user_version`` and every setting read back go through ``scalar``, which takes a
statement that yields exactly one row of one column. Any other result is an SQLite result
with no more specific refusal, so it is ``database_error`` (SPEC.md section 9, and section
8: an unexpected SQLite error is ``database_error``), never a raw Python error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from runstore import RunStoreError
from runstore import sql


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    yield connection
    connection.close()


@pytest.mark.parametrize(
    "statement",
    ["SELECT 1 WHERE 0", "SELECT 1 UNION ALL SELECT 2", "SELECT 1, 2"],
    ids=["no-row", "two-rows", "two-columns"],
)
def test_a_result_that_is_not_one_value_is_a_database_error(
    connection: sqlite3.Connection, statement: str
) -> None:
    """SPEC.md section 9: ``database_error`` for a result of no row, two rows or two
    columns, never an IndexError or a value picked from it."""
    with pytest.raises(RunStoreError) as refused:
        sql.scalar(connection, statement)
    assert refused.value.code == "database_error"


def test_one_value_is_returned_as_it_is(connection: sqlite3.Connection) -> None:
    assert sql.scalar(connection, "SELECT 7") == 7
    assert sql.scalar(connection, "SELECT 'wal'") == "wal"
