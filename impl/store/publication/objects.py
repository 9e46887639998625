"""Completing and verifying an object directory: the filesystem content pipeline of
publication (SPEC.md section 12.4, "Completing and verifying an object").

Rules of this file: the filesystem work between a populated stage and a rename. Walks never
follow links (:mod:`runstore.store.publication.inventory`); each file is opened, read,
checked and synced in one pass by :mod:`runstore.store.publication.file_pass`, every fsync
goes through :mod:`runstore.durable`, and no database is touched. Formats come from
:mod:`runstore.manifest` and :mod:`runstore.tree_hash`.

Errors: an entry the publisher refuses (symbolic link, FIFO, socket, device, empty
directory, unsafe or non-UTF-8 name, a caller-written runtime name) is ``unsafe_entry``;
content that is not what it must be (a size that differs from the scan, a file changing
while read, an inventory that changed before the manifest was written, any failure to read
it back, any defect :func:`verify` finds) is ``artifact_corrupt``; a failed write or fsync
is ``durability_failed`` and nothing after it is done. :func:`verify` reports unsafe entries
as ``artifact_corrupt`` too: in a completed object they are corruption.

Reading each byte once: the manifest needs each file's SHA-256, and the tree transcript
needs the same bytes in path order with the manifest's own bytes at the position of
``manifest.json``. :func:`complete` therefore reads every payload file once, in transcript
order, feeding its file digest and, for a path sorting before ``manifest.json``, the
transcript. A file sorting after ``manifest.json`` cannot reach the transcript until the
manifest exists: its bytes are kept from that one read (up to :data:`LATE_KEEP_BYTES` in
all) and fed after the manifest is written; only a file beyond that budget is read a second
time, and that read's digest must equal the first. Runtime files are hashed from the bytes
written, never read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Final

import attrs
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.enums import ArtifactKind
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import UnsafeEntryError
from runstore.manifest import MANIFEST_NAME
from runstore.manifest import ManifestFile
from runstore.manifest import built_manifest_bytes
from runstore.manifest import check_entry_name
from runstore.manifest import manifest_sha256
from runstore.manifest import parse_manifest
from runstore.manifest import path_order
from runstore.records import ArtifactRegistration
from runstore.store.publication.file_pass import CHUNK
from runstore.store.publication.file_pass import OVERLAP_MIN
from runstore.store.publication.file_pass import SyncLane
from runstore.store.publication.file_pass import fsync_dir
from runstore.store.publication.file_pass import read_file
from runstore.store.publication.file_pass import read_whole
from runstore.store.publication.file_pass import write_new
from runstore.store.publication.inventory import Inventory
from runstore.store.publication.inventory import InventoryFile
from runstore.store.publication.inventory import Stamp
from runstore.store.publication.inventory import first_difference
from runstore.store.publication.inventory import listing
from runstore.store.publication.inventory import scan
from runstore.store.publication.inventory import walk
from runstore.tree_hash import TreeHasher
from runstore.validation import check_digest

__all__ = [
    "CHUNK",
    "OVERLAP_MIN",
    "CompletedObject",
    "Inventory",
    "InventoryFile",
    "complete",
    "first_difference",
    "scan",
    "verify",
]

LANE_MIN_FILES: Final = 16
"""Payloads of at least this many files are synced through a
:class:`~runstore.store.publication.file_pass.SyncLane` (each fsync overlapping the reading
of the next files); smaller ones, where there is nothing to overlap, file by file."""

LATE_KEEP_BYTES: Final = 64 * CHUNK
"""Bytes of files sorting after ``manifest.json`` that :func:`complete` keeps in memory
from their one read (64 MiB in all); a late file beyond this budget is read twice."""

_MANIFEST_KEY: Final = path_order(MANIFEST_NAME)


@attrs.frozen(kw_only=True)
class CompletedObject:
    """A completed object directory: its tree hash (the content digest), the manifest's
    digest and exact bytes, and the files the manifest lists."""

    tree_sha256: str
    manifest_sha256: str
    manifest: bytes
    files: tuple[ManifestFile, ...]


# --- ordering -------------------------------------------------------------------------------


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
        fsync_dir(f"{object_dir}/{path}")


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
    size or kind differs from the scan or that changes while read, an inventory that
    differs when re-scanned before the manifest is written (a new unsafe entry found then is
    ``unsafe_entry``), and a file sorting after ``manifest.json`` that changed by the time
    the manifest was written; with ``out_of_range``: a file over 2**53-1 bytes; with
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
    read_as: dict[str, Stamp] = {}
    for name in sorted(runtime_files, key=path_order):  # written and synced here, once
        read_as[name] = write_new(f"{object_dir}/{name}", runtime_files[name])
    runtime = [
        InventoryFile(path=name, size=len(data), executable=False)
        for name, data in runtime_files.items()
    ]
    expected = Inventory(
        directories=inventory.directories,
        files=tuple(sorted([*inventory.files, *runtime], key=lambda f: path_order(f.path))),
    )
    tree = TreeHasher(len(expected.directories) + len(expected.files) + 1)
    digests, late = _first_pass(object_dir, expected, runtime_files, read_as, tree)
    _sync_directories(object_dir, expected.directories)

    # The callback must have relinquished its writers; a change now would make the manifest
    # describe bytes that are no longer there.
    known = {*expected.directories, *read_as}
    directories, stamps = listing(object_dir, {MANIFEST_NAME}, known)
    if stamps != read_as or set(directories) != set(expected.directories):
        _refuse_rescan(object_dir, expected, read_as)
    listed = [
        ManifestFile(path=file.path, sha256=digests[file.path], size_bytes=file.size)
        for file in expected.files
    ]
    manifest = built_manifest_bytes(listed)
    write_new(f"{object_dir}/{MANIFEST_NAME}", manifest)
    tree.file(MANIFEST_NAME, False, len(manifest))
    tree.update(manifest)
    _feed_late(object_dir, tree, late, digests, stamps)
    fsync_dir(object_dir)
    return CompletedObject(
        tree_sha256=tree.hexdigest(),
        manifest_sha256=manifest_sha256(manifest),
        manifest=manifest,
        files=tuple(listed),
    )


Late = list[tuple[str, InventoryFile | None, bytes | None]]
"""Entries sorting after ``manifest.json``: (path, file or None for a directory, the
file's bytes when kept from its one read or a runtime file's, else None)."""


def _first_pass(
    object_dir: str,
    expected: Inventory,
    runtime_files: Mapping[str, bytes],
    read_as: dict[str, Stamp],
    tree: TreeHasher,
) -> tuple[dict[str, str], Late]:
    """Every entry in transcript order, up to the manifest's position in ``tree``: each
    payload file read, hashed and synced once (its stamp added to ``read_as``), each
    runtime file hashed from its bytes. Returns the digests and the late entries. Every
    fsync has returned when this returns (a lane is drained on every path)."""
    digests: dict[str, str] = {}
    late: Late = []
    keep_budget = LATE_KEEP_BYTES
    lane = SyncLane() if len(expected.files) - len(runtime_files) >= LANE_MIN_FILES else None
    with lane if lane is not None else contextlib.nullcontext():
        for key, path, file in _entries(expected):
            is_late = key > _MANIFEST_KEY
            if file is None:
                if is_late:
                    late.append((path, None, None))
                else:
                    tree.directory(path)
                continue
            if not is_late:
                tree.file(path, file.executable, file.size)
            data = runtime_files.get(path)
            if data is not None:  # a runtime file: written and synced, hashed from memory
                digests[path] = hashlib.sha256(data).hexdigest()
                if not is_late:
                    tree.update(data)
            else:
                keep = is_late and file.size <= keep_budget
                digests[path], read_as[path], data = read_file(
                    f"{object_dir}/{path}",
                    file,
                    sync=True,
                    tree=None if is_late else tree,
                    keep=keep,
                    lane=lane,
                )
                if keep:
                    keep_budget -= file.size
            if is_late:
                late.append((path, file, data))
    return digests, late


def _refuse_rescan(object_dir: str, expected: Inventory, read_as: Mapping[str, Stamp]) -> None:
    """The rescan found a difference: name it (``artifact_corrupt``; a new unsafe entry is
    ``unsafe_entry`` from the walk)."""
    rescanned, stamps = walk(object_dir, {MANIFEST_NAME})
    if rescanned != expected:
        difference = first_difference(expected, rescanned)
        raise ArtifactCorruptError(f"inventory changed before the manifest: {difference}")
    for path, seen in stamps.items():
        if read_as[path] != seen:
            raise ArtifactCorruptError(f"{path!r:.120} changed after it was read")
    raise ArtifactCorruptError("inventory changed before the manifest")


def _feed_late(
    object_dir: str,
    tree: TreeHasher,
    late: Late,
    digests: Mapping[str, str],
    stamps: Mapping[str, Stamp],
) -> None:
    """Feed the entries sorting after ``manifest.json`` to the transcript, once the
    manifest is in it: kept bytes as they were read (the file must still have the stamp
    it was read under), the rest read a second time (its digest must not change)."""
    for path, file, data in late:
        if file is None:
            tree.directory(path)
            continue
        tree.file(path, file.executable, file.size)
        if data is not None:
            tree.update(data)
            if path in stamps and _lstamp(object_dir, path) != stamps[path]:
                raise ArtifactCorruptError(f"{path!r:.120} changed after it was read")
            continue
        again, _, _ = read_file(
            f"{object_dir}/{path}", file, sync=False, tree=tree, expected=stamps[path]
        )
        if again != digests[path]:
            raise ArtifactCorruptError(f"{path!r:.120} changed between its two reads")


def _lstamp(object_dir: str, path: str) -> Stamp | None:
    try:
        status = os.lstat(f"{object_dir}/{path}")
    except OSError:
        return None
    return (status.st_ino, status.st_size, status.st_mode, status.st_mtime_ns)


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
            digest, _, _ = read_file(
                f"{object_dir}/{path}", file, sync=sync, tree=tree, expected=stamps[path]
            )
            if digest != by_path[path].sha256:
                raise ArtifactCorruptError(f"{path!r:.120} does not match its manifest digest")
    if sync:
        _sync_directories(object_dir, found.directories)
        fsync_dir(object_dir)
    return CompletedObject(
        tree_sha256=tree.hexdigest(),
        manifest_sha256=manifest_sha256(manifest),
        manifest=manifest,
        files=files,
    )


def _read_manifest(object_dir: str, file: InventoryFile, *, sync: bool) -> bytes:
    """Read ``manifest.json`` whole, fsyncing the same descriptor when ``sync``."""
    data = read_whole(f"{object_dir}/{file.path}", MANIFEST_NAME, sync=sync)
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
