"""Benchmark: every reading command of ``runstore`` on a 10,000-slot and a 100,000-slot store,
side by side, as a user runs them (the installed console script, one subprocess each).

The stores are ``tools/scale_store.py``'s: 100 candidates x 100 problems with one
repetition (10k) and with ten (100k), plus a small second campaign; a few percent of slots
failed with a traceback on stderr, some retried, a few never run. They are built untimed
under ``--cache DIR`` (default ``<system temp>/runstore-bench-scale``), one directory per
builder version and shape (``<version>-<C>x<P>x<R>``), and reused while the builder's
version is unchanged (a store counts as built once its ``.json`` summary exists beside it).

Measured per command and store: the wall time of the child process (start to exit, the
interpreter's start included, as a user waits for it) and its peak RSS (``ru_maxrss`` of
that one child, from ``os.wait4``; ``getrusage(RUSAGE_CHILDREN)`` would be cumulative),
both taken by a small launcher the child is forked from (:data:`LAUNCHER`). A
command the installed CLI does not have prints ``n/a``; one that fails prints its exit
status. ``--rounds N`` (default 1) takes the median of N runs, the sizes' order flipping
every round. Before each run the store's database files are read once (:func:`warm`), so
every command starts from the page cache a store in use has, not from whatever the
previous command left there.

The first row, ``(snapshot)``, is a process that only takes and closes the inspection
snapshot (SPEC.md section 15.6: the copy, ``quick_check``, the schema check): the floor
every other command but ``validate`` stands on.

Printed: one table of command, both times, the time-per-slot ratio (100k / 10k, slots
counted), both peaks in MB, and each target's verdict: ``status`` at most 1 s at 10k and
5 s at 100k; every command's time per slot at 100k at most 1.2x its 10k one; peak memory
not growing with the store (100k's peak at most 1.25x 10k's). Never read the figures as
absolute: the machine is shared; compare the two sides measured together.

Run: ``python tools/bench_scale.py [--cache DIR] [--rounds N]``; ``--quick`` measures two
small stores (60 and 420 slots) instead: a smoke run, whose verdicts mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import attrs
import scale_store
from scale_store import Shape

RUNSTORE: Final = str(Path(sys.executable).with_name("runstore"))
SIZES: Final = {"10k": Shape(100, 100, 1), "100k": Shape(100, 100, 10)}
QUICK_SIZES: Final = {"small": Shape(4, 10, 1), "large": Shape(4, 10, 10)}
STATUS_LIMITS_S: Final = (1.0, 5.0)
PER_SLOT_LIMIT: Final = 1.2
MEMORY_LIMIT: Final = 1.25
EXPLAINED: Final = 31
"""The plan index of the slot ``explain`` shows (one with two failed attempts)."""

SNAPSHOT: Final = "(snapshot)"
"""The floor under every row but ``validate``'s: a process that only takes and closes the
inspection snapshot (imports, the copy, ``quick_check`` and the schema check)."""
SNAPSHOT_CODE: Final = (
    "import sys; from runstore.inspection.snapshot import Snapshot; "
    "Snapshot.take(sys.argv[1]).close()"
)

COMMANDS: Final = (
    (SNAPSHOT, ()),
    ("status", ()),
    ("status --json", ("--json",)),
    ("status --slots", ("--slots",)),
    ("explain", ()),
    ("campaigns", ()),
    ("failures", ()),
    ("export", ()),
    ("validate", ()),
    ("validate --quick", ("--quick",)),
    ("audit", ()),
)
"""Each row: its label and the options after ``runstore <command> --store ROOT``."""
EXIT_STATUSES: Final = {"failures": (0, 1)}
"""Exit statuses that mean success (``failures`` exits 1 when it lists failures)."""


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_mb: float


@dataclass(frozen=True)
class Outcome:
    """One command on one store: its samples, or why there are none."""

    samples: tuple[Sample, ...] = ()
    missing: str | None = None

    def median(self, field: str) -> float | None:
        if not self.samples:
            return None
        return float(statistics.median(getattr(sample, field) for sample in self.samples))


def build(cache: str, shape: Shape) -> tuple[str, int, str]:
    """The store of ``shape`` under ``cache`` (built unless already there), its slots and
    the id of the slot ``explain`` shows."""
    name = f"{scale_store.BUILDER_VERSION}-{shape.candidates}x{shape.problems}x{shape.repetitions}"
    root = os.path.join(cache, name)
    marker = f"{root}.json"
    if os.path.exists(marker) and os.path.isdir(root):
        with open(marker, encoding="utf-8") as handle:
            built = json.load(handle)
        print(f"reusing {root} ({built['slots']} slots)", flush=True)
        return root, int(built["slots"]), str(built["explained"])
    shutil.rmtree(root, ignore_errors=True)
    print(f"building {shape.slots} slots into {root} ...", flush=True)
    summary = scale_store.build(root, shape)
    explained = scale_store.slot_plans(shape)[EXPLAINED].attempt_slot
    assert explained is not None
    with open(marker, "w", encoding="utf-8") as handle:
        json.dump({**attrs.asdict(summary), "explained": explained.id}, handle)
    print(
        f"built {summary.slots} slots, {summary.attempts} attempts, {summary.artifacts} "
        f"artifacts, {summary.events} events in {summary.seconds:.1f} s; {summary.fates}",
        flush=True,
    )
    return root, summary.slots, explained.id


def available(command: str) -> bool:
    """Whether the installed CLI has ``command``."""
    if command == SNAPSHOT:
        return True
    done = subprocess.run(
        [RUNSTORE, command, "--help"], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


def arguments(label: str, extra: Sequence[str], root: str, scratch: str, slot: str) -> list[str]:
    command = label.split()[0]
    if command == SNAPSHOT:
        return [sys.executable, "-c", SNAPSHOT_CODE, root]
    target = [slot] if command == "explain" else []
    out = ["--out", os.path.join(scratch, "export")] if command == "export" else []
    return [RUNSTORE, command, *target, "--store", root, *extra, *out]


LAUNCHER: Final = """
import os, sys, time
report, command = int(sys.argv[1]), sys.argv[2:]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(command[0], command)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - started
os.write(report, f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}".encode())
"""
"""Runs the measured command as its own child and reports that child's wall time, peak RSS
(``ru_maxrss`` from ``os.wait4``, KiB) and exit status on a pipe. Linux starts a child's
``ru_maxrss`` at its parent's resident size at the fork (exec keeps it), so the command is
forked from this small interpreter (``-S``), never from the benchmark itself, which holds
the stores' plans."""


