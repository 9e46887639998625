"""The crash simulator: the representative subset passes, the exhaustive suite passes
(nightly), and the simulator has teeth, by both crash methods.

Each sweep forks: a child prepares the fixture, a child records the reference run; then
either one trial child per crash point copies the fixture, crashes a grandchild at that
point with ``os._exit`` and verifies what survived (the kill method), or one child runs the
scenario stopping at each point while the parent photographs the store, and a trial child
verifies each distinct photograph (the image method, the default).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from runstore.crashsim.__main__ import main
from runstore.crashsim.faulty import changing_path
from runstore.crashsim.faulty import early_registration
from runstore.crashsim.faulty import split_reserve
from runstore.crashsim.points import Point
from runstore.crashsim.points import check_prefix
from runstore.crashsim.points import points_of
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import FULL_IN_SUBSET
from runstore.crashsim.scenarios import INIT_ROOT
from runstore.crashsim.scenarios import OPENING_SCENARIOS
from runstore.crashsim.scenarios import PUBLICATIONS
from runstore.crashsim.scenarios import RECOVERIES
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.suite import METHODS
from runstore.crashsim.suite import SAMPLE_OPENING
from runstore.crashsim.suite import CrashMethod
from runstore.crashsim.suite import default_directory
from runstore.crashsim.suite import run_suite
from runstore.crashsim.sweep import run_sweep
from runstore.crashsim.tracer import CRASH_EXIT
from runstore.crashsim.tracer import normalize
from runstore.crashsim.verify import object_problem
from runstore.model.state import ModelState
from runstore.store.publication import objects
from runstore.testing.publishing import Payload

from conformance.crash.fresh import fresh

SUMMARY = re.compile(
    r"^scenarios=\d+ boundaries=\d+ crashes=\d+ images=\d+ failures=\d+ seconds=[\d.]+ "
    r"points_per_second=[\d.]+$"
)


def _every_step(scenario: Scenario, method: CrashMethod) -> tuple[SweepResult, list[Point]]:
    """``scenario`` swept by ``method`` at every step boundary, and its reference points."""
    seen: list[Point] = []

    def select(points: Sequence[Point]) -> list[int]:
        seen.extend(points)
        return [p.k for p in points if p.op_index > 0]

    result = run_sweep(
        scenario, select, method=METHODS[method], jobs=2, directory=default_directory()
    )
    return result, seen


def test_representative_subset_passes() -> None:
    suite = fresh("runstore.crashsim.suite:run_suite", seed=0)
    assert {c.scenario for c in suite.sweeps} == set(SCENARIOS)
    problems = [(c.scenario, c.problem, c.failures, c.mismatches) for c in suite.sweeps]
    assert suite.failures == 0 and suite.mismatches == 0, problems
    for sweep in suite.sweeps:
        assert sweep.checked > 0
        assert 0 < sweep.images <= sweep.checked
        opening = [r.k for r in sweep.results if r.operation.startswith("step 0 ")]
        steps = {r.k for r in sweep.results if not r.operation.startswith("step 0 ")}
        if sweep.scenario in ("init", INIT_ROOT):  # creating a store: every boundary
            assert sweep.checked == sweep.boundaries
        elif sweep.scenario in OPENING_SCENARIOS:  # opening an existing store, sampled
            assert SAMPLE_OPENING <= sweep.checked < sweep.boundaries
            assert not steps
        else:  # opening is crashed by the opening sweeps only
            assert not opening
        if sweep.scenario in FULL_IN_SUBSET and sweep.scenario not in OPENING_SCENARIOS:
            assert steps == set(range(min(steps), sweep.boundaries))
    # Every publication sweep crashes at its landmarks: each syscall of the compound
    # steps (the rename, then each parent sync), outcome construction, the terminal commit.
    publications = {s.name for s in PUBLICATIONS}
    for sweep in suite.sweeps:
        if sweep.scenario not in publications:
            continue
        crashed = [r.boundary for r in sweep.results]
        # (a rename that finds the address taken has no "after" boundary: it raised)
        assert any("before fs: rename_noreplace" in b for b in crashed), sweep.scenario
        for landmark in ("fsync_dir $ROOT/artifacts/.staging-", "COMMIT"):
            assert sum(landmark in b for b in crashed) >= 2, (sweep.scenario, landmark)
        if sweep.scenario.startswith("publish_finalization"):
            assert sum("outcome.json" in b for b in crashed) >= 2
            assert any("UPDATE attempts SET state" in b for b in crashed)
    # Every recovery sweep crashes recovery itself at its landmarks: the renames (a
    # quarantine or its own failure's publication; an orphan imported alone renames
    # nothing), the syncs of artifacts/ and its transactions' commits.
    recoveries = {s.name for s in RECOVERIES}
    for sweep in suite.sweeps:
        if sweep.scenario in recoveries:
            crashed = [r.boundary for r in sweep.results if "step 1" in r.operation]
            renamed = any("rename_noreplace" in b for b in crashed)
            assert renamed == (sweep.scenario != "recover_orphan_import"), sweep.scenario
            assert any("fsync_dir $ROOT/artifacts" in b for b in crashed), sweep.scenario
            assert sum("COMMIT" in b for b in crashed) >= 2, sweep.scenario
    print(suite.summary())
    assert SUMMARY.match(suite.summary())


@pytest.mark.exhaustive
def test_every_boundary_of_every_scenario_survives_process_death() -> None:
    suite = run_suite(exhaustive=True)
    problems = [(c.scenario, c.problem, c.failures, c.mismatches) for c in suite.sweeps]
    assert suite.failures == 0 and suite.mismatches == 0, problems
    for sweep in suite.sweeps:
        if sweep.scenario in OPENING_SCENARIOS:
            assert sweep.checked == sweep.boundaries > 0
        else:  # every step boundary, none of opening's
            crashed = [r.k for r in sweep.results]
            assert crashed == list(range(crashed[0], sweep.boundaries))
            assert not any(r.operation.startswith("step 0 ") for r in sweep.results)
    print(suite.summary())


@pytest.mark.parametrize("method", METHODS)
def test_a_split_transaction_fails_between_its_two_commits(method: CrashMethod) -> None:
    result, seen = _every_step(split_reserve(), method)
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
    assert result.checked == len(step)


@pytest.mark.parametrize("method", METHODS)
def test_registering_before_the_rename_fails_until_the_object_is_there(method: CrashMethod) -> None:
    result, seen = _every_step(early_registration(), method)
    assert result.problem is None and not result.mismatches
    step = [p for p in seen if p.op_index == 1]
    final_commit = [p.k for p in step if p.entry[2:] == ["after", "sql", "COMMIT"]][-1]
    rename = [p.k for p in step if p.entry[2:4] == ["before", "fs"] and "rename" in p.entry[4]]
    # From the final commit until the rename places the object, a registered artifact has
    # no object on disk: the model's "after" state, and still a failure.
    assert [r.k for r in result.failures] == list(range(final_commit, rename[0] + 1))
    assert all("is not on disk" in r.detail for r in result.failures)
    assert result.checked == len(step)


def test_acceptable_states_of_a_multi_transaction_step() -> None:
    states = [ModelState() for _ in range(5)]  # before, then after each of 4 commits
    transactions = [states[:2], states]

    def point(commits: int, entry: list[object]) -> Point:
        return Point(0, ["b", 0, *entry], 1, "publish", commits > 0, commits)

    def done(p: Point) -> list[int]:
        return [d for _, d in p.choices(transactions)]

    assert done(point(0, ["before", "fs", "rename_noreplace x -> y"])) == [0]
    assert done(point(0, ["before", "sql", "COMMIT"])) == [0, 1]
    assert done(point(1, ["after", "sql", "COMMIT"])) == [1]
    assert done(point(3, ["before", "sql", "COMMIT"])) == [3, 4]
    assert done(point(4, ["after", "sql", "COMMIT"])) == [4]
    assert [
        label for label, _ in point(2, ["before", "sql", "SELECT 1"]).choices(transactions)
    ] == ["after transaction 2 of 4"]
    # A one-transaction step keeps the original rule: before or after until it commits.
    opening = Point(0, ["b", 0, "before", "sql", "SELECT 1"], 0, "open", False, 0)
    assert [d for _, d in opening.choices(transactions)] == [0, 1]


def test_completed_objects_must_verify_under_their_address(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    (artifacts / ".staging-0").mkdir(parents=True)
    staged = tmp_path / "object"
    staged.mkdir()
    Payload(files=(("a/b.txt", b"bytes"), ("empty", b"")))(str(staged))
    inventory = objects.scan(str(staged), reserved=("manifest.json",))
    completed = objects.complete(str(staged), inventory, {})
    projection: dict[str, list[tuple[object, ...]]] = {"artifacts": []}
    wrong = artifacts / f"dataset-{'0' * 64}"
    staged.rename(wrong)
    assert "verifies with tree hash" in str(object_problem(str(tmp_path), projection))
    right = artifacts / f"dataset-{completed.tree_sha256}"
    wrong.rename(right)
    assert object_problem(str(tmp_path), projection) is None
    path = f"artifacts/{right.name}"
    row = ("id", "result", path, completed.tree_sha256, completed.manifest_sha256, 1)
    assert "disagrees" in str(object_problem(str(tmp_path), {"artifacts": [row]}))
    missing = (f"artifacts/dataset-{'1' * 64}",)
    row = ("id", "dataset", missing[0], "x", "y", 1)
    assert "not on disk" in str(object_problem(str(tmp_path), {"artifacts": [row]}, missing))
    (right / "a" / "b.txt").write_bytes(b"BYTES")
    assert "does not verify" in str(object_problem(str(tmp_path), projection))
    (right / "a" / "b.txt").write_bytes(b"bytes")
    (artifacts / ".quarantine").mkdir()  # recovery's: allowed
    assert object_problem(str(tmp_path), projection) is None
    (artifacts / ".elsewhere").mkdir()
    assert "unexpected hidden entry" in str(object_problem(str(tmp_path), projection))


@pytest.mark.parametrize("method", METHODS)
def test_a_changing_path_is_a_prefix_mismatch_and_not_counted(
    tmp_path: Path, method: CrashMethod
) -> None:
    result, seen = _every_step(changing_path(f"{tmp_path}/marker"), method)
    assert result.problem is None and not result.failures
    chosen = [p for p in seen if p.op_index > 0]
    branch = min(p.k for p in chosen if p.op_name == "branching advance")
    mismatched = sorted(r.k for r in result.mismatches)
    assert mismatched == [p.k for p in chosen if p.k >= branch]
    assert result.checked == len([p for p in chosen if p.k < branch]) > 0
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
