"""The SQL seam: connections with verified settings, and the one traced executor.

Rules of this file: every SQL statement the store runs goes through :func:`execute`
(BEGIN, COMMIT and ROLLBACK included; no ``executescript`` or ``executemany`` anywhere in
the store), so an optional observer sees a before and an after point per statement. The
observer is test-only. Connections are opened here, with autocommit handled by hand
(``isolation_level=None``), and every required setting is set and read back.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any
from typing import Final
from typing import Literal

from runstore.errors import BusyError
from runstore.errors import ConnectionSettingsError
from runstore.errors import DatabaseError
from runstore.errors import InvalidRecordError

Phase = Literal["before", "after"]
Observer = Callable[[Phase, str], None]
"""``observer(phase, sql)``; raising from ``before`` makes the statement fail unrun."""

Params = Sequence[Any] | dict[str, Any]
Row = tuple[Any, ...]

BUSY_TIMEOUT_MS: Final = 5000

_observer: Observer | None = None


def install_observer(observer: Observer | None) -> Observer | None:
    """The seam's test hook, as :func:`runstore.durable.install_observer`'s: install
    ``observer`` (None removes it) and return the previous one. It sees "before" and
    "after" around each statement; raising from "before" fails the statement unrun."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def execute(connection: sqlite3.Connection, sql: str, params: Params = ()) -> list[Row]:
    """Run one statement to completion and return all its rows."""
    if _observer is not None:
        _observer("before", sql)
    try:
        rows: list[Row] = connection.execute(sql, params).fetchall()
    except UnicodeDecodeError as error:
        raise undecodable(error) from None
    except UnicodeEncodeError:
        raise unencodable() from None
    if _observer is not None:
        _observer("after", sql)
    return rows


def iterate(connection: sqlite3.Connection, sql: str, params: Params = ()) -> Iterator[Row]:
    """Run one statement and yield its rows one at a time from its cursor, for results too
    large to hold at once (an inspection copy's tables). The observer sees "before" when
    the statement starts and "after" once its rows are exhausted."""
    if _observer is not None:
        _observer("before", sql)
    try:
        cursor = connection.execute(sql, params)
    except UnicodeDecodeError as error:
        raise undecodable(error) from None
    except UnicodeEncodeError:
        raise unencodable() from None
    try:
        # Not ``yield from``: closing this generator would then close the cursor, which
        # raises once the connection is closed.
        for row in cursor:  # noqa: UP028
            yield row
    except UnicodeDecodeError as error:
        raise undecodable(error) from None
    finally:
        # A generator left unfinished may be collected after its connection closed, which
        # released the cursor already.
        with contextlib.suppress(sqlite3.ProgrammingError):
            cursor.close()
    if _observer is not None:
        _observer("after", sql)


def undecodable(error: UnicodeDecodeError) -> sqlite3.DatabaseError:
    """The database error SQLite reported in a message Python could not decode: a name in
    the schema that is not UTF-8 (hostile bytes written into ``sqlite_schema``) ends up in
    the message. The bytes are shown escaped, so every caller that handles
    ``sqlite3.DatabaseError`` handles this one too, instead of a raw UnicodeDecodeError."""
    shown = bytes(error.object).decode("utf-8", "backslashreplace")
    return sqlite3.DatabaseError(shown)


def unencodable() -> InvalidRecordError:
    """A parameter Python could not encode for SQLite: text with a lone surrogate, which
    has no UTF-8 form. The argument checks refuse such text first; this keeps any path
    they do not cover typed too (the statement never ran)."""
    return InvalidRecordError("a value to store is not Unicode text (it holds a lone surrogate)")


def scalar(connection: sqlite3.Connection, sql: str, params: Params = ()) -> Any:
    """Run a statement that yields exactly one row of one column and return that value."""
    rows = execute(connection, sql, params)
    if len(rows) != 1 or len(rows[0]) != 1:
        raise DatabaseError(f"expected one value from {sql.split()[0]}, got {len(rows)} rows")
    return rows[0][0]


