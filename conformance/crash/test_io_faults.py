"""The I/O fault sweeps (``runstore.crashsim.iofaults``): the subset passes, the
exhaustive suite passes (nightly), and the method has teeth: a step that swallows a
failed sync, or lets a raw ``OSError`` escape, is reported; an injection that finds nothing
to fail is reported as unfired, never as tested.

Each trial forks: the trial child copies the fixture and runs the scenario in a grandchild
with one durability call (or one statement's SQLite writes) failing, then reopens, recovers
and continues the store in its own process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from runstore import RunStore
from runstore import durable
from runstore.crashsim.exporting import EXPORT
from runstore.crashsim.iofault_trials import Fault
from runstore.crashsim.iofault_trials import Injector
from runstore.crashsim.iofault_trials import Tamper
from runstore.crashsim.iofaults import FaultPick
from runstore.crashsim.iofaults import IoFaults
from runstore.crashsim.iofaults import among
from runstore.crashsim.iofaults import run_io_faults
from runstore.crashsim.points import Point
from runstore.crashsim.results import SweepResult
from runstore.crashsim.results import report_lines
from runstore.crashsim.scenarios import OPENING_SCENARIOS
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.suite import default_directory
from runstore.crashsim.sweep import run_sweep
from runstore.errors import DurabilityError
from runstore.store.probes import PROBE_PREFIX
from runstore.store.publication import staging
from runstore.testing import sqlite_kernel

from conformance.crash.fresh import fresh

SUMMARY = re.compile(
    r"^faults=io scenarios=\d+ points=\d+ states=\d+ unfired=\d+ failures=\d+ seconds=[\d.]+$"
)


def test_sqlite_can_be_made_to_fail_here() -> None:
    """The SQLite injections need SQLite's own test hook; without it the sweep reports a
    problem instead of passing on the filesystem points alone (never a silent skip)."""
    assert sqlite_kernel.available() == ""


def _lines(sweeps: Sequence[SweepResult]) -> str:
    return "\n".join(line for sweep in sweeps for line in report_lines(sweep))


def test_subset_passes() -> None:
    suite = fresh("runstore.crashsim.iofaults:run_io_faults", seed=0)
    assert {sweep.scenario for sweep in suite.sweeps} == set(SCENARIOS)
    assert suite.failures == 0, _lines(suite.sweeps)
    states, unfired = suite.count("states"), suite.count("unfired")
    assert states > 0 and states + unfired == suite.count("points")
    for sweep in suite.sweeps:
        assert sweep.results, sweep.scenario
        opening = any(r.operation.startswith("step 0 ") for r in sweep.results)
        assert opening == (sweep.scenario in OPENING_SCENARIOS), sweep.scenario
        # every SQLite injection of the subset: a COMMIT that wrote, or opening's own (an
        # export writes nothing to the store)
        wrote = any("SQLite writes fail" in r.boundary for r in sweep.results)
        assert wrote == (sweep.scenario != EXPORT), sweep.scenario
    init = next(sweep for sweep in suite.sweeps if sweep.scenario == "init")
    assert any(
        "flock_exclusive $ROOT/.run-store-init.lock [EIO]" in r.boundary for r in init.results
    )
    assert any("fsync_file $ROOT/run.sqlite3 [ENOSPC]" in r.boundary for r in init.results)
    print(suite.summary())
    assert SUMMARY.match(suite.summary())


@pytest.mark.exhaustive
def test_every_injection_point_of_every_scenario() -> None:
    suite = run_io_faults(exhaustive=True)
    assert suite.failures == 0, _lines(suite.sweeps)
    print(suite.summary())


def _fs_faults(operation: str, errno_name: str = "EIO") -> FaultPick:
    """A selector: the filesystem faults of one operation kind, with one errno."""

    def select(faults: Sequence[Fault], points: Sequence[Point]) -> list[Fault]:
        return [
            f
            for f in faults
            if f.target == "fs"
            and f.errno_name == errno_name
            and str(points[f.k].entry[4]).startswith(operation)
        ]

    return select


def _swallow_fsync_dir() -> None:
    """The fault: every directory sync's failure is caught and ignored."""
    original = durable.fsync_dir

    def swallowing(path: str) -> None:
        with contextlib.suppress(OSError):
            original(path)

    durable.fsync_dir = swallowing  # type: ignore[assignment]


