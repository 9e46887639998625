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

Rules of this file: the comparison as a sweep method (:data:`COMPARE`), and what "the same"
means; everything else is the other methods' pieces, reused as they are (the sweep driver's
fixture and reference, :func:`~runstore.crashsim.images.stop_at` for the photographs,
:func:`~runstore.crashsim.kill.killed_each` for the kill method's copies). The parent opens
no connection. Each point's finding is ``ok`` when both copies are the same, ``failure``
when they differ (or the kill trial left nothing), ``mismatch`` when either execution left
the reference path; ``image`` names the first point whose photograph was identical, so the
sweep's ``images`` (printed ``distinct=``) counts the different photographs.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.crashsim import trials
from runstore.crashsim.images import Tree
from runstore.crashsim.images import read_tree
from runstore.crashsim.images import stop_at
from runstore.crashsim.kill import killed_each
from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.sweep import Sweep
from runstore.crashsim.sweep import run_sweep
from runstore.crashsim.timing import Phases

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


class Compare:
    """The method comparison (:data:`COMPARE`)."""

    name = "compare"
    persistence = False

    def run(self, sweep: Sweep, chosen: Sequence[int]) -> SweepResult:
        photographs: dict[int, dict[str, str]] = {}

        def photograph(k: int, live: str) -> None:
            photographs[k] = comparable(read_tree(live))

        mismatches = stop_at(sweep, chosen, photograph)
        copies: dict[int, dict[str, object]] = {}

        def done(point: Point, trial: str, status: int) -> None:
            copies[point.k] = trials.found(trial, status)

        killed_each(sweep, [sweep.points[k] for k in chosen], _view_body, done)
        first: dict[tuple[tuple[str, str], ...], int] = {}  # a photograph -> its first point
        findings = []
        for k in chosen:
            photo = photographs.get(k)
            found = _compared(photo, mismatches.get(k, ""), copies[k])
            finding = sweep.finding(sweep.points[k], {**found, "acceptable": ""})
            if photo is not None:
                image = first.setdefault(tuple(sorted(photo.items())), k)
                finding = attrs.evolve(finding, image=image)
            findings.append(finding)
        return sweep.result(findings)


COMPARE: Final = Compare()


def compare_methods(
    scenario: Scenario,
    select: Selector[int],
    *,
    jobs: int = 2,
    directory: str | None = None,
) -> SweepResult:
    """Crash ``scenario`` at the points ``select`` chooses by both methods and compare what
    each leaves (:data:`COMPARE`)."""
    return run_sweep(scenario, select, method=COMPARE, jobs=jobs, directory=directory)


def difference_lines(result: SweepResult) -> list[str]:
    """One line per difference: the sweep's problem, and each point whose copies differ or
    could not be compared."""
    lines = [f"DIFFERENCE scenario={result.scenario} {result.problem}"] if result.problem else []
    for finding in result.results:
        if finding.status != "ok":
            lines.append(
                f"DIFFERENCE scenario={result.scenario} {finding.boundary}: {finding.detail}"
            )
    return lines


def _compared(
    photo: dict[str, str] | None, mismatch: str, copy: dict[str, object]
) -> dict[str, object]:
    """The finding at one point: the image method's ``photo`` (None with its ``mismatch``)
    against the kill trial's finding ``copy`` (its view when the trial got one)."""
    if photo is None:
        return {"status": "mismatch", "detail": mismatch}
    if copy["status"] != "ok":
        return copy
    view = copy.get("view")
    if not isinstance(view, dict):
        return {"status": "failure", "detail": f"the kill trial wrote no copy: {copy}"}
    paths = sorted(p for p in {*view, *photo} if view.get(p) != photo.get(p))
    if paths:
        return {"status": "failure", "detail": f"the copies differ in {paths}"}
    return {"status": "ok"}


def _view_body(point: Point, root: str, result_path: str, phases: Phases) -> int:
    """Trial child, after the kill: write the copy as :func:`comparable`."""
    trials.write(result_path, {"status": "ok", "view": comparable(read_tree(root))})
    return 0
