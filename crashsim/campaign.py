"""The campaign runner: a reference execution, then one crashed copy per chosen boundary.

Rules of this file: the process that calls :func:`run_campaign` (the parent) never opens
a connection or copies a live store: it computes the model run (pure), forks a child to
prepare the fixture, a child for the reference execution, and one trial child per crash
point (at most ``jobs`` at a time). A trial child copies the closed fixture (names
preserved), forks the crashing grandchild, checks the grandchild's trace is exactly the
reference prefix, and only then verifies the copy (reopen, integrity, model states,
continuation) and writes its finding as JSON. A changed execution path is a ``mismatch``:
reported, never counted as a tested crash point.

Acceptable states. A step the model performs as one transaction keeps the original rule:
before its COMMIT completed the store may be in the state before or after the step, from
then on only after. A publication commits several transactions (``publish_artifact``: the
stage's lease, then the final one; ``publish_finalization``: a check, the stage's lease,
another check, the final one). The model run records the state after *every* committed
transaction, check transactions included (they commit and change nothing), rather than
only the changed states of ``ModelWriter.trail``: the k-th COMMIT in the trace is then
simply the k-th recorded state, with no guessing which commits changed something (a
check transaction that wrote something would show up as a failure at the crash points
after its COMMIT). With k COMMITs of the step completed at or before the crash point, the
store must be in the state after the k-th transaction; at the boundary just before the
(k+1)-th COMMIT, also in the state after it. The reference trace must commit exactly as
many transactions in each such step as the model run; anything else is a campaign
problem.

Recovery (a step named ``recover``) is the exception: the store's pass also runs
read-only transactions whose number depends on what it finds on disk, while the model
records only the transactions that change something (each attempt's move to finalizing
and terminal commit, the staging leases' release, the orphans' registration). A crash
anywhere in a pass may therefore leave any prefix of those changes: every state the
model passes through is acceptable, the exact trace prefix still pins the path taken,
and the recovery that follows every crash must then converge.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Final

import attrs
from runstore.crashsim import processes
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.harness import COMPLETED, ModelRun, prepare_fixture, run_traced
from runstore.crashsim.scenarios import RECOVER_STEP, Scenario
from runstore.crashsim.tracer import CRASH_EXIT, Entry, describe, read_trace
from runstore.crashsim.verify import Acceptable, verify
from runstore.model.state import ModelState
from runstore.testing.disk import disk_view

BEFORE_COMMIT: Final = ["before", "sql", "COMMIT"]
AFTER_COMMIT: Final = ["after", "sql", "COMMIT"]


@attrs.frozen
class Point:
    """Boundary ``k`` of the reference trace, inside step ``op_index`` (0 is opening);
    ``committed`` when a COMMIT of that step completed at or before it, ``commits`` how
    many did."""

    k: int
    entry: Entry
    op_index: int
    op_name: str
    committed: bool
    commits: int = 0

    def choices(self, transactions: Sequence[Sequence[ModelState]]) -> list[tuple[str, int]]:
        """The acceptable states as (label, transactions done) pairs, where
        ``transactions[op_index]`` is the state before the step followed by the state after
        each of its committed transactions (see the module docstring)."""
        states = transactions[self.op_index]
        count = len(states) - 1
        if self.op_name.startswith(RECOVER_STEP):
            return [(_label(done, count), done) for done in range(count + 1)]
        if count <= 1:
            return [("after", 1)] if self.committed else [("before", 0), ("after", 1)]
        done = min(self.commits, count)
        chosen = [(_label(done, count), done)]
        if self.entry[2:] == BEFORE_COMMIT and done < count:
            chosen.append((_label(done + 1, count), done + 1))
        return chosen

    def acceptable(self, transactions: Sequence[Sequence[ModelState]]) -> Acceptable:
        states = transactions[self.op_index]
        return [(label, states[done]) for label, done in self.choices(transactions)]


def _label(done: int, count: int) -> str:
    if done == 0:
        return "before"
    return "after" if done == count else f"after transaction {done} of {count}"


@attrs.frozen
class CrashResult:
    """The finding at one crash point: ``status`` is "ok", "failure" or "mismatch"."""

    scenario: str
    k: int
    status: str
    boundary: str
    operation: str
    acceptable: str
    detail: str = ""


@attrs.frozen
class CampaignResult:
    """One scenario's campaign. ``problem`` is a failure of the fixture or the reference."""

    scenario: str
    boundaries: int
    results: tuple[CrashResult, ...]
    seconds: float
    problem: str | None = None

    @property
    def crashes(self) -> int:
        return sum(1 for r in self.results if r.status != "mismatch")

    @property
    def failures(self) -> list[CrashResult]:
        return [r for r in self.results if r.status == "failure"]

    @property
    def mismatches(self) -> list[CrashResult]:
        return [r for r in self.results if r.status == "mismatch"]


