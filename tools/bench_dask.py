"""Benchmark: how many no-op slots per second the coordinator finishes with the local
executor and with a Dask ``LocalCluster`` of the same worker count, and where the time goes.

The campaign: one candidate x ``--slots`` problems (one-shot slots), written as TOML into
a temporary directory and read with ``load_campaign``. The worker is as cheap as a valid
one gets: ``/bin/sh -c`` writing ``{"metrics":{"x":1}}`` to
``$RUNSTORE_OUTPUT_DIR/result.json``.

Each round runs ``run_campaign`` in-process (no-op reporter, ``RunOptions(jobs=workers)``)
once per executor, each on a fresh store (``create_root`` then ``RunStore.open``), the order
of the two flipping every round: ``LocalExecutor(workers)``, then
``open_dask(None, workers, orphan_after_s=<lease seconds>)`` (a LocalCluster of ``workers``
single-threaded worker processes). The cluster's start-up and the executors' ``close`` are
timed apart and left out of the slots/s figure. Around the executor sits a proxy that sums
the wall time spent inside ``submit``, inside ``wait`` and inside its handles' ``result``
(for Dask, fetching the result from the worker), and counts the calls; the rest of
``run_campaign``'s wall time is the coordinator's own work. That rest is split further by
timing (wrapping, for the length of the run) the attempt steps the coordinator calls:
``start`` (reserve, read inputs, advance to executing), ``finish`` (judge the result,
publish its artifacts, commit the terminal), ``renew`` (every renewal, on either of the
lease keeper's threads); ``setup`` is the time before the first ``submit`` (registration of
every slot and planning); ``other`` is what is left (the loop's bookkeeping, the final
query of the slots' progress; for Dask also the GIL and CPU its client's event loop thread
takes from the coordinator's thread).

Run: ``python tools/bench_dask.py [--slots 2000] [--workers 2] [--rounds 1] [--keep DIR]``
(``--slots 200`` is a quick check; ``--keep DIR`` leaves the campaign file and the stores in
``DIR``, which must be empty or not exist yet). Needs the dask extra
(``pip install 'runstore[dask]'``). Type-checked like the package:
``python tools/typecheck.py && MYPYPATH=.typecheck mypy tools/bench_dask.py``.

Output, per run as it ends (``seconds`` is ``run_campaign``'s wall time; the percentages
are of it and submit + wait + result + coordinator = 100%)::

    round 1: local  workers=2 slots=2000 seconds=…  slots/s=…  submit=…%  wait=…%
      result=…%  coordinator=…%  close=…s
      coordinator: setup=…s (…%, registration and planning)  start=…%  finish=…%
      renew=…%  other=…%
      loop only: …s, … slots/s, … ms/slot (per slot: submit … ms, …)  calls: …
    verify local  accepted=2000 distinct_slots=2000 attempts=2000 …: ok

(the Dask line adds ``cluster_start=…s``), then the median slots/s per executor and
``ratio dask/local slots/s = …``. A large ``wait`` share means the coordinator sat idle
waiting for workers (the workers, or the executor's round trip to them, are the limit); a
large ``coordinator`` share means the store work between waits is the limit (with
jobs = workers, the workers mostly sit idle meanwhile). ``verify`` checks, through a
read-only SQLite connection after the store is closed, that every slot holds exactly one
attempt and it is accepted; the exit status is 1 otherwise. Never read the figures as
absolute: the machine may be shared; compare the sides measured together.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import ParamSpec
from typing import TypeVar

from runstore.canonical import JSON
from runstore.runner import attempt
from runstore.runner.campaign import Campaign
from runstore.runner.campaign_file import load_campaign
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import RunSummary
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import Executor
from runstore.runner.executor import WorkHandle
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.store import RunStore
from runstore.store.store_root import DATABASE_NAME
from runstore.store.store_root import create_root

KINDS = ("local", "dask")
LEASE_SECONDS = 30
TIMEOUT_SECONDS = 60
WORKER = (
    "/bin/sh",
    "-c",
    # Braces doubled: the campaign reader expands {name} placeholders in arguments.
    'printf \'{{"metrics":{{"x":1}}}}\' > "$RUNSTORE_OUTPUT_DIR/result.json"',
)

P = ParamSpec("P")
R = TypeVar("R")


# --- the campaign --------------------------------------------------------------------------


def write_campaign(directory: str, slots: int) -> str:
    """A campaign file of one no-op candidate x ``slots`` problems in ``directory``."""
    lines = [
        "[campaign]",
        'name = "bench-dask"',
        f"timeout_seconds = {TIMEOUT_SECONDS}",
        f"lease_seconds = {LEASE_SECONDS}",
        "",
        "[[candidates]]",
        'name = "noop"',
        f"command = [{', '.join(json.dumps(argument) for argument in WORKER)}]",
    ]
    for index in range(slots):
        lines += ["", "[[problems]]", f'name = "p{index:05d}"']
    path = os.path.join(directory, "campaign.toml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def quiet(event: str, fields: dict[str, JSON]) -> None:
    """The no-op reporter."""


# --- timing --------------------------------------------------------------------------------


@dataclass
class Tally:
    """Seconds spent inside, and calls of, one kind of call."""

    seconds: float = 0.0
    calls: int = 0


@dataclass
class Timings:
    submit: Tally = field(default_factory=Tally)
    wait: Tally = field(default_factory=Tally)
    result: Tally = field(default_factory=Tally)
    steps: dict[str, Tally] = field(default_factory=dict)
    first_submit: float | None = None
    """``time.perf_counter()`` at the first submit."""


class TimedHandle:
    """A :class:`WorkHandle` that delegates to ``inner`` and times ``result``."""

    def __init__(self, inner: WorkHandle, tally: Tally) -> None:
        self.inner, self.tally = inner, tally

    def done(self) -> bool:
        return self.inner.done()

    def result(self) -> WorkResult:
        started = time.perf_counter()
        try:
            return self.inner.result()
        finally:
            self.tally.seconds += time.perf_counter() - started
            self.tally.calls += 1

    def cancel(self) -> None:
        self.inner.cancel()


class TimedExecutor:
    """An :class:`Executor` that delegates to ``inner`` and times ``submit``, ``wait`` and
    its handles' ``result``."""

    def __init__(self, inner: Executor, timings: Timings) -> None:
        self.inner, self.timings = inner, timings

    def submit(self, order: WorkOrder) -> TimedHandle:
        started = time.perf_counter()
        if self.timings.first_submit is None:
            self.timings.first_submit = started
        try:
            return TimedHandle(self.inner.submit(order), self.timings.result)
        finally:
            self.timings.submit.seconds += time.perf_counter() - started
            self.timings.submit.calls += 1

    def wait(self, handles: Collection[WorkHandle], timeout_s: float) -> set[WorkHandle]:
        started = time.perf_counter()
        try:
            by_inner: dict[WorkHandle, WorkHandle] = {}
            for handle in handles:
                assert isinstance(handle, TimedHandle)
                by_inner[handle.inner] = handle
            return {by_inner[done] for done in self.inner.wait(list(by_inner), timeout_s)}
        finally:
            self.timings.wait.seconds += time.perf_counter() - started
            self.timings.wait.calls += 1

    def close(self) -> None:
        self.inner.close()


