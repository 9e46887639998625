"""Sweeps side by side: a suite's sweeps run in forked sweep processes, at most ``lanes``
at once, so that one sweep's serial work (its fixture, its reference run and check, the
imaging run the parent photographs) overlaps another sweep's trials.

Rules of this file: the suite's parent forks one sweep process per scenario (at most
``lanes`` alive) and never opens a connection or reads a store. A sweep process runs its
sweep exactly as the parent would (:func:`~runstore.crashsim.sweep.run_sweep`: its own
temporary directory, fixture, reference and trial children, at most ``jobs`` of them)
and leaves its :class:`~runstore.crashsim.results.SweepResult` pickled in
``<suite directory>/<index>.pickle`` (written to a temporary name, then renamed), then
ends with ``os._exit``. The parent reads each result back as its process ends and reports
the sweeps in the order given (a sweep that ends early waits for those before it), so the
output is the same whatever the timing. A sweep process that ends without a result (it
raised, or was killed) becomes a result with that ``problem``, which fails the suite;
nothing is dropped. With one lane, or one scenario, the sweeps run in the parent itself,
one after another.
"""

from __future__ import annotations

import functools
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable
from collections.abc import Sequence

from runstore.crashsim import processes
from runstore.crashsim import trials
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import Scenario

Sweeper = Callable[[Scenario], SweepResult]
"""Runs one scenario's sweep (in whichever process calls it)."""


def side_by_side(
    scenarios: Sequence[Scenario],
    sweep: Sweeper,
    method: str,
    *,
    lanes: int,
    directory: str | None = None,
    report: Callable[[SweepResult], None] | None = None,
) -> list[SweepResult]:
    """``sweep(scenario)`` for each of ``scenarios``, at most ``lanes`` at once, each in a
    sweep process of its own (in this process when ``lanes`` is 1 or there is only one
    scenario); the results in the order given, ``report`` called with each in that order.
    ``method`` names the method in the result of a sweep process that left none."""
    tell = report if report is not None else (lambda result: None)
    if lanes <= 1 or len(scenarios) <= 1:
        results = []
        for scenario in scenarios:
            result = sweep(scenario)
            tell(result)
            results.append(result)
        return results
    base = tempfile.mkdtemp(prefix="runstore-suite-", dir=directory)
    try:
        return _lanes(scenarios, sweep, method, lanes, base, tell)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _lanes(
    scenarios: Sequence[Scenario],
    sweep: Sweeper,
    method: str,
    lanes: int,
    base: str,
    tell: Callable[[SweepResult], None],
) -> list[SweepResult]:
    pool: processes.Pool[int] = processes.Pool(lanes)
    waiting = list(range(len(scenarios)))
    started: dict[int, float] = {}
    ended: dict[int, SweepResult] = {}
    told = 0
    while waiting or len(pool):
        while waiting and not pool.full():
            index = waiting.pop(0)
            path = _result_path(base, index)
            started[index] = time.monotonic()
            body = functools.partial(_sweep_body, sweep, scenarios[index], path)
            pool.start(body, index, path + ".error")
        index, status = pool.wait_any()
        seconds = time.monotonic() - started[index]
        ended[index] = _result(scenarios[index], method, _result_path(base, index), status, seconds)
        while told in ended:
            tell(ended[told])
            told += 1
    return [ended[index] for index in range(len(scenarios))]


def _result_path(base: str, index: int) -> str:
    return os.path.join(base, f"{index}.pickle")


def _sweep_body(sweep: Sweeper, scenario: Scenario, path: str) -> int:
    """Sweep process: run the sweep and leave its result at ``path``."""
    result = sweep(scenario)
    with open(path + ".partial", "wb") as handle:
        pickle.dump(result, handle)
    os.rename(path + ".partial", path)
    return 0


def _result(scenario: Scenario, method: str, path: str, status: int, seconds: float) -> SweepResult:
    """The result a sweep process left at ``path``; without one, a result whose problem
    names the process's exit ``status`` and its last error line."""
    try:
        with open(path, "rb") as handle:
            result = pickle.load(handle)
    except FileNotFoundError:
        result = None
    if isinstance(result, SweepResult):
        return result
    error = trials.read_last_line(path + ".error")
    problem = f"the sweep process ended with {status} and no result: {error}"
    return SweepResult(scenario.name, method, 0, (), seconds, problem)
