"""The image method: run a scenario once, photograph the store root at each chosen boundary,
and check each distinct photograph once.

Why a photograph is a crash. Process death changes no file's contents: the kernel closes
the process's descriptors and drops its locks, and ``os._exit`` runs nothing of the
process's own. What a process killed at boundary ``k`` leaves is therefore exactly the
bytes under the store root at the instant it reaches ``k`` (the page cache included: the
sweeps simulate process death, not power loss). Here one child runs the scenario under
the tracer and stops at each chosen boundary; the parent, which holds no connection and so
cannot disturb SQLite's locks, reads the whole tree (names, kinds, modes, bytes) and lets
the child go on. ``conformance/crash/test_methods.py`` checks, point by point, that the
photograph equals what the kill method's grandchild leaves.

Rules of this file:

* The stop is a pipe round trip: the child writes ``k`` (8 bytes) and waits for one byte;
  a closed pipe (the parent died) ends the child with ``os._exit``.
* The parent reads the child's trace as it grows and compares it with the reference
  entry by entry; a boundary reached on another path is a ``mismatch``, not photographed,
  as is a chosen boundary the child never reaches.
* A photograph is identified by the SHA-256 of its tree (normalized names, kinds, modes,
  and each file's SHA-256, computed once per distinct content: :class:`Digests`; no
  times). Two points whose photographs are identical *and* whose acceptable
  states and resumption are identical (same step, same transaction choices) get the same
  check, so it runs once, on the first, and its finding is reported for each (the
  ``image`` field names the boundary whose copy was checked). The check is deterministic:
  the same bytes, the same model states and the same stage tokens give the same verdict.
* Photographs wait on disk for a free trial slot; at most
  :data:`~runstore.crashsim.trials.WAITING_PER_JOB` per job do, after which the child stays
  stopped until a slot frees (disk use stays bounded).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import struct
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.crashsim import processes
from runstore.crashsim import trials
from runstore.crashsim.harness import run_traced
from runstore.crashsim.points import Point
from runstore.crashsim.points import off_reference
from runstore.crashsim.results import Finding
from runstore.crashsim.results import SweepResult
from runstore.crashsim.sweep import Sweep
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import Entry
from runstore.crashsim.tracer import describe
from runstore.crashsim.tracer import effect_number
from runstore.crashsim.tracer import normalize

GONE_EXIT: Final = 78
"""The exit status of an imaging child whose parent went away while it was stopped."""
_K: Final = struct.Struct("<q")

Tree = list[tuple[str, str, int, bytes]]
"""A store root read whole: (normalized relative path, kind "d"/"f"/"l", mode bits,
bytes or link target), in a fixed order."""


def read_tree(root: str) -> Tree:
    """Every entry under ``root`` (excluded), in sorted walk order."""
    tree: Tree = []
    for directory, names, files in os.walk(root):
        names.sort()
        for name in sorted(names + files):
            path = os.path.join(directory, name)
            relative = normalize(os.path.relpath(path, root), root)
            info = os.lstat(path)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                tree.append((relative, "l", mode, os.fsencode(os.readlink(path))))
                if name in names:
                    names.remove(name)  # os.walk lists a link to a directory among them
            elif stat.S_ISDIR(info.st_mode):
                tree.append((relative, "d", mode, b""))
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as handle:
                    tree.append((relative, "f", mode, handle.read()))
            else:
                raise RuntimeError(f"the store root holds a special file: {relative}")
    return tree


class Digests:
    """SHA-256 digests of trees: over each entry's header (name, kind, mode, length) and
    the SHA-256 of its bytes, where each distinct content is hashed once while it stays in
    the cache (a sweep keeps one: the database file recurs unchanged across photographs,
    and every file across a cut's power-loss states). The cache is emptied when it holds
    more than :data:`CACHED_BYTES`, which bounds what the sweep's parent keeps."""

    def __init__(self) -> None:
        self._files: dict[bytes, bytes] = {}
        self._bytes = 0

    def tree(self, tree: Tree) -> str:
        digest = hashlib.sha256()
        for relative, kind, mode, data in tree:
            header = json.dumps([relative, kind, mode, len(data)]).encode()
            digest.update(_K.pack(len(header)) + header + self._file(data))
        return digest.hexdigest()

    def _file(self, data: bytes) -> bytes:
        found = self._files.get(data)
        if found is None:
            if self._bytes + len(data) > CACHED_BYTES:
                self._files.clear()
                self._bytes = 0
            found = self._files[data] = hashlib.sha256(data).digest()
            self._bytes += len(data)
        return found


CACHED_BYTES: Final = 16 << 20
"""At most this many bytes of file contents stay in a :class:`Digests` cache."""


def tree_digest(tree: Tree) -> str:
    """A tree's digest (:meth:`Digests.tree`, with a cache of its own)."""
    return Digests().tree(tree)


def write_tree(tree: Tree, root: str) -> None:
    """Make ``root`` hold ``tree`` (modes applied once everything is written)."""
    os.mkdir(root, 0o700)
    for relative, kind, _, data in tree:
        path = os.path.join(root, relative)
        if kind == "d":
            os.mkdir(path, 0o700)
        elif kind == "l":
            os.symlink(os.fsdecode(data), path)
        else:
            with open(path, "wb") as handle:
                handle.write(data)
    for relative, kind, mode, _ in reversed(tree):
        if kind != "l":
            os.chmod(os.path.join(root, relative), mode)


class _PrefixReader:
    """Reads the imaging child's trace as it grows and compares it with the reference."""

    def __init__(self, path: str, reference: Sequence[Entry]) -> None:
        self._path = path
        self._reference = reference
        self._offset = 0
        self._pending = b""
        self._count = 0
        self._effects = 0
        self.last: Entry | None = None
        self.diverged = ""

    def at(self, k: int) -> str:
        """Why the child, stopped at boundary ``k`` (or, for a negative ``k``, after the
        persistence effect :func:`~runstore.crashsim.tracer.effect_number` of it), is not on
        the reference path there (empty when it is)."""
        self._advance()
        if self.diverged:
            return self.diverged
        if k < 0:
            if self.last is None or self.last[0] != "p" or self._effects != effect_number(k) + 1:
                return f"the child stopped after {self.last}, not after effect {effect_number(k)}"
            return ""
        if self.last is None or self.last[:2] != ["b", k]:
            return f"the child stopped after {self.last}, not at boundary {k}"
        return ""

    def finish(self) -> str:
        """Read the rest of the trace; returns the divergence found, if any."""
        self._advance()
        return self.diverged

    def _advance(self) -> None:
        with open(self._path, "rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        self._offset += len(data)
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            entry = json.loads(line)
            index = self._count
            self._count += 1
            self._effects += entry[0] == "p"
            self.last = entry
            if self.diverged:
                continue
            self.diverged = off_reference(self._reference, index, entry)


def stop_at(
    sweep: Sweep,
    stops: Collection[int],
    on_stop: Callable[[int, str], None],
    between: Callable[[], None] = lambda: None,
    *,
    on_start: Callable[[str], None] = lambda live: None,
    on_end: Callable[[str, int], None] = lambda live, status: None,
) -> dict[int, str]:
    """Run the sweep's scenario once on a copy of its fixture (``<base>/live``), stopping
    at each boundary in ``stops`` and calling ``on_stop(k, live root)`` there when the trace
    so far is the reference's prefix; ``between()`` is called before each wait for the next
    stop. ``on_start(live)`` is called before the child starts and ``on_end(live, status)``
    after it ended on the reference path; with the sweep's ``persistence`` the trace holds
    the seam's persistence effects too, and a negative stop is the child right after one of
    them (:func:`~runstore.crashsim.tracer.effect_stop`). Returns the mismatch of each stop
    that was off the reference path or never reached."""
    scenario, run, base, reference = sweep.scenario, sweep.run, sweep.base, sweep.reference
    persistence = sweep.persistence
    live = os.path.join(base, "live")
    shutil.copytree(sweep.fixture, live, symlinks=True)
    on_start(live)
    trace_path = os.path.join(base, "imaging.trace")
    from_child, to_parent = os.pipe()
    from_parent, to_child = os.pipe()
    wanted = frozenset(stops)

    def child() -> int:
        os.close(from_child)
        os.close(to_child)

        def pause(k: int) -> None:
            os.write(to_parent, _K.pack(k))
            if os.read(from_parent, 1) != b"c":
                os._exit(GONE_EXIT)

        return run_traced(scenario, run, live, trace_path, None, pause, wanted, persistence)

    pid = processes.fork(child, os.path.join(base, "imaging.error"))
    os.close(to_parent)
    os.close(from_parent)
    reader = _PrefixReader(trace_path, reference)
    mismatches: dict[int, str] = {}
    reached: set[int] = set()
    try:
        while True:
            between()
            with sweep.phases.measure("imaging run"):
                data = os.read(from_child, _K.size)
            if len(data) != _K.size:
                break
            (k,) = _K.unpack(data)
            reached.add(k)
            mismatch = reader.at(k)
            if mismatch:
                mismatches[k] = mismatch
            else:
                on_stop(k, live)
            os.write(to_child, b"c")
    finally:
        os.close(from_child)
        os.close(to_child)
        status = processes.wait(pid)
    diverged = reader.finish()
    if not diverged:
        on_end(live, status)
    ended = diverged or f"the imaging run ended with status {status} before it"
    mismatches.update({k: ended for k in wanted - reached})
    shutil.rmtree(live, ignore_errors=True)
    return mismatches


class Image:
    """The image method (:data:`IMAGE`, see the module docstring)."""

    name = "image"
    persistence = False

    def run(self, sweep: Sweep, chosen: Sequence[int]) -> SweepResult:
        return _Imaging(sweep, [sweep.points[k] for k in chosen]).run()


IMAGE: Final = Image()


class _Imaging:
    def __init__(self, sweep: Sweep, chosen: Sequence[Point]) -> None:
        self.sweep = sweep
        self.points = {point.k: point for point in chosen}
        self.checks = trials.Checks(sweep.jobs, self._body, self._trial, self._collect)
        self.checked: dict[tuple[object, ...], int] = {}  # key -> the boundary checked
        self.copies: dict[int, list[Point]] = {}  # checked boundary -> points sharing it
        self.findings: dict[int, Finding] = {}
        self.digests = Digests()

    def run(self) -> SweepResult:
        mismatches = stop_at(self.sweep, self.points, self._photograph, self.checks.service)
        results = [
            self.sweep.finding(self.points[k], {"status": "mismatch", "detail": detail})
            for k, detail in mismatches.items()
        ]
        self.checks.drain()
        for first, points in self.copies.items():
            finding = self.findings[first]
            for point in points:
                results.append(
                    attrs.evolve(finding, k=point.k, boundary=describe(point.entry), image=first)
                )
        return self.sweep.result(sorted(results, key=lambda f: f.k))

    def _trial(self, point: Point) -> str:
        return self.sweep.trial(f"k{point.k}")

    def _photograph(self, k: int, live: str) -> None:
        point = self.points[k]
        with self.sweep.phases.measure("photograph"):
            tree = read_tree(live)
            choices = tuple(point.choices(self.sweep.run.transactions))
            key = (self.digests.tree(tree), point.op_index, choices)
        first = self.checked.get(key)
        if first is not None:
            self.copies[first].append(point)
            return
        self.checked[key] = point.k
        self.copies[point.k] = [point]
        trial = self._trial(point)
        os.mkdir(trial, 0o700)
        with self.sweep.phases.measure("image write"):
            write_tree(tree, os.path.join(trial, "store"))
        self.checks.add(point)

    def _body(self, point: Point) -> Callable[[], int]:
        trial = self._trial(point)
        store, result = os.path.join(trial, "store"), os.path.join(trial, "result.json")
        return functools.partial(self.sweep.check_body, point, store, result, Phases())

    def _collect(self, point: Point, status: int) -> None:
        self.findings[point.k] = self.sweep.collect(self._trial(point), point, status)
