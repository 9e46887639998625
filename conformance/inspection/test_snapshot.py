"""``runstore.inspection.snapshot``: the private, validated copy (SPEC.md 15.6), outside in.

Each refusal the section names gets a test (``unsafe_path``, ``inspection_unsafe``,
``inspection_unstable``, ``schema_mismatch`` and the other version refusals), the root is
checked byte for byte around every snapshot, and copies taken while another process keeps
committing must all open, pass ``quick_check`` and never go back in time.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import RunStore
from runstore import RunStoreError
from runstore.inspection import snapshot as snapshot_module
from runstore.inspection.snapshot import Snapshot
from runstore.testing import factories

WRITER = textwrap.dedent(
    """
    import os, sys, time
    from runstore import AttemptState, FirstAttempt, RunStore
    from runstore.testing import factories

    root, stop, count, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    store = RunStore.open(root)
    done = 0
    for i in range(count):
        if os.path.exists(stop):
            break
        bundle = factories.one_shot(f"slot-{i}")
        slot_id = store.register_one_shot(*bundle.arguments())
        lease = factories.lease(f"l-{i}", expires_at_ns=2**62)
        guard = store.reserve(slot_id, FirstAttempt(), lease, 1_000)
        store.advance(guard, AttemptState.MATERIALIZING, 1_001)
        time.sleep(pause)
        done += 1
        if i == 2:
            print("ready", flush=True)
    print("done", done, flush=True)
    sys.stdin.readline()  # hold the store open (WAL and -shm present) until told to go
    store.close()
    """
)


INCONSISTENT = """
SELECT count(*) FROM attempts AS a
WHERE (SELECT count(*) FROM attempt_transitions AS t WHERE t.attempt_id = a.id) != a.revision + 1
"""


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def refused(code: str, root: object, **kwargs: object) -> RunStoreError:
    with pytest.raises(RunStoreError) as info:
        Snapshot.take(root, **kwargs)  # type: ignore[arg-type]
    assert info.value.code == code, info.value
    return info.value


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary directory for the copies, to see that none is left behind."""
    directory = tmp_path / "private-tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def make_store(root: Path, slots: int = 3) -> None:
    """A closed store on ``root`` with ``slots`` registered one-shot slots."""
    store = RunStore.open(root)
    try:
        for i in range(slots):
            store.register_one_shot(*factories.one_shot(f"slot-{i}").arguments())
    finally:
        store.close()


