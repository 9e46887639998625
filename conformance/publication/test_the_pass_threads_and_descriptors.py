"""Which thread does what in a file pass, and what it leaves open (SPEC.md 12.4, "Each byte
is read once" and "The sync lane"):

- a file of 4 MiB or more that also feeds the tree transcript feeds its own SHA-256 on a
  second thread; a smaller file, or one read without the transcript, on the reading thread;
- a payload of 16 files or more has each file's fsync run on the lane's helper thread, a
  smaller one on the reading thread;
- at most 32 descriptors wait at once in a lane (its queue is full at 32 while the device
  holds the first fsync);
- a lane fails as a file-by-file pass would: a descriptor that fails to close surfaces as
  the same error in both;
- no descriptor outlives the pass, descriptor 0 included when it is the one the file got.

Threads are observed by recording, for each digest update and each seam call, whether it
ran on the thread that called the pass.
"""

from __future__ import annotations

import errno
import hashlib
import os
import queue
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runstore.store.publication import file_pass
from runstore.store.publication import objects
from runstore.store.publication.inventory import InventoryFile
from runstore.tree_hash import TreeHasher

from conformance.publication.test_objects import RESERVED
from conformance.publication.test_objects import observed
from conformance.publication.test_objects import populate

MIB = 1 << 20
OVERLAP = 4 * MIB
"""SPEC.md 12.4: files of 4 MiB or more overlap their two SHA-256 passes."""
LANE_FILES = 16
"""SPEC.md 12.4: payloads of 16 files or more are synchronized through a lane."""
LANE_DEPTH = 32
"""SPEC.md 12.4: at most 32 descriptors wait at once."""


# --- the digest's thread ------------------------------------------------------------------------


@pytest.fixture
def digest_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """For each SHA-256 update :mod:`file_pass` makes, whether it ran on the main thread."""
    on_main: list[bool] = []

    class Recording:
        def __init__(self, data: bytes = b"") -> None:
            self._digest = hashlib.sha256()
            if data:
                self.update(data)

        def update(self, data: bytes) -> None:
            on_main.append(threading.current_thread() is threading.main_thread())
            self._digest.update(data)

        def hexdigest(self) -> str:
            return self._digest.hexdigest()

    monkeypatch.setattr(file_pass, "hashlib", types.SimpleNamespace(sha256=Recording))
    yield on_main


@pytest.mark.parametrize(
    ("size", "with_tree", "second_thread"),
    [
        (MIB + 1, True, False),
        (OVERLAP - 1, True, False),
        (OVERLAP, True, True),
        (OVERLAP + 1, True, True),
        (OVERLAP, False, False),
    ],
    ids=["over-a-chunk", "just-under-4-MiB", "4-MiB", "over-4-MiB", "4-MiB-without-transcript"],
)
def test_a_file_of_4_mib_or_more_feeds_its_digest_on_a_second_thread(
    tmp_path: Path, digest_threads: list[bool], size: int, with_tree: bool, second_thread: bool
) -> None:
    """SPEC.md 12.4: a file of 4 MiB or more feeds its own digest on a second thread while
    the tree transcript is fed on the first; the digest is the same either way."""
    data = bytes(index % 253 for index in range(size))
    path = tmp_path / "f"
    path.write_bytes(data)
    tree = None
    if with_tree:
        tree = TreeHasher(1)
        tree.file("f", False, size)
    digest, _, _ = file_pass.read_file(
        str(path), InventoryFile(path="f", size=size, executable=False), sync=False, tree=tree
    )
    assert digest == hashlib.sha256(data).hexdigest()
    assert digest_threads and set(digest_threads) == {not second_thread}


# --- the sync lane --------------------------------------------------------------------------


def _payload(root: Path, count: int) -> None:
    populate(root, {f"d/f{index:02d}": bytes([index]) * (index + 1) for index in range(count)})


