"""``validate``'s first part, the database (SPEC.md section 16.1, *Database*): readable,
``integrity_check``, ``user_version``, the exact embedded schema, ``foreign_key_check``.

Rules of this file: reads only, on the raw snapshot's connection; findings go to the
``report`` callback. A database that holds no schema at all is refused (``unsafe_path``):
it is no store.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from runstore import sql
from runstore.errors import SchemaMismatchError
from runstore.errors import UnsafePathError
from runstore.inspection.validate.findings import Report
from runstore.inspection.validate.reading import stream
from runstore.store import schema_check
from runstore.store.schema_sql import RUN_STORE_SCHEMA_VERSION

DATABASE_UNREADABLE: Final = "database_unreadable"
SQLITE_INTEGRITY: Final = "sqlite_integrity"
SCHEMA_VERSION: Final = "schema_version"
SCHEMA_MISMATCH: Final = "schema_mismatch"
FOREIGN_KEY: Final = "foreign_key"
CODES: Final = (DATABASE_UNREADABLE, SQLITE_INTEGRITY, SCHEMA_VERSION, SCHEMA_MISMATCH, FOREIGN_KEY)


def check_database(connection: sqlite3.Connection, root: str, log: Report) -> bool:
    """The database-level checks; False when the rest cannot be interpreted."""
    try:
        version = sql.scalar(connection, "PRAGMA user_version")
        objects = schema_check.user_object_count(connection)
    except sqlite3.DatabaseError as error:
        log(DATABASE_UNREADABLE, "database", f"the copy cannot be read: {error}")
        return False
    if version == 0 and objects == 0:
        raise UnsafePathError(f"the database in {root} holds no run store schema")
    _check_integrity(connection, log)
    if version != RUN_STORE_SCHEMA_VERSION:
        log(
            SCHEMA_VERSION,
            "database",
            f"user_version is {version}, not {RUN_STORE_SCHEMA_VERSION}: nothing else is checked",
        )
        return False
    try:
        schema_check.verify_schema(connection)
    except SchemaMismatchError as error:
        log(SCHEMA_MISMATCH, "database", error.message)
    for table, rowid, parent, key in stream(connection, "PRAGMA foreign_key_check"):
        log(FOREIGN_KEY, f"{table}:{rowid}", f"no {parent} row for its foreign key {key}")
    return True


def _check_integrity(connection: sqlite3.Connection, log: Report) -> None:
    """Each problem line of ``PRAGMA integrity_check`` (which stops at 100). SQLite raises
    instead of reporting some damage (a page whose header is garbage); then each table is
    checked on its own, so the finding names the damaged table."""
    try:
        _log_integrity(connection, "PRAGMA integrity_check", "", log)
    except sqlite3.DatabaseError:
        names = sql.execute(
            connection, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"
        )
        for (name,) in names:
            quoted = str(name).replace('"', '""')
            try:
                _log_integrity(connection, f'PRAGMA integrity_check("{quoted}")', name, log)
            except sqlite3.DatabaseError as error:
                log(SQLITE_INTEGRITY, "database", f"table {name}: {error}")


def _log_integrity(connection: sqlite3.Connection, query: str, table: str, log: Report) -> None:
    prefix = f"table {table}: " if table else ""
    for (text,) in stream(connection, query):
        for line in str(text).splitlines():
            if line != "ok" and not line.startswith("*** in database"):
                log(SQLITE_INTEGRITY, "database", prefix + line)
