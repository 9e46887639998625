"""The durability seam: every durability syscall the store makes passes through here.

Rules of this file: file and directory fsync, no-replace rename, kernel locks, durable
mkdir and unlink, and the filesystem-type query live here and nowhere else. Each operation
announces itself to an optional observer before and after the syscall, so tests can inject
failures (by raising ``OSError`` from the observer) and the crash simulator can number
boundaries. A second hook, the recorder, is told of each persistence effect as its
syscall succeeds (a file or directory synced, a directory made, an entry renamed or
removed), in order, so the power-loss simulator can tell what a power cut may undo. Both
hooks are test-only: production code never installs one. Operations raise plain
``OSError``; callers decide which typed error that becomes. This module imports nothing
from the rest of the package.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import time
from collections.abc import Callable
from typing import Final
from typing import Literal

Phase = Literal["before", "after"]
Observer = Callable[[Phase, str, str], None]
"""``observer(phase, operation, target)``; raising from ``before`` makes the operation fail."""

Recorder = Callable[[str, tuple[str, ...]], None]
"""``recorder(effect, paths)``, called right after the syscall succeeds. Effects:
"fsync" (a file: path or, for :func:`fsync_fd`, its label), "fsync_dir", "mkdir",
"unlink", "rmdir" (one path each) and "rename" (source, destination)."""

_observer: Observer | None = None
_recorder: Recorder | None = None


def install_observer(observer: Observer | None) -> Observer | None:
    """The seam's test hook: install ``observer`` (or remove it with None) and return the
    previous one, so a caller can restore it. The observer is called with "before" and
    "after" around each operation of this seam, in this process; raising from "before"
    makes the operation fail without running (fault injection), and the crash simulator's
    tracer numbers boundaries through it. Test-only: the runtime never installs one, and
    with none installed each operation pays one ``is None`` check."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def install_recorder(recorder: Recorder | None) -> Recorder | None:
    """The seam's second test hook: install ``recorder`` (None removes it) and return the
    previous one. It is called once per persistence effect of this seam's operations, in
    this process, after the syscall succeeded (see :data:`Recorder`); a compound operation
    reports each effect (``remove_tree``: each unlink and rmdir, then the parent's sync).
    Test-only, like the observer."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def _record(effect: str, *paths: str) -> None:
    if _recorder is not None:
        _recorder(effect, paths)


def _sync_directory(path: str, *, follow: bool = False) -> None:
    """fsync a directory (``follow``: even through a symbolic link, as for the parent of a
    path, which may be the user's own linked directory)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _record("fsync_dir", path)


def _before(operation: str, target: str) -> None:
    if _observer is not None:
        _observer("before", operation, target)


def _after(operation: str, target: str) -> None:
    if _observer is not None:
        _observer("after", operation, target)


# --- synchronization ---------------------------------------------------------------------


def fsync_fd(fd: int, label: str) -> None:
    """fsync an already open descriptor (used for the database file, whose descriptors must
    not be opened and closed while SQLite holds locks on it)."""
    _before("fsync_file", label)
    os.fsync(fd)
    _record("fsync", label)
    _after("fsync_file", label)


def fsync_file(path: str) -> None:
    """Open ``path`` read-only, fsync it and close it. Never use on a live database file."""
    _before("fsync_file", path)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    _record("fsync", path)
    _after("fsync_file", path)


def fsync_dir(path: str) -> None:
    """fsync a directory so that entries created, renamed or removed in it are durable."""
    _before("fsync_dir", path)
    _sync_directory(path)
    _after("fsync_dir", path)


# --- creation and removal ------------------------------------------------------------------


def mkdir(path: str, mode: int = 0o700) -> None:
    """Create a directory and fsync its parent. Refuses an existing entry (FileExistsError)."""
    _before("mkdir", path)
    os.mkdir(path, mode)
    _record("mkdir", path)
    _sync_directory(os.path.dirname(path), follow=True)
    _after("mkdir", path)


def create_directory(path: str, mode: int = 0o700) -> None:
    """Create one directory without syncing its parent: the caller syncs the parent with
    :func:`fsync_dir` as its own step, so a crash between the two is its own boundary.
    Refuses an existing entry (FileExistsError)."""
    _before("create_directory", path)
    os.mkdir(path, mode)
    _record("mkdir", path)
    _after("create_directory", path)


def unlink(path: str) -> None:
    """Remove a file (not a directory) and fsync its parent."""
    _before("unlink", path)
    os.unlink(path)
    _record("unlink", path)
    _sync_directory(os.path.dirname(path), follow=True)
    _after("unlink", path)


def remove_tree(path: str, *, sync_parent: bool = True) -> None:
    """Remove a directory tree made of plain files and directories (never following links),
    then fsync the parent of ``path`` (unless ``sync_parent`` is False: the caller then
    syncs it with :func:`fsync_dir` as its own step, a crash boundary of its own). Used for
    the store's own disposable directories."""
    _before("remove_tree", path)
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
            _record("unlink", os.path.join(dirpath, name))
        for name in dirnames:
            child = os.path.join(dirpath, name)
            if os.path.islink(child):
                os.unlink(child)
                _record("unlink", child)
            else:
                os.rmdir(child)
                _record("rmdir", child)
    os.rmdir(path)
    _record("rmdir", path)
    if sync_parent:
        _sync_directory(os.path.dirname(path), follow=True)
    _after("remove_tree", path)


# --- no-replace rename ---------------------------------------------------------------------

_AT_FDCWD: Final = -100
_RENAME_NOREPLACE: Final = 1
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)
if _renameat2 is not None:
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    _renameat2.argtypes += [ctypes.c_uint]
    _renameat2.restype = ctypes.c_int


