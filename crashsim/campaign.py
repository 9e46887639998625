"""The campaign runner: a reference execution, then a crashed store per chosen boundary,
each checked against the model.

Rules of this file: the process that calls :func:`run_campaign` (the parent) never opens
a connection or reads a live store: it computes the model run (pure), forks a child to
prepare the fixture and a child for the reference execution, then makes the crashed stores
by one of two methods and checks each in a trial child (at most ``jobs`` at a time; reopen,
integrity, model states, recovery and continuation, :mod:`runstore.crashsim.verify`):

* ``kill`` (this file): one trial child per crash point copies the closed fixture (names
  preserved), forks a grandchild that runs the scenario and leaves with ``os._exit`` at
  that boundary, checks the grandchild's trace is exactly the reference prefix, and only
  then checks the copy.
* ``image`` (the default, :mod:`runstore.crashsim.images`): one child runs the scenario
  once, stopping at each chosen boundary while the parent copies the store root; each copy
  is what process death at that boundary leaves, byte for byte (the kill method's copy;
  ``conformance/crash/test_methods.py`` compares the two at every point), and each distinct
  copy is checked once per set of acceptable states.

Either way a changed execution path is a ``mismatch``: reported, never counted as a tested
crash point.

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
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Final, Literal

from runstore.crashsim import processes, trials
from runstore.crashsim.harness import ModelRun, run_traced, warm
from runstore.crashsim.images import imaged
from runstore.crashsim.points import (
    CampaignResult,
    CrashResult,
    Point,
    Selector,
    check_prefix,
    commit_problem,
    points_of,
)
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import Entry, read_trace

__all__ = [
    "METHODS",
    "CampaignResult",
    "CrashResult",
    "Method",
    "Point",
    "Selector",
    "check_prefix",
    "points_of",
    "run_campaign",
]

Method = Literal["image", "kill"]
METHODS: Final[tuple[Method, ...]] = ("image", "kill")


def run_campaign(
    scenario: Scenario,
    select: Selector | None = None,
    *,
    jobs: int = 2,
    directory: str | None = None,
    method: Method = "image",
) -> CampaignResult:
    """Run ``scenario``'s campaign at the points ``select`` chooses (every boundary when
    None) by ``method``, in a temporary directory under ``directory`` (the system default
    when None)."""
    started = time.monotonic()
    warm()
    run = ModelRun(scenario)
    phases = Phases()
    base = tempfile.mkdtemp(prefix=f"runstore-crashsim-{scenario.name}-", dir=directory)

    def finished(
        boundaries: int, results: Sequence[CrashResult], problem: str | None = None
    ) -> CampaignResult:
        seconds = time.monotonic() - started
        ordered = tuple(sorted(results, key=lambda r: r.k))
        return CampaignResult(scenario.name, boundaries, ordered, seconds, problem, phases)

    try:
        fixture, problem = trials.prepare(scenario, run, base, phases)
        if problem:
            return finished(0, [], problem)
        reference, problem = trials.reference(scenario, run, base, fixture, phases)
        points = points_of(reference)
        problem = problem or commit_problem(points, run)
        if problem:
            return finished(len(points), [], problem)
        chosen = sorted(set(select(points) if select is not None else range(len(points))))
        crash = imaged if method == "image" else _killed
        at = [points[k] for k in chosen]
        results = crash(scenario, run, base, fixture, reference, at, jobs, phases)
        return finished(len(points), results)
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
    phases: Phases,
) -> list[CrashResult]:
    """The kill method: a trial child per point, crashing a grandchild there."""
    results: list[CrashResult] = []

    def trial_of(point: Point) -> str:
        return os.path.join(base, f"k{point.k}")

    def body(point: Point) -> Callable[[], int]:
        return functools.partial(_trial, scenario, run, fixture, trial_of(point), reference, point)

    def done(point: Point, status: int) -> None:
        result, spent = trials.collect(scenario, run, trial_of(point), point, status)
        results.append(result)
        phases.add(spent)

    trials.each_point(chosen, jobs, body, trial_of, done)
    return results


def _trial(
    scenario: Scenario,
    run: ModelRun,
    fixture: str,
    trial: str,
    reference: Sequence[Entry],
    point: Point,
) -> int:
    """Trial child body: copy, crash a grandchild at ``point``, check, verify, report."""
    phases = Phases()
    os.mkdir(trial, 0o700)
    root = os.path.join(trial, "store")
    with phases.measure("copy fixture"):
        shutil.copytree(fixture, root, symlinks=True)
    trace_path = os.path.join(trial, "trace")
    with phases.measure("crash run"):
        status = processes.run(lambda: run_traced(scenario, run, root, trace_path, point.k))
    with phases.measure("prefix check"):
        mismatch = check_prefix(reference, read_trace(trace_path), point.k, status)
    result_path = os.path.join(trial, "result.json")
    if mismatch:
        trials.write(result_path, {"status": "mismatch", "detail": mismatch})
        return 0
    return trials.check_point_body(scenario, run, root, point, result_path, phases)
