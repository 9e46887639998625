"""The store root's lock files: a persistent regular file held by ``flock`` while it is
entered (the initialization lock, the recovery lock), and the link-safe open every lock
file of the store uses (a stage's ``lock`` too).

Rules of this file: every lock goes through :func:`runstore.durable.flock` (and a durable
creation through the seam's syncs), so each is a traced boundary. A lock file is created
once and never deleted, so no process can lock a replacement inode; it is opened without
following a link and must be a regular file (``unsafe_path``). Waiting past the timeout
refuses with ``busy``; a failing lock or creation sync with ``durability_failed``. Closing
the descriptor releases the lock.
"""

from __future__ import annotations

import errno
import os
import stat

from runstore import durable
from runstore.errors import BusyError
from runstore.errors import DurabilityError
from runstore.errors import UnsafePathError


def open_lock_file(path: str) -> int:
    """Open the existing lock file ``path`` read-write without following a link (for a
    flock). ``unsafe_path`` when it is a symbolic link, not a regular file, or cannot be
    opened; a missing file raises FileNotFoundError."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{path} is a symbolic link") from exc
        raise UnsafePathError(f"cannot open {path}: {exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePathError(f"{path} is not a regular file")
    return fd


class LockFile:
    """``root/name`` held with a flock (``exclusive`` or shared) from ``__enter__`` to
    ``__exit__``, waiting at most ``timeout`` seconds, else :class:`BusyError` with
    ``busy``. Made when missing (mode 0600); with ``durable_creation`` the new file and the
    root are synced before it is locked (a failing sync is ``durability_failed`` and the
    lock is not taken)."""

    def __init__(
        self,
        root: str,
        name: str,
        *,
        exclusive: bool,
        timeout: float,
        durable_creation: bool,
        busy: str,
    ) -> None:
        self.path = os.path.join(root, name)
        self._root = root
        self._name = name
        self._exclusive = exclusive
        self._timeout = timeout
        self._durable_creation = durable_creation
        self._busy = busy
        self._fd: int | None = None

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileExistsError:
            return open_lock_file(self.path)
        except OSError as exc:
            raise UnsafePathError(f"cannot create {self.path}: {exc}") from exc
        if self._durable_creation:
            try:
                durable.fsync_fd(fd, self.path)
                durable.fsync_dir(self._root)
            except OSError as exc:
                os.close(fd)
                raise DurabilityError(f"creating {self._name} failed: {exc}") from exc
        return fd

    def __enter__(self) -> LockFile:
        fd = self._open()
        try:
            taken = durable.flock(fd, self.path, exclusive=self._exclusive, timeout=self._timeout)
        except OSError as exc:
            os.close(fd)
            raise DurabilityError(f"locking {self._name} failed: {exc}") from exc
        if not taken:
            os.close(fd)
            raise BusyError(self._busy)
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing releases the flock
