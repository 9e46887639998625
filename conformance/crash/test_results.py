"""One result type for every method: each family counts and prints its sweeps and suites
with the keys its parsers read (the summary patterns of the other crash tests,
``tools/nightly``, ``tools/powerloss_teeth.py``), and a mismatch counts as a failure exactly
where it always did (I/O faults, the method comparison). Each case is a hand-made set of
findings whose counts are written out.
"""

from __future__ import annotations

import re

import attrs
from runstore.crashsim.results import FAMILIES
from runstore.crashsim.results import Finding
from runstore.crashsim.results import SuiteResult
from runstore.crashsim.results import SweepResult
from runstore.crashsim.results import exit_status
from runstore.crashsim.results import report_lines

from conformance.crash.test_crashes import SUMMARY as CRASH_SUMMARY
from conformance.crash.test_io_faults import SUMMARY as IO_SUMMARY
from conformance.crash.test_powerloss import SUMMARY as POWERLOSS_SUMMARY

COMPARE_SUMMARY = re.compile(r"^scenarios=\d+ compared=\d+ differences=\d+ seconds=[\d.]+$")


def _sweep(method: str, *statuses: str, problem: str | None = None) -> SweepResult:
    """A one-second sweep of ``method`` over 40 boundaries whose points have ``statuses``
    (point ``k`` at boundary ``k``, each its own image)."""
    findings = tuple(
        Finding("s", k, status, f"k={k} before fs: x", "step 1 (reserve)", detail=f"why {k}")
        for k, status in enumerate(statuses)
    )
    return SweepResult("s", method, 40, findings, 1.0, problem, cuts=7, sampled=2)


def _suite(*sweeps: SweepResult) -> SuiteResult:
    return SuiteResult(sweeps[0].method, sweeps, 2.0)


def test_a_crash_sweep_counts_checked_points_and_distinct_images_not_mismatches() -> None:
    sweep = _sweep("image", "ok", "ok", "failure", "mismatch")
    first, second, *rest = sweep.results
    shared = attrs.evolve(sweep, results=(first, attrs.evolve(second, image=0), *rest))
    assert shared.line() == (
        "s: boundaries=40 crashes=3 failures=1 mismatches=1 images=2 seconds=1.0 "
        "points_per_second=3.0"
    )
    suite = _suite(shared, _sweep("image", "ok", problem="no fixture"))
    assert suite.summary() == (
        "scenarios=2 boundaries=80 crashes=4 images=3 failures=2 seconds=2.0 points_per_second=2.0"
    )
    assert CRASH_SUMMARY.match(suite.summary())
    assert exit_status(_suite(_sweep("kill", "ok", "mismatch"))) == 2
    assert exit_status(_suite(_sweep("kill", "ok", "failure", "mismatch"))) == 1
    assert exit_status(_suite(_sweep("kill", "ok"))) == 0


def test_an_io_fault_mismatch_is_a_failure_and_an_unfired_fault_is_not_a_state() -> None:
    sweep = _sweep("io", "ok", "failure", "mismatch", "unfired")
    assert sweep.line() == "s: boundaries=40 points=4 states=2 failures=2 seconds=1.0"
    suite = _suite(sweep, _sweep("io", "ok", "mismatch"))
    assert suite.summary() == (
        "faults=io scenarios=2 points=6 states=3 unfired=1 failures=3 seconds=2.0"
    )
    assert IO_SUMMARY.match(suite.summary())
    assert exit_status(_suite(_sweep("io", "ok", "mismatch"))) == 1
    lines = report_lines(sweep)
    assert "MISMATCH scenario=s k=2 (a failure)\n  boundary: k=2 before fs: x\n  why 2" in lines
    assert lines[-1] == "UNFIRED scenario=s k=3 before fs: x in step 1 (reserve)"


def test_a_power_loss_sweep_counts_cuts_states_and_sampled_cuts() -> None:
    sweep = _sweep("powerloss", "ok", "ok", "failure", "mismatch")
    assert sweep.line() == "s: boundaries=40 cuts=7 states=3 failures=1 seconds=1.0"
    suite = _suite(sweep, _sweep("powerloss", "ok"))
    assert suite.summary() == (
        "faults=powerloss scenarios=2 cuts=14 states=4 sampled=4 failures=1 seconds=2.0"
    )
    assert POWERLOSS_SUMMARY.match(suite.summary())
    assert exit_status(_suite(_sweep("powerloss", "ok", "mismatch"))) == 2
    # Across the fault suites, a failure anywhere outweighs a mismatch anywhere.
    io_failed, cut_mismatched = _sweep("io", "failure"), _sweep("powerloss", "mismatch")
    assert exit_status(_suite(io_failed), _suite(cut_mismatched)) == 1
    assert exit_status(_suite(_sweep("io", "ok")), _suite(cut_mismatched)) == 2


def test_a_power_loss_failure_names_what_the_cut_undid_and_the_shrunk_report_follows() -> None:
    sweep = _sweep("powerloss", "ok", "failure")
    ok, failed = sweep.results
    undone = attrs.evolve(failed, undone=("entry run.sqlite3", "data of a"))
    sweep = attrs.evolve(sweep, results=(ok, undone), shrunk="cut at k=1\n  undone: entry a")
    failure, shrunk = report_lines(sweep)
    assert failure == (
        "FAILURE scenario=s k=1 in step 1 (reserve)\n  boundary: k=1 before fs: x\n"
        "  undone: entry run.sqlite3; data of a\n  found: why 1"
    )
    assert shrunk == "SHRUNK scenario=s cut at k=1\n  undone: entry a"
    nothing = attrs.evolve(sweep, results=(attrs.evolve(undone, undone=()),), shrunk="")
    assert "  undone: nothing\n" in report_lines(nothing)[0]


def test_the_method_comparison_counts_every_point_it_could_not_compare_as_a_difference() -> None:
    sweep = _sweep("compare", "ok", "failure", "mismatch")
    assert sweep.line() == "s: compared=3 distinct=2 differences=2"
    suite = _suite(sweep, _sweep("compare", "ok", problem="the reference failed"))
    assert suite.summary() == "scenarios=2 compared=4 differences=3 seconds=2.0"
    assert COMPARE_SUMMARY.match(suite.summary())
    assert exit_status(_suite(_sweep("compare", "ok", "mismatch"))) == 1


def test_every_method_has_a_family_whose_keys_a_sweep_counts() -> None:
    counted = set(_sweep("image").counts()) | {"scenarios", "seconds", "points_per_second"}
    assert set(FAMILIES) == {"image", "kill", "io", "powerloss", "compare"}
    for family in FAMILIES.values():
        assert set(family.line) <= counted and set(family.summary) <= counted
