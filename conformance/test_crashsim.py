"""The crash simulator: the representative subset passes, the exhaustive campaign passes
(nightly), and the simulator has teeth.

Each campaign forks: a child prepares the fixture, a child records the reference run, and
one trial child per crash point copies the fixture, crashes a grandchild at that point with
``os._exit`` and verifies what survived against the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from runstore.crashsim.__main__ import main
from runstore.crashsim.campaign import Point, Selector, check_prefix, points_of, run_campaign
from runstore.crashsim.faulty import changing_path, split_reserve
from runstore.crashsim.scenarios import FULL_IN_SUBSET, SCENARIOS
from runstore.crashsim.suite import default_directory, run_suite
from runstore.crashsim.tracer import CRASH_EXIT, normalize

SUMMARY = re.compile(r"^scenarios=\d+ boundaries=\d+ crashes=\d+ failures=\d+ seconds=[\d.]+$")


def _step_points(seen: list[Point]) -> Selector:
    """A selector that records the reference points and chooses every step boundary."""

    def select(points: Sequence[Point]) -> list[int]:
        seen.extend(points)
        return [p.k for p in points if p.op_index > 0]

    return select


def test_representative_subset_passes() -> None:
    suite = run_suite(seed=0)
    assert {c.scenario for c in suite.campaigns} == set(SCENARIOS)
    problems = [(c.scenario, c.problem, c.failures, c.mismatches) for c in suite.campaigns]
    assert suite.failures == 0 and suite.mismatches == 0, problems
    for campaign in suite.campaigns:
        assert campaign.crashes > 0
        if campaign.scenario in FULL_IN_SUBSET:
            assert campaign.crashes == campaign.boundaries
    assert SUMMARY.match(suite.summary())


@pytest.mark.exhaustive
def test_every_boundary_of_every_scenario_survives_process_death() -> None:
    suite = run_suite(exhaustive=True)
    problems = [(c.scenario, c.problem, c.failures, c.mismatches) for c in suite.campaigns]
    assert suite.failures == 0 and suite.mismatches == 0, problems
    for campaign in suite.campaigns:
        assert campaign.crashes == campaign.boundaries > 0
    print(suite.summary())


def test_a_split_transaction_fails_between_its_two_commits() -> None:
    seen: list[Point] = []
    result = run_campaign(
        split_reserve(), _step_points(seen), jobs=3, directory=default_directory()
    )
    assert result.problem is None and not result.mismatches
    step = [p for p in seen if p.op_index == 1]
    commits = [p.k for p in step if p.entry[2:] == ["after", "sql", "COMMIT"]]
    final_commit = [p.k for p in step if p.entry[2:] == ["before", "sql", "COMMIT"]][-1]
    assert len(commits) == 2
    # From the first transaction's commit until the second one commits, the store holds an
    # attempt without its lease: neither the state before reserve nor the one after it.
    failed = [r.k for r in result.failures]
    assert failed == list(range(commits[0], final_commit + 1))
    between = {r.k: r.boundary for r in result.failures}
    assert between[commits[0]].endswith("after sql: COMMIT")
    assert between[commits[0] + 1].endswith("before sql: BEGIN IMMEDIATE")
    assert all("matches no model state" in r.detail for r in result.failures)
    assert result.crashes == len(step)


def test_a_changing_path_is_a_prefix_mismatch_and_not_counted(tmp_path: Path) -> None:
    seen: list[Point] = []
    marker = f"{tmp_path}/marker"
    result = run_campaign(
        changing_path(marker), _step_points(seen), jobs=3, directory=default_directory()
    )
    assert result.problem is None and not result.failures
    chosen = [p for p in seen if p.op_index > 0]
    branch = min(p.k for p in chosen if p.op_name == "branching advance")
    mismatched = sorted(r.k for r in result.mismatches)
    assert mismatched == [p.k for p in chosen if p.k >= branch]
    assert result.crashes == len([p for p in chosen if p.k < branch]) > 0
    assert all("the reference has" in r.detail for r in result.mismatches)


def test_prefix_check_and_points() -> None:
    reference = [
        ["op", 0, "open"],
        ["b", 0, "before", "sql", "BEGIN IMMEDIATE"],
        ["b", 1, "after", "sql", "BEGIN IMMEDIATE"],
        ["b", 2, "before", "sql", "COMMIT"],
        ["b", 3, "after", "sql", "COMMIT"],
        ["end", 0],
        ["op", 1, "step"],
        ["b", 4, "before", "sql", "SELECT 1"],
    ]
    points = points_of(reference)
    assert [(p.k, p.op_index, p.committed) for p in points] == [
        (0, 0, False),
        (1, 0, False),
        (2, 0, False),
        (3, 0, True),
        (4, 1, False),
    ]
    assert check_prefix(reference, reference[:3], 1, CRASH_EXIT) == ""
    assert "status 0" in check_prefix(reference, reference[:3], 1, 0)
    assert "not at boundary 2" in check_prefix(reference, reference[:3], 2, CRASH_EXIT)
    changed = [*reference[:2], ["b", 1, "after", "sql", "SELECT 2"]]
    assert "the reference has" in check_prefix(reference, changed, 1, CRASH_EXIT)
    assert normalize("/r/x/.run-store-probe-0a1b/flock", "/r/x") == "$ROOT/.run-store-probe-*/flock"


def test_entry_point_ends_with_the_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenario", "renew", "--seed", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("renew: ")
    assert SUMMARY.match(lines[-1]), lines[-1]
