"""One pass over one file of an object: open it once, check it is the file the scan saw,
read its bytes once (feeding its SHA-256 and, when given, the tree transcript), check it
did not change while read, and fsync the same descriptor; and the creation of a runtime
file from bytes in memory.

Rules of this file: files only (no directory walk, no database). Files are opened with
``O_NOFOLLOW``; every fsync goes through :mod:`runstore.durable`. Bytes are read in
:data:`CHUNK` reads, never a whole large file at once; a file's bytes, whatever its size,
may be kept (``keep``) when the caller needs them again, so that it is never read twice
(the caller bounds what it keeps: SPEC.md 12.4's 64 MiB for late files). A file is read
up to the size ``fstat`` gave on the open descriptor and no further: the ``fstat`` after
the read compares the whole stamp (inode, size, mode, mtime), so a file that grew, shrank
or was rewritten while read is refused without a read to end of file.

Errors: a file that cannot be opened or read, is not the regular file of the scanned size
and execute bit (or of ``expected``'s stamp), or changes while read is
``artifact_corrupt``; a failed create, write or fsync is ``durability_failed``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import queue
import stat
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from runstore import durable
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.store.publication.inventory import InventoryFile
from runstore.store.publication.inventory import Stamp
from runstore.tree_hash import TreeHasher

CHUNK: Final = 1 << 20
"""Read size: 1 MiB."""

OVERLAP_MIN: Final = 4 * CHUNK
"""Files at least this large feed their own digest on a second thread while the tree hash
runs on this one (hashlib releases the GIL for large updates), so the two SHA-256 passes
the formats need overlap on two cores instead of adding up."""

LANE_DEPTH: Final = 32
"""Descriptors a :class:`SyncLane` holds at most (read, waiting for their fsync)."""

_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def fsync_fd(fd: int, label: str) -> None:
    """fsync ``fd`` through the seam; ``durability_failed`` on failure."""
    try:
        durable.fsync_fd(fd, label)
    except OSError as error:
        raise DurabilityError(f"fsync of {label} failed: {error.strerror}") from None


def fsync_dir(path: str) -> None:
    """fsync the directory ``path`` through the seam; ``durability_failed`` on failure."""
    try:
        durable.fsync_dir(path)
    except OSError as error:
        raise DurabilityError(f"fsync of directory {path} failed: {error.strerror}") from None


def write_new(path: str, data: bytes) -> Stamp:
    """Create ``path`` (never replacing anything), write ``data`` fully, fsync it. Returns
    the stamp of the file as written (the rescan compares it like a read file's)."""
    try:
        fd = os.open(path, _CREATE_FLAGS, 0o644)
    except FileExistsError:
        raise ArtifactCorruptError(f"{path} appeared while the object was completed") from None
    except OSError as error:
        raise DurabilityError(f"creating {path} failed: {error.strerror}") from None
    try:
        view = memoryview(data)
        while view:
            try:
                written = os.write(fd, view)
            except OSError as error:
                raise DurabilityError(f"writing {path} failed: {error.strerror}") from None
            view = view[written:]
        fsync_fd(fd, path)
        status = os.fstat(fd)
    finally:
        os.close(fd)
    return (status.st_ino, status.st_size, status.st_mode, status.st_mtime_ns)


def read_file(
    absolute: str,
    file: InventoryFile,
    *,
    sync: bool,
    tree: TreeHasher | None = None,
    expected: Stamp | None = None,
    keep: bool = False,
    lane: SyncLane | None = None,
) -> tuple[str, Stamp, bytes | None]:
    """Read ``file`` (at ``absolute``) once, feeding ``tree`` when given; check it is the
    regular file of the inventory's size and execute bit (and ``expected``, when given)
    before, and unchanged after; fsync the same descriptor when ``sync`` (here, or by
    ``lane`` when given, which then owns and closes the descriptor). Returns its SHA-256,
    the stamp it was read under, and its bytes when ``keep`` (else None)."""
    try:
        fd = os.open(absolute, _READ_FLAGS)
    except OSError as error:
        reason = "became a symbolic link" if error.errno == errno.ELOOP else error.strerror
        raise ArtifactCorruptError(f"{file.path!r:.120} cannot be read: {reason}") from None
    try:
        before = os.fstat(fd)
        size = file.size
        mode = before.st_mode
        if not stat.S_ISREG(mode) or before.st_size != size:
            raise ArtifactCorruptError(f"{file.path!r:.120} is not the file of size {size}")
        read_as = (before.st_ino, size, mode, before.st_mtime_ns)
        if bool(mode & 0o111) != file.executable or (expected and read_as != expected):
            raise ArtifactCorruptError(f"{file.path!r:.120} changed after it was scanned")
        if size <= CHUNK:
            data = _read_exactly(fd, file.path, size)
            digest = hashlib.sha256(data)
            if tree is not None:
                tree.update(data)
            kept = data if keep else None
        else:
            chunks: list[bytes] | None = [] if keep else None
            digest = _read_chunks(fd, file.path, size, tree, chunks)
            kept = None if chunks is None else b"".join(chunks)
        after = os.fstat(fd)
        if (after.st_ino, after.st_size, after.st_mode, after.st_mtime_ns) != read_as:
            raise ArtifactCorruptError(f"{file.path!r:.120} changed while it was read")
        if sync and lane is not None:
            lane.submit(fd, absolute)
            fd = -1
        elif sync:
            fsync_fd(fd, absolute)
    finally:
        if fd >= 0:
            os.close(fd)
    return digest.hexdigest(), read_as, kept


def _read_exactly(fd: int, path: str, size: int) -> bytes:
    """``size`` bytes from ``fd`` (at most one :data:`CHUNK`); a file that ends sooner
    changed while it was read."""
    data = _read(fd, path, size) if size else b""
    while len(data) < size:
        more = _read(fd, path, size - len(data))
        if not more:
            raise ArtifactCorruptError(f"{path!r:.120} changed while it was read")
        data += more
    return data


def _read_chunks(
    fd: int, path: str, size: int, tree: TreeHasher | None, kept: list[bytes] | None
) -> hashlib._Hash:
    """Read ``size`` bytes in :data:`CHUNK` reads into a new SHA-256 (on a helper thread
    when ``tree`` is fed too and the file is large), ``tree``, and ``kept`` when given."""
    digest = hashlib.sha256()
    remaining = size
    with _DigestLane(active=tree is not None and size >= OVERLAP_MIN) as lane:
        while remaining:
            chunk = _read(fd, path, min(CHUNK, remaining))
            if not chunk:
                raise ArtifactCorruptError(f"{path!r:.120} changed while it was read")
            remaining -= len(chunk)
            lane.update(digest.update, chunk)
            if tree is not None:
                tree.update(chunk)
            if kept is not None:
                kept.append(chunk)
    return digest


def _read(fd: int, path: str, count: int) -> bytes:
    try:
        return os.read(fd, count)
    except OSError as error:
        raise ArtifactCorruptError(f"{path!r:.120} cannot be read: {error.strerror}") from None


def read_whole(absolute: str, path: str, *, sync: bool) -> bytes:
    """Read a file whole in :data:`CHUNK` reads, to its end (for ``manifest.json``, which
    is parsed as one document, so it is held in memory anyway), fsyncing the same
    descriptor when ``sync``."""
    chunks: list[bytes] = []
    try:
        fd = os.open(absolute, _READ_FLAGS)
    except OSError as error:
        raise ArtifactCorruptError(f"{path} cannot be read: {error.strerror}") from None
    try:
        while chunk := _read(fd, path, CHUNK):
            chunks.append(chunk)
        if sync:
            fsync_fd(fd, absolute)
    finally:
        os.close(fd)
    return b"".join(chunks)


class _DigestLane:
    """Feeds a file's digest chunk by chunk, on one helper thread when ``active`` (at most
    one chunk in flight, so memory stays two chunks) and inline otherwise. The digest only
    ever sees its chunks in order: each update waits for the previous one."""

    def __init__(self, *, active: bool) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1) if active else None
        self._pending: Future[None] | None = None

    def update(self, feed: Callable[[bytes], None], chunk: bytes) -> None:
        if self._pool is None:
            feed(chunk)
            return
        self._wait()
        self._pending = self._pool.submit(feed, chunk)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __enter__(self) -> _DigestLane:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


