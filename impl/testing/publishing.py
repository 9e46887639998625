"""Publication test values: payloads that ``populate`` callbacks write, scripted clocks,
and reading a directory back as the model's in-memory tree.

Rules of this file: a :class:`Payload` and a :class:`ClockScript` are frozen values, so a
script :class:`~runstore.testing.script.Call` can hold them as arguments and play the same
call on the store and on the model: the payload writes the same entries each time it is
called, and each play takes a :meth:`ClockScript.fresh` clock. :func:`read_tree` is the
only place the model's side of publication looks at files.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from collections.abc import Iterator
from typing import Final

import attrs
from runstore.model import content

EXECUTABLE: Final = 0o755
REGULAR: Final = 0o644


@attrs.frozen
class Payload:
    """What a ``populate(path)`` callback writes under ``path``: ``files`` as (relative
    path, bytes) pairs, ``executables`` among them with mode 0755, ``directories`` (which
    may be empty), ``symlinks`` as (relative path, target) pairs, ``fifos`` (special
    files). The last three exist to test refusals."""

    files: tuple[tuple[str, bytes], ...] = ()
    executables: frozenset[str] = frozenset()
    directories: tuple[str, ...] = ()
    symlinks: tuple[tuple[str, str], ...] = ()
    fifos: tuple[str, ...] = ()

    def __call__(self, path: str) -> None:
        for directory in self.directories:
            os.makedirs(os.path.join(path, directory), exist_ok=True)
        for name, data in self.files:
            target = os.path.join(path, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(data)
            os.chmod(target, EXECUTABLE if name in self.executables else REGULAR)
        for name, link_target in self.symlinks:
            target = os.path.join(path, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(link_target, target)
        for name in self.fifos:
            target = os.path.join(path, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.mkfifo(target)


def files(**named: bytes) -> Payload:
    """A payload of plain files at the top level (names as keywords)."""
    return Payload(files=tuple(sorted(named.items())))


@attrs.frozen
class ClockScript:
    """A clock as a value: ``fresh()`` gives a clock returning ``samples`` in order and
    then ``samples[-1] + step * k`` for the k-th reading past them."""

    samples: tuple[int, ...]
    step: int = 1

    def fresh(self) -> Callable[[], int]:
        readings = self._readings()
        return lambda: next(readings)

    def _readings(self) -> Iterator[int]:
        yield from self.samples
        last = self.samples[-1]
        while True:
            last += self.step
            yield last


def at(time_ns: int) -> ClockScript:
    """A clock starting at ``time_ns`` and advancing 1 ns per reading."""
    return ClockScript(samples=(time_ns,))


def read_tree(path: str) -> content.Tree:
    """The directory under ``path`` (not following links) as the model's tree."""
    tree: dict[str, content.Entry] = {}

    def walk(directory: str, prefix: str) -> None:
        for name in sorted(os.listdir(directory)):
            full = os.path.join(directory, name)
            relative = f"{prefix}{name}"
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                tree[relative] = content.Symlink(target=os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                tree[relative] = content.Directory()
                walk(full, relative + "/")
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    data = handle.read()
                tree[relative] = content.File(data=data, executable=bool(info.st_mode & 0o111))
            else:
                tree[relative] = content.Special()

    walk(path, "")
    return tree
