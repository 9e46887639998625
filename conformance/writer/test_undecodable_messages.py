"""Writer spec tests: an SQLite error whose message is not UTF-8 stays an SQLite error.

SQLite can name bytes that are not UTF-8 in an error message (a hostile name written into
``sqlite_schema``, or text from a row). The SQL seam turns the UnicodeDecodeError Python
raises on such a message into ``sqlite3.DatabaseError`` with the bytes shown escaped, so
every caller that handles SQLite's errors (as ``database_error``, SPEC.md sections 8 and
9, or as a finding of ``validate``) handles it too, never a raw UnicodeDecodeError
(``conformance/cli/test_hostile_store.py`` pins the commands' side). Here the message
comes from a JSON path read from a row, so it can arise at any row of a statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from runstore import sql

QUERY = "SELECT json_extract('{}', path) FROM paths ORDER BY rowid"


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    """Paths whose last is not UTF-8 (``$`` then byte FF): SQLite's error for it quotes it."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE paths (path TEXT)")
    connection.execute("INSERT INTO paths VALUES ('$.a'), ('$.b'), (CAST(X'24FF' AS TEXT))")
    yield connection
    connection.close()


@pytest.mark.parametrize("good_rows", [0, 1, 2])
def test_an_undecodable_message_at_any_row_is_an_sqlite_error(
    connection: sqlite3.Connection, good_rows: int
) -> None:
    """The statement fails on its first row or on a later one (``iterate`` yields rows one
    at a time, so the later rows' errors surface while it iterates): each time the error
    is ``sqlite3.DatabaseError`` naming the byte escaped."""
    connection.execute(f"DELETE FROM paths WHERE rowid <= {2 - good_rows}")
    for read in (sql.execute, lambda c, q: list(sql.iterate(c, q))):
        with pytest.raises(sqlite3.DatabaseError) as failed:
            read(connection, QUERY)
        assert "\\xff" in str(failed.value)
