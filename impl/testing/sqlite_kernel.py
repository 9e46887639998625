"""A fake kernel under SQLite: make the SQLite library this process uses see failing system
calls, through its own documented test hook (``sqlite3_vfs.xSetSystemCall`` of the default
``unix`` VFS).

Rules of this file: test-only; the runtime never imports it. It reaches the very library
instance the stdlib ``sqlite3`` module runs on (the ``libsqlite3`` mapped into this process,
checked by version), and refuses with :class:`SqliteKernelUnavailable` where it cannot:
a statically linked ``_sqlite3``, another VFS, or a version mismatch. Every override is
undone on leaving its context, even on error. Overrides are process-wide: use them in a
process that runs one store (a crash-simulator child or a single-threaded test).

``failing_writes(code)`` makes every ``write``/``pwrite64`` SQLite issues fail with
``code`` (``ENOSPC`` becomes ``SQLITE_FULL``, ``EIO`` becomes ``SQLITE_IOERR_WRITE``): the
statement that writes (in WAL mode, the ``COMMIT`` that appends the transaction's frames)
fails and SQLite rolls the transaction back. ``fired`` counts the failed calls, so a
caller can tell an injection that happened from one that found nothing to fail.
"""

from __future__ import annotations

import ctypes
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from typing import Final

import attrs

WRITE_CALLS: Final = ("write", "pwrite64", "pwrite")


class SqliteKernelUnavailable(RuntimeError):
    """SQLite's system calls cannot be overridden in this process."""


class _Vfs(ctypes.Structure):
    pass


_Vfs._fields_ = [
    ("iVersion", ctypes.c_int),
    ("szOsFile", ctypes.c_int),
    ("mxPathname", ctypes.c_int),
    ("pNext", ctypes.c_void_p),
    ("zName", ctypes.c_char_p),
    ("pAppData", ctypes.c_void_p),
    *(
        (name, ctypes.c_void_p)
        for name in (
            "xOpen",
            "xDelete",
            "xAccess",
            "xFullPathname",
            "xDlOpen",
            "xDlError",
            "xDlSym",
            "xDlClose",
            "xRandomness",
            "xSleep",
            "xCurrentTime",
            "xGetLastError",
            "xCurrentTimeInt64",
            "xSetSystemCall",
            "xGetSystemCall",
            "xNextSystemCall",
        )
    ),
]

_VfsPointer = ctypes.POINTER(_Vfs)
_SetSystemCall = ctypes.CFUNCTYPE(ctypes.c_int, _VfsPointer, ctypes.c_char_p, ctypes.c_void_p)
_GetSystemCall = ctypes.CFUNCTYPE(ctypes.c_void_p, _VfsPointer, ctypes.c_char_p)
_NextSystemCall = ctypes.CFUNCTYPE(ctypes.c_char_p, _VfsPointer, ctypes.c_char_p)
# ssize_t write(int, const void *, size_t) and ssize_t pwrite64(int, const void *, size_t,
# off64_t): one callback type serves both on x86-64 (the fourth argument is ignored).
_Write = ctypes.CFUNCTYPE(
    ctypes.c_ssize_t,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_longlong,
    use_errno=True,
)


def _mapped_library() -> str:
    """The path of the ``libsqlite3`` mapped into this process (by ``_sqlite3``)."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.rstrip("\n").split(maxsplit=5)[-1]
            if "/libsqlite3" in path:
                return path
    raise SqliteKernelUnavailable("no libsqlite3 is mapped: _sqlite3 is linked statically")


@attrs.define
class _Table:
    vfs: Any
    set_call: Any
    get_call: Any
    names: frozenset[str]


_table: _Table | None = None


def _load() -> _Table:
    global _table
    if _table is not None:
        return _table
    library = ctypes.CDLL(_mapped_library())
    library.sqlite3_libversion.restype = ctypes.c_char_p
    version = library.sqlite3_libversion().decode()
    if version != sqlite3.sqlite_version:
        raise SqliteKernelUnavailable(
            f"the mapped libsqlite3 is {version}, the sqlite3 module runs {sqlite3.sqlite_version}"
        )
    library.sqlite3_vfs_find.restype = _VfsPointer
    library.sqlite3_vfs_find.argtypes = [ctypes.c_char_p]
    vfs = library.sqlite3_vfs_find(None)
    if not vfs or vfs.contents.zName != b"unix" or vfs.contents.iVersion < 3:
        raise SqliteKernelUnavailable("the default SQLite VFS is not unix version 3")
    next_call = _NextSystemCall(vfs.contents.xNextSystemCall)
    names: set[str] = set()
    name = next_call(vfs, None)
    while name:
        names.add(name.decode())
        name = next_call(vfs, name)
    _table = _Table(
        vfs=vfs,
        set_call=_SetSystemCall(vfs.contents.xSetSystemCall),
        get_call=_GetSystemCall(vfs.contents.xGetSystemCall),
        names=frozenset(names),
    )
    return _table


def available() -> str:
    """Empty when SQLite's system calls can be overridden here, else why not."""
    try:
        _load()
    except (SqliteKernelUnavailable, OSError, AttributeError) as error:
        return str(error)
    return ""


@attrs.define
class Injection:
    """What one override did: ``fired`` failed calls."""

    code: int
    fired: int = 0


@contextmanager
def failing_writes(code: int) -> Iterator[Injection]:
    """Within the block, every write SQLite issues fails with errno ``code``."""
    table = _load()
    injection = Injection(code)

    def fail(fd: int, buffer: int, size: int, offset: int) -> int:
        injection.fired += 1
        ctypes.set_errno(code)
        return -1

    callback = _Write(fail)
    names = [name for name in WRITE_CALLS if name in table.names]
    saved = {name: table.get_call(table.vfs, name.encode()) for name in names}
    try:
        for name in names:
            if table.set_call(table.vfs, name.encode(), ctypes.cast(callback, ctypes.c_void_p)):
                raise SqliteKernelUnavailable(f"SQLite refused to override {name}")
        yield injection
    finally:
        for name, pointer in saved.items():
            table.set_call(table.vfs, name.encode(), pointer)
