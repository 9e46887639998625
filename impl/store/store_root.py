"""The store root on disk: the root's path checks, the store files it holds (database,
sidecars, the initialization lock), and who holds their descriptors.

Rules of this file: checks paths with ``lstat`` only (never opening the database or its
sidecars, whose close would drop SQLite's POSIX locks held elsewhere in this process),
holds the initialization lock, and keeps one process-wide descriptor per database file
(per inode) for fsync, opened before the process's first connection to it and closed after
its last.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import Final

import attrs
from runstore import durable
from runstore.errors import DurabilityError
from runstore.errors import UnsafePathError
from runstore.errors import UnsupportedFilesystemError
from runstore.store.lock_file import LockFile
from runstore.store.probes import PROBE_PREFIX

DATABASE_NAME: Final = "run.sqlite3"
SIDECAR_NAMES: Final = ("run.sqlite3-wal", "run.sqlite3-shm")
INIT_LOCK_NAME: Final = ".run-store-init.lock"
INIT_LOCK_TIMEOUT_S: Final = 5.0


def checked_root(root: object) -> str:
    """The root as a string path, refused (UnsafePathError) unless it is an existing,
    absolute directory that is not itself a symbolic link."""
    if not isinstance(root, str | os.PathLike):
        raise UnsafePathError(f"the store root must be a path, not {type(root).__name__}")
    path = os.fspath(root)
    if isinstance(path, bytes):
        raise UnsafePathError("the store root must be a text path")
    if not os.path.isabs(path):
        raise UnsafePathError(f"the store root must be absolute: {path!r}")
    if "\x00" in path:
        raise UnsafePathError("the store root contains a NUL character")
    path = os.path.normpath(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise UnsafePathError(f"the store root does not exist: {path}") from None
    except OSError as exc:
        raise UnsafePathError(f"cannot inspect the store root {path}: {exc}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"the store root is a symbolic link: {path}")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"the store root is not a directory: {path}")
    return path


def check_not_nested(root: str) -> None:
    """Refuse (UnsafePathError) a root inside another store's root (an ancestor directory,
    links resolved, that holds ``run.sqlite3``): a store under another's ``artifacts/``
    would be taken for the outer store's stages and objects (one named ``.staging-*``
    quarantined by its recovery), and a store's root holds only what its store writes."""
    real = os.path.realpath(root)
    ancestor = os.path.dirname(real)
    while True:
        try:
            info = os.lstat(os.path.join(ancestor, DATABASE_NAME))
        except OSError:
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            raise UnsafePathError(
                f"the store root {root} lies inside the run store {ancestor}; "
                "choose a directory outside it"
            )
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            return
        ancestor = parent


def check_adoptable(root: str) -> None:
    """Refuse (UnsafePathError) to make a store in an existing directory that holds no
    ``run.sqlite3`` but other entries (anything besides what an interrupted first open
    leaves: the init lock, SQLite's sidecars, probe directories): the command makes a store
    only in a missing or empty directory, never among a user's files."""
    if not os.path.isdir(root) or os.path.lexists(os.path.join(root, DATABASE_NAME)):
        return
    try:
        names = os.listdir(root)
    except OSError as exc:
        raise UnsafePathError(f"cannot list the store root {root}: {exc}") from exc
    left = (INIT_LOCK_NAME, *SIDECAR_NAMES)
    others = sorted(n for n in names if n not in left and not n.startswith(PROBE_PREFIX))
    if others:
        more = f" and {len(others) - 3} more" if len(others) > 3 else ""
        raise UnsafePathError(
            f"{root} holds no run store but other files ({', '.join(others[:3])}{more}); "
            "a store is made only in a missing or empty directory"
        )


def create_root(root: str) -> bool:
    """Create the absolute directory ``root`` (its parent must exist) and sync the parent,
    so a store created there survives a crash; True when created, False when ``root``
    already is a directory (then nothing is done; anything else there is refused by
    :func:`checked_root`)."""
    if not os.path.isabs(root):
        raise UnsafePathError(f"the store root must be absolute: {root!r}")
    path = os.path.normpath(root)
    check_not_nested(path)
    if os.path.lexists(path):
        checked_root(path)
        return False
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise UnsafePathError(f"the parent of the store root does not exist: {parent}")
    try:
        durable.mkdir(path)
    except FileExistsError:
        checked_root(path)
        return False
    except OSError as exc:
        raise DurabilityError(f"cannot create the store root {path}: {exc}") from exc
    return True


