"""Two refusals the default suite once let through (issue 16), each with a test of its test.

* ``durable.rename_noreplace`` must be atomic: an emulation that checks the destination
  (``os.path.exists``, ``lexists``, ``os.lstat``, ``os.stat``, ``os.access``) and then
  calls ``os.rename`` is caught by blinding those checks to the destination, which is what
  a racing creator does between the check and the rename.
* An existing database is verified before its journal mode changes: a refused database is
  left byte-identical, still in rollback-journal mode (header bytes 18-19 are 1; WAL makes
  them 2), with no ``-wal`` file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runstore import RUN_STORE_SCHEMA_SQL
from runstore import RunStore
from runstore import durable
from runstore import sql
from runstore.errors import RunStoreError
from runstore.errors import SchemaMismatchError
from runstore.errors import UnknownSchemaVersionError
from runstore.errors import UnversionedDatabaseError
from runstore.store import run_store as store_module
from runstore.store import schema_check
from runstore.store.store_root import INIT_LOCK_NAME

# --- no-replace rename against a destination its checks cannot see --------------------------

Rename = Callable[[str, str], None]
Snapshot = tuple[str, dict[str, bytes]] | None


def snapshot(path: Path) -> Snapshot:
    if path.is_dir():
        return "directory", {
            str(item.relative_to(path)): item.read_bytes() if item.is_file() else b"<dir>"
            for item in sorted(path.rglob("*"))
        }
    return ("file", {"": path.read_bytes()}) if path.exists() else None


@contextlib.contextmanager
def blind_to(destination: str) -> Iterator[None]:
    """Make the usual existence checks report ``destination`` missing."""
    hidden = os.path.abspath(destination)

    def is_hidden(path: Any) -> bool:
        try:
            return os.path.abspath(os.fsdecode(os.fspath(path))) == hidden
        except TypeError:  # a descriptor
            return False

    def stat_like(real: Callable[..., Any]) -> Callable[..., Any]:
        def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
            if is_hidden(path):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
            return real(path, *args, **kwargs)

        return fake

    def predicate(real: Callable[..., bool]) -> Callable[..., bool]:
        return lambda path, *args, **kwargs: not is_hidden(path) and real(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        for name in ("stat", "lstat"):
            patch.setattr(os, name, stat_like(getattr(os, name)))
        patch.setattr(os, "access", predicate(os.access))
        for name in ("exists", "lexists", "isdir", "isfile", "islink"):
            patch.setattr(os.path, name, predicate(getattr(os.path, name)))
        yield


LAYOUTS = {  # destination: what sits there
    "empty directory": lambda path: path.mkdir(),
    "populated directory": lambda path: (path.mkdir(), (path / "resident").write_bytes(b"r\n")),
    "file": lambda path: path.write_bytes(b"resident file\n"),
}
SOURCES = {
    "directory": lambda path: (path.mkdir(), (path / "payload").write_bytes(b"p\n")),
    "file": lambda path: path.write_bytes(b"payload file\n"),
}


def assert_refuses(rename: Rename, tmp_path: Path, source_kind: str, layout: str) -> None:
    """``rename`` must refuse the destination with FileExistsError even though every
    existence check says it is free, leaving source and destination as they were."""
    source, destination = tmp_path / "source", tmp_path / "destination"
    SOURCES[source_kind](source)
    LAYOUTS[layout](destination)
    before = snapshot(source), snapshot(destination)
    with blind_to(str(destination)):
        try:
            rename(str(source), str(destination))
        except FileExistsError:
            pass
        except OSError as exc:
            raise AssertionError(f"refused with {exc!r}, not FileExistsError") from exc
        else:
            raise AssertionError(f"renamed over the {layout}")
    assert (snapshot(source), snapshot(destination)) == before


CASES = [(source, layout) for source in SOURCES for layout in LAYOUTS]


@pytest.mark.parametrize(("source_kind", "layout"), CASES)
def test_noreplace_rename_refuses_a_destination_its_checks_cannot_see(
    tmp_path: Path, source_kind: str, layout: str
) -> None:
    assert_refuses(durable.rename_noreplace, tmp_path, source_kind, layout)


def check_then_rename(check: Callable[[str], bool]) -> Rename:
    def rename(source: str, destination: str) -> None:
        if check(destination):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)
        os.rename(source, destination)

    return rename


def _stats(function: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(path: str) -> bool:
        try:
            function(path)
        except FileNotFoundError:
            return False
        return True

    return check


CHECKS: dict[str, Callable[[str], bool]] = {  # looked up at call time, as an emulation would
    "os.path.exists": lambda path: os.path.exists(path),
    "os.path.lexists": lambda path: os.path.lexists(path),
    "os.lstat": _stats(lambda path: os.lstat(path)),
    "os.stat": _stats(lambda path: os.stat(path)),
    "os.access": lambda path: os.access(path, os.F_OK),
}


@pytest.mark.parametrize(("source_kind", "layout"), CASES)
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_teeth_a_check_then_rename_emulation_is_caught(
    tmp_path: Path, check: str, source_kind: str, layout: str
) -> None:
    """The test above fails a check-then-rename rename_noreplace, whatever it checks with,
    for every layout (whether os.rename then replaces or fails with another errno)."""
    with pytest.raises(AssertionError):
        assert_refuses(check_then_rename(CHECKS[check]), tmp_path, source_kind, layout)


def test_teeth_the_emulation_passes_without_the_race(tmp_path: Path) -> None:
    """Unblinded, the emulation refuses like the real thing: only the race exposes it."""
    destination = tmp_path / "destination"
    destination.mkdir()
    (tmp_path / "source").mkdir()
    with pytest.raises(FileExistsError):
        check_then_rename(CHECKS["os.path.lexists"])(str(tmp_path / "source"), str(destination))


# --- an existing database is verified before WAL is enabled ---------------------------------

DATABASES: dict[str, tuple[list[str], type[RunStoreError]]] = {
    "v1 with a foreign table": (
        ["CREATE TABLE mine (x INTEGER)", "PRAGMA user_version = 1"],
        SchemaMismatchError,
    ),
    "v1 less one index": (
        [
            RUN_STORE_SCHEMA_SQL,
            "DROP INDEX one_accepted_attempt_per_slot",
            "PRAGMA user_version = 1",
        ],
        SchemaMismatchError,
    ),
    "unknown version 7": (
        ["CREATE TABLE mine (x INTEGER)", "PRAGMA user_version = 7"],
        UnknownSchemaVersionError,
    ),
    "unversioned with objects": (
        ["CREATE TABLE mine (x INTEGER)", "INSERT INTO mine VALUES (1)"],
        UnversionedDatabaseError,
    ),
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


def make_rollback_journal_database(root: Path, statements: list[str]) -> bytes:
    connection = sqlite3.connect(root / "run.sqlite3", isolation_level=None)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        connection.executescript(";\n".join(statements) + ";")
    finally:
        connection.close()
    image = (root / "run.sqlite3").read_bytes()
    assert image[18:20] == b"\x01\x01"  # rollback journal: file format read/write version 1
    return image


def assert_refused_untouched(root: Path, database: str) -> None:
    statements, error = DATABASES[database]
    before = make_rollback_journal_database(root, statements)
    with pytest.raises(error):
        RunStore.open(root)
    after = (root / "run.sqlite3").read_bytes()
    assert after[18:20] == b"\x01\x01", "the journal mode changed before the schema was checked"
    assert after == before
    assert sorted(os.listdir(root)) == sorted([INIT_LOCK_NAME, "run.sqlite3"])


@pytest.mark.parametrize("database", sorted(DATABASES))
def test_a_refused_database_keeps_its_rollback_journal(root: Path, database: str) -> None:
    assert_refused_untouched(root, database)


@pytest.mark.parametrize("database", sorted(DATABASES))
def test_teeth_wal_enabled_before_the_checks_is_caught(
    root: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    real = store_module._initialize_or_verify

    def wal_first(connection: sqlite3.Connection, *args: Any) -> None:
        sql.enable_wal(connection)
        real(connection, *args)

    monkeypatch.setattr(store_module, "_initialize_or_verify", wal_first)
    with pytest.raises(AssertionError, match="journal mode changed"):
        assert_refused_untouched(root, database)


@pytest.mark.parametrize(
    "database", sorted(name for name, (_, e) in DATABASES.items() if e is SchemaMismatchError)
)
def test_teeth_wal_enabled_inside_verification_is_caught(
    root: Path, monkeypatch: pytest.MonkeyPatch, database: str
) -> None:
    real = schema_check.verify_schema

    def verify_after_wal(connection: sqlite3.Connection) -> None:
        sql.enable_wal(connection)
        real(connection)

    monkeypatch.setattr(schema_check, "verify_schema", verify_after_wal)
    with pytest.raises(AssertionError, match="journal mode changed"):
        assert_refused_untouched(root, database)
