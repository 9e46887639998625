"""The mix of one lifecycle and its bare replay, for ``tools/bench_lifecycle.py``.

Rules of this file: :class:`Recorder` records, through the two seams' observers, every
transaction (its ``BEGIN``, statements and WAL frames) and durable operation of what runs
while it is entered; :class:`Replay` runs a recorded mix with bare stdlib calls in its own
root. WAL frames are read from the ``-shm`` file through a descriptor opened once and
closed only after the connections to that database are closed (closing any descriptor of
a file drops the process's POSIX locks on it, SQLite's included). The method is described
in ``tools/bench_lifecycle.py``.
"""

from __future__ import annotations

import collections
import fcntl
import itertools
import os
import re
import shutil
import sqlite3
import struct
from collections.abc import Callable
from dataclasses import dataclass

from runstore import durable
from runstore import sql
from runstore.store import store_root

TRACED_REPLAYS = 5
"""Replayed lifecycles whose mix is measured (a B-tree split adds frames now and then)."""
ROW_BYTES = 3_900
"""A replayed row's blob: one row per 4 KiB leaf page."""
_HEX = re.compile(r"[0-9a-f]{16,}")
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC


# --- tracing one lifecycle ------------------------------------------------------------------


class WalIndex:
    """Reads ``mxFrame`` and the salts from the first WAL-index header in ``<db>-shm``."""

    def __init__(self, database: str) -> None:
        self.shm = database + "-shm"
        self._fd = os.open(self.shm, os.O_RDONLY | os.O_CLOEXEC)
        self.last = self._read()

    def _read(self) -> tuple[int, bytes]:
        header = os.pread(self._fd, 48, 0)
        return struct.unpack_from("=I", header, 16)[0], header[32:40]

    def close(self) -> None:
        """Call only once every connection to the database is closed (see the module
        docstring)."""
        os.close(self._fd)

    def frames_since_last(self) -> int:
        """Frames written since the previous call (all of them after a WAL restart)."""
        now = self._read()
        (before, salts), (after, now_salts) = self.last, now
        self.last = now
        return after - before if salts == now_salts else after


@dataclass(frozen=True)
class Txn:
    begin: str
    statements: int
    frames: int


@dataclass(frozen=True)
class FsOp:
    operation: str
    targets: tuple[str, ...]
    """Relative to the root; ``{0}``, ``{1}``... stand for names fresh per lifecycle."""
    size: int


Step = Txn | FsOp


@dataclass
class Mix:
    """One lifecycle's durable operations, in order."""

    steps: list[Step]
    placeholders: list[int]
    """The length of each placeholder's name."""
    page_size: int
    statements: int = 0
    other_transactions: int = 0
    """Transactions ended otherwise than by COMMIT (ROLLBACK)."""

    def counts(self) -> dict[str, int]:
        found: collections.Counter[str] = collections.Counter()
        for step in self.steps:
            if isinstance(step, Txn):
                found["commits"] += 1
                found["commits writing WAL" if step.frames else "commits without WAL"] += 1
                found["WAL frames"] += step.frames
            else:
                found[step.operation] += 1
        return dict(found)

    def wal_bytes(self) -> int:
        return sum(s.frames for s in self.steps if isinstance(s, Txn)) * (24 + self.page_size)


