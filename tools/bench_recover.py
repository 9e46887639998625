"""Benchmark: ``RunStore.recover`` cost follows the recoverable work, not the history.

The issue's target: the ratio of ``recover()`` time with 10 expired attempts over a history
of 100,000 terminal attempts versus over 1,000 is at most 1.3, measured in one run.

Fixtures (built once per run, untimed, under ``--dir``, default the system temp dir, by
``tools/bench_recover_history.py``, whose docstring describes them): a **history** of
``--history SMALL LARGE`` (default 1,000 and 100,000) terminal attempts, each with exactly
the rows the writer gives it and its own final artifact directory on disk, built by the
writer's own functions with setup-only shortcuts that change no byte; and **the recoverable
work**, identical on both stores and built through the public API with its real
durability: 10 attempts whose reservation leases expire before the recovery clock (4
``reserved``; 6 ``executing``, of which 3 published a dataset and 2 died while publishing,
leaving a stage directory with its unreleased staging lease).

Per round (``--rounds``, default 7 per size), untimed: a fresh copy of the fixture (the
database and lock files copied; the fixture's ``artifacts/`` moved in by one rename, since
copying 100,000 object directories per round would dominate the run, and restored exactly
afterwards: recovery's additions removed, the quarantined stages copied back from a pristine
copy, the entries checked; recovery never writes inside an existing object), then
``RunStore.open``; timed: one ``store.recover(clock)``; untimed: a check of the report (10
terminals, 2 quarantined stages, nothing else). Sizes alternate (the order flips every
round) after one warm-up pass. Printed: the median per size with min-max, the ratio
median(large)/median(small) and the min-max of the per-round ratios (round i of each size
paired), then a cProfile of one more large-history pass (top ``--top``, default 15, by
cumulative time) and a phase breakdown of another (exclusive time of each step recovery
calls, by wrapping those functions; transaction own time is BEGIN/COMMIT with its fsync).

Building 100,000 takes minutes here; ``--keep`` leaves the fixtures and ``--reuse DIR``
measures them again (for example after a change to recovery).
Never read these figures as absolute: the machine is shared; compare the sides measured
together. Run: ``python tools/bench_recover.py [--history 1000 100000] [--rounds 7] [--keep]``;
``--quick`` is ``--history 200 2000 --rounds 3``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import itertools
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runstore import RunStore
from runstore.store.publication import staging
from runstore.store.recovery import recover

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))  # tools/ is not a package: the fixtures' builder lives here

from bench_recover_history import EXPIRED  # noqa: E402
from bench_recover_history import RECOVER_AT_NS  # noqa: E402
from bench_recover_history import add_expired_work  # noqa: E402
from bench_recover_history import build_history  # noqa: E402

# --- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    """A built store and what restores its ``artifacts/`` after a pass."""

    root: str
    names: frozenset[str]
    """The entries of ``artifacts/`` as built."""
    stages: str
    """A pristine copy of the stage directories (recovery quarantines them)."""

    @classmethod
    def build(cls, work: str, size: int, clock: Iterator[int]) -> tuple[Fixture, float]:
        root = os.path.join(work, f"fixture-{size}")
        os.mkdir(root)
        start = time.perf_counter()
        build_history(root, size, clock)
        built = time.perf_counter() - start
        add_expired_work(root)
        artifacts = os.path.join(root, staging.ARTIFACTS_DIR)
        names = frozenset(os.listdir(artifacts))
        stages = os.path.join(work, f"stages-{size}")
        os.mkdir(stages)
        for name in names:
            if name.startswith(staging.STAGE_PREFIX):
                shutil.copytree(os.path.join(artifacts, name), os.path.join(stages, name))
        os.sync()
        return cls(root=root, names=names, stages=stages), built

    @classmethod
    def reuse(cls, work: str, size: int) -> Fixture:
        """A fixture an earlier ``--keep`` run left in ``work``."""
        root = os.path.join(work, f"fixture-{size}")
        names = frozenset(os.listdir(os.path.join(root, staging.ARTIFACTS_DIR)))
        return cls(root=root, names=names, stages=os.path.join(work, f"stages-{size}"))


@contextlib.contextmanager
def fresh_copy(fixture: Fixture, target: str) -> Iterator[None]:
    """A copy of the fixture that recovery may change: the database and lock files copied
    into ``target``, and the fixture's ``artifacts/`` moved in (one rename: copying 100,000
    object directories per round would dominate the run). Afterwards ``artifacts/`` is
    restored exactly: what recovery added (its committed objects, ``.quarantine/``) is
    removed, the quarantined stages are copied back from a pristine copy, the directory is
    moved back, and its entries are checked against the fixture's. Recovery never writes
    inside an existing object, so every other entry is as built."""
    os.mkdir(target)
    for name in os.listdir(fixture.root):
        source = os.path.join(fixture.root, name)
        if os.path.isfile(source):
            shutil.copy2(source, os.path.join(target, name))
    moved = os.path.join(target, staging.ARTIFACTS_DIR)
    os.rename(os.path.join(fixture.root, staging.ARTIFACTS_DIR), moved)
    try:
        yield
    finally:
        for name in set(os.listdir(moved)) - fixture.names:
            remove(os.path.join(moved, name))
        for name in os.listdir(fixture.stages):
            if not os.path.exists(os.path.join(moved, name)):
                shutil.copytree(os.path.join(fixture.stages, name), os.path.join(moved, name))
        os.rename(moved, os.path.join(fixture.root, staging.ARTIFACTS_DIR))
        remove(target)
        if set(os.listdir(os.path.join(fixture.root, staging.ARTIFACTS_DIR))) != fixture.names:
            raise AssertionError(f"{fixture.root} was not restored")


def remove(path: str) -> None:
    subprocess.run(["rm", "-rf", path], check=True)


def _clock() -> int:
    return RECOVER_AT_NS


def timed_recover(fixture: Fixture, target: str) -> float:
    with fresh_copy(fixture, target):
        store = RunStore.open(target)
        try:
            start = time.perf_counter()
            report = store.recover(_clock)
            elapsed = time.perf_counter() - start
        finally:
            store.close()
        _check(report)
    return elapsed


def _check(report: Any) -> None:
    if len(report.terminals) != EXPIRED or len(report.quarantined_stages) != 2:
        raise AssertionError(f"unexpected recovery report: {report!r}")
    if report.rejected_artifacts or report.imported_artifacts or report.busy_stages:
        raise AssertionError(f"unexpected recovery report: {report!r}")


def profile_recover(fixture: Fixture, target: str, top: int) -> None:
    with fresh_copy(fixture, target):
        with RunStore.open(target) as store:
            profiler = cProfile.Profile()
            profiler.enable()
            report = store.recover(_clock)
            profiler.disable()
        _check(report)
    print(f"cProfile of one recover() over the largest history, top {top} by cumulative time:")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(top)


class _Phases:
    """Exclusive time per label: a nested timed call pauses its caller's clock."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._stack: list[str] = []
        self._since = 0.0

    def _charge(self) -> None:
        now = time.perf_counter()
        if self._stack:
            label = self._stack[-1]
            self.spent[label] = self.spent.get(label, 0.0) + now - self._since
        self._since = now

    @contextlib.contextmanager
    def timing(self, label: str) -> Iterator[None]:
        self._charge()
        self._stack.append(label)
        try:
            yield
        finally:
            self._charge()
            self._stack.pop()


