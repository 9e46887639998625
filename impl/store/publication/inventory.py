"""Scanning a populated object directory: its inventory of directories and regular files,
refusing every entry the publisher refuses.

Rules of this file: filesystem reads only (``os.scandir``/``os.lstat``, never following a
link, never opening a file), no writes, no database. Names are checked with
:func:`runstore.manifest.check_entry_name`; the inventory is sorted in manifest order (the
UTF-8 bytes of each path). :mod:`runstore.store.publication.objects` completes and verifies what
this scans.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection

import attrs
from runstore.errors import UnsafeEntryError
from runstore.manifest import check_entry_name
from runstore.manifest import path_order


@attrs.frozen(kw_only=True)
class InventoryFile:
    path: str
    size: int
    executable: bool


@attrs.frozen(kw_only=True)
class Inventory:
    """What a scan found, each tuple sorted by the UTF-8 bytes of the path."""

    directories: tuple[str, ...]
    files: tuple[InventoryFile, ...]


# --- scanning -------------------------------------------------------------------------------


def scan(object_dir: str, *, reserved: Collection[str]) -> Inventory:
    """Walk ``object_dir`` without following links and return its inventory.

    Refuses with ``unsafe_entry`` (naming the relative path): a symbolic link, a FIFO,
    socket or device, an empty directory at any depth (the root itself may be empty), a name
    that is not UTF-8 or breaks the name rules, and a root-level name in ``reserved``.
    ``object_dir`` itself must be a real directory, and every directory listable
    (``unsafe_entry`` otherwise).
    """
    inventory, _ = walk(object_dir, reserved)
    return inventory


Stamp = tuple[int, int, int, int]
"""(inode, size, mode, mtime_ns) of a file, to notice a file replaced or changed."""


def stamp(status: os.stat_result) -> Stamp:
    return (status.st_ino, status.st_size, status.st_mode, status.st_mtime_ns)


def walk(object_dir: str, reserved: Collection[str]) -> tuple[Inventory, dict[str, Stamp]]:
    """The inventory of ``object_dir`` (refusing as :func:`scan` does) and each file's stamp."""
    directories, stamps = listing(object_dir, reserved)
    files = [
        InventoryFile(path=path, size=found[1], executable=is_executable(found[2]))
        for path, found in stamps.items()
    ]
    directories.sort(key=path_order)
    files.sort(key=lambda file: path_order(file.path))
    return Inventory(directories=tuple(directories), files=tuple(files)), stamps


def listing(
    object_dir: str, reserved: Collection[str], known: Collection[str] = ()
) -> tuple[list[str], dict[str, Stamp]]:
    """Walk ``object_dir`` without following links: its directories (unsorted) and the stamp
    of each regular file, refusing as :func:`scan` does. A path in ``known`` was checked
    against the name rules by an earlier walk and is not checked again (a rescan checks
    only what is new). One ``lstat`` per regular file; a directory's type comes from the
    listing itself where the filesystem reports it."""
    try:
        root_status = os.lstat(object_dir)
    except OSError as error:
        raise UnsafeEntryError(f"object directory cannot be read: {error.strerror}") from None
    if not stat.S_ISDIR(root_status.st_mode):
        raise UnsafeEntryError("object directory is not a directory")
    directories: list[str] = []
    stamps: dict[str, Stamp] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        absolute = f"{object_dir}/{relative}" if relative else object_dir
        prefix = f"{relative}/" if relative else ""
        try:
            with os.scandir(absolute) as entries:
                children = list(entries)
        except OSError as error:
            shown = repr(relative or ".")[:120]
            raise UnsafeEntryError(f"{shown} cannot be listed: {error.strerror}") from None
        if relative and not children:
            raise UnsafeEntryError(f"{relative!r:.120} is an empty directory")
        for entry in children:
            path = prefix + entry.name
            if not relative and entry.name in reserved:
                raise UnsafeEntryError(f"{path!r:.120} is a runtime-owned name")
            if path not in known:
                check_entry_name(path)
            try:
                is_directory = entry.is_dir(follow_symlinks=False)
                status = None if is_directory else entry.stat(follow_symlinks=False)
            except OSError as error:
                raise UnsafeEntryError(f"{path!r:.120} cannot be read: {error.strerror}") from None
            if status is None:
                directories.append(path)
                pending.append(path)
                continue
            mode = status.st_mode
            if stat.S_ISREG(mode):
                stamps[path] = (status.st_ino, status.st_size, mode, status.st_mtime_ns)
            elif stat.S_ISLNK(mode):
                raise UnsafeEntryError(f"{path!r:.120} is a symbolic link")
            elif stat.S_ISDIR(mode):  # the listing gave no type; lstat says directory
                directories.append(path)
                pending.append(path)
            else:
                raise UnsafeEntryError(f"{path!r:.120} is a special file")
    return directories, stamps


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


def is_executable(mode: int) -> bool:
    return bool(mode & 0o111)
