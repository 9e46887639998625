"""The kill method: at each chosen point a fresh execution is killed with ``os._exit``, and
the copy it leaves is checked.

Rules of this file: one trial child per point (at most ``jobs`` at a time) copies the
closed fixture (names preserved), forks a grandchild that runs the scenario and leaves with
``os._exit`` at that boundary, checks the grandchild's trace is exactly the reference
prefix (else the point is a ``mismatch``), and only then hands the copy on: to the check
(:meth:`~runstore.crashsim.sweep.Sweep.check_body`) for :data:`KILL`, or to another
reader of the copy (:func:`killed_each`, which the method comparison uses). The parent
only starts trials and reads their findings.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from runstore.crashsim import processes
from runstore.crashsim import trials
from runstore.crashsim.harness import run_traced
from runstore.crashsim.points import Point
from runstore.crashsim.points import check_prefix
from runstore.crashsim.results import Finding
from runstore.crashsim.results import SweepResult
from runstore.crashsim.sweep import Sweep
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import read_trace

ThenBody = Callable[[Point, str, str, Phases], int]
"""Trial child, after the kill: ``(point, the copy's root, result.json's path, phases)``;
writes the finding and returns the child's exit status."""


class Kill:
    """The kill method (:data:`KILL`)."""

    name = "kill"
    persistence = False

    def run(self, sweep: Sweep, chosen: Sequence[int]) -> SweepResult:
        findings: list[Finding] = []

        def done(point: Point, trial: str, status: int) -> None:
            findings.append(sweep.collect(trial, point, status))

        killed_each(sweep, [sweep.points[k] for k in chosen], sweep.check_body, done)
        return sweep.result(sorted(findings, key=lambda f: f.k))


KILL: Final = Kill()


def killed_each(
    sweep: Sweep,
    points: Sequence[Point],
    then: ThenBody,
    done: Callable[[Point, str, int], None],
) -> None:
    """For each of ``points``, a trial child that kills a grandchild there and, when its
    trace is the reference prefix, runs ``then`` on the copy; ``done(point, trial
    directory, status)`` is called in the parent as each trial ends."""

    def trial_of(point: Point) -> str:
        return sweep.trial(f"k{point.k}")

    def body(point: Point) -> Callable[[], int]:
        return functools.partial(_trial, sweep, trial_of(point), point, then)

    checks = trials.Checks(
        sweep.jobs, body, trial_of, lambda point, status: done(point, trial_of(point), status)
    )
    for point in points:
        checks.add(point)
    checks.drain()


def _trial(sweep: Sweep, trial: str, point: Point, then: ThenBody) -> int:
    """Trial child body: copy, crash a grandchild at ``point``, check its prefix, then."""
    phases = Phases()
    root = sweep.copy_fixture(trial, phases)
    trace_path = os.path.join(trial, "trace")
    with phases.measure("crash run"):
        status = processes.run(
            lambda: run_traced(sweep.scenario, sweep.run, root, trace_path, point.k)
        )
    with phases.measure("prefix check"):
        mismatch = check_prefix(sweep.reference, read_trace(trace_path), point.k, status)
    result_path = os.path.join(trial, "result.json")
    if mismatch:
        trials.write(result_path, {"status": "mismatch", "detail": mismatch})
        return 0
    return then(point, root, result_path, phases)