def _leak_raw_oserror() -> None:
    """The fault: creating a stage lets the raw OSError behind its typed error escape."""
    original = staging.create_stage

    def leaking(root: str) -> staging.Stage:
        try:
            return original(root)
        except DurabilityError as error:
            if isinstance(error.__cause__, OSError):
                raise error.__cause__ from None
            raise

    staging.create_stage = leaking  # type: ignore[assignment]


def _sweep(name: str, operation: str, tamper: Tamper | None = None) -> SweepResult:
    return run_sweep(
        SCENARIOS[name],
        among(name, _fs_faults(operation)),
        method=IoFaults(tamper),
        directory=default_directory(),
    )


def test_a_swallowed_failed_sync_is_a_receipt_for_something_not_durable() -> None:
    honest = _sweep("publish_artifact", "fsync_dir")
    assert honest.results and not honest.failures, _lines([honest])
    faulty = _sweep("publish_artifact", "fsync_dir", _swallow_fsync_dir)
    assert len(faulty.results) == len(honest.results)
    # every directory sync of the publication was swallowed and a receipt came back
    assert len(faulty.failures) == len(faulty.results), _lines([faulty])
    for result in faulty.failures:
        assert "returned a receipt for something not durable" in result.detail, result


def test_an_untyped_error_escaping_is_a_failure() -> None:
    honest = _sweep("publish_artifact", "create_directory $ROOT/artifacts/.staging-")
    assert honest.results and not honest.failures, _lines([honest])
    assert all("raised durability_failed" in r.detail for r in honest.results)
    faulty = _sweep(
        "publish_artifact", "create_directory $ROOT/artifacts/.staging-", _leak_raw_oserror
    )
    assert len(faulty.failures) == len(faulty.results) > 0, _lines([faulty])
    for result in faulty.failures:
        assert "an untyped error escaped the step: OSError" in result.detail, result


def test_an_injection_that_writes_nothing_is_unfired_not_tested() -> None:
    """Reopening switches an existing WAL database to WAL again (the last switch; the
    probes' are on fresh databases): SQLite writes nothing, so failing its writes fails
    nothing."""

    def journal_mode(faults: Sequence[Fault], points: Sequence[Point]) -> list[Fault]:
        switches = [
            f
            for f in faults
            if f.target == "sqlite" and points[f.k].entry[4] == "PRAGMA journal_mode = WAL"
        ]
        last = max(f.k for f in switches)
        return [f for f in switches if f.k == last]

    sweep = run_sweep(
        SCENARIOS["reopen"],
        among("reopen", journal_mode),
        method=IoFaults(),
        directory=default_directory(),
    )
    assert len(sweep.results) == 2 and {r.status for r in sweep.results} == {"unfired"}
    assert sweep.checked == 0 and len(sweep.unfired) == 2


def test_a_sqlite_injection_is_disarmed_at_the_next_boundary(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    try:
        connection.execute("CREATE TABLE t (x)")
        injector = Injector(Fault(k=3, target="sqlite", errno_name="ENOSPC"))
        injector(3, "before", "sql", "INSERT")  # armed
        with pytest.raises(sqlite3.OperationalError, match="full"):
            connection.execute("INSERT INTO t VALUES (1)")
        injector(4, "before", "sql", "ROLLBACK")  # disarmed by the next boundary
        assert injector.fired > 0
        connection.execute("INSERT INTO t VALUES (2)")
        assert connection.execute("SELECT x FROM t").fetchall() == [(2,)]
    finally:
        connection.close()


def test_a_failing_init_lock_is_durability_failed(tmp_path: Path) -> None:
    """Regression: a failing ``flock`` of ``.run-store-init.lock`` escaped ``RunStore.open``
    as a raw OSError (found by the I/O fault sweep of ``init``)."""

    def failing(phase: str, operation: str, target: str) -> None:
        if phase == "before" and target.endswith(".run-store-init.lock"):
            raise OSError(errno.EIO, "injected")

    previous = durable.install_observer(failing)
    try:
        with pytest.raises(DurabilityError) as refused:
            RunStore.open(tmp_path)
    finally:
        durable.install_observer(previous)
    assert refused.value.code == "durability_failed"
    assert not any(name.startswith(PROBE_PREFIX) for name in os.listdir(tmp_path))
    assert not os.path.exists(tmp_path / "run.sqlite3")
    with RunStore.open(tmp_path) as store:  # the lock was released: opening works again
        assert store.slot_progress([]) == {}
