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
    try:
        root_status = os.lstat(object_dir)
    except OSError as error:
        raise UnsafeEntryError(f"object directory cannot be read: {error.strerror}") from None
    if not stat.S_ISDIR(root_status.st_mode):
        raise UnsafeEntryError("object directory is not a directory")
    directories: list[str] = []
    files: list[InventoryFile] = []
    stamps: dict[str, Stamp] = {}
    pending = [""]
    while pending:
        relative = pending.pop()
        absolute = os.path.join(object_dir, relative) if relative else object_dir
        try:
            with os.scandir(absolute) as listing:
                children = [(entry.name, entry.stat(follow_symlinks=False)) for entry in listing]
        except OSError as error:
            shown = repr(relative or ".")[:120]
            raise UnsafeEntryError(f"{shown} cannot be listed: {error.strerror}") from None
        if relative and not children:
            raise UnsafeEntryError(f"{relative!r:.120} is an empty directory")
        for name, status in children:
            path = f"{relative}/{name}" if relative else name
            if not relative and name in reserved:
                raise UnsafeEntryError(f"{path!r:.120} is a runtime-owned name")
            check_entry_name(path)
            mode = status.st_mode
            if stat.S_ISDIR(mode):
                directories.append(path)
                pending.append(path)
            elif stat.S_ISREG(mode):
                files.append(
                    InventoryFile(path=path, size=status.st_size, executable=is_executable(mode))
                )
                stamps[path] = stamp(status)
            elif stat.S_ISLNK(mode):
                raise UnsafeEntryError(f"{path!r:.120} is a symbolic link")
            else:
                raise UnsafeEntryError(f"{path!r:.120} is a special file")
    directories.sort(key=path_order)
    files.sort(key=lambda file: path_order(file.path))
    return Inventory(directories=tuple(directories), files=tuple(files)), stamps


def is_executable(mode: int) -> bool:
    return bool(mode & 0o111)