def check_filesystem(root: str) -> None:
    """Refuse recognized network filesystems (UnsupportedFilesystemError)."""
    try:
        magic = durable.filesystem_magic(root)
    except OSError as exc:
        raise UnsupportedFilesystemError(
            f"cannot identify the filesystem of {root}: {exc}"
        ) from exc
    name = durable.NETWORK_FILESYSTEMS.get(magic)
    if name is not None:
        raise UnsupportedFilesystemError(
            f"{root} is on {name} (statfs magic {magic:#x}); network filesystems are refused"
        )


def check_store_files(root: str) -> None:
    """Each existing store file (database, sidecars, lock file) must be a regular file and
    not a symbolic link (UnsafePathError). Missing files are fine."""
    for name in (DATABASE_NAME, *SIDECAR_NAMES, INIT_LOCK_NAME):
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(f"{name} is a symbolic link: {path}")
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"{name} is not a regular file: {path}")


class InitLock(LockFile):
    """The persistent ``.run-store-init.lock``, held exclusively (flock) while opening,
    waiting at most :data:`INIT_LOCK_TIMEOUT_S` (else ``busy``). Created without a sync: a
    lost lock file is simply made again by the next opening."""

    def __init__(self, root: str) -> None:
        super().__init__(
            root,
            INIT_LOCK_NAME,
            exclusive=True,
            timeout=INIT_LOCK_TIMEOUT_S,
            durable_creation=False,
            busy=f"another process held {INIT_LOCK_NAME} for 5 s",
        )


@attrs.frozen
class HeldDescriptor:
    """One reference to the process-wide descriptor of a database file."""

    fd: int
    key: tuple[int, int]
    """The file's (st_dev, st_ino): the same file reached by two paths shares one entry."""


class _DatabaseDescriptors:
    """Process-wide, reference-counted descriptors of database files, keyed by inode.

    Call :meth:`acquire` only under the init lock (every open in this process takes it), so
    no other opener can create or replace the file in between.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, int], list[int]] = {}  # key -> [fd, references]

    def acquire(self, path: str) -> HeldDescriptor:
        with self._lock:
            try:
                info: os.stat_result | None = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                info = None
            if info is not None:
                key = (info.st_dev, info.st_ino)
                entry = self._entries.get(key)
                if entry is not None:
                    entry[1] += 1
                    return HeldDescriptor(fd=entry[0], key=key)
                if not stat.S_ISREG(info.st_mode):
                    raise UnsafePathError(f"the database is not a regular file: {path}")
            flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
            if info is None:
                flags |= os.O_CREAT | os.O_EXCL
            try:
                fd = os.open(path, flags, 0o600)
            except OSError as exc:
                raise UnsafePathError(f"cannot open the database file {path}: {exc}") from exc
            opened = os.fstat(fd)
            key = (opened.st_dev, opened.st_ino)
            if (info is not None and key != (info.st_dev, info.st_ino)) or key in self._entries:
                # Replaced under our feet: never close a descriptor of a file whose SQLite
                # locks this process may hold.
                if key not in self._entries:
                    os.close(fd)
                raise UnsafePathError(f"the database file changed while opening: {path}")
            self._entries[key] = [fd, 1]
            return HeldDescriptor(fd=fd, key=key)

    def release(self, held: HeldDescriptor) -> None:
        """Drop one reference; the last one closes the descriptor. Call only after this
        holder's SQLite connection to the file is closed."""
        with self._lock:
            entry = self._entries[held.key]
            entry[1] -= 1
            if entry[1] == 0:
                del self._entries[held.key]
                os.close(entry[0])

    def holds(self, key: tuple[int, int]) -> bool:
        with self._lock:
            return key in self._entries


database_descriptors = _DatabaseDescriptors()
