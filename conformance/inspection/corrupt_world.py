"""Damage for ``validate``'s tests: a real store built once, and ways to break a copy of it.

The store holds what a campaign leaves behind (one-shot slots, one of them retried after a
failure, a stream measurement after its warm-up), an attempt recovery settled (it had
claimed its slot and left a stage behind), and two attempts left open through the store's
own API: one finalizing under its claim with a published artifact, one only reserved.
Each test copies it and damages the copy in one way. Database edits go through
a plain ``sqlite3`` connection on the copy with every trigger dropped and re-created
around them (so the schema still verifies), and end with a ``TRUNCATE`` checkpoint and a
closed connection, so the copy is one self-contained file again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import AttemptState
from runstore import RunStore
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.canonical import encode
from runstore.enums import ArtifactKind
from runstore.manifest import ManifestFile
from runstore.manifest import manifest_bytes
from runstore.manifest import parse_manifest
from runstore.requests import FirstAttempt
from runstore.runner.campaign import SlotKind
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.testing import factories

from conformance.runner.world import SECOND
from conformance.runner.world import START
from conformance.runner.world import Clock
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import succeeded

DATABASE = "run.sqlite3"


def _one_shot(order: WorkOrder, nth: int) -> WorkResult:
    """Candidate ``a`` on problem ``p`` fails once, everything else succeeds."""
    env = dict(order.env)
    if (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"], nth) == ("a", "p", 0):
        return result(WorkStatus.EXITED, 3)
    return succeeded({"ratio": 2.5}, extra=env["RUNSTORE_CANDIDATE"].encode() * 64)


def _stream(order: WorkOrder, nth: int) -> WorkResult:
    outputs = [("log.txt", b"beside the checkpoints")]
    for index in range(2):
        document = json.dumps({"metrics": {"step": index}}).encode()
        outputs += [(f"checkpoints/{index}/result.json", document)]
    return result(WorkStatus.EXITED, 0, outputs=tuple(sorted(outputs)))


def build_store(root: Path) -> None:
    """Fill the empty directory ``root`` with the store described above."""
    clock = Clock()
    with RunStore.open(str(root)) as store:
        for script, options in (
            (_one_shot, {}),
            (_stream, {"name": "flow", "slot_kind": SlotKind.STREAM, "checkpoints": 2}),
        ):
            run_campaign(
                store,
                campaign(**options, warmup=bool(options)),  # type: ignore[arg-type]
                ScriptedExecutor(script, clock),
                RunOptions(jobs=1, retry_failed=1),
                lambda event, fields: None,
                clock=clock,
            )
        _leave_open(store, clock.now + SECOND)


def _leave_open(store: RunStore, now: int) -> None:
    expiry = START + 10**6 * SECOND
    claimed = factories.one_shot("open-claimed")
    guard = store.reserve(
        store.register_one_shot(*claimed.arguments()),
        FirstAttempt(),
        factories.lease("open-claimed", expires_at_ns=expiry),
        now,
    )
    guard = store.advance(guard, AttemptState.MATERIALIZING, now + 1)

    def populate(path: str) -> None:
        (Path(path) / "data.bin").write_bytes(b"\0data")

    ticks = iter(range(now + 2, now + 100))
    published = store.publish_artifact(guard, ArtifactKind.DATASET, populate, lambda: next(ticks))
    disposition = store.begin_finalization(
        published.attempt, factories.lease("open-claim", expires_at_ns=expiry), now + 200
    )
    assert disposition.claimed
    _leave_interrupted(store, now + 400)
    reserved = factories.one_shot("open-reserved")
    store.reserve(
        store.register_one_shot(*reserved.arguments()),
        FirstAttempt(),
        factories.lease("open-reserved", expires_at_ns=expiry),
        now + 300,
    )


def _leave_interrupted(store: RunStore, now: int) -> None:
    """An owner that claimed its slot, left a registered stage behind (its ``populate``
    failed) and expired: recovery quarantines the stage and commits the interrupted
    failure."""
    slots = factories.one_shot("interrupted")
    guard = store.reserve(
        store.register_one_shot(*slots.arguments()),
        FirstAttempt(),
        factories.lease("interrupted", expires_at_ns=now + 1_000),
        now,
    )
    guard = store.advance(guard, AttemptState.MATERIALIZING, now + 1)

    def populate(path: str) -> None:
        raise OSError("the worker died")

    with pytest.raises(OSError, match="the worker died"):
        store.publish_artifact(guard, ArtifactKind.DATASET, populate, lambda: now + 2)
    lease = factories.lease("interrupted-claim", expires_at_ns=now + 1_000)
    assert store.begin_finalization(guard, lease, now + 3).claimed
    report = store.recover(lambda: now + 5_000)
    assert len(report.terminals) == 1 and len(report.quarantined_stages) == 1, report


def copy_store(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@contextmanager
def edited(root: Path, *, keep_triggers: bool = True) -> Iterator[sqlite3.Connection]:
    """A connection on ``root``'s database inside one transaction, with every trigger
    dropped (and re-created with its exact text afterwards when ``keep_triggers``); then
    a ``TRUNCATE`` checkpoint, and the connection is closed."""
    connection = sqlite3.connect(root / DATABASE, isolation_level=None)
    try:
        triggers = connection.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name"
        ).fetchall()
        connection.execute("BEGIN IMMEDIATE")
        for name, _ in triggers:
            connection.execute(f'DROP TRIGGER "{name}"')
        yield connection
        if keep_triggers:
            for _, statement in triggers:
                connection.execute(statement)
        connection.execute("COMMIT")
        checkpoint(connection)
    finally:
        connection.close()


def executed(root: Path, statement: str) -> None:
    """Run ``statement`` alone (no trigger dropped, outside a transaction) on ``root``'s
    database, then a ``TRUNCATE`` checkpoint."""
    connection = sqlite3.connect(root / DATABASE, isolation_level=None)
    try:
        connection.execute(statement)
        checkpoint(connection)
    finally:
        connection.close()


def checkpoint(connection: sqlite3.Connection) -> None:
    busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0


def rewrite_record(
    connection: sqlite3.Connection,
    table: str,
    rowid: int,
    change: Callable[[dict[str, JSON]], None],
) -> None:
    """Decode one row's ``record_json``, ``change`` it, and store it canonically again."""
    (data,) = connection.execute(
        f"SELECT record_json FROM {table} WHERE rowid = ?", (rowid,)
    ).fetchone()
    document = decode_object(data.encode())
    change(document)
    connection.execute(
        f"UPDATE {table} SET record_json = ? WHERE rowid = ?", (encode(document).decode(), rowid)
    )


def artifact_dirs(root: Path) -> list[Path]:
    """The completed object directories, in name order."""
    return sorted(path for path in (root / "artifacts").iterdir() if not path.name.startswith("."))


def payload_file(root: Path) -> Path:
    """A payload file (not ``manifest.json``) of the first artifact holding one."""
    for directory in artifact_dirs(root):
        files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != "manifest.json")
        if files:
            return files[0]
    raise AssertionError("no artifact holds a payload file")


def rewrite_consistently(file: Path) -> None:
    """Change ``file``'s bytes and rewrite its object's manifest to match: a valid object
    at an address that no longer names its content."""
    directory = next(parent for parent in file.parents if parent.parent.name == "artifacts")
    data = file.read_bytes() + b"!"
    file.write_bytes(data)
    manifest = directory / "manifest.json"
    relative = file.relative_to(directory).as_posix()
    listed = [
        ManifestFile(path=f.path, sha256=_sha256(data), size_bytes=len(data))
        if f.path == relative
        else f
        for f in parse_manifest(manifest.read_bytes())
    ]
    manifest.write_bytes(manifest_bytes(listed))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
