"""``RunStore.recover`` under contention and failure (SPEC.md section 14, "The lock" and
"Failures"), outside in: concurrent recoverers in separate processes, a transaction rolled
back and then the same immutable orphan imported, a crash between recovery's own failure
publication and its commit completed by the next pass, and every refusal the SPEC names for
``recover`` itself (the clock, a closed store, the lock held elsewhere, unsafe paths), each
leaving the database byte for byte as it was.

Faults are injected through the SQL seam's observer (:func:`runstore.sql.install_observer`):
raising ``sqlite3.OperationalError`` before a statement makes the statement fail unrun, so
the store rolls the transaction back and reports ``database_error``. Expected values are
SPEC.md section 14's, not the model's.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import RunStore
from runstore import canonical
from runstore import sql
from runstore.store.publication import staging
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import StageTokens

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.publication.world import refusal_code
from conformance.publication.world import snapshot_tree
from conformance.recovery.world import FixedClock
from conformance.recovery.world import addresses
from conformance.recovery.world import attempt_row
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crash_populate
from conformance.recovery.world import entry
from conformance.recovery.world import events
from conformance.recovery.world import leases
from conformance.recovery.world import quarantined
from conformance.recovery.world import recover
from conformance.recovery.world import store_path
from conformance.recovery.world import terminal_events
from conformance.recovery.world import tree
from conformance.writer.world import Workers

ATTEMPT = ArtifactKind.ATTEMPT


@contextmanager
def failing_once(fragment: str) -> Iterator[list[str]]:
    """Make the first statement containing ``fragment`` fail unrun (an SQLite error), once;
    yields the statements it failed."""
    failed: list[str] = []

    def observer(phase: str, statement: str) -> None:
        if phase == "before" and fragment in statement and not failed:
            failed.append(statement)
            raise sqlite3.OperationalError(f"injected failure before {fragment}")

    previous = sql.install_observer(observer)
    try:
        yield failed
    finally:
        sql.install_observer(previous)


# The terminal commit's statement after the projection UPDATE (SPEC.md section 6: the commit
# appends the transition and event, deletes the claim and releases the leases).
TERMINAL_STATEMENT = "DELETE FROM finalization_claims"


# --- concurrent recoverers ----------------------------------------------------------------------


def prepare(world: PublicationWorld) -> list[str]:
    """Three expired attempts: one with a verified orphan, one with a registered stage,
    one with nothing left; returns their ids."""
    plain = world.executing(sc.slot_fixture(name="plain"), "reservation-0")
    staged = world.executing(sc.slot_fixture(name="staged"), "reservation-1")
    crash_populate(world, staged)
    orphaned = world.executing(sc.slot_fixture(name="orphaned"), "reservation-2")
    orphaned = world.finalizing(orphaned, 1_500)
    crash_finalization(world, orphaned, Censored(reason="budget"))
    return [plain.attempt_id, staged.attempt_id, orphaned.attempt_id]


def test_concurrent_recoverers(tmp_path: Path) -> None:
    """Two processes start a pass together on the same store (two stores in turn): one
    is ``busy`` or both succeed, and either way every attempt has exactly one terminal
    event and each stage is quarantined once."""
    previous = staging.install_token_source(StageTokens())
    worlds: list[PublicationWorld] = []
    workers = Workers(2)
    try:
        for index in range(2):
            root = tmp_path / f"store-{index}"
            root.mkdir()
            world = PublicationWorld(root)
            worlds.append(world)
            attempt_ids = prepare(world)
            task = (str(world.root), "recover", (FixedClock(EXPIRES),))
            outcomes = workers.run([task, task])
            assert all(status in ("ok", "refused") for status, _ in outcomes), outcomes
            assert [value for status, value in outcomes if status == "refused"] in ([], ["busy"])
            reports = [value for status, value in outcomes if status == "ok"]
            assert reports
            finished = sorted(t.attempt_id for r in reports for t in r.terminals)
            assert finished == sorted(attempt_ids)
            for attempt_id in attempt_ids:
                assert len(terminal_events(world, attempt_id)) == 1
                assert attempt_row(world, attempt_id)["state"] in ("failed", "censored")
            moved = sorted(os.listdir(world.artifacts / ".quarantine"))
            assert len(moved) == 2
            assert sorted(s for r in reports for s in r.quarantined_stages) == [
                f"artifacts/{name}" for name in moved
            ]
            # Converged: one more pass finds nothing to do.
            assert not recover(world, EXPIRES).changed
    finally:
        workers.close()
        for world in worlds:
            world.close()
        staging.install_token_source(previous)


# --- rollback, then the same orphan -------------------------------------------------------------


def test_transaction_rollback_then_import_of_the_same_immutable_orphan(
    world: PublicationWorld,
) -> None:
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome)
    (stage,) = world.stages()
    contents = tree(orphan)
    row = attempt_row(world, guard.attempt_id)

    with failing_once(TERMINAL_STATEMENT) as failed:
        assert refusal_code(lambda: recover(world, EXPIRES)) == "database_error"
    assert failed
    # The import rolled back whole: the attempt as it was, no terminal event, the orphan
    # intact and registered by nothing.
    assert attempt_row(world, guard.attempt_id) == row
    assert terminal_events(world, guard.attempt_id) == []
    assert tree(orphan) == contents
    assert world.rows("SELECT count(*) FROM artifacts WHERE path = ?", (store_path(orphan),)) == [
        (0,)
    ]
    assert world.rows("SELECT count(*) FROM finalization_claims") == [(0,)]  # never claimed

    report = recover(world, EXPIRES)
    (terminal,) = report.terminals
    assert (terminal.state, terminal.finished_at_ns) == (AttemptState.CENSORED, 2_001)
    # The dead publisher's stage is quarantined by one pass or the other (which one
    # depends on the order of a pass, pinned in test_recovery_paths).
    assert world.stages() == []
    assert quarantined(world) == [stage.name]
    assert attempt_row(world, guard.attempt_id)["final_artifact_id"] == (
        f"run-store-v1:{orphan.name}"
    )
    assert tree(orphan) == contents


def test_a_crash_after_recovery_published_its_failure_is_completed_by_the_next_pass(
    world: PublicationWorld,
) -> None:
    guard = world.executing(sc.slot_fixture())
    dataset = world.publish_artifact(guard, ArtifactKind.DATASET, DATA, at(1_200)).artifact

    with failing_once(TERMINAL_STATEMENT) as failed:
        assert refusal_code(lambda: recover(world, EXPIRES)) == "database_error"
    assert failed
    # The move to finalizing committed; the failure object is published, not registered;
    # recovery's private stage (no lease) stays.
    row = attempt_row(world, guard.attempt_id)
    assert (row["state"], row["revision"], row["updated_at_ns"]) == ("finalizing", 5, EXPIRES)
    assert terminal_events(world, guard.attempt_id) == []
    (published,) = addresses(world, ATTEMPT)
    document = canonical.decode_object((published / "outcome.json").read_bytes())
    assert document["outcome"] == {
        "details": {"cause": "reservation_expired", "interrupted_state": "executing"},
        "failure_code": "interrupted_attempt",
        "state": "failed",
    }
    assert document["dependencies"] == [{"artifact": entry(dataset), "role": "leased_root"}]
    assert document["finished_at_ns"] == str(EXPIRES)
    (private,) = world.stages()

    later = EXPIRES + 500
    report = recover(world, later)
    (terminal,) = report.terminals
    assert report.quarantined_stages == (store_path(private),)
    assert report.rejected_artifacts == ()
    # The same object, its finish time; the leases released at the commit time.
    assert (terminal.state, terminal.finished_at_ns) == (AttemptState.FAILED, EXPIRES)
    assert attempt_row(world, guard.attempt_id)["final_artifact_id"] == (
        f"run-store-v1:{published.name}"
    )
    assert addresses(world, ATTEMPT) == [published]
    assert [kind for _, kind, _, _ in events(world, guard.attempt_id)].count(
        "attempt_finalizing"
    ) == 1
    assert leases(world, guard.attempt_id)["reservation-0"] == later


@pytest.mark.parametrize("delay", [0, 500])
def test_a_crash_after_recovery_published_the_failure_of_an_ambiguous_attempt(
    world: PublicationWorld, delay: int
) -> None:
    guard, outcome = world.terminal_scenario("censored")
    first = crash_finalization(world, guard, outcome, payload=files(a=b"1"), start=2_000)
    second = crash_finalization(world, guard, outcome, payload=files(a=b"2"), start=2_100)
    with failing_once(TERMINAL_STATEMENT):
        assert refusal_code(lambda: recover(world, EXPIRES)) == "database_error"
    (own,) = [p for p in addresses(world, ATTEMPT) if p not in (first, second)]

    report = recover(world, EXPIRES + delay)
    (terminal,) = report.terminals
    assert (terminal.state, terminal.finished_at_ns) == (AttemptState.FAILED, EXPIRES)
    assert attempt_row(world, guard.attempt_id)["final_artifact_id"] == f"run-store-v1:{own.name}"
    assert store_path(own) not in [item.path for item in report.rejected_artifacts]


# --- refusals -----------------------------------------------------------------------------------

CLOCKS: dict[str, tuple[object, str]] = {
    "not-callable": (EXPIRES, "invalid_record"),
    "none": (None, "invalid_record"),
    "bool": (lambda: True, "invalid_record"),
    "float": (lambda: float(EXPIRES), "invalid_record"),
    "string": (lambda: str(EXPIRES), "invalid_record"),
    "negative": (lambda: -1, "out_of_range"),
    "2**63": (lambda: 2**63, "out_of_range"),
}


def expired(world: PublicationWorld) -> str:
    """An expired attempt with a registered stage: a pass that ran would change both."""
    guard = world.executing(sc.slot_fixture())
    crash_populate(world, guard)
    return guard.attempt_id


def refused_unchanged(world: PublicationWorld, code: str, call: Callable[[], object]) -> None:
    before, disk = world.database_bytes(), snapshot_tree(world.artifacts)
    assert refusal_code(call) == code
    assert world.database_bytes() == before
    assert snapshot_tree(world.artifacts) == disk


@pytest.mark.parametrize("case", sorted(CLOCKS))
def test_a_hostile_clock_is_refused(world: PublicationWorld, case: str) -> None:
    expired(world)
    clock, code = CLOCKS[case]
    refused_unchanged(world, code, lambda: world.store.recover(clock))  # type: ignore[arg-type]


def test_a_non_callable_clock_is_refused_before_the_lock_exists(world: PublicationWorld) -> None:
    world.executing(sc.slot_fixture())
    lock = world.root / ".run-store-recovery.lock"
    assert not lock.exists()
    before = world.database_bytes()
    assert refusal_code(lambda: world.store.recover(EXPIRES)) == "invalid_record"  # type: ignore[arg-type]
    assert not lock.exists()
    assert world.database_bytes() == before


def test_the_clock_is_sampled_once(world: PublicationWorld) -> None:
    expired(world)
    readings: list[int] = []

    def clock() -> int:
        readings.append(EXPIRES)
        return EXPIRES

    assert world.store.recover(clock).changed
    assert readings == [EXPIRES]


def test_a_closed_store_is_refused(world: PublicationWorld) -> None:
    expired(world)
    other = RunStore.open(world.root)
    other.close()
    refused_unchanged(world, "store_closed", lambda: other.recover(FixedClock(EXPIRES)))


@pytest.mark.parametrize("exclusive", [False, True], ids=["publisher", "recoverer"])
def test_the_recovery_lock_held_elsewhere_is_busy(world: PublicationWorld, exclusive: bool) -> None:
    attempt_id = expired(world)
    with staging.RecoveryLock(str(world.root), exclusive=exclusive):
        refused_unchanged(world, "busy", lambda: recover(world, EXPIRES))
    assert attempt_row(world, attempt_id)["state"] == "executing"
    assert recover(world, EXPIRES).changed  # free again


def _artifacts_symlink(world: PublicationWorld) -> None:
    target = world.root / "elsewhere"
    os.rename(world.artifacts, target)
    os.symlink(target, world.artifacts)


def _artifacts_file(world: PublicationWorld) -> None:
    os.rename(world.artifacts, world.root / "elsewhere")
    world.artifacts.write_bytes(b"not a directory")


def _stage_file(world: PublicationWorld) -> None:
    (world.artifacts / ".staging-file").write_bytes(b"")


def _stage_symlink(world: PublicationWorld) -> None:
    (world.artifacts / ".staging-link").symlink_to(world.stages()[0])


def _quarantine_file(world: PublicationWorld) -> None:
    (world.artifacts / ".quarantine").write_bytes(b"")


def _stage_lock_symlink(world: PublicationWorld) -> None:
    lock = world.stages()[0] / "lock"
    lock.unlink()
    lock.symlink_to(world.root / "run.sqlite3")


UNSAFE = {
    "artifacts-symlink": _artifacts_symlink,
    "artifacts-file": _artifacts_file,
    "stage-file": _stage_file,
    "stage-symlink": _stage_symlink,
    "quarantine-file": _quarantine_file,
    "stage-lock-symlink": _stage_lock_symlink,
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_an_unsafe_path_is_refused(world: PublicationWorld, case: str) -> None:
    attempt_id = expired(world)
    UNSAFE[case](world)
    before = world.database_bytes()
    disk = snapshot_tree(world.root / "elsewhere" if "artifacts-" in case else world.artifacts)
    assert refusal_code(lambda: recover(world, EXPIRES)) == "unsafe_path"
    assert world.database_bytes() == before
    assert snapshot_tree(world.root / "elsewhere" if "artifacts-" in case else world.artifacts) == (
        disk
    )
    assert attempt_row(world, attempt_id)["state"] == "executing"