def timed(function: Callable[P, R], tally: Tally) -> Callable[P, R]:
    """``function``, adding its wall time and calls to ``tally``."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            tally.seconds += time.perf_counter() - started
            tally.calls += 1

    return wrapper


@contextlib.contextmanager
def timed_steps(timings: Timings) -> Iterator[None]:
    """For the block, the coordinator's calls of ``attempt.start`` and ``finish`` (looked
    up on the module at each call) and every ``RunStore.renew`` (the lease keeper's, on the
    coordinator's thread or its own) are timed into ``timings.steps``."""
    original = (attempt.start, attempt.finish, RunStore.renew)
    timings.steps = {name: Tally() for name in ("start", "finish", "renew")}
    attempt.start = timed(attempt.start, timings.steps["start"])
    attempt.finish = timed(attempt.finish, timings.steps["finish"])
    RunStore.renew = timed(RunStore.renew, timings.steps["renew"])  # type: ignore[method-assign]
    try:
        yield
    finally:
        attempt.start, attempt.finish, RunStore.renew = original  # type: ignore[method-assign]


# --- one run -------------------------------------------------------------------------------


@dataclass
class Run:
    kind: str
    slots: int
    seconds: float
    timings: Timings
    setup_seconds: float
    cluster_start: float
    close_seconds: float
    summary: RunSummary
    verified: tuple[int, int, int]
    """accepted attempts, distinct slots among them, attempts in all."""

    @property
    def rate(self) -> float:
        return self.slots / self.seconds


def open_kind(kind: str, workers: int) -> Executor:
    if kind == "local":
        from runstore.runner.local import LocalExecutor

        return LocalExecutor(workers)
    from runstore.runner.dask_executor import open_dask

    return open_dask(None, workers, orphan_after_s=float(LEASE_SECONDS))


def run_one(kind: str, campaign: Campaign, workers: int, root: str) -> Run:
    """Run ``campaign`` on a fresh store at ``root`` through a new ``kind`` executor."""
    create_root(root)
    timings = Timings()
    began = time.perf_counter()
    inner = open_kind(kind, workers)
    cluster_start = time.perf_counter() - began
    executor = TimedExecutor(inner, timings)
    try:
        with RunStore.open(root) as store, timed_steps(timings):
            started = time.perf_counter()
            summary = run_campaign(store, campaign, executor, RunOptions(jobs=workers), quiet)
            ended = time.perf_counter()
    finally:
        closing = time.perf_counter()
        executor.close()
        close_seconds = time.perf_counter() - closing
    first = timings.first_submit if timings.first_submit is not None else ended
    return Run(
        kind=kind,
        slots=summary.slots,
        seconds=ended - started,
        timings=timings,
        setup_seconds=first - started,
        cluster_start=cluster_start,
        close_seconds=close_seconds,
        summary=summary,
        verified=verify(root),
    )


def verify(root: str) -> tuple[int, int, int]:
    """Accepted attempts, distinct slots among them and all attempts, read from the closed
    store's database through a read-only connection."""
    uri = f"file:{os.path.join(root, DATABASE_NAME)}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        accepted, distinct = connection.execute(
            "SELECT count(*), count(DISTINCT slot_id) FROM attempts WHERE state = 'accepted'"
        ).fetchone()
        (attempts,) = connection.execute("SELECT count(*) FROM attempts").fetchone()
    finally:
        connection.close()
    return int(accepted), int(distinct), int(attempts)


