"""Scratch directories named for the process that owns them, and the removal of those whose
owner is dead.

Rules of this file: names and liveness only; no store, no worker. A scratch directory is
``runstore-work-<pid namespace>-<pid>-<start time>-<8 random characters>`` in the scratch
root (SPEC.md section 15.3): the owner is the process that made it (the coordinator, or the
Dask worker process that ran the order), named by its pid namespace's inode, its pid and
its start time in clock ticks since boot, so a reused pid is never taken for the owner.
:func:`remove_dead` removes the directories whose owner is dead and nothing else: only
entries of exactly that form, directories themselves (never through a link), owned by this
user, of this pid namespace, whose owner's ``/proc`` entry is gone, a zombie, or started at
another time. Where ``/proc`` cannot tell (no Linux, another namespace's view), a directory
is made without the owner part and nothing is ever removed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import tempfile
from typing import Final

from runstore.runner.output_tree import remove_tree

PREFIX: Final = "runstore-work-"

_TAGGED: Final = re.compile(
    r"runstore-work-(?P<owner>(?P<namespace>[0-9]{1,20})-[0-9]{1,10}-[0-9]{1,20})-[a-z0-9_]{8}"
)
"""A tagged scratch directory's name; the last part is what :func:`tempfile.mkdtemp` adds."""


def _started(stat_text: bytes) -> tuple[str, str]:
    """A ``/proc/<pid>/stat`` line's state and start time (fields 3 and 22; the command
    name, field 2, may hold spaces and parentheses, so fields count from its last ``)``)."""
    fields = stat_text.rsplit(b")", 1)[1].split()
    return fields[0].decode("ascii"), fields[19].decode("ascii")


@functools.cache
def _owner_tag(pid: int) -> str | None:
    """``<namespace>-<pid>-<start>`` for this process (cached per pid: a forked child has
    its own), or None when ``/proc`` does not show this process as itself."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
        with open("/proc/self/stat", "rb") as file:
            text = file.read()
        if int(text.split(b" ", 1)[0]) != pid:  # a /proc of another pid namespace
            return None
        return f"{namespace}-{pid}-{_started(text)[1]}"
    except (OSError, ValueError, IndexError):
        return None


def owner_tag() -> str | None:
    """This process's owner tag, or None where ``/proc`` cannot give one."""
    return _owner_tag(os.getpid())


def make(root: str | None) -> str:
    """A fresh private (``0o700``) scratch directory under ``root`` (default: the system
    temporary directory) named for this process. Raises OSError when none can be made."""
    tag = owner_tag()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{tag}-" if tag else PREFIX, dir=root)


def _alive(pid: str, start: str) -> bool:
    """Whether process ``pid`` of this namespace runs and started at ``start``; True when
    it cannot be told (never remove what might be live)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state, started = _started(file.read())
    except (FileNotFoundError, ProcessLookupError):
        return False
    except (OSError, ValueError, IndexError):
        return True
    return state not in ("Z", "X") and started == start


def remove_dead(root: str | None) -> tuple[str, ...]:
    """Remove every scratch directory under ``root`` (default: the system temporary
    directory) whose owner is dead, as the module docstring says, and return the paths
    removed. Never raises: an unreadable root removes nothing, and a directory that cannot
    be removed whole stays for the next call. Running it twice, or in two processes at
    once, is harmless: a directory is only ever removed, and never one of a live owner."""
    mine = owner_tag()
    if mine is None:
        return ()
    here = mine.split("-", 1)[0]
    root = root if root is not None else tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return ()
    removed: list[str] = []
    for name in sorted(names):
        match = _TAGGED.fullmatch(name)
        if match is None or match["namespace"] != here or match["owner"] == mine:
            continue
        path = os.path.join(root, name)
        with contextlib.suppress(OSError):
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            _, pid, start = match["owner"].split("-")
            if not _alive(pid, start) and remove_tree(path):
                removed.append(path)
    return tuple(removed)
