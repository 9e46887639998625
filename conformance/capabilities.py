"""Acting as a process that owns no file: ``owning_nothing`` drops ``CAP_FOWNER`` from
this process's effective capabilities for a block (root's tests would otherwise pass where
a user's run fails with EPERM, as on a file opened ``O_NOATIME`` that it does not own).
Linux only; the capability stays permitted and is raised again on exit.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

NOBODY = 65534
"""The uid and gid of ``nobody``: files given to it belong to another user."""
CAP_FOWNER = 3
"""linux/capability.h: the capability that lets a process act as any file's owner."""
LIBC = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _capabilities() -> tuple[_CapHeader, ctypes.Array[_CapData]]:
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if LIBC.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    return header, data


@contextmanager
def owning_nothing() -> Iterator[None]:
    """This process without ``CAP_FOWNER`` in its effective set (it stays permitted, and
    is raised again on exit): no privilege stands in for owning a file."""
    header, data = _capabilities()
    saved = data[0].effective
    data[0].effective = saved & ~(1 << CAP_FOWNER)
    if LIBC.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    try:
        yield
    finally:
        header, data = _capabilities()
        data[0].effective = saved
        if LIBC.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")
