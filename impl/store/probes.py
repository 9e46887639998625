"""Capability probes: what the store checks about its filesystem before trusting it.

Rules of this file: each probe works only inside one private, disposable directory under
the store root; every durability syscall goes through :mod:`runstore.durable` and every
SQL statement through :mod:`runstore.sql`. A probe that cannot establish its property
raises :class:`CapabilityProbeError`; there is no weaker fallback. The caller removes the
probe directory (:func:`run_probes` does so on success).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import sqlite3
from collections.abc import Callable
from typing import Final
from typing import NoReturn
from typing import ParamSpec
from typing import TypeVar

from runstore import durable
from runstore import sql
from runstore.errors import CapabilityProbeError
from runstore.errors import RunStoreError

P = ParamSpec("P")
T = TypeVar("T")

PROBE_PREFIX: Final = ".run-store-probe-"
_PAYLOAD: Final = b"runstore capability probe\n"


def run_probes(root: str) -> None:
    """Run all five probes in a fresh ``.run-store-probe-*`` directory of ``root``, then
    remove it and fsync ``root``. Raises CapabilityProbeError on the first failure, leaving
    the directory behind for the next open to clear; an OSError a probe meets outside its
    checked steps (writing or reading its own files, for example) is a failure too."""
    directory = os.path.join(root, PROBE_PREFIX + secrets.token_hex(8))
    _step("create the probe directory", durable.mkdir, directory)
    try:
        probe_flock(directory)
        probe_posix_record_lock(directory)
        probe_fsync(directory, root)
        probe_noreplace_rename(directory)
        probe_wal(directory)
    except OSError as exc:
        raise CapabilityProbeError(f"a capability probe failed: {exc}") from exc
    _step("remove the probe directory", durable.remove_tree, directory)
    _step("sync the store root", durable.fsync_dir, root)


def clear_stale_probe_directories(root: str) -> None:
    """Remove probe directories left by interrupted opens. Call only while holding the
    initialization lock: every live probe runs under it, so any directory seen is stale."""
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name.startswith(PROBE_PREFIX) and not os.path.islink(path) and os.path.isdir(path):
            _step("remove a stale probe directory", durable.remove_tree, path)


def probe_flock(directory: str) -> None:
    """Two independently opened descriptors exclude each other and can reacquire."""
    path = _write_file(directory, "flock")
    first = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    second = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        if not _step("lock the first descriptor", durable.flock, first, path):
            _fail("an uncontended exclusive flock was refused")
        if _step("lock the second descriptor", durable.flock, second, path):
            _fail("flock did not exclude a second open file description")
        _step("unlock the first descriptor", durable.funlock, first, path)
        if not _step("relock after release", durable.flock, second, path):
            _fail("flock could not be reacquired after release")
        _step("unlock the second descriptor", durable.funlock, second, path)
    finally:
        os.close(first)
        os.close(second)


def probe_posix_record_lock(directory: str) -> None:
    """A forked child cannot take a POSIX record lock the parent holds, and can after the
    parent releases it. The child only calls fcntl and ``os._exit``."""
    path = _write_file(directory, "posix-lock")
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        if not _step("take the record lock", durable.posix_lock, fd, path, lock=True):
            _fail("an uncontended POSIX record lock was refused")
        if _child_can_lock(fd):
            _fail("a child process took a POSIX record lock its parent holds")
        _step("release the record lock", durable.posix_lock, fd, path, lock=False)
        if not _child_can_lock(fd):
            _fail("a child process could not take a released POSIX record lock")
    finally:
        os.close(fd)


def _child_can_lock(fd: int) -> bool:
    try:
        pid = os.fork()
    except OSError as exc:
        raise CapabilityProbeError(f"cannot create the lock-probe process: {exc}") from exc
    if pid == 0:  # child: fcntl and exit, nothing else
        status = 1
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            status = 0
        finally:
            # Whatever lockf raises (an OSError, or KeyboardInterrupt from a Ctrl-C sent to
            # the whole process group) ends here: the child never unwinds into its caller.
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    if not os.WIFEXITED(wait_status):
        _fail("the lock-probe process did not exit normally")
    return os.WEXITSTATUS(wait_status) == 0


def probe_fsync(directory: str, root: str) -> None:
    """A written file, its directory and the root can be synchronized."""
    path = _write_file(directory, "fsync")
    _step("sync a file", durable.fsync_file, path)
    _step("sync the probe directory", durable.fsync_dir, directory)
    _step("sync the store root", durable.fsync_dir, root)


def probe_noreplace_rename(directory: str) -> None:
    """No-replace rename moves a populated directory intact and refuses populated and empty
    destinations, leaving both trees unchanged; the parent is synced after success."""
    source = os.path.join(directory, "rename-source")
    populated = os.path.join(directory, "rename-populated")
    empty = os.path.join(directory, "rename-empty")
    target = os.path.join(directory, "rename-target")
    for path in (source, populated, empty):
        os.mkdir(path, 0o700)
    _write_file(source, "payload")
    _write_file(populated, "resident", b"resident\n")
    for destination in (populated, empty):
        try:
            durable.rename_noreplace(source, destination)
        except FileExistsError:
            pass
        except OSError as exc:
            _fail(f"no-replace rename is unavailable here: {exc}")
        else:
            _fail(f"no-replace rename replaced {os.path.basename(destination)}")
        _expect_tree(source, {"payload": _PAYLOAD})
        _expect_tree(populated, {"resident": b"resident\n"})
        _expect_tree(empty, {})
    try:
        durable.rename_noreplace(source, target)
    except OSError as exc:
        _fail(f"no-replace rename to a free name failed: {exc}")
    if os.path.lexists(source):
        _fail("the renamed source still exists")
    _expect_tree(target, {"payload": _PAYLOAD})
    _step("sync the rename parent", durable.fsync_dir, directory)


def probe_wal(directory: str) -> None:
    """Two WAL connections: immediate writers exclude each other, uncommitted data is
    hidden, commits are visible, rollbacks discarded, a checkpoint completes, and STRICT
    tables and JSON functions behave."""
    path = os.path.join(directory, "probe.sqlite3")
    try:
        writer = sql.connect(path)
        try:
            reader = sql.connect(path)
            try:
                _probe_wal_pair(writer, reader)
            finally:
                reader.close()
        finally:
            writer.close()
    except CapabilityProbeError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise CapabilityProbeError(f"the WAL probe failed: {exc}") from exc
    except RunStoreError as exc:  # a settings refusal from sql.connect, for example
        raise CapabilityProbeError(f"the WAL probe failed: {exc.message}") from exc


def _probe_wal_pair(writer: sqlite3.Connection, reader: sqlite3.Connection) -> None:
    sql.enable_wal(writer)
    sql.enable_wal(reader)
    sql.execute(
        writer,
        "CREATE TABLE probe (id INTEGER PRIMARY KEY, doc TEXT NOT NULL "
        "CHECK (json_valid(doc) AND json_type(doc) = 'object')) STRICT",
    )
    count = "SELECT count(*) FROM probe"
    sql.execute(writer, "BEGIN IMMEDIATE")
    sql.execute(writer, "INSERT INTO probe (id, doc) VALUES (1, '{\"a\":1}')")
    sql.execute(reader, "PRAGMA busy_timeout = 0")
    try:
        sql.execute(reader, "BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        pass
    else:
        _fail("a second immediate write transaction was not excluded")
    finally:
        sql.execute(reader, f"PRAGMA busy_timeout = {sql.BUSY_TIMEOUT_MS}")
    if sql.scalar(reader, count) != 0:
        _fail("uncommitted data was visible to another connection")
    sql.execute(writer, "COMMIT")
    if sql.scalar(reader, count) != 1:
        _fail("committed data was not visible to another connection")
    sql.execute(writer, "BEGIN IMMEDIATE")
    sql.execute(writer, "INSERT INTO probe (id, doc) VALUES (2, '{}')")
    sql.execute(writer, "ROLLBACK")
    if sql.scalar(reader, count) != 1:
        _fail("rolled-back data was visible")
    for bad in (
        "INSERT INTO probe (id, doc) VALUES ('x', '{}')",
        "INSERT INTO probe (id, doc) VALUES (3, '[1]')",
    ):
        try:
            sql.execute(writer, bad)
        except sqlite3.IntegrityError:
            continue
        _fail("STRICT typing or the JSON object check did not refuse a bad row")
    if sql.scalar(reader, "SELECT json_extract(doc, '$.a') FROM probe WHERE id = 1") != 1:
        _fail("JSON functions did not read a stored object")
    busy, _, _ = sql.execute(writer, "PRAGMA wal_checkpoint(TRUNCATE)")[0]
    if busy != 0:
        _fail("a WAL checkpoint did not complete")


def _expect_tree(path: str, files: dict[str, bytes]) -> None:
    names = sorted(os.listdir(path))
    if names != sorted(files):
        _fail(f"{os.path.basename(path)} changed: holds {names}")
    for name, content in files.items():
        with open(os.path.join(path, name), "rb") as handle:
            if handle.read() != content:
                _fail(f"{os.path.basename(path)}/{name} changed content")


def _write_file(directory: str, name: str, content: bytes = _PAYLOAD) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, content)
    finally:
        os.close(fd)
    return path


def _step(what: str, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run one durability step of a probe; an OSError refuses the store."""
    try:
        return function(*args, **kwargs)
    except OSError as exc:
        raise CapabilityProbeError(f"cannot {what}: {exc}") from exc


def _fail(message: str) -> NoReturn:
    raise CapabilityProbeError(message)
