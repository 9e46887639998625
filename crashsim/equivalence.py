"""The two crash methods leave the same store: at each chosen point, the kill method's copy
(a grandchild killed with ``os._exit`` there) and the image method's photograph agree on
everything SQLite and the store read after the crash.

What "the same" means. Every file and directory must match in name, kind, mode and bytes,
except two files whose bytes differ between *executions* for reasons unrelated to the
crash (two kill-method trials at the same point differ in them just the same):

* the WAL: SQLite draws each WAL's salts from its random generator, which it reseeds in
  every new process, and the frame checksums chain from them. The WAL is compared as what
  SQLite replays from it: its header (magic, format, page size, checkpoint sequence), then
  each frame (page number, commit size, page bytes) up to the last commit frame of the
  valid prefix, a frame being valid while its salts equal the header's and its checksum
  continues the chain (SQLite's ``walIndexRecover`` rule);
* the ``-shm`` file: the wal-index. After a crash the first process to open the database
  (holding no other connection) truncates it and rebuilds it from the WAL (SQLite's unix
  VFS, ``unixLockSharedMemory``), so only its presence is compared.

Rules of this file: test-only; the campaign machinery of the other modules is reused as is
(fixture, reference, :func:`~runstore.crashsim.images.stop_at`, the kill trial's
grandchild); the parent opens no connection.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Sequence
from typing import Final

import attrs
from runstore.crashsim import processes, trials
from runstore.crashsim.harness import ModelRun, run_traced, warm
from runstore.crashsim.images import Tree, read_tree, stop_at
from runstore.crashsim.points import Point, Selector, check_prefix, points_of
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import Entry, describe, read_trace

WAL_SUFFIX: Final = "-wal"
SHM_SUFFIX: Final = "-shm"
_WAL_ORDER: Final = {0x377F0682: "<", 0x377F0683: ">"}
"""WAL magic -> the byte order of the words its checksums sum."""
_MASK: Final = 0xFFFFFFFF


def wal_checksum(data: bytes, order: str, s0: int, s1: int) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` continued from ``(s0, s1)``, words in ``order``."""
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for index in range(0, len(words), 2):
        s0 = (s0 + words[index] + s1) & _MASK
        s1 = (s1 + words[index + 1] + s0) & _MASK
    return s0, s1


def wal_content(data: bytes) -> bytes:
    """What SQLite replays from the WAL file ``data`` (see the module docstring)."""
    if len(data) < 32:
        return b"short:" + data
    magic, _, page_size, _ = struct.unpack(">4I", data[:16])
    order = _WAL_ORDER.get(magic)
    if order is None:
        return b"no magic:" + data
    s0, s1 = wal_checksum(data[:24], order, 0, 0)
    if (s0, s1) != struct.unpack(">2I", data[24:32]):
        return b"bad header:" + data[:16]
    salts = data[16:24]
    frames: list[bytes] = []
    committed = 0
    offset = 32
    while offset + 24 + page_size <= len(data):
        header = data[offset : offset + 24]
        page = data[offset + 24 : offset + 24 + page_size]
        if header[8:16] != salts:
            break
        s0, s1 = wal_checksum(header[:8] + page, order, s0, s1)
        if (s0, s1) != struct.unpack(">2I", header[16:24]):
            break
        frames.append(header[:8] + page)
        if struct.unpack(">I", header[4:8])[0] != 0:
            committed = len(frames)
        offset += 24 + page_size
    return b"".join([data[:16], *frames[:committed]])


def comparable(tree: Tree) -> dict[str, str]:
    """Each entry's path -> a digest of its kind, mode and (for the WAL and ``-shm``, see
    the module docstring) bytes."""
    view = {}
    for relative, kind, mode, data in tree:
        if relative.endswith(WAL_SUFFIX):
            data = wal_content(data)
        elif relative.endswith(SHM_SUFFIX):
            data = b""
        digest = hashlib.sha256(f"{kind}:{mode:o}:".encode() + data).hexdigest()
        view[relative] = digest
    return view