_STEPS: tuple[tuple[str, Any, str], ...] = (
    # In the order recover() reaches them; each is called through a module (or class)
    # attribute, so wrapping the attribute times every call and leaves the pass unchanged.
    ("recovery lock", recover.staging.RecoveryLock, "__enter__"),
    ("clock sample", recover.publish, "sample"),
    ("list artifacts/ by name", recover.disk, "list_artifacts"),
    ("staging leases, one scan", recover.recover_tx, "stage_leases"),
    ("try stage locks", recover.disk.StageLock, "__init__"),
    ("registered names", recover.recover_tx, "registered_names"),
    ("parse unregistered names", recover.disk, "addresses"),
    ("nonterminal attempts", recover.recover_tx, "nonterminal_attempts"),
    ("effective time", recover.recover_tx, "effective"),
    ("recovery cause", recover.recover_tx, "cause_at"),
    ("read candidate objects", recover.disk, "read_object"),
    ("candidates' attempt states", recover.recover_tx, "attempt_states"),
    ("load attempt", recover, "load_attempt"),
    ("evaluate candidate", recover.recover_tx, "evaluate"),
    ("verify dependency", recover.disk, "verifies"),
    ("sync artifacts/", recover.disk, "sync_artifacts"),
    ("import outcome", recover.recover_tx, "import_outcome"),
    ("move to finalizing", recover.recover_tx, "move_to_finalizing"),
    ("failure document", recover.recover_tx, "failure_document"),
    ("create stage", recover.staging, "create_stage"),
    ("scan stage", recover.objects, "scan"),
    ("complete failure object", recover.objects, "complete"),
    ("object address", recover.objects, "address"),
    ("place failure object", recover.publish, "place"),
    ("artifact registration", recover.objects, "registration"),
    ("commit failure", recover.recover_tx, "commit_failure"),
    ("remove stage", recover.staging, "remove_stage"),
    ("reread staging leases", recover.recover_tx, "reread"),
    ("quarantine stages", recover.disk, "quarantine"),
    ("stage exists", recover.disk, "stage_exists"),
    ("release staging leases", recover.recover_tx, "release_stage_leases"),
    ("release stage locks", recover.disk.StageLock, "release"),
    ("register orphans", recover.recover_tx, "register_orphans"),
    ("release recovery lock", recover.staging.RecoveryLock, "__exit__"),
)
"""The steps :func:`runstore.store.recovery.recover.recover` takes: every function it calls in
``disk``, ``recover_tx``, ``staging``, ``objects`` and ``publish``, the
locks, and ``load_attempt`` (a query inside two of its transactions)."""


