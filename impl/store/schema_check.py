"""Creating schema v1 in an empty database, and verifying an existing one.

Rules of this file: helpers here run inside the caller's transaction or on a private
in-memory database; they never commit. Verification compares the database's catalogue with
an in-memory instantiation of the embedded script (object definitions, columns,
indexes, foreign keys, strictness), built once per process, never the script's text
against the file.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from runstore import sql
from runstore.errors import SchemaMismatchError
from runstore.store.schema_sql import RUN_STORE_SCHEMA_VERSION
from runstore.store.schema_sql import schema_statements

Fingerprint = dict[str, Any]


def user_object_count(connection: sqlite3.Connection) -> int:
    """How many schema objects (tables, indexes, views, triggers) the database holds."""
    return int(sql.scalar(connection, "SELECT count(*) FROM sqlite_schema"))


def create_schema_in_transaction(connection: sqlite3.Connection) -> None:
    """Run every statement of the embedded script; the caller owns BEGIN/COMMIT/ROLLBACK.
    The script's last statement sets ``user_version``."""
    for statement in schema_statements():
        sql.execute(connection, statement)


def fingerprint(connection: sqlite3.Connection) -> Fingerprint:
    """A structural description of the main schema: every catalogue row, and per table its
    columns, strictness, indexes (with their columns) and foreign keys."""
    objects = sql.execute(
        connection,
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name",
    )
    tables = sql.execute(
        connection,
        "SELECT name, type, ncol, wr, strict FROM pragma_table_list WHERE schema = 'main' "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    per_table: dict[str, Any] = {}
    for name, *_rest in tables:
        indexes = sql.execute(
            connection,
            'SELECT name, "unique", origin, partial FROM pragma_index_list(?) ORDER BY name',
            (name,),
        )
        per_table[name] = {
            "columns": sql.execute(
                connection, "SELECT * FROM pragma_table_xinfo(?) ORDER BY cid", (name,)
            ),
            "foreign_keys": sql.execute(
                connection, "SELECT * FROM pragma_foreign_key_list(?) ORDER BY id, seq", (name,)
            ),
            "indexes": [
                (
                    index,
                    sql.execute(
                        connection,
                        "SELECT * FROM pragma_index_xinfo(?) ORDER BY seqno",
                        (index[0],),
                    ),
                )
                for index in indexes
            ],
        }
    return {"objects": objects, "tables": tables, "per_table": per_table}


@functools.cache
def expected_fingerprint() -> Fingerprint:
    """The fingerprint of a fresh in-memory instantiation of the embedded schema.

    It depends only on the embedded script (and the SQLite library), so it is built once per
    process, on first use, and shared: callers compare it and never modify it. A process
    that forks children can call it first so that no child's first open builds it (the
    in-memory statements then appear in no child's statement trace)."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    try:
        sql.execute(connection, "BEGIN")
        create_schema_in_transaction(connection)
        sql.execute(connection, "COMMIT")
        return fingerprint(connection)
    finally:
        connection.close()


def verify_schema(connection: sqlite3.Connection) -> None:
    """Refuse (SchemaMismatchError) a version-1 database whose catalogue differs in any
    table, column, index, trigger, foreign key or strictness from the embedded schema."""
    actual = fingerprint(connection)
    expected = expected_fingerprint()
    if actual == expected:
        return
    raise SchemaMismatchError(
        f"the schema v{RUN_STORE_SCHEMA_VERSION} database differs from the embedded "
        f"schema: {_first_difference(expected, actual)}"
    )


def _first_difference(expected: Fingerprint, actual: Fingerprint) -> str:
    expected_objects = {(row[0], row[1]): row for row in expected["objects"]}
    actual_objects = {(row[0], row[1]): row for row in actual["objects"]}
    for key in sorted(expected_objects.keys() - actual_objects.keys()):
        return f"missing {key[0]} {key[1]}"
    for key in sorted(actual_objects.keys() - expected_objects.keys()):
        return f"unexpected {key[0]} {key[1]}"
    for key in sorted(expected_objects):
        if expected_objects[key] != actual_objects[key]:
            return f"changed {key[0]} {key[1]}"
    for name in sorted(expected["per_table"]):
        if expected["per_table"][name] != actual["per_table"].get(name):
            return f"changed structure of table {name}"
    return "changed table list"
