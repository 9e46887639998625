"""Fixtures of ``tools/bench_recover.py``: a store with a history of terminal attempts and
the recoverable work ``RunStore.recover`` is timed on (``tools/`` is not a package;
``bench_recover.py`` imports this module from its own directory).

- **History** (:func:`build_history`): ``count`` terminal attempts, ten retries per one-shot
  slot, built by the writer's own functions on one raw connection:
  ``registration.register_one_shot``, ``attempts.reserve``, ``attempts.advance`` into
  finalizing, then ``publication.publish_finalization``'s database steps in its order
  (``check_finalization``, ``register_stage`` with a real stage token, the outcome document
  from the records, ``publish_finalization_commit``). So every attempt has exactly the rows
  the writer gives it (attempt, transitions, events, reservation and staging leases, the
  final artifact) and its own final artifact directory ``artifacts/attempt-<tree>`` on disk
  (``outcome.json`` and ``manifest.json``). Shortcuts, none of which changes a byte: the
  writer's ``write`` runs each operation inside one large ``BEGIN IMMEDIATE`` batch (a
  commit every ``_BATCH`` attempts) with ``PRAGMA synchronous=OFF``; ``durable.fsync_*`` are
  no-ops while the history is built (``os.sync()`` follows); the object is written straight
  at its address by one of ``_DISK_THREADS`` threads with the bytes ``objects.complete``
  would write, computed in memory (the first ``_CHECKED`` objects are also built by
  ``objects.complete`` and checked with ``objects.verify`` to be identical).
- **The recoverable work** (:func:`add_expired_work`), identical on both stores and built
  through the public API with its real durability: :data:`EXPIRED` (10) attempts whose
  reservation leases expire before :data:`RECOVER_AT_NS`: 4 left ``reserved``; 6
  ``executing``, of which 3 published a dataset (rooted under the reservation lease, so the
  interrupted failure names it as a ``leased_root``) and 2 died while publishing (a stage
  directory with its unreleased staging lease, lock free).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import os
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from typing import TypeVar

from runstore import ArtifactKind
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import RunStore
from runstore import canonical
from runstore import durable
from runstore import sql
from runstore.manifest import MANIFEST_NAME
from runstore.manifest import ManifestFile
from runstore.manifest import manifest_bytes
from runstore.manifest import manifest_sha256
from runstore.receipts import CommittedEvent
from runstore.receipts import OwnedAttempt
from runstore.requests import Failed
from runstore.requests import Next
from runstore.store import attempts
from runstore.store import registration
from runstore.store.publication import objects
from runstore.store.publication import outcome_document
from runstore.store.publication import publish
from runstore.store.publication import publish_tx
from runstore.store.publication import staging
from runstore.store.recovery import disk as recovery_disk
from runstore.testing import fixtures as fx
from runstore.tree_hash import TreeHasher

T = TypeVar("T")

_BATCH = 2_000
"""History attempts per setup transaction."""
_DISK_THREADS = 32
"""Threads writing the history's objects (file creation here is latency-bound)."""
_WINDOW = 512
"""History attempts whose objects may be in flight."""
_CHECKED = 3
"""History attempts whose objects are also built by ``objects.complete`` and compared."""
_RETRIES = 10
"""History attempts per slot (retry indices 0 .. 9)."""
EXPIRED = 10
"""The recoverable attempts (each becomes one terminal of the recovery report)."""
_HISTORY_EXPIRY_NS = 2**62
"""The history's leases: never expired (every one is released by its terminal commit)."""
_WORK_START_NS = 10**15
"""The recoverable attempts start here (after every history time) ..."""
_WORK_EXPIRY_NS = _WORK_START_NS + 10**12
"""... and their leases expire here, before the recovery clock."""
RECOVER_AT_NS = _WORK_EXPIRY_NS + 10**12
"""The recovery clock."""


# --- building the history -------------------------------------------------------------------


@contextlib.contextmanager
def _no_fsync() -> Iterator[None]:
    """Setup only: make the durability calls no-ops (content and names are unchanged)."""
    saved = durable.fsync_fd, durable.fsync_dir

    def fsync_fd(fd: int, label: str) -> None:
        return None

    def fsync_dir(path: str) -> None:
        return None

    durable.fsync_fd, durable.fsync_dir = fsync_fd, fsync_dir
    try:
        yield
    finally:
        durable.fsync_fd, durable.fsync_dir = saved
        os.sync()


