"""Connecting to a store's database during ``RunStore.open``: schema v1 created or verified,
the connection locked down (SPEC.md section 8, "Opening", steps 4 and 5).

Rules of this file: called only by ``RunStore.open``, under the store's initialization
lock. Every refusal closes the connection and leaves the database file as it was: version
0 with no objects creates v1 in one immediate transaction and syncs the database file and
the root; version 1 is verified before the journal mode changes.
"""

from __future__ import annotations

import os
import sqlite3

from runstore import durable
from runstore import sql
from runstore.errors import DatabaseError
from runstore.errors import DurabilityError
from runstore.errors import UnknownSchemaVersionError
from runstore.errors import UnversionedDatabaseError
from runstore.store import schema_check
from runstore.store import store_root
from runstore.store.schema_sql import RUN_STORE_SCHEMA_VERSION


def open_connection(root: str, database_path: str, descriptor: int) -> sqlite3.Connection:
    """Connect, create or verify the schema, and lock the connection down; on any error
    the connection is closed and the error raised."""
    try:
        connection = sql.connect(database_path)
    except sqlite3.Error as exc:
        raise DatabaseError(f"cannot open {database_path}: {exc}") from exc
    try:
        initialize_or_verify(connection, root, descriptor)
        sql.lock_down(connection)
    except BaseException as exc:
        connection.close()
        if isinstance(exc, sqlite3.Error):
            raise DatabaseError(f"opening {database_path} failed: {exc}") from exc
        raise
    return connection


def initialize_or_verify(connection: sqlite3.Connection, root: str, descriptor: int) -> None:
    version = sql.scalar(connection, "PRAGMA user_version")
    if version == 0:
        if schema_check.user_object_count(connection) != 0:
            raise UnversionedDatabaseError(
                "the database has user_version 0 but already holds schema objects"
            )
        sql.enable_wal(connection)
        if not create_schema(connection):
            schema_check.verify_schema(connection)
            return
        try:
            durable.fsync_fd(descriptor, os.path.join(root, store_root.DATABASE_NAME))
            durable.fsync_dir(root)
        except OSError as exc:
            raise DurabilityError(f"cannot sync the new schema: {exc}") from exc
    elif version == RUN_STORE_SCHEMA_VERSION:
        schema_check.verify_schema(connection)  # before WAL: a refusal changes nothing
        sql.enable_wal(connection)
    else:
        raise UnknownSchemaVersionError(
            f"the database has schema version {version}; this build knows only "
            f"{RUN_STORE_SCHEMA_VERSION}"
        )


def create_schema(connection: sqlite3.Connection) -> bool:
    """Create v1 in one immediate transaction, rechecking emptiness under the write lock.
    Returns False (creating nothing) when another initializer that ignored the init lock
    committed v1 first; anything else found there is refused."""
    with sql.immediate_transaction(connection):
        version = sql.scalar(connection, "PRAGMA user_version")
        if version == RUN_STORE_SCHEMA_VERSION:
            return False
        if version != 0 or schema_check.user_object_count(connection) != 0:
            raise UnversionedDatabaseError("the database changed while it was being created")
        schema_check.create_schema_in_transaction(connection)
    return True
