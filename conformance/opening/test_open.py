"""Opening a store: fresh and repeated opens, settings, concurrency, refusals, probes, and
an existing database verified before its journal mode changes (a refused database is left
byte-identical, still in rollback-journal mode, with no ``-wal`` file).

Durable state is always checked through a fresh sqlite3 connection or the file's bytes,
never through the connection that wrote it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import ClassVar

import pytest
import runstore
from runstore import RUN_STORE_SCHEMA_SQL
from runstore import RUN_STORE_SCHEMA_VERSION
from runstore import RunStore
from runstore import durable
from runstore import sql
from runstore import sql as store_sql
from runstore.errors import BusyError
from runstore.errors import CapabilityProbeError
from runstore.errors import ConnectionSettingsError
from runstore.errors import DurabilityError
from runstore.errors import RunStoreError
from runstore.errors import SchemaMismatchError
from runstore.errors import UnknownSchemaVersionError
from runstore.errors import UnsafePathError
from runstore.errors import UnsupportedFilesystemError
from runstore.errors import UnversionedDatabaseError
from runstore.store import schema_check
from runstore.store import store_open
from runstore.store import store_root
from runstore.store.probes import PROBE_PREFIX
from runstore.store.store_root import INIT_LOCK_NAME

REPO = Path(__file__).resolve().parents[2]


def fresh_connection(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "run.sqlite3", isolation_level=None)


def catalogue(root: Path) -> list[tuple[str, str]]:
    with fresh_connection(root) as connection:
        return connection.execute(
            "SELECT type, name FROM sqlite_schema ORDER BY type, name"
        ).fetchall()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftover_probe_dirs(root: Path) -> list[str]:
    return [name for name in os.listdir(root) if name.startswith(PROBE_PREFIX)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


# --- the embedded schema ----------------------------------------------------------------


def test_schema_constant_is_the_file_text() -> None:
    text = (REPO / "impl" / "store" / "schema" / "v1.sql").read_text(encoding="utf-8")
    assert text == RUN_STORE_SCHEMA_SQL
    assert RUN_STORE_SCHEMA_VERSION == 1


# --- fresh and repeated opens -----------------------------------------------------------


def test_fresh_open_creates_v1_in_wal_mode(root: Path) -> None:
    with RunStore.open(root) as store:
        assert store.root == str(root)
        assert store.database_path == str(root / "run.sqlite3")
    with fresh_connection(root) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        for table in ("attempts", "events", "leases", "artifacts"):
            assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    assert (root / ".run-store-init.lock").is_file()
    assert leftover_probe_dirs(root) == []
    expected = len([r for r in catalogue(root) if r[0] == "table"])
    assert expected == 17  # the 16 tables and sqlite_sequence (AUTOINCREMENT events)


def test_repeated_opens_see_one_schema_and_keep_history(root: Path) -> None:
    RunStore.open(root).close()
    first = catalogue(root)
    with fresh_connection(root) as connection:
        connection.execute("PRAGMA foreign_keys = OFF")
        connection.execute(
            "INSERT INTO applicability_decisions (id, candidate_id, problem_id, applicable, "
            "record_json) VALUES ('decision:v1:' || hex(zeroblob(32)), 'c', 'p', 1, '{}')"
        )
    with RunStore.open(root), RunStore.open(root):
        pass
    assert catalogue(root) == first
    with fresh_connection(root) as connection:
        assert connection.execute("SELECT count(*) FROM applicability_decisions").fetchone() == (1,)
        assert connection.execute("SELECT count(*) FROM events").fetchone() == (0,)


def test_close_is_idempotent_and_releases_the_database(root: Path) -> None:
    store = RunStore.open(root)
    store.close()
    store.close()
    assert "closed" in repr(store)
    assert not store_root.database_descriptors.holds(store._descriptor.key)


def test_two_paths_to_one_database_share_one_descriptor(root: Path, tmp_path: Path) -> None:
    """Closing a second descriptor of the database would drop SQLite's POSIX locks held by
    this process's other connections, so a store reached by another path (here a bind of
    the parent through a symbolic link) must reuse the first descriptor."""
    alias = tmp_path / "alias"
    alias.symlink_to(root.parent)
    with RunStore.open(root) as first, RunStore.open(alias / root.name) as second:
        assert first._descriptor == second._descriptor
        assert store_root.database_descriptors.holds(first._descriptor.key)
    assert not store_root.database_descriptors.holds(first._descriptor.key)


# --- connection settings ----------------------------------------------------------------


class _RecordingConnection(sqlite3.Connection):
    """Records every statement, and can lie about one pragma's read-back value."""

    lie_about: str | None = None
    log: ClassVar[list[tuple[int, str]]] = []
    opened: ClassVar[list[str]] = []

    def __init__(self, database: str, *args: object, **kwargs: object) -> None:
        super().__init__(database, *args, **kwargs)  # type: ignore[arg-type]
        self.serial = len(self.opened)
        self.opened.append(str(database))

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        self.log.append((self.serial, sql))
        if self.lie_about is not None and sql == f"PRAGMA {self.lie_about}":
            return super().execute("SELECT 'not-the-required-value'")
        return super().execute(sql, *args)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_RecordingConnection]]:
    class Recording(_RecordingConnection):
        log: ClassVar[list[tuple[int, str]]] = []
        opened: ClassVar[list[str]] = []

    real_connect = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        return real_connect(*args, factory=Recording, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(store_sql.sqlite3, "connect", connect)
    yield Recording


REQUIRED = {
    "foreign_keys": "ON",
    "recursive_triggers": "ON",
    "synchronous": "FULL",
    "locking_mode": "NORMAL",
    "fullfsync": "ON",
    "checkpoint_fullfsync": "ON",
    "busy_timeout": "5000",
    "journal_mode": "WAL",
}


def test_every_connection_sets_and_reads_back_every_setting(
    root: Path, recording: type[_RecordingConnection]
) -> None:
    RunStore.open(root).close()
    RunStore.open(root).close()
    connections: dict[int, list[str]] = {}
    for serial, statement in recording.log:
        if recording.opened[serial] != ":memory:":  # the schema twin holds no data
            connections.setdefault(serial, []).append(statement)
    # Each open makes two probe connections and the store's own connection.
    assert len(connections) == 6
    assert sum(path.endswith("/run.sqlite3") for path in recording.opened) == 2
    for statements in connections.values():
        for name, value in REQUIRED.items():
            set_at = statements.index(f"PRAGMA {name} = {value}")
            assert f"PRAGMA {name}" in statements[set_at + 1 :], name


@pytest.mark.parametrize("setting", sorted(REQUIRED))
def test_a_setting_that_does_not_read_back_refuses_the_open(
    root: Path, recording: type[_RecordingConnection], setting: str
) -> None:
    recording.lie_about = setting
    with pytest.raises((ConnectionSettingsError, CapabilityProbeError)) as caught:
        RunStore.open(root)
    assert setting in str(caught.value)
    recording.lie_about = None
    RunStore.open(root).close()


def test_the_store_connection_refuses_ddl_and_pragma_writes(root: Path) -> None:
    with RunStore.open(root) as store:
        connection = store._require_connection()
        for statement in (
            "DROP TABLE events",
            "CREATE TABLE extra (x INTEGER) STRICT",
            "DROP INDEX one_accepted_attempt_per_slot",
            "PRAGMA foreign_keys = OFF",
            "PRAGMA journal_mode = DELETE",
            "ATTACH DATABASE ':memory:' AS other",
        ):
            with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
                store_sql.execute(connection, statement)
        store_sql.verify_settings(connection)


# --- concurrency --------------------------------------------------------------------------


def test_concurrent_opens_from_threads_agree_on_one_schema(root: Path) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_and_close() -> None:
        try:
            barrier.wait()
            RunStore.open(root).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_close) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    RunStore.open(root).close()  # verifies the schema once more
    assert leftover_probe_dirs(root) == []


