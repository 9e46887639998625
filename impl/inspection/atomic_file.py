"""Output files written atomically: a temporary beside the target, then a replacing rename.

Rules of this file: every file is first written under a fresh temporary name in its
target directory (``.<name>.<16 hex>.tmp``, created with ``O_EXCL`` and ``O_NOFOLLOW``,
so nothing existing is ever opened or truncated), and is renamed onto its name only once
every file of the set is complete and fsynced; the directory is fsynced after the
renames. A set that is discarded, or whose owner raises, removes its temporaries and
leaves the directory as it was. The rename replaces an older file of the same name
(``os.replace``): this is for rebuildable outputs (an export), where replacing an
identical older copy is harmless; the store's own publication never replaces anything.
fsyncs go through :mod:`runstore.durable`; ``OSError`` becomes ``durability_failed``.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
from typing import BinaryIO
from typing import Final

import attrs
from runstore import durable
from runstore.errors import DurabilityError
from runstore.errors import InvalidRecordError
from runstore.errors import UnsafePathError

_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_MODE: Final = 0o666  # narrowed by the umask, like any file the user creates
TEMP_SUFFIX: Final = ".tmp"


def refuse_inside_store(directory: str, root: str, what: str, *, argument: str) -> None:
    """``unsafe_path`` (naming the caller's parameter ``argument``) when ``directory``
    resolves (links followed) to the store ``root`` or anything beneath it: outputs are
    never written into a store."""
    resolved, store = os.path.realpath(directory), os.path.realpath(root)
    if resolved == store or resolved.startswith(store.rstrip(os.sep) + os.sep):
        raise UnsafePathError(f"{what} lies inside the store {root}", argument=argument)


def temporary_name(name: str) -> str:
    """A fresh temporary name for ``name``: ``.<name>.<16 lowercase hex>.tmp``."""
    return f".{name}.{secrets.token_hex(8)}{TEMP_SUFFIX}"


@attrs.define
class _Pending:
    name: str
    temporary: str
    stream: BinaryIO


class AtomicFiles:
    """A set of files for one directory, installed together by :meth:`commit`.

    Use as a context manager: leaving it without a successful :meth:`commit` (an
    exception included) discards every temporary. :meth:`create` returns a binary stream
    the caller writes and must not close.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._pending: list[_Pending] = []
        self._committed = False

    def create(self, name: str) -> BinaryIO:
        """A new temporary for ``name`` (a plain file name, not yet used in this set).
        Refuses a name with a ``/``, a NUL, ``.`` or ``..``, or one used twice, with
        ``invalid_record``; a failed create is ``durability_failed``."""
        if name in ("", ".", "..") or "/" in name or "\x00" in name:
            raise InvalidRecordError(f"not a plain file name: {name!r}")
        if any(pending.name == name for pending in self._pending):
            raise InvalidRecordError(f"{name!r} is already part of this set")
        temporary = temporary_name(name)
        path = os.path.join(self.directory, temporary)
        try:
            fd = os.open(path, _CREATE_FLAGS, _FILE_MODE)
        except OSError as exc:
            raise DurabilityError(f"cannot create {path}: {exc.strerror}") from exc
        stream = io.BufferedWriter(io.FileIO(fd, "wb"))
        self._pending.append(_Pending(name=name, temporary=temporary, stream=stream))
        return stream

    def commit(self) -> None:
        """Flush, fsync and close every temporary; then rename each onto its name (in
        creation order), then fsync the directory. Any failure is ``durability_failed``
        (the temporaries not yet renamed are then discarded by the context manager)."""
        try:
            for pending in self._pending:
                pending.stream.flush()
                durable.fsync_fd(pending.stream.fileno(), self._path(pending.temporary))
                pending.stream.close()
            while self._pending:
                pending = self._pending[0]
                os.replace(self._path(pending.temporary), self._path(pending.name))
                self._pending.pop(0)
            durable.fsync_dir(self.directory)
        except OSError as exc:
            raise DurabilityError(f"cannot install the files in {self.directory}: {exc}") from exc
        self._committed = True

    def discard(self) -> None:
        """Close and remove every temporary not yet renamed (best effort: a temporary
        that cannot be removed stays, named as :func:`temporary_name` says)."""
        pending, self._pending = self._pending, []
        for item in pending:
            with contextlib.suppress(OSError):
                item.stream.close()
            with contextlib.suppress(OSError):
                os.unlink(self._path(item.temporary))

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def __enter__(self) -> AtomicFiles:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self._committed:
            self.discard()
