"""The conformance kit against this package's own driver (SPEC.md section 18): the
reference driver passes every level; each planted defect fails the check that names it;
and a failed lockstep's shrunk transcript replays against a driver.
"""

from __future__ import annotations

import sys
from unittest import mock

import pytest
from runstore.errors import OptionInvalidError
from runstore.kit import KitOptions
from runstore.kit import replay_transcript
from runstore.kit import run_kit
from runstore.kit.defects import DEFECTS
from runstore.kit.report import FAIL
from runstore.kit.report import PASS
from runstore.kit.run import names

DRIVER = [sys.executable, "-m", "runstore.kit.driver"]


def defective(name: str) -> list[str]:
    return [*DRIVER, "--defect", name]


def test_the_reference_driver_passes_every_check_of_the_store_level() -> None:
    """SPEC.md 18.4: the store level runs the value checks, the writer and store vector
    replays, both lockstep machines and the crash campaign; this package's own store,
    served by its driver, passes every one (none is left not implemented)."""
    report = run_kit(DRIVER, KitOptions(level="store", examples=25, kills=1))
    assert [check.name for check in report.checks] == names("store")
    assert [(c.name, c.status) for c in report.checks if c.status != PASS] == []
    crash = report.check("crash campaign")
    assert crash.cases >= 30, crash  # every step of every eligible scenario was killed
    assert report.implementation == "runstore (Python reference) 1"
    assert not report.failed


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_each_planted_defect_fails_the_check_that_names_it(name: str) -> None:
    """A kit that stopped looking would let a broken implementation pass: each defect the
    reference driver can plant (a known way to get SPEC wrong) makes its own check fail,
    with the first failing case named in the detail."""
    defect = DEFECTS[name]
    level = next(level for level in ("values", "writer", "store") if defect.check in names(level))
    options = KitOptions(
        level=level,
        only=(defect.check,),
        examples=150,
        shrink_seconds=2.0,
        scenarios=("register_one_shot",) if defect.check == "crash campaign" else (),
        kills=3,
    )
    report = run_kit(defective(name), options)
    check = report.check(defect.check)
    assert check.status == FAIL, (name, check)
    assert check.detail
    assert report.failed


def test_the_same_checks_pass_without_the_defects() -> None:
    """The control of the test above: the checks the defects fail, on the same options,
    pass against the driver without a defect (so each failure is the defect's)."""
    only = tuple(sorted({defect.check for defect in DEFECTS.values()}))
    options = KitOptions(level="store", only=only, examples=150, scenarios=("register_one_shot",))
    report = run_kit(DRIVER, options)
    assert [(c.name, c.status) for c in report.checks] == [
        (n, PASS) for n in names("store") if n in only
    ]


def test_a_shrunk_lockstep_failure_replays_as_a_transcript() -> None:
    """SPEC.md 18.4: a lockstep failure is shrunk and printed as the exact request and
    response lines; replaying them against the defective driver reproduces every answer,
    and against a correct driver shows where it differs."""
    options = KitOptions(
        level="writer", only=("writer lockstep",), examples=150, shrink_seconds=2.0
    )
    report = run_kit(defective("stale_revision_accepted"), options)
    check = report.check("writer lockstep")
    assert check.status == FAIL
    transcript = check.detail.split("shrunk transcript:\n", 1)[1]
    requests = [line for line in transcript.splitlines() if line.startswith("> ")]
    assert requests and requests[0].startswith('> {"id": ') and '"op": "open"' in requests[0]
    assert len(requests) == len([line for line in transcript.splitlines() if line.startswith("< ")])
    assert replay_transcript(defective("stale_revision_accepted"), transcript) == []
    differences = replay_transcript(DRIVER, transcript)
    assert differences and all(": got " in line for line in differences)


def test_the_lockstep_levels_without_hypothesis_are_a_usage_error() -> None:
    """Hypothesis is the ``kit`` extra, not a dependency: without it the value level runs
    and the levels that need the lockstep are refused before any check, naming the extra."""
    with mock.patch("importlib.util.find_spec", return_value=None):
        for level in ("writer", "store"):
            with pytest.raises(OptionInvalidError, match=r"runstore\[kit\]"):
                KitOptions(level=level)
        assert KitOptions(level="values").level == "values"