def test_concurrent_opens_from_processes_agree_on_one_schema(root: Path) -> None:
    code = (
        "import sys\nfrom runstore import RunStore\n"
        "with RunStore.open(sys.argv[1]) as store:\n    print(store.database_path)\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [process.communicate(timeout=60) for process in processes]
    assert [process.returncode for process in processes] == [0] * 4, results
    assert all(out.strip() == str(root / "run.sqlite3") for out, _ in results)
    with fresh_connection(root) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
    RunStore.open(root).close()


def test_a_held_init_lock_makes_open_busy(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_root, "INIT_LOCK_TIMEOUT_S", 0.2)
    fd = os.open(root / ".run-store-init.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert durable.flock(fd, "test")
        with pytest.raises(BusyError):
            RunStore.open(root)
    finally:
        os.close(fd)
    RunStore.open(root).close()


# --- refused databases, left byte-identical -------------------------------------------------


def _make_database(root: Path, *statements: str) -> str:
    with sqlite3.connect(root / "run.sqlite3", isolation_level=None) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()
    return digest(root / "run.sqlite3")


def _assert_refused_unchanged(root: Path, error: type[Exception], before: str) -> None:
    with pytest.raises(error):
        RunStore.open(root)
    assert digest(root / "run.sqlite3") == before
    assert not (root / "run.sqlite3-wal").exists()


def test_unknown_schema_version_is_refused_unchanged(root: Path) -> None:
    before = _make_database(root, "PRAGMA user_version = 7")
    _assert_refused_unchanged(root, UnknownSchemaVersionError, before)


def test_unversioned_database_with_a_user_table_is_refused_unchanged(root: Path) -> None:
    before = _make_database(root, "CREATE TABLE mine (x INTEGER)", "INSERT INTO mine VALUES (1)")
    _assert_refused_unchanged(root, UnversionedDatabaseError, before)


ALTERATIONS = {
    "dropped index": ["DROP INDEX one_accepted_attempt_per_slot"],
    "extra table": ["CREATE TABLE extra (x INTEGER) STRICT"],
    "changed trigger": [],  # filled in by the test from the real catalogue
}


@pytest.mark.parametrize("alteration", sorted(ALTERATIONS))
def test_an_altered_schema_is_refused_unchanged(root: Path, alteration: str) -> None:
    RunStore.open(root).close()
    statements = list(ALTERATIONS[alteration])
    if alteration == "changed trigger":
        with fresh_connection(root) as connection:
            name, text = connection.execute(
                "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name LIMIT 1"
            ).fetchone()
        connection.close()
        changed = text.replace("BEGIN", "BEGIN SELECT 1;", 1)
        assert changed != text
        statements = [f"DROP TRIGGER {name}", changed]
    before = _make_database(root, *statements)
    _assert_refused_unchanged(root, SchemaMismatchError, before)


# --- unsafe paths ---------------------------------------------------------------------------


def test_relative_missing_and_non_directory_roots_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError, match="absolute"):
        RunStore.open("relative/store")
    with pytest.raises(UnsafePathError, match="does not exist"):
        RunStore.open(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnsafePathError, match="not a directory"):
        RunStore.open(tmp_path / "file")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("inner", ["artifacts/.staging-inner", "artifacts/x/y", "sub"])
def test_a_root_inside_another_store_is_refused_untouched(
    root: Path, tmp_path: Path, inner: str
) -> None:
    """A store under another store's root (under its ``artifacts/`` above all, where the
    outer store's recovery would quarantine one named ``.staging-*``) is refused before the
    lock, the probes or the database are made; so is one reached through a link."""
    RunStore.open(root).close()
    nested = root / inner
    nested.mkdir(parents=True)
    link = tmp_path / "link-into-store"
    link.symlink_to(nested.parent)
    for path in (nested, link / nested.name):
        with pytest.raises(UnsafePathError, match="lies inside the run store"):
            RunStore.open(path)
    assert os.listdir(nested) == []
    beside = tmp_path / "beside"  # a sibling of the store is no nesting
    beside.mkdir()
    RunStore.open(beside).close()


def test_a_symlinked_root_is_refused(root: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(root)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        RunStore.open(link)
    assert os.listdir(root) == []


@pytest.mark.parametrize(
    "name", ["run.sqlite3", "run.sqlite3-wal", "run.sqlite3-shm", ".run-store-init.lock"]
)
def test_a_symlinked_store_file_is_refused(root: Path, tmp_path: Path, name: str) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    (root / name).symlink_to(target)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        RunStore.open(root)
    assert target.read_bytes() == b""


def test_a_store_file_that_is_a_directory_is_refused(root: Path) -> None:
    (root / "run.sqlite3").mkdir()
    with pytest.raises(UnsafePathError, match="not a regular file"):
        RunStore.open(root)


@pytest.mark.parametrize("magic", sorted(durable.NETWORK_FILESYSTEMS))
def test_network_filesystems_are_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch, magic: int
) -> None:
    monkeypatch.setattr(durable, "filesystem_magic", lambda path: magic)
    with pytest.raises(UnsupportedFilesystemError, match=durable.NETWORK_FILESYSTEMS[magic]):
        RunStore.open(root)
    assert os.listdir(root) == []


def test_the_local_filesystem_is_identified(root: Path) -> None:
    assert durable.filesystem_magic(str(root)) not in durable.NETWORK_FILESYSTEMS


# --- injected failures at the probe boundaries ----------------------------------------------


def _fail_at(operation: str, where: Callable[[str], bool], error: int) -> durable.Observer:
    def observer(phase: str, op: str, target: str) -> None:
        if phase == "before" and op == operation and where(target):
            raise OSError(error, os.strerror(error), target)

    return observer


@pytest.fixture
def inject() -> Iterator[Callable[[durable.Observer], None]]:
    def install(observer: durable.Observer) -> None:
        durable.install_observer(observer)

    yield install
    durable.install_observer(None)


PROBE_FAULTS = {
    "flock": ("flock_exclusive", lambda target: PROBE_PREFIX in target),
    "posix record lock": ("posix_lock", lambda target: PROBE_PREFIX in target),
    "file sync": ("fsync_file", lambda target: PROBE_PREFIX in target),
    "directory sync": ("fsync_dir", lambda target: PROBE_PREFIX in target),
    "rename": ("rename_noreplace", lambda target: target.endswith("rename-target")),
    "probe directory creation": ("mkdir", lambda target: PROBE_PREFIX in target),
}


@pytest.mark.parametrize("error", [errno.EIO, errno.ENOSPC])
@pytest.mark.parametrize("boundary", sorted(PROBE_FAULTS))
def test_a_failed_probe_refuses_the_open_and_a_later_open_succeeds(
    root: Path, inject: Callable[[durable.Observer], None], boundary: str, error: int
) -> None:
    operation, where = PROBE_FAULTS[boundary]
    inject(_fail_at(operation, where, error))
    with pytest.raises(CapabilityProbeError):
        RunStore.open(root)
    assert not (root / "run.sqlite3").exists() or (root / "run.sqlite3").stat().st_size == 0
    inject(None)  # type: ignore[arg-type]
    with RunStore.open(root) as store:
        assert store.database_path == str(root / "run.sqlite3")
    assert leftover_probe_dirs(root) == []


def test_a_refused_rename_capability_refuses_the_open(
    root: Path, inject: Callable[[durable.Observer], None]
) -> None:
    inject(_fail_at("rename_noreplace", lambda target: True, errno.EINVAL))
    with pytest.raises(CapabilityProbeError, match="no-replace rename"):
        RunStore.open(root)


def test_a_failed_sync_after_schema_creation_is_reported_and_reopen_verifies(
    root: Path, inject: Callable[[durable.Observer], None]
) -> None:
    database = str(root / "run.sqlite3")
    inject(_fail_at("fsync_file", lambda target: target == database, errno.EIO))
    with pytest.raises(DurabilityError):
        RunStore.open(root)
    inject(None)  # type: ignore[arg-type]
    RunStore.open(root).close()
    with fresh_connection(root) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)


