"""The RunStore face: durable opening of a store root, and the handle callers hold.

Rules of this file: ``RunStore.open`` is the only way to get a handle; it runs the path
checks, the capability probes, and schema creation or verification, in that order, under
the initialization lock. The handle owns its SQLite connection privately. Operations on an
open store live in their own modules and are exposed here as thin methods.
"""

from __future__ import annotations

import os
import sqlite3
from types import TracebackType

from runstore import durable, probes, schema_check, sql, store_files
from runstore.errors import (
    DatabaseError,
    DurabilityError,
    RunStoreError,
    StoreClosedError,
    UnknownSchemaVersionError,
    UnversionedDatabaseError,
)
from runstore.schema_sql import RUN_STORE_SCHEMA_VERSION


class RunStore:
    """An open run store. Obtain one with :meth:`RunStore.open`; close it with
    :meth:`close` or by using it as a context manager."""

    def __init__(self, root: str, database_path: str, connection: sqlite3.Connection) -> None:
        self._root = root
        self._database_path = database_path
        self._connection: sqlite3.Connection | None = connection

    @property
    def root(self) -> str:
        """The absolute store root directory."""
        return self._root

    @property
    def database_path(self) -> str:
        """The absolute path of ``run.sqlite3``."""
        return self._database_path

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> RunStore:
        """Open the store in ``root``, creating schema v1 if the database is new.

        ``root`` must be an existing absolute directory on a local filesystem; it is never
        created. Under ``.run-store-init.lock`` (waiting at most 5 s, else BusyError) this
        runs the capability probes in a disposable directory, then reads ``user_version``:
        0 on an empty database creates v1 in one ``BEGIN IMMEDIATE`` transaction and syncs
        the database file and root; 0 with objects is refused (unversioned_database); 1 is
        verified against the embedded schema (schema_mismatch); anything else is refused
        (unknown_schema_version). Every refusal leaves the database file as it was and
        returns no handle. Opening never records attempts or events.
        """
        path = store_files.checked_root(root)
        store_files.check_filesystem(path)
        store_files.check_store_files(path)
        database_path = os.path.join(path, store_files.DATABASE_NAME)
        with store_files.InitLock(path):
            probes.clear_stale_probe_directories(path)
            probes.run_probes(path)
            store_files.check_store_files(path)
            descriptor = store_files.database_descriptors.acquire(database_path)
            try:
                connection = _open_connection(path, database_path, descriptor)
            except BaseException:
                store_files.database_descriptors.release(database_path)
                raise
        return cls(path, database_path, connection)

    def close(self) -> None:
        """Close the connection. Idempotent: closing a closed store does nothing."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            finally:
                store_files.database_descriptors.release(self._database_path)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _require_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StoreClosedError("this RunStore handle is closed")
        return self._connection

    def __repr__(self) -> str:
        state = "open" if self._connection is not None else "closed"
        return f"RunStore({self._root!r}, {state})"


def _open_connection(root: str, database_path: str, descriptor: int) -> sqlite3.Connection:
    """Connect, create or verify the schema, and lock the connection down; on any error
    the connection is closed and the error raised."""
    try:
        connection = sql.connect(database_path)
    except sqlite3.Error as exc:
        raise DatabaseError(f"cannot open {database_path}: {exc}") from exc
    try:
        _initialize_or_verify(connection, root, descriptor)
        sql.lock_down(connection)
    except BaseException as exc:
        connection.close()
        if isinstance(exc, sqlite3.Error):
            raise DatabaseError(f"opening {database_path} failed: {exc}") from exc
        raise
    return connection


def _initialize_or_verify(connection: sqlite3.Connection, root: str, descriptor: int) -> None:
    version = sql.scalar(connection, "PRAGMA user_version")
    if version == 0:
        if schema_check.user_object_count(connection) != 0:
            raise UnversionedDatabaseError(
                "the database has user_version 0 but already holds schema objects"
            )
        sql.enable_wal(connection)
        if not _create_schema(connection):
            schema_check.verify_schema(connection)
            return
        try:
            durable.fsync_fd(descriptor, os.path.join(root, store_files.DATABASE_NAME))
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


def _create_schema(connection: sqlite3.Connection) -> bool:
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


__all__ = ["RunStore", "RunStoreError"]