class Recorder:
    """Installs both observers while entered and records the steps of what runs."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.wal = WalIndex(os.path.join(root, store_root.DATABASE_NAME))
        self.steps: list[Step] = []
        self.names: dict[str, int] = {}
        self.statements = 0
        self.rollbacks = 0
        self._begin = ""
        self._in_txn = 0
        self._previous: tuple[durable.Observer | None, sql.Observer | None] = (None, None)

    def __enter__(self) -> Recorder:
        self._previous = (
            durable.install_observer(self._on_fs),
            sql.install_observer(self._on_sql),
        )
        return self

    def __exit__(self, *exc_info: object) -> None:
        durable.install_observer(self._previous[0])
        sql.install_observer(self._previous[1])

    def _on_sql(self, phase: sql.Phase, statement: str) -> None:
        word = statement.split(None, 1)[0].upper()
        if phase == "before":
            self.statements += 1
            self._in_txn += 1
            if word == "BEGIN":
                self._begin, self._in_txn = " ".join(statement.split()), 1
            return
        if word == "COMMIT":
            frames = self.wal.frames_since_last()
            self.steps.append(Txn(self._begin, self._in_txn, frames))
        elif word == "ROLLBACK":
            self.rollbacks += 1

    def _on_fs(self, phase: durable.Phase, operation: str, target: str) -> None:
        if phase != "before":
            return
        paths = tuple(target.split(" -> ")) if operation == "rename_noreplace" else (target,)
        size = 0
        if operation == "fsync_file":
            size = os.stat(target).st_size
        self.steps.append(FsOp(operation, tuple(self._template(p) for p in paths), size))

    def _template(self, path: str) -> str:
        relative = os.path.relpath(path, self.root)
        if relative.startswith(".."):
            raise ValueError(f"a durable operation outside the root: {path}")

        def placeholder(match: re.Match[str]) -> str:
            number = self.names.setdefault(match.group(0), len(self.names))
            return "{" + str(number) + "}"

        return _HEX.sub(placeholder, relative.replace("{", "{{").replace("}", "}}"))

    def mix(self, page_size: int) -> Mix:
        lengths = [len(name) for name in sorted(self.names, key=self.names.__getitem__)]
        return Mix(self.steps, lengths, page_size, self.statements, self.rollbacks)


def page_size(database: str) -> int:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        value = connection.execute("PRAGMA page_size").fetchone()[0]
    finally:
        connection.close()
    assert isinstance(value, int)
    return value


def trace_lifecycle(root: str, lifecycle: Callable[[], None]) -> tuple[Mix, WalIndex]:
    """The mix of one (untimed) ``lifecycle`` on the store at ``root``, and the WAL index
    reader to close after the store (see the module docstring)."""
    recorder = Recorder(root)
    with recorder:
        lifecycle()
    return recorder.mix(page_size(os.path.join(root, store_root.DATABASE_NAME))), recorder.wal


# --- the replay -----------------------------------------------------------------------------

Concrete = tuple[str, tuple[str, ...], int]
"""A durable operation with absolute targets, or ("txn", (begin,), frames)."""


class Replay:
    """A bare stdlib root replaying a mix: its own database, ``artifacts/`` and lock file."""

    def __init__(self, root: str, mix: Mix, like: str | None = None) -> None:
        self.root, self.mix = root, mix
        os.makedirs(root)
        self.database = os.path.join(root, "replay.sqlite3")
        connection = sqlite3.connect(self.database, isolation_level=None)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("CREATE TABLE pages (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        for table in ("tick1", "tick2"):
            connection.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, n INTEGER)")
            connection.execute(f"INSERT INTO {table} VALUES (1, 0)")
        self.connection = connection
        self.row = bytes(ROW_BYTES)
        self.data = os.urandom(max([1] + [s.size for s in mix.steps if isinstance(s, FsOp)]))
        self.held: dict[str, int] = {}
        self.indexes: list[WalIndex] = []
        self.resembled: tuple[int, int] | None = None
        """(entries in ``artifacts/``, database bytes) when made like a store."""
        self._numbers = itertools.count()
        self._prepare_fixed()
        if like is not None:
            self._resemble(like)

    def _resemble(self, store: str) -> None:
        """Give the replay what a large store's filesystem and database already hold, so
        that both sides pay the same for size: as many entries in ``artifacts/`` (empty
        directories: a directory operation costs by entry count) and a database file of
        the same size (pages appended unsynced, then checkpointed and synced once)."""
        artifacts = os.path.join(store, "artifacts")
        count = len(os.listdir(artifacts)) if os.path.isdir(artifacts) else 0
        mine = self._path("artifacts", [])
        os.makedirs(mine, exist_ok=True)
        for index in range(count):
            os.mkdir(os.path.join(mine, f"filler-{index:064x}"), 0o700)
        target = os.path.getsize(os.path.join(store, store_root.DATABASE_NAME))
        connection = self.connection
        connection.execute("CREATE TABLE filler (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        connection.execute("PRAGMA synchronous = OFF")
        while os.path.getsize(self.database) < target:
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO filler (v) VALUES (?)", itertools.repeat((self.row,), 2_000)
            )
            connection.execute("COMMIT")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA synchronous = FULL")
        assert connection.execute("PRAGMA synchronous").fetchone() == (2,)
        os.sync()
        self.resembled = (count, os.path.getsize(self.database))

    def _prepare_fixed(self) -> None:
        """The directories and lock files the traced lifecycle found already there."""
        for step in self.mix.steps:
            if not isinstance(step, FsOp) or "{" in "".join(step.targets):
                continue
            path = self._path(step.targets[0], [])
            if step.operation == "fsync_dir":
                os.makedirs(path, exist_ok=True)
            elif step.operation.startswith("flock"):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.close(os.open(path, _LOCK_FLAGS, 0o600))

    def _path(self, template: str, names: list[str]) -> str:
        return os.path.normpath(os.path.join(self.root, template.format(*names)))

    def prepare(self, count: int) -> list[list[Concrete]]:
        """``count`` lifecycles with fresh names (made before timing)."""
        plans: list[list[Concrete]] = []
        for _ in range(count):
            names = [f"{next(self._numbers):0{length}x}" for length in self.mix.placeholders]
            plan: list[Concrete] = []
            for step in self.mix.steps:
                if isinstance(step, Txn):
                    plan.append(("txn", (step.begin,), step.frames))
                else:
                    paths = tuple(self._path(t, names) for t in step.targets)
                    plan.append((step.operation, paths, step.size))
            plans.append(plan)
        return plans

    def run(self, plan: list[Concrete], seen: collections.Counter[str] | None = None) -> None:
        """One lifecycle; ``seen`` (tracing only) counts operations and statements."""
        for operation, targets, number in plan:
            if seen is not None:
                seen[operation] += 1
            if operation == "txn":
                self._transaction(targets[0], number, seen)
            else:
                self._durable(operation, targets, number)

    def _transaction(self, begin: str, frames: int, seen: collections.Counter[str] | None) -> None:
        execute = self.connection.execute
        execute(begin)
        if frames == 0:
            execute("SELECT n FROM tick1").fetchall()
        elif frames <= 2:
            execute("UPDATE tick1 SET n = n + 1")
            if frames == 2:
                execute("UPDATE tick2 SET n = n + 1")
        else:
            self.connection.executemany(
                "INSERT INTO pages (v) VALUES (?)", itertools.repeat((self.row,), frames - 2)
            )
        execute("COMMIT")
        if seen is not None:
            seen["statements"] += 2 + (frames == 2) + (frames != 0 and frames != 2)

    def _durable(self, operation: str, targets: tuple[str, ...], size: int) -> None:
        path = targets[0]
        if operation == "fsync_file":
            try:
                fd = os.open(path, _CREATE_FLAGS, 0o644)
                os.write(fd, self.data[:size])
            except FileExistsError:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif operation == "fsync_dir":
            _fsync_directory(path)
        elif operation == "rename_noreplace":
            os.rename(path, targets[1])
        elif operation == "create_directory":
            os.mkdir(path, 0o700)
        elif operation == "mkdir":
            os.mkdir(path, 0o700)
            _fsync_directory(os.path.dirname(path))
        elif operation == "unlink":
            os.unlink(path)
            _fsync_directory(os.path.dirname(path))
        elif operation == "remove_tree":
            for held in [p for p in self.held if p.startswith(path + os.sep)]:
                os.close(self.held.pop(held))
            shutil.rmtree(path)
        elif operation in ("flock_shared", "flock_exclusive"):
            fd = os.open(path, _LOCK_FLAGS, 0o600)
            if operation == "flock_shared":
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                os.close(fd)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.held[path] = fd
        elif operation == "funlock":
            fcntl.flock(self.held[path], fcntl.LOCK_UN)
        else:
            raise ValueError(f"no bare replay for the durable operation {operation!r}")

    def traced(self, count: int = TRACED_REPLAYS) -> tuple[dict[str, float], float]:
        """``count`` more (untimed) lifecycles, measured: the mean per lifecycle of each
        operation's count, of the statements (key ``statements``) and of the WAL frames."""
        seen: collections.Counter[str] = collections.Counter()
        wal = WalIndex(self.database)
        self.indexes.append(wal)
        frames = 0
        for plan in self.prepare(count):
            for operation, targets, number in plan:
                self.run([(operation, targets, number)], seen)
                if operation == "txn":
                    frames += wal.frames_since_last()
        return {k: v / count for k, v in seen.items()}, frames / count

    def close(self) -> None:
        for fd in self.held.values():
            os.close(fd)
        self.connection.close()
        for index in self.indexes:  # after the connection (see the module docstring)
            index.close()


def _fsync_directory(path: str) -> None:
    fd = os.open(path, _DIRECTORY_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