@contextmanager
def immediate_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; on any error, ``ROLLBACK`` and re-raise.

    A deferred constraint failing at COMMIT leaves the transaction open in SQLite, so the
    rollback also runs when COMMIT itself raises. Lock contention past the busy timeout
    becomes :class:`BusyError`.
    """
    try:
        execute(connection, "BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise BusyError(f"the database write lock was not free within 5 s: {exc}") from exc
        raise
    try:
        yield
        execute(connection, "COMMIT")
    except BaseException:
        if connection.in_transaction:
            execute(connection, "ROLLBACK")
        raise


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith("SQLITE_BUSY") or "database is locked" in str(exc)


# --- connections ---------------------------------------------------------------------------

# (pragma, value to set, value it must read back). Order matters only in that all of these
# are connection-local and are applied before any transaction starts.
_LOCAL_SETTINGS: Final = (
    ("foreign_keys", "ON", 1),
    ("recursive_triggers", "ON", 1),
    ("synchronous", "FULL", 2),
    ("locking_mode", "NORMAL", "normal"),
    ("fullfsync", "ON", 1),
    ("checkpoint_fullfsync", "ON", 1),
    ("busy_timeout", str(BUSY_TIMEOUT_MS), BUSY_TIMEOUT_MS),
)


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` (an absolute file path: never a URI) with connection-local settings
    applied and verified. The persistent journal mode is left alone: see :func:`enable_wal`.
    """
    if not path.startswith("/"):
        raise ValueError("connect() takes an absolute path")
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, uri=False
    )
    try:
        for name, value, expected in _LOCAL_SETTINGS:
            execute(connection, f"PRAGMA {name} = {value}")
            _read_back(connection, name, expected)
    except BaseException:
        connection.close()
        raise
    return connection


def enable_wal(connection: sqlite3.Connection) -> None:
    """Set the persistent WAL journal mode and verify it (and every local setting) again."""
    rows = execute(connection, "PRAGMA journal_mode = WAL")
    if rows != [("wal",)]:
        raise ConnectionSettingsError(f"journal_mode=WAL was refused (got {rows!r})")
    verify_settings(connection)


def verify_settings(connection: sqlite3.Connection) -> None:
    """Read back every required setting, WAL included; raise ConnectionSettingsError."""
    _read_back(connection, "journal_mode", "wal")
    for name, _value, expected in _LOCAL_SETTINGS:
        _read_back(connection, name, expected)


def _read_back(connection: sqlite3.Connection, name: str, expected: object) -> None:
    actual = scalar(connection, f"PRAGMA {name}")
    if actual != expected:
        raise ConnectionSettingsError(f"PRAGMA {name} reads back {actual!r}, not {expected!r}")


# Authorizer actions the store's connection may never perform once its schema is verified:
# DDL, ATTACH/DETACH, and changing any pragma (reading one is allowed).
_DENIED_ACTIONS: Final = frozenset(
    {
        sqlite3.SQLITE_ALTER_TABLE,
        sqlite3.SQLITE_ATTACH,
        sqlite3.SQLITE_DETACH,
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_CREATE_TEMP_INDEX,
        sqlite3.SQLITE_CREATE_TEMP_TABLE,
        sqlite3.SQLITE_CREATE_TEMP_TRIGGER,
        sqlite3.SQLITE_CREATE_TEMP_VIEW,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_CREATE_VTABLE,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_TEMP_INDEX,
        sqlite3.SQLITE_DROP_TEMP_TABLE,
        sqlite3.SQLITE_DROP_TEMP_TRIGGER,
        sqlite3.SQLITE_DROP_TEMP_VIEW,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_DROP_VTABLE,
    }
)


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: str | None) -> int:
    if action in _DENIED_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and arg2 is not None:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def lock_down(connection: sqlite3.Connection) -> None:
    """Forbid schema changes and pragma writes on a verified store connection, so that no
    caller can weaken its settings or schema through it."""
    connection.set_authorizer(_authorize)