def warm(root: str) -> None:
    """Read the store's database files once, so every command starts from the same page
    cache: what a store in use has (a command measured right after another one read
    gigabytes of artifacts would otherwise pay for reading the database from disk, by
    chance; measured: the first snapshot of the 100k store 7.0 s, the next ones 2.2 s)."""
    for name in ("run.sqlite3", "run.sqlite3-wal"):
        try:
            with open(os.path.join(root, name), "rb") as handle:
                while handle.read(1 << 24):
                    pass
        except FileNotFoundError:
            continue


def measure(command: list[str], accepted: Sequence[int]) -> Sample | str:
    """Run ``command`` once: its wall time and peak RSS, or why it failed."""
    env = {**os.environ, "COLUMNS": "120"}
    readable, writable = os.pipe()
    launcher = [sys.executable, "-S", "-c", LAUNCHER, str(writable), *command]
    with tempfile.TemporaryFile() as output:
        try:
            subprocess.run(
                launcher,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                pass_fds=(writable,),
                check=False,
            )
        finally:
            os.close(writable)
        with os.fdopen(readable, "rb") as report:
            seconds, peak_kib, code = report.read().decode().split()
        if int(code) not in accepted:
            output.seek(0)
            tail = output.read()[-400:].decode("utf-8", "replace")
            return f"exit {code}: {tail.strip()}"
    return Sample(seconds=float(seconds), peak_mb=int(peak_kib) / 1024)


