"""A worker's output tree: collected as bytes within stated bounds, and removed whatever it holds.

Rules of this file: files and directories only, no recursion (a hostile tree may nest far
deeper than Python's stack), no link ever followed. :func:`collect` reads the output
directory of a finished worker (its whole process group is dead) within the bounds below,
stated in SPEC.md section 15 ("The worker protocol"); :func:`remove_tree` deletes a scratch
directory whatever it holds (read-only directories, paths longer than ``PATH_MAX``) and never
raises.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import stat
from collections.abc import Iterator
from typing import Final

from runstore.runner.executor import WorkStatus

MAX_OUTPUT_DEPTH: Final = 32
"""The most segments an output path may have (``a/b/result.json`` has 3)."""

MAX_OUTPUT_PATH_BYTES: Final = 1024
"""The longest output path, in UTF-8 bytes, relative to the output directory: a path this
long still fits a store root of 2,000 bytes under ``PATH_MAX`` (4,096) when published."""

MAX_OUTPUT_ENTRIES: Final = 250_000
"""The most files and directories an output tree may hold."""

Collected = tuple[WorkStatus, tuple[tuple[str, bytes], ...], str]


def collect(output_dir: str, limit: int) -> Collected:
    """Walk ``output_dir`` following no link: only regular files and directories, within
    the depth, path-length and entry bounds above, the files at most ``limit`` bytes
    together (lstat sizes, checked before any read). Returns the status (EXITED,
    UNSAFE_OUTPUT, OUTPUT_TOO_LARGE), the outputs sorted by path and a one-line detail."""
    try:
        if not stat.S_ISDIR(os.lstat(output_dir).st_mode):
            return WorkStatus.UNSAFE_OUTPUT, (), "the output directory was replaced"
        listed = _list(output_dir)
    except OSError as error:
        where = os.path.relpath(error.filename or output_dir, os.path.dirname(output_dir))
        return WorkStatus.UNSAFE_OUTPUT, (), f"{where}: unreadable ({error.strerror})"
    if isinstance(listed, str):
        return WorkStatus.UNSAFE_OUTPUT, (), listed
    total = sum(size for _, size in listed)
    if total > limit:
        return WorkStatus.OUTPUT_TOO_LARGE, (), f"outputs hold {total} bytes, limit {limit}"
    outputs: list[tuple[str, bytes]] = []
    for relative, size in sorted(listed):
        full = os.path.join(output_dir, *relative.split("/"))
        try:
            with open(os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as file:
                data = file.read(size + 1)
        except OSError as error:
            return WorkStatus.UNSAFE_OUTPUT, (), f"{relative}: unreadable ({error.strerror})"
        if len(data) != size:  # something outside the killed group still writes to it
            return WorkStatus.UNSAFE_OUTPUT, (), f"{relative}: changed while being collected"
        outputs.append((relative, data))
    return WorkStatus.EXITED, tuple(outputs), ""


def _list(output_dir: str) -> list[tuple[str, int]] | str:
    """The regular files under ``output_dir`` as (relative path, size), or why the tree is
    unsafe. Raises OSError for an entry that cannot be inspected."""
    files: list[tuple[str, int]] = []
    pending = [""]  # relative directories still to list; "" is the output directory
    entries = 0
    while pending:
        directory = pending.pop()
        with os.scandir(os.path.join(output_dir, directory)) as listing:
            names = sorted(entry.name for entry in listing)
        for name in names:
            entries += 1
            if entries > MAX_OUTPUT_ENTRIES:
                return f"the outputs hold more than {MAX_OUTPUT_ENTRIES} entries"
            relative = f"{directory}/{name}" if directory else name
            try:
                size = len(relative.encode("utf-8"))
            except UnicodeEncodeError:
                return f"{relative!r:.200}: name is not UTF-8"
            if size > MAX_OUTPUT_PATH_BYTES:
                return f"{relative[:80]!r}...: path longer than {MAX_OUTPUT_PATH_BYTES} bytes"
            if relative.count("/") >= MAX_OUTPUT_DEPTH:
                return f"{relative[:80]!r}...: deeper than {MAX_OUTPUT_DEPTH} levels"
            info = os.lstat(os.path.join(output_dir, relative))
            if stat.S_ISREG(info.st_mode):
                files.append((relative, info.st_size))
            elif stat.S_ISDIR(info.st_mode):
                pending.append(relative)
            else:
                kind = "symbolic link" if stat.S_ISLNK(info.st_mode) else "special file"
                return f"{relative}: {kind} in output"
    return files


_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(root: str) -> bool:
    """Delete ``root`` and everything under it, following no link, and say whether it is
    gone. Each directory met is first made ours (``0o700``) and its subdirectories are
    moved up to ``root`` itself under fresh names before it is emptied, so no path is ever
    longer than ``root/<name>/<name>`` and at most two descriptors are open, however deep
    the tree. Never raises: what cannot be removed stays (the caller may report it)."""
    try:
        top = os.open(root, _DIRECTORY_FLAGS)
    except OSError:
        return not os.path.lexists(root)
    try:
        with contextlib.suppress(OSError):
            os.fchmod(top, 0o700)
        fresh = (f".removing-{index}" for index in itertools.count())
        pending = [name for name in _names(top) if not _unlink(top, name)]
        while pending:
            name = pending.pop()
            for child in _flatten(top, name, fresh):
                pending.append(child)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(root)
    return not os.path.lexists(root)


def _names(directory_fd: int) -> list[str]:
    with contextlib.suppress(OSError), os.scandir(directory_fd) as listing:
        return [entry.name for entry in listing]
    return []


def _unlink(directory_fd: int, name: str) -> bool:
    """Unlink ``name`` unless it is a directory (not followed); True when it was not one
    (removed, or vanished, or left because it cannot be)."""
    try:
        info = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
    except OSError:
        return True
    if stat.S_ISDIR(info.st_mode):
        return False
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=directory_fd)
    return True


def _flatten(top: int, name: str, fresh: Iterator[str]) -> list[str]:
    """Empty directory ``top/name`` of everything but its subdirectories, move those up to
    ``top`` under fresh names (made ours first, so the move may rewrite their ``..``) and
    return the names they now have there."""
    moved: list[str] = []
    try:
        directory = os.open(name, _DIRECTORY_FLAGS, dir_fd=top)
    except OSError:
        return moved
    try:
        with contextlib.suppress(OSError):
            os.fchmod(directory, 0o700)
        for child in _names(directory):
            if _unlink(directory, child):
                continue
            with contextlib.suppress(OSError):
                sub = os.open(child, _DIRECTORY_FLAGS, dir_fd=directory)
                try:
                    os.fchmod(sub, 0o700)
                finally:
                    os.close(sub)
            for target in itertools.islice(fresh, 3):  # a name the worker took fails
                try:
                    os.rename(child, target, src_dir_fd=directory, dst_dir_fd=top)
                except OSError:
                    continue
                moved.append(target)
                break
    finally:
        os.close(directory)
    return moved