def test_stale_probe_directories_are_cleared(root: Path) -> None:
    stale = root / (PROBE_PREFIX + "0123456789abcdef")
    (stale / "nested").mkdir(parents=True)
    (stale / "nested" / "file").write_bytes(b"x")
    RunStore.open(root).close()
    assert leftover_probe_dirs(root) == []


# --- the SQL seam ---------------------------------------------------------------------------


def test_every_statement_of_an_open_passes_the_sql_seam_in_pairs(root: Path) -> None:
    seen: list[tuple[str, str]] = []
    previous = store_sql.install_observer(lambda phase, text: seen.append((phase, text)))
    try:
        RunStore.open(root).close()
    finally:
        store_sql.install_observer(previous)
    texts = [text for phase, text in seen if phase == "before"]
    unfinished = []
    position = 0
    while position < len(seen):
        phase, text = seen[position]
        assert phase == "before"
        if position + 1 < len(seen) and seen[position + 1] == ("after", text):
            position += 2
        else:  # a statement that raised has no after point
            unfinished.append(text)
            position += 1
    # Only the WAL probe's deliberately refused statements raise during a good open.
    assert unfinished == [
        "BEGIN IMMEDIATE",
        "INSERT INTO probe (id, doc) VALUES ('x', '{}')",
        "INSERT INTO probe (id, doc) VALUES (3, '[1]')",
    ]
    assert "BEGIN IMMEDIATE" in texts and "COMMIT" in texts
    assert sum(text.replace(" ", "").startswith("PRAGMAuser_version=1") for text in texts) == 1
    assert runstore.RUN_STORE_SCHEMA_VERSION == 1


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
    real = store_open.initialize_or_verify

    def wal_first(connection: sqlite3.Connection, *args: Any) -> None:
        sql.enable_wal(connection)
        real(connection, *args)

    monkeypatch.setattr(store_open, "initialize_or_verify", wal_first)
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
