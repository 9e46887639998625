"""Completing and verifying an object directory: the filesystem content pipeline of
publication (SPEC.md section 12.4, "Completing and verifying an object").

Rules of this file: the filesystem work between a populated stage and a rename. Walks never
follow links (``os.scandir``/``os.lstat``; files are opened with ``O_NOFOLLOW``), every
fsync goes through :mod:`runstore.durable`, and no database is touched. Bytes are read in
1 MiB chunks, never a whole file at once. Formats come from :mod:`runstore.manifest` and
:mod:`runstore.tree_hash`.

Errors: an entry the publisher refuses (symbolic link, FIFO, socket, device, empty
directory, unsafe or non-UTF-8 name, a caller-written runtime name) is ``unsafe_entry``;
content that is not what it must be (a size that differs from the scan, a file changing
while read, an inventory that changed before the manifest was written, any failure to read
it back, any defect :func:`verify` finds) is ``artifact_corrupt``; a failed write or fsync
is ``durability_failed`` and nothing after it is done. :func:`verify` reports unsafe entries
as ``artifact_corrupt`` too: in a completed object they are corruption.

Reading each byte once where possible: the manifest needs each file's SHA-256, and the
tree transcript needs the same bytes in path order with the manifest's own bytes at the
position of ``manifest.json``. :func:`complete` therefore streams every file whose path
sorts before ``manifest.json`` once, feeding both its file digest and the tree transcript.
A file sorting after ``manifest.json`` is read twice: first for its digest (the manifest
must exist before the transcript can pass its position), then, once the manifest is
written, for the transcript; the second read's digest must equal the first.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import attrs
from runstore import durable
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.enums import ArtifactKind
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import UnsafeEntryError
from runstore.manifest import MANIFEST_NAME
from runstore.manifest import ManifestFile
from runstore.manifest import check_entry_name
from runstore.manifest import manifest_bytes
from runstore.manifest import manifest_sha256
from runstore.manifest import parse_manifest
from runstore.manifest import path_order
from runstore.records import ArtifactRegistration
from runstore.store.publication.inventory import Inventory
from runstore.store.publication.inventory import InventoryFile
from runstore.store.publication.inventory import Stamp
from runstore.store.publication.inventory import is_executable
from runstore.store.publication.inventory import scan
from runstore.store.publication.inventory import stamp
from runstore.store.publication.inventory import walk
from runstore.tree_hash import TreeHasher
from runstore.validation import check_digest

CHUNK: Final = 1 << 20
"""Read size: 1 MiB."""

__all__ = ["CompletedObject", "Inventory", "InventoryFile", "complete", "scan", "verify"]

_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MANIFEST_KEY: Final = path_order(MANIFEST_NAME)


@attrs.frozen(kw_only=True)
class CompletedObject:
    """A completed object directory: its tree hash (the content digest), the manifest's
    digest and exact bytes, and the files the manifest lists."""

    tree_sha256: str
    manifest_sha256: str
    manifest: bytes
    files: tuple[ManifestFile, ...]


# --- durability and reading -----------------------------------------------------------------


def _fsync_fd(fd: int, label: str) -> None:
    try:
        durable.fsync_fd(fd, label)
    except OSError as error:
        raise DurabilityError(f"fsync of {label} failed: {error.strerror}") from None


def _fsync_dir(path: str) -> None:
    try:
        durable.fsync_dir(path)
    except OSError as error:
        raise DurabilityError(f"fsync of directory {path} failed: {error.strerror}") from None


def _write_new(path: str, data: bytes) -> None:
    """Create ``path`` (never replacing anything), write ``data`` fully, fsync it."""
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
        _fsync_fd(fd, path)
    finally:
        os.close(fd)


def _stream(
    object_dir: str,
    file: InventoryFile,
    *,
    sync: bool,
    tree: TreeHasher | None = None,
    expected: Stamp | None = None,
) -> tuple[str, Stamp]:
    """Read ``file`` once in chunks, feeding ``tree`` when given; check it is the regular
    file of the inventory's size (and ``expected``, when given) before and after; fsync the
    same descriptor when ``sync``. Returns its SHA-256 and the stamp it was read under."""
    absolute = os.path.join(object_dir, file.path)
    try:
        fd = os.open(absolute, _READ_FLAGS)
    except OSError as error:
        reason = "became a symbolic link" if error.errno == errno.ELOOP else error.strerror
        raise ArtifactCorruptError(f"{file.path!r:.120} cannot be read: {reason}") from None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or before.st_size != file.size:
            raise ArtifactCorruptError(f"{file.path!r:.120} is not the file of size {file.size}")
        if is_executable(before.st_mode) != file.executable or (
            expected and stamp(before) != expected
        ):
            raise ArtifactCorruptError(f"{file.path!r:.120} changed after it was scanned")
        digest = hashlib.sha256()
        total = 0
        with _DigestLane(active=tree is not None and file.size >= OVERLAP_MIN) as lane:
            while chunk := _read(fd, file.path):
                total += len(chunk)
                if total > file.size:
                    raise ArtifactCorruptError(f"{file.path!r:.120} grew while it was read")
                lane.update(digest.update, chunk)
                if tree is not None:
                    tree.update(chunk)
        if total != file.size or stamp(os.fstat(fd)) != stamp(before):
            raise ArtifactCorruptError(f"{file.path!r:.120} changed while it was read")
        if sync:
            _fsync_fd(fd, absolute)
    finally:
        os.close(fd)
    return digest.hexdigest(), stamp(before)


OVERLAP_MIN: Final = 4 * CHUNK
"""Files at least this large feed their own digest on a second thread while the tree hash
runs on this one (hashlib releases the GIL for large updates), so the two SHA-256 passes
the formats need overlap on two cores instead of adding up."""


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


def _read(fd: int, path: str) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError as error:
        raise ArtifactCorruptError(f"{path!r:.120} cannot be read: {error.strerror}") from None


def _entries(inventory: Inventory) -> Iterator[tuple[bytes, str, InventoryFile | None]]:
    """Directories and files merged in transcript order: ``(key, path, file or None)``."""
    merged: list[tuple[bytes, str, InventoryFile | None]] = [
        (path_order(path), path, None) for path in inventory.directories
    ]
    merged += [(path_order(file.path), file.path, file) for file in inventory.files]
    merged.sort(key=lambda item: item[0])
    return iter(merged)


def _sync_directories(object_dir: str, directories: tuple[str, ...]) -> None:
    """fsync every directory below the root, deepest first (bottom-up)."""
    for path in sorted(directories, key=lambda p: (-p.count("/"), path_order(p))):
        _fsync_dir(os.path.join(object_dir, path))


# --- completing -----------------------------------------------------------------------------


def complete(
    object_dir: str, inventory: Inventory, runtime_files: Mapping[str, bytes]
) -> CompletedObject:
    """Complete a scanned, relinquished stage: write the ``runtime_files`` at the root,
    hash and fsync every file, fsync every directory bottom-up, re-scan, write
    ``manifest.json`` last and fsync it, fsync the root; return the digests.

    ``inventory`` is the :func:`scan` of ``object_dir`` (with the runtime names reserved).
    Refuses with ``unsafe_entry``: a runtime file named ``manifest.json``, not a safe
    root-level name, or already in the inventory; with ``artifact_corrupt``: a file whose
    size or kind differs from the scan or that changes while read, and an inventory that
    differs when re-scanned before the manifest is written (a new unsafe entry found then is
    ``unsafe_entry``); with ``out_of_range``: a file over 2**53-1 bytes; with
    ``durability_failed``: a failed write or fsync.
    """
    for scanned in inventory.files:
        if scanned.size > MAX_SAFE_INTEGER:  # refused before any byte is read or written
            raise OutOfRangeError(f"{scanned.path!r:.120} is over 2**53-1 bytes: not listable")
    taken = set(inventory.directories) | {scanned.path for scanned in inventory.files}
    for name in runtime_files:
        check_entry_name(name)
        if "/" in name or name == MANIFEST_NAME or name in taken:
            raise UnsafeEntryError(f"runtime file {name!r:.120} is not a free root-level name")
    for name in sorted(runtime_files, key=path_order):
        _write_new(os.path.join(object_dir, name), runtime_files[name])
    runtime = [
        InventoryFile(path=name, size=len(data), executable=False)
        for name, data in runtime_files.items()
    ]
    expected = Inventory(
        directories=inventory.directories,
        files=tuple(sorted([*inventory.files, *runtime], key=lambda f: path_order(f.path))),
    )
    tree = TreeHasher(len(expected.directories) + len(expected.files) + 1)
    digests: dict[str, str] = {}
    read_as: dict[str, Stamp] = {}
    late: list[tuple[str, InventoryFile | None]] = []
    for key, path, file in _entries(expected):
        if key > _MANIFEST_KEY:
            late.append((path, file))
            if file is not None:
                synced = path not in runtime_files  # written and synced just above
                digests[path], read_as[path] = _stream(object_dir, file, sync=synced)
        elif file is None:
            tree.directory(path)
        else:
            tree.file(path, file.executable, file.size)
            synced = path not in runtime_files
            digests[path], read_as[path] = _stream(object_dir, file, sync=synced, tree=tree)
    _sync_directories(object_dir, expected.directories)

    # The callback must have relinquished its writers; a change now would make the manifest
    # describe bytes that are no longer there.
    rescanned, stamps = walk(object_dir, {MANIFEST_NAME})
    if rescanned != expected:
        difference = first_difference(expected, rescanned)
        raise ArtifactCorruptError(f"inventory changed before the manifest: {difference}")
    for path, seen in stamps.items():
        if read_as[path] != seen:
            raise ArtifactCorruptError(f"{path!r:.120} changed after it was read")
    listed = [
        ManifestFile(path=file.path, sha256=digests[file.path], size_bytes=file.size)
        for file in expected.files
    ]
    manifest = manifest_bytes(listed)
    _write_new(os.path.join(object_dir, MANIFEST_NAME), manifest)
    tree.file(MANIFEST_NAME, False, len(manifest))
    tree.update(manifest)
    for path, file in late:
        if file is None:
            tree.directory(path)
            continue
        tree.file(path, file.executable, file.size)
        again, _ = _stream(object_dir, file, sync=False, tree=tree, expected=stamps[path])
        if again != digests[path]:
            raise ArtifactCorruptError(f"{path!r:.120} changed between its two reads")
    _fsync_dir(object_dir)
    return CompletedObject(
        tree_sha256=tree.hexdigest(),
        manifest_sha256=manifest_sha256(manifest),
        manifest=manifest,
        files=tuple(listed),
    )


def first_difference(expected: Inventory, found: Inventory) -> str:
    """The first difference between two inventories, in path order, as a phrase."""
    want = {path: "directory" for path in expected.directories}
    want.update({f.path: f"file of {f.size} bytes, exec={f.executable}" for f in expected.files})
    have = {path: "directory" for path in found.directories}
    have.update({f.path: f"file of {f.size} bytes, exec={f.executable}" for f in found.files})
    for path in sorted(want.keys() | have.keys(), key=path_order):
        if path not in have:
            return f"{path!r:.120} is missing"
        if path not in want:
            return f"{path!r:.120} is an extra entry"
        if want[path] != have[path]:
            return f"{path!r:.120} is a {have[path]}, not a {want[path]}"
    return "no difference"


# --- verifying ------------------------------------------------------------------------------


def verify(object_dir: str, *, sync: bool) -> CompletedObject:
    """Verify a completed object directory by reading every byte; fsync every file and
    directory (root last) when ``sync``. Returns the tree hash it computed.

    Refuses with ``artifact_corrupt`` naming the first difference: no readable
    ``manifest.json`` or one that does not parse, an unsafe entry (link, special file, empty
    directory, unsafe name), an entry the manifest does not account for or a listed file
    that is missing, a size or SHA-256 that differs, a file changing while read. A failed
    fsync is ``durability_failed``.
    """
    try:
        found, stamps = walk(object_dir, ())
    except UnsafeEntryError as error:
        raise ArtifactCorruptError(error.message) from None
    manifest_file = next((f for f in found.files if f.path == MANIFEST_NAME), None)
    if manifest_file is None:
        raise ArtifactCorruptError("manifest.json is missing")
    manifest = _read_manifest(object_dir, manifest_file, sync=sync)
    files = parse_manifest(manifest)
    by_path = {file.path: file for file in files}
    executable = {f.path: f.executable for f in found.files}
    listed = [
        InventoryFile(path=f.path, size=f.size_bytes, executable=executable.get(f.path, False))
        for f in files
    ]
    expected = Inventory(
        directories=tuple(sorted(_parents(by_path), key=path_order)),
        files=tuple(sorted([*listed, manifest_file], key=lambda f: path_order(f.path))),
    )
    if found != expected:
        raise ArtifactCorruptError(
            f"object does not match its manifest: {first_difference(expected, found)}"
        )
    tree = TreeHasher(len(found.directories) + len(found.files))
    for _, path, file in _entries(found):
        if file is None:
            tree.directory(path)
        elif path == MANIFEST_NAME:
            tree.file(path, file.executable, len(manifest))
            tree.update(manifest)
        else:
            tree.file(path, file.executable, file.size)
            digest, _ = _stream(object_dir, file, sync=sync, tree=tree, expected=stamps[path])
            if digest != by_path[path].sha256:
                raise ArtifactCorruptError(f"{path!r:.120} does not match its manifest digest")
    if sync:
        _sync_directories(object_dir, found.directories)
        _fsync_dir(object_dir)
    return CompletedObject(
        tree_sha256=tree.hexdigest(),
        manifest_sha256=manifest_sha256(manifest),
        manifest=manifest,
        files=files,
    )


def _read_manifest(object_dir: str, file: InventoryFile, *, sync: bool) -> bytes:
    """Read ``manifest.json`` whole (it is parsed as one document, so it is held in memory
    anyway), fsyncing the same descriptor when ``sync``."""
    chunks: list[bytes] = []
    absolute = os.path.join(object_dir, file.path)
    try:
        fd = os.open(absolute, _READ_FLAGS)
    except OSError as error:
        raise ArtifactCorruptError(f"manifest.json cannot be read: {error.strerror}") from None
    try:
        while chunk := _read(fd, file.path):
            chunks.append(chunk)
        if sync:
            _fsync_fd(fd, absolute)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) != file.size:
        raise ArtifactCorruptError("manifest.json changed while it was read")
    return data


def _parents(files: Mapping[str, ManifestFile]) -> set[str]:
    parents: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parents.add("/".join(parts[:depth]))
    return parents


# --- addressing -----------------------------------------------------------------------------


def address(kind: ArtifactKind | str, tree_sha256: str) -> tuple[str, str]:
    """``(artifact_id, store_path)`` of a completed object: ``run-store-v1:<kind>-<tree>``
    and ``artifacts/<kind>-<tree>``, derived by :class:`~runstore.records.ArtifactRegistration`
    (the content digest is the tree hash). Refuses an unknown kind or malformed digest with
    ``invalid_record``."""
    registration = _registration(kind, tree_sha256, tree_sha256, 0)
    return registration.id, registration.path


def registration(
    kind: ArtifactKind | str, completed: CompletedObject, verified_at_ns: int
) -> ArtifactRegistration:
    """The registration of a verified completed object of ``kind``."""
    return _registration(kind, completed.tree_sha256, completed.manifest_sha256, verified_at_ns)


def _registration(
    kind: ArtifactKind | str, content: str, manifest: str, verified_at_ns: int
) -> ArtifactRegistration:
    try:
        member = ArtifactKind(kind)
    except ValueError:
        raise InvalidRecordError(f"artifact kind {kind!r:.40} is unknown") from None
    check_digest(content, "tree_sha256")
    return ArtifactRegistration(
        kind=member,
        path=f"artifacts/{member.value}-{content}",
        content_sha256=content,
        manifest_sha256=manifest,
        verified_at_ns=verified_at_ns,
    )
