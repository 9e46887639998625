"""Photographs of a store root for the power-loss method: every directory, regular file
and symbolic link, by inode (:func:`photograph`); or, for a run that makes directories
beside its root, the root's parent as far as the run reaches it
(:func:`photograph_parent`).

Rules of this file: reading only, in the sweep's parent (which holds no connection): the
database files are photographed without their bytes (:func:`database_files` reads those,
at the points SQLite's guarantee names); anything but a directory, a regular file or a
symbolic link is refused. Paths are relative to what is photographed ("" is its top).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from typing import Final

import attrs
from runstore.crashsim.exporting import EXPORT_SUFFIX
from runstore.store.store_root import DATABASE_NAME
from runstore.store.store_root import SIDECAR_NAMES

DATABASE_FILES: Final = (DATABASE_NAME, *SIDECAR_NAMES)
ROOT_PREFIX: Final = "$ROOT"
PARENT_PREFIX: Final = "$PARENT"
STORE: Final = "store"
"""The store root's name in a photograph of its parent (:func:`photograph_parent`)."""


@attrs.frozen
class Node:
    """One entry of a photograph: inode number, kind ("d", "f" or "l"), mode bits, bytes
    (a symbolic link's: its target)."""

    ino: int
    kind: str
    mode: int
    data: bytes = b""


Photo = dict[str, Node]
"""A store root read whole: relative path ("" for the root) to its node. The database
files are in it with no bytes: their bytes are read by :func:`database_files`."""


def photograph(root: str) -> Photo:
    """Read ``root`` whole (every directory, regular file and symbolic link, by inode; the
    database files without their bytes). Anything else is refused."""
    info = os.lstat(root)
    photo: Photo = {"": Node(info.st_ino, "d", stat.S_IMODE(info.st_mode))}
    _walk_into(photo, root, "", DATABASE_FILES)
    return photo


def photograph_parent(root: str) -> Photo:
    """Read the parent of the store ``root`` as far as the store's run reaches it: the
    parent itself (``""``), the root as :data:`STORE` when it exists, and ``<root>.export``
    as :data:`STORE_EXPORT` when it exists, each whole (see :func:`photograph`)."""
    parent = os.path.dirname(root)
    info = os.lstat(parent)
    photo: Photo = {"": Node(info.st_ino, "d", stat.S_IMODE(info.st_mode))}
    skipped = {f"{STORE}/{name}" for name in DATABASE_FILES}
    for path, name in ((root, STORE), (root + EXPORT_SUFFIX, STORE + EXPORT_SUFFIX)):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            raise RuntimeError(f"{path} is not a directory")
        photo[name] = Node(info.st_ino, "d", stat.S_IMODE(info.st_mode))
        _walk_into(photo, path, name, skipped)
    return photo


def _walk_into(photo: Photo, top: str, prefix: str, skipped: Collection[str]) -> None:
    """Add everything under the directory ``top`` to ``photo`` as ``prefix/...`` (the
    ``skipped`` files without their bytes)."""
    for directory, names, files in os.walk(top):
        for name in sorted(names + files):
            path = os.path.join(directory, name)
            relative = inside(prefix, os.path.relpath(path, top))
            info = os.lstat(path)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                photo[relative] = Node(info.st_ino, "l", mode, os.fsencode(os.readlink(path)))
            elif stat.S_ISDIR(info.st_mode):
                photo[relative] = Node(info.st_ino, "d", mode)
            elif stat.S_ISREG(info.st_mode):
                data = b""
                if relative not in skipped:
                    with open(path, "rb") as handle:
                        data = handle.read()
                photo[relative] = Node(info.st_ino, "f", mode, data)
            else:
                raise RuntimeError(f"the store root holds a special file: {relative}")


def inside(prefix: str, relative: str) -> str:
    """``relative`` under ``prefix`` (either may be "", the top)."""
    return f"{prefix}/{relative}" if prefix and relative else prefix or relative


def database_files(root: str) -> dict[str, bytes]:
    """The bytes of each database file that exists in ``root``."""
    found: dict[str, bytes] = {}
    for name in DATABASE_FILES:
        try:
            with open(os.path.join(root, name), "rb") as handle:
                found[name] = handle.read()
        except FileNotFoundError:
            continue
    return found