def _step_label(description: str, owner: Any, name: str) -> str:
    return f"{description} ({owner.__name__.rsplit('.', 1)[-1]}.{name})"


@contextlib.contextmanager
def _timed_steps(phases: _Phases) -> Iterator[list[str]]:
    """Wrap every step of :data:`_STEPS` in a timer for the duration; yields the labels."""
    originals = []
    try:
        for description, owner, name in _STEPS:
            label = _step_label(description, owner, name)
            original = getattr(owner, name)
            originals.append((owner, name, original))

            def timed(*args: Any, _label: str = label, _original: Any = original, **kw: Any) -> Any:
                with phases.timing(_label):
                    return _original(*args, **kw)

            setattr(owner, name, timed)
        yield [_step_label(*step) for step in _STEPS]
    finally:
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)


def phase_breakdown(fixture: Fixture, target: str) -> None:
    """One more pass over a fresh copy with the pass's steps (:data:`_STEPS`) wrapped in
    timers; what a transaction spends outside them is BEGIN/COMMIT with its fsync."""
    phases = _Phases()
    with fresh_copy(fixture, target), RunStore.open(target) as store:
        write = store._write

        def timed_write(operation: Any) -> Any:
            with phases.timing("transaction BEGIN/COMMIT (store._write, own time)"):
                return write(operation)

        store._write = timed_write  # type: ignore[method-assign]
        with _timed_steps(phases) as labels:
            start = time.perf_counter()
            report = store.recover(_clock)
            total = time.perf_counter() - start
        _check(report)
    print(f"phases of one recover() over the largest history (total {_ms(total)}):")
    spent = phases.spent
    for label, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(f"  {label:62} {_ms(seconds):>10} ({seconds / total:5.1%})")
    rest = total - sum(spent.values())
    print(f"  {'everything else':62} {_ms(rest):>10} ({rest / total:5.1%})")
    idle = [label for label in labels if label not in spent]
    if idle:
        print("  not called in this pass: " + ", ".join(idle))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--history",
        type=int,
        nargs=2,
        default=None,
        metavar=("SMALL", "LARGE"),
        help="terminal attempts in the two histories (default 1000 100000)",
    )
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per size (7)")
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    parser.add_argument("--quick", action="store_true", help="--history 200 2000 --rounds 3")
    parser.add_argument("--top", type=int, default=15, help="profile entries shown (15)")
    parser.add_argument("--keep", action="store_true", help="keep the fixtures afterwards")
    parser.add_argument(
        "--reuse", default=None, metavar="DIR", help="reuse the fixtures a --keep run left in DIR"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip profile and phases")
    options = parser.parse_args(argv)
    history = options.history or ([200, 2_000] if options.quick else [1_000, 100_000])
    rounds = options.rounds if options.rounds is not None else (3 if options.quick else 7)
    if rounds < 1 or min(history) < 0:
        parser.error("rounds must be positive and histories non-negative")
    small, large = history

    work = options.reuse or tempfile.mkdtemp(prefix="bench-recover-", dir=options.dir)
    print(
        f"bench_recover: {work}, histories {small} and {large}, {rounds} rounds, "
        f"{EXPIRED} expired attempts, {os.cpu_count()} CPUs"
    )
    try:
        fixtures = {}
        ticks = itertools.count(1_000)
        for size in history:
            if options.reuse:
                fixtures[size] = Fixture.reuse(work, size)
                continue
            fixtures[size], built = Fixture.build(work, size, ticks)
            print(f"  built history {size}: {built:.1f} s", flush=True)
        target = os.path.join(work, "copy")
        timed_recover(fixtures[small], target)  # warm-up: imports, first-touch caches
        times: dict[int, list[float]] = {small: [], large: []}
        for index in range(rounds):
            order = (small, large) if index % 2 == 0 else (large, small)
            for size in order:
                times[size].append(timed_recover(fixtures[size], target))
        med = {size: statistics.median(values) for size, values in times.items()}
        ratios = [b / a for a, b in zip(times[small], times[large], strict=True)]
        for size in history:
            values = times[size]
            print(
                f"recover() with history {size:>7}: median {_ms(med[size])}"
                f" (min-max {_ms(min(values))}-{_ms(max(values))})"
            )
        print(
            f"ratio median({large})/median({small}): {med[large] / med[small]:.2f}"
            f" (per round {min(ratios):.2f}-{max(ratios):.2f}; target <= 1.3)"
        )
        print("  per round: " + ", ".join(f"{r:.2f}" for r in ratios))
        if not options.no_profile:
            profile_recover(fixtures[large], target, options.top)
            phase_breakdown(fixtures[large], target)
    finally:
        if options.keep or options.reuse:
            print(f"fixtures kept in {work}")
        else:
            remove(work)


if __name__ == "__main__":
    main()