Selector = Callable[[Sequence[Point]], Sequence[int]]
"""Chooses the crash points (boundary numbers) of a campaign from its reference points."""


def points_of(trace: Sequence[Entry]) -> list[Point]:
    """The boundaries of a reference trace with the step each belongs to."""
    points: list[Point] = []
    op_index, op_name, commits = 0, "open", 0
    for entry in trace:
        if entry[0] == "op":
            op_index, op_name, commits = int(str(entry[1])), str(entry[2]), 0
        elif entry[0] == "b":
            if entry[2:] == AFTER_COMMIT:
                commits += 1
            points.append(Point(len(points), entry, op_index, op_name, commits > 0, commits))
    return points


def commit_problem(points: Sequence[Point], run: ModelRun) -> str:
    """Why the reference's COMMITs do not line up with the model's transactions in a
    multi-transaction step (empty when they do)."""
    for index, states in enumerate(run.transactions):
        expected = len(states) - 1
        if index == 0 or expected <= 1 or run.names[index].startswith(RECOVER_STEP):
            continue
        found = max((p.commits for p in points if p.op_index == index), default=0)
        if found != expected:
            return (
                f"step {index} commits {found} transactions in the reference, the model {expected}"
            )
    return ""


def check_prefix(reference: Sequence[Entry], trace: Sequence[Entry], k: int, status: int) -> str:
    """Why a child's ``trace`` is not the reference prefix ending at boundary ``k`` (empty
    when it is)."""
    for index, entry in enumerate(trace):
        if index >= len(reference) or entry != reference[index]:
            expected = reference[index] if index < len(reference) else "the end"
            return f"trace entry {index} is {entry}, the reference has {expected}"
    if status != CRASH_EXIT or not trace or trace[-1][:2] != ["b", k]:
        last = trace[-1] if trace else "nothing"
        return f"the child exited with status {status} after {last}, not at boundary {k}"
    return ""


def brief(state: ModelState) -> str:
    """A model state in a few words."""
    attempts = ",".join(
        f"{row.retry_index}:{row.state.value}@{row.revision}"
        for row in sorted(state.attempts.values(), key=lambda row: row.id)
    )
    return (
        f"slots={len(state.attempt_slots)} attempts=[{attempts}] leases={len(state.leases)} "
        f"claims={len(state.claims)} selections={len(state.selections)} "
        f"events={len(state.events)}"
    )


def run_campaign(
    scenario: Scenario,
    select: Selector | None = None,
    *,
    jobs: int = 2,
    directory: str | None = None,
) -> CampaignResult:
    """Run ``scenario``'s campaign at the points ``select`` chooses (every boundary when
    None), in a temporary directory under ``directory`` (the system default when None)."""
    started = time.monotonic()
    run = ModelRun(scenario)
    base = tempfile.mkdtemp(prefix=f"runstore-crashsim-{scenario.name}-", dir=directory)
    try:
        return _campaign(scenario, run, base, select, jobs, started)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _campaign(
    scenario: Scenario,
    run: ModelRun,
    base: str,
    select: Selector | None,
    jobs: int,
    started: float,
) -> CampaignResult:
    def finished(
        boundaries: int, results: list[CrashResult], problem: str | None = None
    ) -> CampaignResult:
        seconds = time.monotonic() - started
        return CampaignResult(scenario.name, boundaries, tuple(results), seconds, problem)

    fixture = os.path.join(base, "fixture")
    os.mkdir(fixture, 0o700)
    error = os.path.join(base, "fixture.error")
    if processes.run(lambda: prepare_fixture(scenario, run, fixture), error) != COMPLETED:
        return finished(0, [], f"preparing the fixture failed: {_read(error)}")
    run.play(lambda state: disk_view(fixture, state))
    reference, problem = _reference(scenario, run, base, fixture)
    points = points_of(reference)
    problem = problem or commit_problem(points, run)
    if problem:
        return finished(len(points), [], problem)
    chosen = sorted(set(select(points) if select is not None else range(len(points))))
    results: list[CrashResult] = []
    pool = processes.Pool(jobs)
    queue = list(reversed(chosen))
    while queue or len(pool):
        while queue and not pool.full():
            point = points[queue.pop()]
            trial = os.path.join(base, f"k{point.k}")
            body = functools.partial(_trial, scenario, run, fixture, trial, reference, point)
            pool.start(body, point, trial + ".error")
        tag, status = pool.wait_any()
        assert isinstance(tag, Point)
        results.append(_collect(scenario, run, base, tag, status))
    results.sort(key=lambda r: r.k)
    return finished(len(points), results)