# --- report --------------------------------------------------------------------------------


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:5.1f}%"


def describe(run: Run, workers: int) -> str:
    t, whole = run.timings, run.seconds
    own = whole - t.submit.seconds - t.wait.seconds - t.result.seconds
    line = (
        f"{run.kind:<6} workers={workers} slots={run.slots} seconds={whole:.2f}  "
        f"slots/s={run.rate:.1f}  submit={percent(t.submit.seconds, whole)}  "
        f"wait={percent(t.wait.seconds, whole)}  result={percent(t.result.seconds, whole)}  "
        f"coordinator={percent(own, whole)}"
    )
    if run.kind == "dask":
        line += f"  cluster_start={run.cluster_start:.2f}s"
    line += f"  close={run.close_seconds:.2f}s"
    steps = {name: tally.seconds for name, tally in t.steps.items()}
    other = own - run.setup_seconds - sum(steps.values())
    detail = "  ".join(f"{name}={percent(seconds, whole)}" for name, seconds in steps.items())
    loop = whole - run.setup_seconds
    per_slot_ms = 1000 * loop / run.slots if run.slots else 0.0
    line += (
        f"\n  coordinator: setup={run.setup_seconds:.2f}s ({percent(run.setup_seconds, whole)}, "
        f"registration and planning)  {detail}  other={percent(other, whole)}"
        f"\n  loop only: {loop:.2f}s, {run.slots / loop if loop else 0:.1f} slots/s, "
        f"{per_slot_ms:.2f} ms/slot (per slot: submit "
        f"{1000 * t.submit.seconds / max(1, t.submit.calls):.2f} ms, result "
        f"{1000 * t.result.seconds / max(1, t.result.calls):.2f} ms, start "
        f"{1000 * steps['start'] / max(1, t.steps['start'].calls):.2f} ms, finish "
        f"{1000 * steps['finish'] / max(1, t.steps['finish'].calls):.2f} ms)  "
        f"calls: submit={t.submit.calls} wait={t.wait.calls} "
        f"renew={t.steps['renew'].calls}"
    )
    return line


def verdict(run: Run) -> bool:
    accepted, distinct, attempts = run.verified
    expected = run.slots
    ok = accepted == distinct == attempts == expected and run.summary.accepted == expected
    ok = ok and not run.summary.unsatisfied and run.summary.failed == 0
    print(
        f"verify {run.kind:<6} accepted={accepted} distinct_slots={distinct} "
        f"attempts={attempts} expected={expected} summary_accepted={run.summary.accepted} "
        f"failed={run.summary.failed}: {'ok' if ok else 'FAILED'}",
        flush=True,
    )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", help="leave the stores in this directory")
    arguments = parser.parse_args(argv)
    if arguments.slots < 1 or arguments.workers < 1 or arguments.rounds < 1:
        parser.error("--slots, --workers and --rounds must be at least 1")
    if arguments.keep is not None:
        scratch = os.path.abspath(arguments.keep)
        os.makedirs(scratch, exist_ok=True)
        if os.listdir(scratch):
            parser.error(f"--keep {scratch} is not empty")
    else:
        scratch = tempfile.mkdtemp(prefix="bench-dask-")
    try:
        campaign = load_campaign(write_campaign(scratch, arguments.slots))
        return run_rounds(campaign, arguments.workers, arguments.rounds, scratch)
    finally:
        if arguments.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def run_rounds(campaign: Campaign, workers: int, rounds: int, scratch: str) -> int:
    runs: dict[str, list[Run]] = {kind: [] for kind in KINDS}
    ok = True
    for number in range(rounds):
        for kind in KINDS if number % 2 == 0 else tuple(reversed(KINDS)):
            root = os.path.join(scratch, f"store-{kind}-{number + 1}")
            run = run_one(kind, campaign, workers, root)
            runs[kind].append(run)
            print(f"round {number + 1}: {describe(run, workers)}", flush=True)
            ok = verdict(run) and ok
    rates = {kind: statistics.median(run.rate for run in runs[kind]) for kind in KINDS}
    for kind in KINDS:
        each = ", ".join(f"{run.rate:.1f}" for run in runs[kind])
        print(f"{kind:<6} median slots/s = {rates[kind]:.1f}  (rounds: {each})")
    print(f"ratio dask/local slots/s = {rates['dask'] / rates['local']:.3f}")
    if not ok:
        print("!!! verification failed: some store does not hold one accepted attempt per slot")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