@pytest.mark.parametrize(
    ("count", "runtime", "lane"),
    [
        (LANE_FILES - 1, False, False),
        (LANE_FILES, False, True),
        (LANE_FILES - 1, True, False),
        (LANE_FILES, True, True),
    ],
)
def test_each_file_fsync_runs_on_the_lane_thread_from_16_files(
    tmp_path: Path, count: int, runtime: bool, lane: bool
) -> None:
    """SPEC.md 12.4, "The sync lane": from 16 payload files each file's fsync runs on one
    helper thread; below that, on the thread that reads. A runtime file (``outcome.json``,
    written and synced before the pass) does not count. Directories are synced by the
    reading thread after the lane is drained."""
    _payload(tmp_path, count)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    runtime_files = {"outcome.json": b"{}"} if runtime else {}
    calls: list[tuple[str, str, bool]] = []

    def record(phase: str, operation: str, target: str) -> None:
        if phase == "before":
            on_main = threading.current_thread() is threading.main_thread()
            calls.append((operation, os.path.relpath(target, tmp_path), on_main))

    with observed(record):
        objects.complete(str(tmp_path), inventory, runtime_files)
    payload_syncs = [c for c in calls if c[0] == "fsync_file" and c[1].startswith("d/")]
    assert [target for _, target, _ in payload_syncs] == [f"d/f{i:02d}" for i in range(count)]
    assert {on_main for _, _, on_main in payload_syncs} == {not lane}
    assert all(on_main for operation, _, on_main in calls if operation == "fsync_dir")


def test_at_most_32_descriptors_wait_in_the_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.4, "The sync lane": while the device holds the first fsync, the reading
    thread queues descriptors until 32 wait, and then waits itself."""
    _payload(tmp_path, LANE_DEPTH + 8)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    released = threading.Event()
    waiting_when_full: list[int] = []

    class Watched(queue.Queue):  # type: ignore[type-arg]
        def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
            if self.full() and not released.is_set():
                waiting_when_full.append(self.qsize())
                released.set()
            super().put(item, block, timeout)

    monkeypatch.setattr(file_pass, "queue", types.SimpleNamespace(Queue=Watched))
    first_sync: list[bool] = []

    def hold(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("before", "fsync_file") and not first_sync:
            first_sync.append(True)
            released.wait(timeout=60)  # a safety net only: the full queue sets it

    with observed(hold):
        objects.complete(str(tmp_path), inventory, {})
    assert waiting_when_full == [LANE_DEPTH]


@pytest.mark.parametrize("lane", [False, True], ids=["file-by-file", "lane"])
def test_a_failed_close_fails_the_lane_as_it_fails_a_file_by_file_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane: bool
) -> None:
    """SPEC.md 12.4: a lane fails as a file-by-file pass would, so a descriptor whose close
    fails (after the file was synced) stops the pass with that error in both."""
    _payload(tmp_path, LANE_FILES + 2)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    monkeypatch.setattr(objects, "LANE_MIN_FILES", LANE_FILES if lane else 10_000)
    victim = str(tmp_path / "d" / "f03")
    descriptors: dict[int, str] = {}
    real_open, real_close = os.open, os.close

    def opening(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        descriptors[fd] = os.fspath(path)
        return fd

    def closing(fd: int) -> None:
        real_close(fd)
        if descriptors.pop(fd, None) == victim:
            raise OSError(errno.EIO, "injected close failure")

    monkeypatch.setattr(os, "open", opening)
    monkeypatch.setattr(os, "close", closing)
    with pytest.raises(OSError) as info:
        objects.complete(str(tmp_path), inventory, {})
    assert info.value.errno == errno.EIO
    assert not (tmp_path / "manifest.json").exists()


def test_descriptor_0_is_closed_too(tmp_path: Path) -> None:
    """SPEC.md 12.4: no descriptor outlives the pass, whatever number the system gave it;
    with descriptor 0 free, the file read gets 0 and it is closed afterwards."""
    path = tmp_path / "f"
    path.write_bytes(b"data")
    saved = os.dup(0)
    try:
        os.close(0)
        file_pass.read_file(str(path), InventoryFile(path="f", size=4, executable=False), sync=True)
        with pytest.raises(OSError) as info:
            os.fstat(0)
        assert info.value.errno == errno.EBADF
    finally:
        os.dup2(saved, 0)
        os.close(saved)