def _reference(
    scenario: Scenario, run: ModelRun, base: str, fixture: str
) -> tuple[list[Entry], str]:
    """Record the reference execution and check its final state; returns its trace and a
    problem (empty when none)."""
    root = os.path.join(base, "reference")
    shutil.copytree(fixture, root)
    trace_path = os.path.join(base, "reference.trace")
    status = processes.run(lambda: run_traced(scenario, run, root, trace_path, None))
    trace = read_trace(trace_path)
    if status != COMPLETED or not trace or trace[-1] != ["done"]:
        last = trace[-1] if trace else "nothing"
        return trace, f"the reference execution did not complete (status {status}, {last})"
    result_path = os.path.join(base, "reference.json")
    final = [("after", run.states[-1])]
    final_step = len(run.transactions) - 1
    done = len(run.transactions[final_step]) - 1
    resumption = Resumption.of(scenario, run, final_step, [done]) if scenario.resume else None
    processes.run(lambda: _verify_to(root, final, result_path, resumption, run.published))
    found = _load(result_path)
    if found.get("status") != "ok":
        return trace, f"the completed reference run fails verification: {found.get('detail')}"
    return trace, ""


def _trial(
    scenario: Scenario,
    run: ModelRun,
    fixture: str,
    trial: str,
    reference: Sequence[Entry],
    point: Point,
) -> int:
    """Trial child body: copy, crash a grandchild at ``point``, check, verify, report."""
    os.mkdir(trial, 0o700)
    root = os.path.join(trial, "store")
    shutil.copytree(fixture, root)
    trace_path = os.path.join(trial, "trace")
    status = processes.run(lambda: run_traced(scenario, run, root, trace_path, point.k))
    mismatch = check_prefix(reference, read_trace(trace_path), point.k, status)
    result_path = os.path.join(trial, "result.json")
    if mismatch:
        _write(result_path, {"status": "mismatch", "detail": mismatch})
        return 0
    choices = point.choices(run.transactions)
    resumption = None
    if scenario.resume:
        resumption = Resumption.of(scenario, run, point.op_index, [d for _, d in choices])
    acceptable = point.acceptable(run.transactions)
    return _verify_to(root, acceptable, result_path, resumption, run.published)


def _verify_to(
    root: str,
    acceptable: Acceptable,
    result_path: str,
    resumption: Resumption | None = None,
    published: Sequence[str] = (),
) -> int:
    verdict = verify(root, acceptable, resumption, published)
    status = "ok" if verdict.ok else "failure"
    _write(result_path, {"status": status, "matched": verdict.matched, "detail": verdict.detail})
    return 0


def _collect(
    scenario: Scenario, run: ModelRun, base: str, point: Point, status: int
) -> CrashResult:
    trial = os.path.join(base, f"k{point.k}")
    found = _load(os.path.join(trial, "result.json"))
    shutil.rmtree(trial, ignore_errors=True)
    if not found:
        error = _read(trial + ".error")
        found = {"status": "failure", "detail": f"the trial process ended with {status}: {error}"}
    acceptable = " | ".join(
        f"{label}: {brief(state)}" for label, state in point.acceptable(run.transactions)
    )
    detail = str(found.get("detail", ""))
    if found.get("matched"):
        detail = f"matched {found['matched']}; {detail}"
    return CrashResult(
        scenario=scenario.name,
        k=point.k,
        status=str(found["status"]),
        boundary=describe(point.entry),
        operation=f"step {point.op_index} ({point.op_name})",
        acceptable=acceptable,
        detail=detail,
    )


def _write(path: str, value: dict[str, str]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)


def _load(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (FileNotFoundError, ValueError):
        return {}
    return {str(key): str(item) for key, item in value.items()}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip().splitlines()[-1]
    except (FileNotFoundError, IndexError):
        return "(no error recorded)"