def rename_noreplace(source: str, destination: str) -> None:
    """Atomically rename ``source`` to ``destination`` only if nothing exists there.

    Raises FileExistsError for any existing destination (file, empty or populated
    directory), leaving both untouched. Where the platform cannot refuse replacement
    (no renameat2, or EINVAL/ENOSYS/EPERM) raises ``OSError`` with that errno: callers
    must refuse, never fall back to a replacing rename. Does not fsync; see
    :func:`fsync_dir`.
    """
    _before("rename_noreplace", f"{source} -> {destination}")
    if _renameat2 is None:
        raise OSError(errno.ENOSYS, "renameat2 is not available", destination)
    result = _renameat2(
        _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(destination), _RENAME_NOREPLACE
    )
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), destination)
    _record("rename", source, destination)
    _after("rename_noreplace", f"{source} -> {destination}")


# --- kernel locks --------------------------------------------------------------------------


def flock(fd: int, label: str, *, exclusive: bool = True, timeout: float = 0.0) -> bool:
    """Take a flock on ``fd``, polling until ``timeout`` seconds have passed.

    Returns True when taken, False on contention past the timeout; other failures raise.
    """
    operation = "flock_exclusive" if exclusive else "flock_shared"
    _before(operation, label)
    mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, mode)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
    _after(operation, label)
    return True


def funlock(fd: int, label: str) -> None:
    """Release a flock taken with :func:`flock`."""
    _before("funlock", label)
    fcntl.flock(fd, fcntl.LOCK_UN)
    _after("funlock", label)


def posix_lock(fd: int, label: str, *, lock: bool) -> bool:
    """Take (``lock=True``) or release a POSIX record lock on byte 0 without waiting.

    Returns False when another process holds a conflicting lock. POSIX record locks belong
    to the process: closing any descriptor of the file drops them.
    """
    operation = "posix_lock" if lock else "posix_unlock"
    _before(operation, label)
    try:
        fcntl.lockf(fd, (fcntl.LOCK_EX | fcntl.LOCK_NB) if lock else fcntl.LOCK_UN, 1, 0)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    _after(operation, label)
    return True


# --- filesystem type -----------------------------------------------------------------------

NETWORK_FILESYSTEMS: Final[dict[int, str]] = {
    0x6969: "NFS",
    0x517B: "SMB",
    0xFF534D42: "CIFS",
    0xFE534D42: "SMB2",
    0x5346414F: "AFS",
    0x6B414653: "kAFS",
    0x00C36400: "Ceph",
    0x73757245: "Coda",
    0x564C: "NCP",
    0x01021997: "9P",
}

_statfs = getattr(_libc, "statfs", None)
# glibc's struct statfs (bits/statfs.h): f_type, a __fsword_t (a long on x86_64 and
# aarch64), is its first member; the struct is 120 bytes there, so 256 leaves room.
# conformance/opening/test_kernel_constants.py pins all three against the headers.
_STATFS_BUFFER_BYTES: Final = 256
_F_TYPE_OFFSET: Final = 0
_F_TYPE: Final = ctypes.c_long


def filesystem_magic(path: str) -> int:
    """The Linux ``statfs`` f_type of the filesystem holding ``path`` (as unsigned 32 bits)."""
    if _statfs is None:
        raise OSError(errno.ENOSYS, "statfs is not available", path)
    buffer = ctypes.create_string_buffer(_STATFS_BUFFER_BYTES)
    if _statfs(os.fsencode(path), buffer) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    f_type = _F_TYPE.from_buffer(buffer, _F_TYPE_OFFSET).value
    return f_type & 0xFFFFFFFF