class SyncLane:
    """fsyncs and closes descriptors on one helper thread, in the order they are given,
        so that a file's fsync (mostly waiting for the device) overlaps reading and hashing
        the next files. The seam sees the same operations in the same order as a sequential
        pass: only this thread calls it until :meth:`finish`, and the submitting thread makes
        no durability call in between.

        After the first failure it syncs nothing more (the remaining descriptors are closed
        unsynced) and the error (``durability_failed``) is raised by the next :meth:`submit`
        and by :meth:`finish`. :meth:`finish` must be called on every path (it is the
        context manager's exit): it waits until every submitted descriptor is synced and
        closed, so nothing of the lane outlives the pass, whether it succeeded or not; a failure
    of the lane wins over an error of the submitting thread, as it would have come first in a
    sequential pass. At most
        :data:`LANE_DEPTH` descriptors wait at once (``submit`` blocks beyond that)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[int, str] | None] = queue.Queue(maxsize=LANE_DEPTH)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run, name="runstore-fsync-lane", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fd, label = item
            try:
                if self._error is None:
                    fsync_fd(fd, label)
            except BaseException as error:  # re-raised in the submitting thread
                self._error = error
            finally:
                try:
                    os.close(fd)
                except OSError as error:  # as from a sequential pass's close; never hang
                    self._error = self._error or error

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def submit(self, fd: int, label: str) -> None:
        """Queue ``fd`` to be synced as ``label``, then closed: the lane owns it once this
        returns. Raises the lane's failure instead (the caller still owns ``fd`` then)."""
        self._raise()
        if self._thread is None:
            raise RuntimeError("the lane is finished")
        self._queue.put((fd, label))

    def finish(self) -> None:
        """Wait until every queued descriptor is synced (or, after a failure, closed);
        raise the first failure. Idempotent."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
        self._raise()

    def __enter__(self) -> SyncLane:
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Every descriptor submitted precedes, in the pass's order, whatever the submitting
        # thread failed on, so a failure of the lane is the first failure of a sequential
        # pass: it wins over an error already propagating.
        self.finish()
