"""Sweeps side by side (runstore.crashsim.lanes): each sweep in its own process, results
and reports in the order given whatever order the processes end in, a sweep process that
leaves no result reported as a failing sweep, and the same findings as one sweep after
another."""

from __future__ import annotations

import os
import time
from pathlib import Path

from runstore.crashsim.lanes import side_by_side
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.suite import default_directory
from runstore.crashsim.suite import run_suite

NAMES = ("reserve", "renew", "commit_accepted")


def _scenarios(*names: str) -> list[Scenario]:
    return [SCENARIOS[name] for name in names]


def _result(scenario: Scenario, problem: str | None = None) -> SweepResult:
    """A result that records the pid of the process that made it (as ``boundaries``)."""
    return SweepResult(scenario.name, "image", os.getpid(), (), 0.0, problem)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_results_and_reports_keep_the_given_order(tmp_path: Path) -> None:
    second_done = tmp_path / "second-done"

    def sweep(scenario: Scenario) -> SweepResult:
        if scenario.name == NAMES[0]:
            _wait_for(second_done)  # the first sweep ends after the second
        if scenario.name == NAMES[1]:
            second_done.touch()
        return _result(scenario)

    reported: list[str] = []
    results = side_by_side(
        _scenarios(*NAMES), sweep, "image", lanes=2, report=lambda r: reported.append(r.scenario)
    )
    assert [r.scenario for r in results] == list(NAMES)
    assert reported == list(NAMES)
    pids = {r.boundaries for r in results}
    assert os.getpid() not in pids and len(pids) == len(NAMES)  # one process per sweep
    assert all(r.problem is None for r in results)


def test_one_lane_runs_in_this_process() -> None:
    results = side_by_side(_scenarios(*NAMES), _result, "image", lanes=1)
    assert [r.scenario for r in results] == list(NAMES)
    assert {r.boundaries for r in results} == {os.getpid()}


def test_a_sweep_process_without_a_result_fails_its_sweep() -> None:
    def sweep(scenario: Scenario) -> SweepResult:
        if scenario.name == "renew":
            raise RuntimeError("the sweep broke")
        if scenario.name == "commit_accepted":
            os._exit(9)
        return _result(scenario)

    results = side_by_side(_scenarios(*NAMES), sweep, "kill", lanes=2)
    assert [r.scenario for r in results] == list(NAMES)
    assert results[0].problem is None and results[0].failed == 0
    raised, exited = results[1], results[2]
    assert raised.method == exited.method == "kill"
    assert raised.problem is not None and "RuntimeError: the sweep broke" in raised.problem
    assert exited.problem is not None and "ended with 9" in exited.problem
    assert raised.failed == exited.failed == 1


def test_lanes_find_what_one_sweep_after_another_finds() -> None:
    def findings(lanes: int) -> list[tuple[str, int, str, int | None]]:
        suite = run_suite(
            _scenarios("advance", *NAMES), lanes=lanes, jobs=1, directory=default_directory()
        )
        assert suite.failures == 0 and suite.mismatches == 0
        return [(f.scenario, f.k, f.status, f.image) for s in suite.sweeps for f in s.results]

    alone = findings(1)
    assert len(alone) > 40
    assert findings(2) == alone