def count(snapshot: Snapshot, table: str) -> int:
    return int(snapshot.connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# --- a closed store ----------------------------------------------------------------------------


def test_copy_of_a_closed_store(tmp_path: Path, private_tmp: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    make_store(root)
    before = files_of(root)
    with Snapshot.take(root) as snapshot:
        assert snapshot.root == str(root)
        assert count(snapshot, "attempt_slots") == 3
        directory = snapshot.directory
        assert directory is not None and Path(directory).parent == private_tmp
        assert snapshot.connection.execute("PRAGMA query_only").fetchone() == (1,)
        with pytest.raises(sqlite3.OperationalError):
            snapshot.connection.execute("DELETE FROM artifacts")
        assert files_of(root) == before
    assert files_of(root) == before
    assert not (root / "run.sqlite3-shm").exists()
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("tries", [0, -1, True, 2.0])
def test_tries_must_be_a_positive_int(tmp_path: Path, tries: object) -> None:
    make_store(tmp_path)
    refused("invalid_record", tmp_path, tries=tries)


def test_close_is_idempotent(tmp_path: Path) -> None:
    make_store(tmp_path)
    snapshot = Snapshot.take(tmp_path)
    snapshot.close()
    snapshot.close()
    with pytest.raises(RunStoreError) as info:
        _ = snapshot.connection
    assert info.value.code == "store_closed"


# --- refusals ----------------------------------------------------------------------------------


def test_refuses_while_this_process_holds_the_store(tmp_path: Path, private_tmp: Path) -> None:
    make_store(tmp_path)
    with RunStore.open(tmp_path) as store:
        store.register_one_shot(*factories.one_shot("held").arguments())
        before = files_of(tmp_path)
        refused("inspection_unsafe", tmp_path)
        # The same file through another spelling of the root is still refused.
        refused("inspection_unsafe", str(tmp_path) + "/./")
        assert files_of(tmp_path) == before
        store.register_one_shot(*factories.one_shot("after").arguments())
    assert list(private_tmp.iterdir()) == []
    with Snapshot.take(tmp_path) as snapshot:
        assert count(snapshot, "attempt_slots") == 5


def test_unsafe_roots(tmp_path: Path) -> None:
    refused("unsafe_path", tmp_path / "missing")
    refused("unsafe_path", "relative/root")
    error = refused("unsafe_path", tmp_path)
    assert "not a run store" in error.message
    assert list(tmp_path.iterdir()) == []
    link = tmp_path / "link"
    real = tmp_path / "real"
    real.mkdir()
    make_store(real)
    link.symlink_to(real)
    refused("unsafe_path", link)


def test_unsafe_store_files(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    make_store(real)
    root = tmp_path / "root"
    root.mkdir()
    (root / "run.sqlite3").symlink_to(real / "run.sqlite3")
    refused("unsafe_path", root)
    (root / "run.sqlite3").unlink()
    (root / "run.sqlite3").mkdir()
    refused("unsafe_path", root)
    wal_link = tmp_path / "wal-link"
    wal_link.mkdir()
    make_store(wal_link)
    (wal_link / "run.sqlite3-wal").symlink_to(real / "run.sqlite3")
    refused("unsafe_path", wal_link)


def test_altered_schema_is_schema_mismatch(tmp_path: Path, private_tmp: Path) -> None:
    make_store(tmp_path)
    with Snapshot.take(tmp_path):
        pass  # intact before the alteration
    connection = sqlite3.connect(tmp_path / "run.sqlite3", isolation_level=None)
    try:
        connection.execute("DROP TRIGGER events_no_delete")
    finally:
        connection.close()
    before = files_of(tmp_path)
    error = refused("schema_mismatch", tmp_path)
    assert "events_no_delete" in error.message
    assert files_of(tmp_path) == before
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("statements", "code"),
    [
        ((), "unsafe_path"),
        (("CREATE TABLE t (x)",), "unversioned_database"),
        (("CREATE TABLE t (x)", "PRAGMA user_version = 7"), "unknown_schema_version"),
    ],
)
def test_other_databases(
    tmp_path: Path, private_tmp: Path, statements: tuple[str, ...], code: str
) -> None:
    connection = sqlite3.connect(tmp_path / "run.sqlite3", isolation_level=None)
    try:
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()
    refused(code, tmp_path)
    assert list(private_tmp.iterdir()) == []


def test_unstable_when_the_signature_keeps_changing(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_store(tmp_path)
    real = snapshot_module.store_signature
    calls = 0

    def drifting(root: str) -> snapshot_module.Signature:
        nonlocal calls
        calls += 1
        database, wal = real(root)
        assert database is not None
        return (database[0], database[1], calls, database[3], database[4]), wal

    monkeypatch.setattr(snapshot_module, "store_signature", drifting)
    refused("inspection_unstable", tmp_path, tries=3)
    assert calls == 6  # before and after, three times
    assert list(private_tmp.iterdir()) == []
    monkeypatch.setattr(snapshot_module, "store_signature", real)
    Snapshot.take(tmp_path, tries=1).close()


def test_a_file_that_is_no_database_is_unstable(tmp_path: Path, private_tmp: Path) -> None:
    (tmp_path / "run.sqlite3").write_bytes(b"not a database at all" * 300)
    refused("inspection_unstable", tmp_path, tries=2)
    assert list(private_tmp.iterdir()) == []


def test_a_damaged_database_is_refused_after_three_held_copies_not_fifty(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "run.sqlite3").write_bytes(b"not a database at all" * 300)
    copies = 0
    real = snapshot_module._copy_once

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal copies
        copies += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot_module, "_copy_once", counted)
    error = refused("inspection_unstable", tmp_path)
    assert copies == snapshot_module.HELD_FAILURES == 3
    assert "held still" in error.message and "not a database" in error.message
    assert list(private_tmp.iterdir()) == []


# --- another process writing -------------------------------------------------------------------


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[Path, Path, subprocess.Popen[str]]]:
    """A separate process committing slots and attempts on ``tmp_path/store`` as fast as
    it can (a saturated write lock: commits every millisecond or so, auto-checkpoints and
    WAL restarts included) until ``tmp_path/stop`` exists; it then keeps the store open
    until its stdin gets a line."""
    root = tmp_path / "store"
    root.mkdir()
    stop = tmp_path / "stop"
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(stop), "20000", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        yield root, stop, process
    finally:
        stop.touch()
        process.communicate("go\n", timeout=30)


def test_copies_during_writes_are_valid_and_monotonic(
    writer: tuple[Path, Path, subprocess.Popen[str]],
) -> None:
    root, stop, process = writer
    seen: list[tuple[int, int, int]] = []
    for _ in range(30):
        with Snapshot.take(root) as snapshot:
            assert snapshot.connection.execute("PRAGMA quick_check").fetchall() == [("ok",)]
            attempts = count(snapshot, "attempts")
            # Each commit boundary is whole: every attempt's history reaches its revision,
            # and every transition has its event.
            assert snapshot.connection.execute(INCONSISTENT).fetchone() == (0,)
            assert count(snapshot, "attempt_transitions") == count(snapshot, "events")
            seen.append((count(snapshot, "attempt_slots"), attempts, count(snapshot, "events")))
    stop.touch()
    assert process.stdout is not None
    committed = int(process.stdout.readline().removeprefix("done "))
    assert seen == sorted(seen)
    assert seen[-1][1] > seen[0][1], "the writer made no progress while copies were taken"
    # With the writer idle but holding the store open (WAL and -shm present), the copy
    # reads the committed WAL contents and changes nothing in the root.
    before = files_of(root)
    assert (root / "run.sqlite3-wal").exists()
    with Snapshot.take(root) as snapshot:
        assert count(snapshot, "attempts") == committed
    assert files_of(root) == before


def test_writer_process_sees_no_interference(
    writer: tuple[Path, Path, subprocess.Popen[str]],
) -> None:
    """Snapshots never block the writer: it keeps committing while they are taken."""
    root, _stop, _process = writer
    started = time.monotonic()
    with Snapshot.take(root) as first:
        early = count(first, "attempts")
    deadline = started + 10
    later = early
    while later == early and time.monotonic() < deadline:
        with Snapshot.take(root) as snapshot:
            later = count(snapshot, "attempts")
    assert later > early
    assert os.path.exists(root / "run.sqlite3")


DB = (7, 4096, 1, 1, b"SQLite format 3\x00")
WAL = (8, 1000, 1, 1, b"\x37\x7f\x06\x82salt")


@pytest.mark.parametrize(
    ("after", "held"),
    [
        ((DB, WAL), True),
        ((DB, (8, 5000, 2, 2, WAL[4])), True),  # appended to: a prefix was copied
        ((DB, (8, 500, 2, 2, WAL[4])), False),  # truncated
        ((DB, (8, 5000, 2, 2, b"\x37\x7f\x06\x82SALT")), False),  # restarted: a new header
        ((DB, (9, 5000, 2, 2, WAL[4])), False),  # replaced
        ((DB, None), False),  # removed (checkpointed away)
        (((7, 4096, 2, 2, DB[4]), WAL), False),  # the database itself was written
        (((7, 8192, 1, 1, DB[4]), WAL), False),
    ],
)
def test_a_copy_holds_only_when_the_database_is_unchanged_and_the_wal_only_grew(
    after: snapshot_module.Signature, held: bool
) -> None:
    assert snapshot_module.held((DB, WAL), after) is held
    assert snapshot_module.held((DB, None), (DB, None))
    assert not snapshot_module.held((DB, None), (DB, WAL))