@attrs.frozen
class Comparison:
    """The points compared and, for each that differed, a line saying where."""

    scenario: str
    compared: int
    differences: tuple[str, ...]
    distinct: int = 0
    """How many different photographs the compared points left (at least two whenever a
    step writes something: equality point by point is then not vacuous)."""


def compare_methods(
    scenario: Scenario,
    select: Selector | None = None,
    *,
    jobs: int = 2,
    directory: str | None = None,
) -> Comparison:
    """Crash ``scenario`` at the points ``select`` chooses (every boundary when None) by
    both methods and compare what each leaves."""
    warm()
    run = ModelRun(scenario)
    base = tempfile.mkdtemp(prefix=f"runstore-crashsim-compare-{scenario.name}-", dir=directory)
    try:
        fixture, problem = trials.prepare(scenario, run, base, Phases())
        reference: list[Entry] = []
        if not problem:
            reference, problem = trials.reference(scenario, run, base, fixture, Phases())
        if problem:
            return Comparison(scenario.name, 0, (problem,))
        points = points_of(reference)
        chosen = sorted(set(select(points) if select is not None else range(len(points))))
        photographs: dict[int, dict[str, str]] = {}

        def photograph(k: int, live: str) -> None:
            photographs[k] = comparable(read_tree(live))

        mismatches = stop_at(scenario, run, base, fixture, reference, chosen, photograph)
        killed = _killed(scenario, run, base, fixture, reference, [points[k] for k in chosen], jobs)
        differences = []
        for k in chosen:
            where = describe(points[k].entry)
            copy = killed[k]
            if k in mismatches or isinstance(copy, str):
                differences.append(f"{where}: {mismatches.get(k) or copy}")
                continue
            photo = photographs[k]
            paths = sorted(p for p in {*copy, *photo} if copy.get(p) != photo.get(p))
            if paths:
                differences.append(f"{where}: the copies differ in {paths}")
        distinct = len({tuple(sorted(view.items())) for view in photographs.values()})
        return Comparison(scenario.name, len(chosen), tuple(differences), distinct)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _killed(
    scenario: Scenario,
    run: ModelRun,
    base: str,
    fixture: str,
    reference: Sequence[Entry],
    chosen: Sequence[Point],
    jobs: int,
) -> dict[int, dict[str, str] | str]:
    """The kill method's copy at each point, as :func:`comparable` (or why there is none)."""
    found: dict[int, dict[str, str] | str] = {}

    def trial_of(point: Point) -> str:
        return os.path.join(base, f"kill{point.k}")

    def body(point: Point) -> Callable[[], int]:
        return functools.partial(
            _kill_body, scenario, run, fixture, trial_of(point), reference, point
        )

    def done(point: Point, status: int) -> None:
        trial = trial_of(point)
        result = trials.load(os.path.join(trial, "result.json"))
        shutil.rmtree(trial, ignore_errors=True)
        view = result.get("view")
        if isinstance(view, dict):
            found[point.k] = {str(path): str(digest) for path, digest in view.items()}
        else:
            error = result.get("mismatch") or trials.read_last_line(trial + ".error")
            found[point.k] = f"the kill trial ended with {status}: {error}"

    trials.each_point(chosen, jobs, body, trial_of, done)
    return found


def _kill_body(
    scenario: Scenario,
    run: ModelRun,
    fixture: str,
    trial: str,
    reference: Sequence[Entry],
    point: Point,
) -> int:
    os.mkdir(trial, 0o700)
    root = os.path.join(trial, "store")
    shutil.copytree(fixture, root, symlinks=True)
    trace_path = os.path.join(trial, "trace")
    status = processes.run(lambda: run_traced(scenario, run, root, trace_path, point.k))
    mismatch = check_prefix(reference, read_trace(trace_path), point.k, status)
    result: dict[str, object] = {"mismatch": mismatch} if mismatch else {}
    if not mismatch:
        result["view"] = comparable(read_tree(root))
    trials.write(os.path.join(trial, "result.json"), result)
    return 0