class _BatchWriter:
    """The ``write`` the writer's functions are given: each operation runs inside the
    current large transaction of a raw connection with ``synchronous=OFF``."""

    def __init__(self, database_path: str) -> None:
        self.connection = sql.connect(database_path)
        sql.execute(self.connection, "PRAGMA synchronous = OFF")
        sql.execute(self.connection, "BEGIN IMMEDIATE")

    def __call__(
        self, operation: Callable[[sqlite3.Connection], tuple[T, Sequence[CommittedEvent]]]
    ) -> T:
        return operation(self.connection)[0]

    def commit(self) -> None:
        sql.execute(self.connection, "COMMIT")
        sql.execute(self.connection, "BEGIN IMMEDIATE")

    def close(self) -> None:
        sql.execute(self.connection, "COMMIT")
        self.connection.close()


def _populate_log(index: int) -> Callable[[str], None]:
    def populate(path: str) -> None:
        with open(os.path.join(path, "log.txt"), "wb") as handle:
            handle.write(f"attempt {index}: exit status 1\n".encode())

    return populate


def build_history(root: str, count: int, clock: Iterator[int]) -> None:
    """``count`` terminal attempts, each with its final artifact directory on disk."""
    RunStore.open(root).close()  # creates schema v1 durably
    scratch = os.path.join(root, "scratch")
    os.mkdir(scratch)
    write = _BatchWriter(os.path.join(root, "run.sqlite3"))
    pending: collections.deque[_Pending] = collections.deque()
    try:
        with _no_fsync(), ThreadPoolExecutor(_DISK_THREADS) as pool:
            staging.artifacts_directory(root)
            slot_id = ""
            for index in range(count):
                if index % _RETRIES == 0:
                    slot_id = _register_slot(write.connection, index // _RETRIES)
                pending.append(
                    _begin_attempt(root, scratch, write.connection, slot_id, index, clock, pool)
                )
                if len(pending) >= _WINDOW:
                    pending.popleft().commit(write.connection, clock)
                if (index + 1) % _BATCH == 0:
                    write.commit()
            while pending:
                pending.popleft().commit(write.connection, clock)
    finally:
        write.close()
    os.rmdir(scratch)


def _register_slot(connection: sqlite3.Connection, number: int) -> str:
    slots = fx.slot_fixture(name=f"h{number:06d}")
    return registration.register_one_shot(
        connection, slots.decision, slots.run, slots.attempt_slot, slots.observation_slots[0]
    )


@dataclass
class _Pending:
    """An attempt whose final artifact a disk thread is completing."""

    guard: OwnedAttempt
    lease_id: str
    outcome: Failed
    finished: int
    acquired: int
    snapshot: dict[str, Any]
    disk: Future[objects.CompletedObject]

    def commit(self, connection: sqlite3.Connection, clock: Iterator[int]) -> None:
        completed = self.disk.result()
        artifact = objects.registration(
            ArtifactKind.ATTEMPT, completed, max(next(clock), self.acquired)
        )
        publish_tx.publish_finalization_commit(
            connection,
            self.guard,
            self.lease_id,
            self.outcome,
            artifact,
            (),
            self.snapshot,
            self.finished,
            next(clock),
        )


def _write_object(root: str, scratch: str, document: bytes) -> objects.CompletedObject:
    """The completed object holding only ``outcome.json`` (plus ``manifest.json``), written
    at its address by a disk thread: the bytes ``objects.complete`` writes, computed in
    memory (``manifest_bytes``, ``TreeHasher``) so the object is written with three creates
    and no rename. :func:`_check_objects` compares a sample with ``objects.complete`` and
    ``objects.verify``."""
    outcome = ManifestFile(
        path=recovery_disk.OUTCOME_NAME,
        sha256=hashlib.sha256(document).hexdigest(),
        size_bytes=len(document),
    )
    manifest = manifest_bytes([outcome])
    tree = TreeHasher(2)
    tree.file(MANIFEST_NAME, False, len(manifest))
    tree.update(manifest)
    tree.file(recovery_disk.OUTCOME_NAME, False, len(document))
    tree.update(document)
    completed = objects.CompletedObject(
        tree_sha256=tree.hexdigest(),
        manifest_sha256=manifest_sha256(manifest),
        manifest=manifest,
        files=(outcome,),
    )
    path = os.path.join(root, objects.address(ArtifactKind.ATTEMPT, completed.tree_sha256)[1])
    os.mkdir(path, 0o755)
    for name, data in ((recovery_disk.OUTCOME_NAME, document), (MANIFEST_NAME, manifest)):
        with open(os.path.join(path, name), "xb") as handle:
            handle.write(data)
    return completed


def _check_objects(root: str, scratch: str, document: bytes) -> objects.CompletedObject:
    """Write the object as :func:`_write_object` does and check that it is exactly what
    ``objects.complete`` makes of the same ``outcome.json`` and what ``objects.verify``
    finds at its address."""
    path = os.path.join(scratch, "check")
    os.mkdir(path)
    inventory = objects.scan(path, reserved=(MANIFEST_NAME, recovery_disk.OUTCOME_NAME))
    expected = objects.complete(path, inventory, {recovery_disk.OUTCOME_NAME: document})
    durable.remove_tree(path, sync_parent=False)
    written = _write_object(root, scratch, document)
    address = objects.address(ArtifactKind.ATTEMPT, written.tree_sha256)[1]
    found = objects.verify(os.path.join(root, address), sync=False)
    if not expected == written == found:
        raise AssertionError(f"history object differs: {expected} {written} {found}")
    return written


def _begin_attempt(
    root: str,
    scratch: str,
    connection: sqlite3.Connection,
    slot_id: str,
    index: int,
    clock: Iterator[int],
    pool: ThreadPoolExecutor,
) -> _Pending:
    """One attempt of the slot, reserved, moved to finalizing and finished ``Failed`` with
    its final artifact: ``publication.publish_finalization``'s database steps in its order
    (check, staging lease, outcome document, then, once the object is complete and renamed
    to its address, the final commit). Its stage is reduced to a scratch directory (no
    stage lock, no recovery lock: nothing else runs), and the object is written by a disk
    thread while the next attempts' rows are written."""
    lease = fx.lease(f"h{index:07d}", _HISTORY_EXPIRY_NS)
    authorization = FirstAttempt() if index % _RETRIES == 0 else Next(retry=True)
    guard, _ = attempts.reserve(connection, slot_id, authorization, lease, next(clock))
    guard, _ = attempts.advance(connection, guard, AttemptState.FINALIZING, next(clock))
    outcome = Failed(code="exit_status", details={"status": 1 + index % 7})
    publish_tx.check_finalization(connection, guard, outcome, (), next(clock))
    token = staging.new_token()
    lease_id = staging.lease_id_for(token)
    acquired = publish_tx.register_stage(
        connection, guard, lease_id, staging.store_path_for(token), next(clock)
    )
    finished = publish_tx.check_finalization(connection, guard, outcome, (), next(clock))
    document = outcome_document.outcome_document(
        connection, guard.attempt_id, outcome, (), finished
    )
    snapshot = canonical.decode_object(document)["snapshot"]
    assert isinstance(snapshot, dict)
    disk: Future[objects.CompletedObject]
    if index < _CHECKED:
        disk = Future()
        disk.set_result(_check_objects(root, scratch, document))
    else:
        disk = pool.submit(_write_object, root, scratch, document)
    return _Pending(
        guard=guard,
        lease_id=lease_id,
        outcome=outcome,
        finished=finished,
        acquired=acquired,
        snapshot=snapshot,
        disk=disk,
    )


# --- the recoverable work -------------------------------------------------------------------


def add_expired_work(root: str) -> None:
    """10 attempts whose owners died, through the public API (real durability)."""
    ticks = itertools.count(_WORK_START_NS)
    with RunStore.open(root) as store:
        for index in range(EXPIRED):
            slots = fx.slot_fixture(name=f"w{index:02d}")
            store.register_one_shot(
                decision=slots.decision,
                run=slots.run,
                attempt_slot=slots.attempt_slot,
                observation_slot=slots.observation_slots[0],
            )
            lease = fx.lease(f"w{index:02d}", _WORK_EXPIRY_NS)
            guard = store.reserve(slots.slot_id, FirstAttempt(), lease, next(ticks))
            if index < 4:
                continue  # died right after reserving
            for phase in fx.EXECUTION_PATH:
                guard = store.advance(guard, phase, next(ticks))
            if index < 7:
                store.publish_artifact(
                    guard, ArtifactKind.DATASET, _populate_log(-index), lambda: next(ticks)
                )
            elif index < 9:
                _die_while_publishing(store, guard, next(ticks))


def _die_while_publishing(store: RunStore, guard: OwnedAttempt, now_ns: int) -> None:
    """A stage and its staging lease, left as a killed publisher leaves them."""
    stage, _ = publish._open_stage(store.root, store._write, guard, now_ns)
    _populate_log(0)(stage.object_path)
    stage.unlock()