def run(roots: dict[str, tuple[str, int, str]], rounds: int) -> dict[tuple[str, str], Outcome]:
    """Every command on every store, ``rounds`` times. ``roots``: size label -> (root,
    slots, the explained slot's id)."""
    found: dict[tuple[str, str], list[Sample]] = {}
    outcomes: dict[tuple[str, str], Outcome] = {}
    labels = list(roots)
    for label, extra in COMMANDS:
        command = label.split()[0]
        if not available(command):
            for size in labels:
                outcomes[label, size] = Outcome(missing="n/a")
            continue
        for number in range(rounds):
            for size in labels if number % 2 == 0 else list(reversed(labels)):
                if (label, size) in outcomes:
                    continue
                root, _, slot = roots[size]
                warm(root)
                scratch = tempfile.mkdtemp(prefix="bench-scale-")
                try:
                    accepted = EXIT_STATUSES.get(command, (0,))
                    sample = measure(arguments(label, extra, root, scratch, slot), accepted)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                if isinstance(sample, str):
                    outcomes[label, size] = Outcome(missing=sample)
                    print(f"  {label} {size}: {sample}", flush=True)
                    continue
                found.setdefault((label, size), []).append(sample)
                print(
                    f"  {label} {size}: {sample.seconds:.2f} s, {sample.peak_mb:.0f} MB",
                    flush=True,
                )
    for key, samples in found.items():
        outcomes.setdefault(key, Outcome(samples=tuple(samples)))
    return outcomes


def _cell(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def table(
    outcomes: dict[tuple[str, str], Outcome], sizes: dict[str, tuple[str, int, str]]
) -> list[str]:
    """The report: one row per command, then the verdicts."""
    small, large = list(sizes)
    slots = {size: sizes[size][1] for size in sizes}
    header = (
        f"{'command':<18} {small + ' s':>9} {large + ' s':>9} {'per-slot':>9} "
        f"{small + ' MB':>9} {large + ' MB':>9}"
    )
    lines = [header, "-" * len(header)]
    verdicts: list[str] = []
    for label, _ in COMMANDS:
        first, second = outcomes[label, small], outcomes[label, large]
        times = first.median("seconds"), second.median("seconds")
        peaks = first.median("peak_mb"), second.median("peak_mb")
        ratio = None
        if times[0] and times[1] is not None:
            ratio = (times[1] / slots[large]) / (times[0] / slots[small])
        lines.append(
            f"{label:<18} {_cell(times[0], 2):>9} {_cell(times[1], 2):>9} "
            f"{_cell(ratio, 2):>9} {_cell(peaks[0], 0):>9} {_cell(peaks[1], 0):>9}"
        )
        for outcome, size in ((first, small), (second, large)):
            if outcome.missing not in (None, "n/a"):
                verdicts.append(f"FAILED  {label} on {size}: {outcome.missing}")
        if ratio is not None:
            mark = "ok" if ratio <= PER_SLOT_LIMIT else "OVER"
            verdicts.append(f"{mark:<7} {label}: time per slot {ratio:.2f}x (<= {PER_SLOT_LIMIT})")
        if peaks[0] and peaks[1] is not None:
            growth = peaks[1] / peaks[0]
            mark = "ok" if growth <= MEMORY_LIMIT else "OVER"
            verdicts.append(f"{mark:<7} {label}: peak memory {growth:.2f}x (<= {MEMORY_LIMIT})")
    status = (
        outcomes["status", small].median("seconds"),
        outcomes["status", large].median("seconds"),
    )
    for size, seconds, limit in zip((small, large), status, STATUS_LIMITS_S, strict=True):
        if seconds is not None:
            mark = "ok" if seconds <= limit else "OVER"
            verdicts.append(f"{mark:<7} status at {size}: {seconds:.2f} s (<= {limit:g} s)")
    return [*lines, "", *verdicts]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "runstore-bench-scale"),
        help="build (or reuse) the stores here",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="two small stores: a smoke run")
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds takes at least 1")
    os.makedirs(options.cache, exist_ok=True)
    sizes = QUICK_SIZES if options.quick else SIZES
    roots: dict[str, tuple[str, int, str]] = {}
    for label, shape in sizes.items():
        roots[label] = build(options.cache, shape)
    outcomes = run(roots, options.rounds)
    print()
    for line in table(outcomes, roots):
        print(line)
    return 1 if any(o.missing not in (None, "n/a") for o in outcomes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
