"""``validate`` sees a database that lost commits its artifacts survived: a complete object
on disk that no row registers while its ``outcome.json`` says more than the database holds
(``artifact_unregistered``, SPEC.md section 16.1; issue 28, observation 15).

Losing a stopped store's WAL (deleted, or truncated at a frame) puts the database back at
its last checkpoint; the completed objects published since stay, since they are
directories, not pages. :func:`lose_wal` makes that loss faithfully: the store is closed
(so the WAL is checkpointed and removed: the main file then holds everything committed),
the main file is copied aside, more is committed and the store closed again, and the old
main file is put back with no ``-wal`` or ``-shm``. That is exactly what a coordinator
killed before any checkpoint, whose WAL was then lost, leaves: a small WAL is only
checkpointed on close.

The benign side of the rule is pinned too: a crash between an object's rename and its
commit (which recovery imports or rejects) and a rejected outcome whose attempt another
artifact finalized are not findings, and neither is an unregistered object of another kind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import TypeVar

import pytest
from runstore import Accepted
from runstore import AttemptState
from runstore import Failed
from runstore import OwnedAttempt
from runstore import RunStore
from runstore import TerminalOutcome
from runstore.audit import audit
from runstore.enums import ArtifactKind
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.validate import ValidationReport
from runstore.inspection.validate import validate_store
from runstore.requests import FirstAttempt
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.store.publication import objects
from runstore.testing import factories

from conformance.cli.world import runstore
from conformance.closed_store import rows
from conformance.inspection.corrupt_world import DATABASE
from conformance.runner.world import Clock
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import succeeded

T = TypeVar("T")
FAR = 2**62
"""A lease expiry no test clock reaches."""
UNREGISTERED = "artifact_unregistered"


def lose_wal(root: Path, kept: Callable[[RunStore], T], lost: Callable[[RunStore, T], None]) -> T:
    """Commit ``kept`` and close the store; then commit ``lost`` and lose it with the WAL
    (the database is put back as it was before ``lost``, without ``-wal`` and ``-shm``).
    Returns what ``kept`` returned."""
    with RunStore.open(str(root)) as store:
        value = kept(store)
    assert not (root / f"{DATABASE}-wal").exists(), "a closed store keeps no WAL"
    saved = (root / DATABASE).read_bytes()
    with RunStore.open(str(root)) as store:
        lost(store, value)
    (root / DATABASE).write_bytes(saved)
    for suffix in ("-wal", "-shm"):
        (root / f"{DATABASE}{suffix}").unlink(missing_ok=True)
    return value


def unregistered_findings(report: ValidationReport) -> list[tuple[str, str]]:
    return [(f.subject, f.message) for f in report.findings if f.code == UNREGISTERED]


def attempt_objects(root: Path) -> set[str]:
    return {p.name for p in (root / "artifacts").iterdir() if p.name.startswith("attempt-")}


def registered_paths(root: Path) -> set[str]:
    return {path for (path,) in rows(root, "SELECT path FROM artifacts")}


def only_unregistered_object(root: Path) -> str:
    (name,) = {f"artifacts/{n}" for n in attempt_objects(root)} - registered_paths(root)
    return name


# --- the store API, one step each ---------------------------------------------------------


def ticks(start: int) -> Callable[[], int]:
    counter = iter(range(start, start + 1_000))
    return lambda: next(counter)


def started(
    store: RunStore, name: str, now: int, *, expires: int = FAR
) -> tuple[factories.OneShot, OwnedAttempt]:
    slots = factories.one_shot(name)
    guard = store.reserve(
        store.register_one_shot(*slots.arguments()),
        FirstAttempt(),
        factories.lease(name, expires_at_ns=expires),
        now,
    )
    return slots, store.advance(guard, AttemptState.MATERIALIZING, now + 1)


def claimed(store: RunStore, guard: OwnedAttempt, now: int) -> OwnedAttempt:
    disposition = store.begin_finalization(
        guard, factories.lease(f"claim-{guard.attempt_id[-8:]}", expires_at_ns=FAR), now
    )
    assert disposition.claimed
    return disposition.attempt


def observed(
    store: RunStore, slots: factories.OneShot, guard: OwnedAttempt, now: int, *, select: bool = True
) -> None:
    def populate(path: str) -> None:
        Path(path, "result.json").write_text('{"metrics":{"size":1}}', encoding="utf-8")

    published = store.publish_artifact(guard, ArtifactKind.OBSERVATION, populate, ticks(now))
    observation = factories.observation(slots.observation_slot, guard.attempt_id)
    store.register_observation(
        guard, observation, published.artifact, (), select=select, now_ns=now + 10
    )


def accepted(
    store: RunStore, guard: OwnedAttempt, now: int, outcome: TerminalOutcome | None = None
) -> None:
    """``publish_finalization`` of ``outcome`` (``Accepted`` by default) with a log file."""

    def populate(path: str) -> None:
        Path(path, "stdout.log").write_bytes(b"log\n")

    store.publish_finalization(guard, outcome or Accepted(), (), populate, ticks(now))


def to_acceptance(store: RunStore, name: str, now: int) -> str:
    slots, guard = started(store, name, now)
    guard = claimed(store, guard, now + 100)
    observed(store, slots, guard, now + 200)
    accepted(store, guard, now + 300)
    return guard.attempt_id


# --- lost commits are findings ------------------------------------------------------------


def test_a_lost_wal_under_a_campaign_is_seen_by_validate_but_not_by_audit(tmp_path: Path) -> None:
    """The issue's case through the runner: slot a x q is accepted after a checkpoint and
    lost with the WAL; its reservation went with it, so its outcome names an attempt the
    database lacks."""
    clock = Clock()

    def run(store: RunStore, problems: tuple[str, ...]) -> None:
        run_campaign(
            store,
            campaign(("a",), problems),
            ScriptedExecutor(lambda order, nth: succeeded(), clock),
            RunOptions(jobs=1),
            lambda event, fields: None,
            clock=clock,
        )

    lose_wal(tmp_path, lambda store: run(store, ("p",)), lambda store, _: run(store, ("p", "q")))
    (attempt_id,) = {row[0] for row in rows(tmp_path, "SELECT id FROM attempts")}
    subject = only_unregistered_object(tmp_path)
    document = json.loads((tmp_path / subject / "outcome.json").read_bytes())
    lost_id = document["attempt"]["id"]
    assert lost_id != attempt_id

    report = validate_store(str(tmp_path))
    assert not report.ok
    ((found_subject, message),) = unregistered_findings(report)
    assert found_subject == subject
    assert lost_id in message and "lacks" in message, message
    assert [f.code for f in report.findings] == [UNREGISTERED], report.findings
    assert unregistered_findings(validate_store(str(tmp_path), quick=True)) == [
        (found_subject, message)
    ]
    shown = runstore("validate", "--store", str(tmp_path))
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert f"{UNREGISTERED}: {subject}: " in shown.stdout
    # The rolled-back log is a consistent prefix of the history: audit, which replays the
    # log against the tables and reads no object, has nothing to disagree with.
    with Snapshot.take(tmp_path) as snapshot:
        assert audit(snapshot).ok


def accepted_later(store: RunStore, value: tuple[factories.OneShot, OwnedAttempt]) -> None:
    """The commits the WAL loses: the kept attempt claims, observes and is accepted."""
    slots, guard = value
    guard = claimed(store, guard, 2_000)
    observed(store, slots, guard, 2_100)
    accepted(store, guard, 2_200)


def test_an_attempt_rolled_back_to_an_execution_phase_is_a_finding(tmp_path: Path) -> None:
    def kept(store: RunStore) -> tuple[factories.OneShot, OwnedAttempt]:
        return started(store, "rolled", 1_000)

    _, guard = lose_wal(tmp_path, kept, accepted_later)
    ((subject, message),) = unregistered_findings(validate_store(str(tmp_path)))
    assert subject == only_unregistered_object(tmp_path)
    assert guard.attempt_id in message and "materializing at revision 1" in message, message


def test_a_rolled_back_attempt_stays_a_finding_after_recovery_failed_it(tmp_path: Path) -> None:
    """``run --resume`` after the loss: recovery rejects the object (the attempt is not
    finalizing), moves the attempt to finalizing and fails it, so its revision catches up
    with the document's; but that move is later than the document's finish time."""

    def kept(store: RunStore) -> tuple[factories.OneShot, OwnedAttempt]:
        return started(store, "resumed", 1_000, expires=5_000)

    _, guard = lose_wal(tmp_path, kept, accepted_later)
    subject = only_unregistered_object(tmp_path)
    with RunStore.open(str(tmp_path)) as store:
        report = store.recover(lambda: 10_000)
    assert [(r.path, r.code) for r in report.rejected_artifacts] == [(subject, "not_finalizing")]
    assert [t.state for t in report.terminals] == [AttemptState.FAILED]
    ((found, message),) = unregistered_findings(validate_store(str(tmp_path)))
    assert found == subject
    assert guard.attempt_id in message and "later" in message, message


def test_a_lost_attempt_run_again_under_its_id_is_still_a_finding(tmp_path: Path) -> None:
    """The lost attempt's slot is registered and run again after the loss: retry 0 gets
    the same attempt id, accepted with another object. The first object names that id
    with another reservation time."""
    lose_wal(
        tmp_path,
        lambda store: to_acceptance(store, "kept", 1_000),
        lambda store, _: to_acceptance(store, "again", 2_000),
    )
    (lost,) = attempt_objects(tmp_path) - {p.split("/")[1] for p in registered_paths(tmp_path)}
    with RunStore.open(str(tmp_path)) as store:
        attempt_id = to_acceptance(store, "again", 3_000)
    ((subject, message),) = unregistered_findings(validate_store(str(tmp_path)))
    assert subject == f"artifacts/{lost}"
    assert attempt_id in message and "another reservation" in message, message


@pytest.mark.parametrize(
    ("select", "outcome"),
    [(True, Accepted()), (False, Failed(code="worker_failed", details={"exit_code": 3}))],
    ids=["selected and accepted", "unselected and failed"],
)
def test_an_observation_lost_behind_a_kept_claim_is_a_finding(
    tmp_path: Path, select: bool, outcome: TerminalOutcome
) -> None:
    """The attempt is finalizing at the document's revision, as after a crash between the
    rename and the commit; but the observation its document lists (and, when accepted,
    its selection) was lost. A failed outcome's snapshot lists no selection: the produced
    observation alone shows the loss."""

    def kept(store: RunStore) -> tuple[factories.OneShot, OwnedAttempt]:
        slots, guard = started(store, "claimed", 1_000)
        return slots, claimed(store, guard, 1_100)

    def lost(store: RunStore, value: tuple[factories.OneShot, OwnedAttempt]) -> None:
        slots, guard = value
        observed(store, slots, guard, 2_000, select=select)
        accepted(store, guard, 2_100, outcome)

    _, guard = lose_wal(tmp_path, kept, lost)
    ((subject, message),) = unregistered_findings(validate_store(str(tmp_path)))
    assert subject == only_unregistered_object(tmp_path)
    assert guard.attempt_id in message and "observation" in message, message


# --- leftovers recovery handles are not ---------------------------------------------------


class Crash(Exception):
    pass


def crashing(start: int, at: int) -> Callable[[], int]:
    """A clock that raises at its ``at``-th sample (SPEC.md section 11 numbers them)."""
    samples = iter(range(1, 100))

    def clock() -> int:
        number = next(samples)
        if number == at:
            raise Crash
        return start + number

    return clock


def test_a_crash_between_rename_and_commit_is_no_finding(tmp_path: Path) -> None:
    """publish_finalization dies at its third clock sample, after the rename: the object
    is an orphan naming the finalizing attempt at the document's revision, which recovery
    imports. Then the owner publishes again (another finish time, another object) and
    commits: the first object names a terminal attempt another artifact finalized."""
    with RunStore.open(str(tmp_path)) as store:
        slots, guard = started(store, "crashed", 1_000)
        guard = claimed(store, guard, 1_100)
        observed(store, slots, guard, 1_200)

        def populate(path: str) -> None:
            Path(path, "stdout.log").write_bytes(b"log\n")

        with pytest.raises(Crash):
            store.publish_finalization(guard, Accepted(), (), populate, crashing(2_000, 3))
    orphan = only_unregistered_object(tmp_path)
    assert validate_store(str(tmp_path)).ok
    assert validate_store(str(tmp_path), quick=True).ok
    with RunStore.open(str(tmp_path)) as store:
        accepted(store, guard, 3_000)
    assert orphan not in registered_paths(tmp_path)
    assert len(attempt_objects(tmp_path)) == 2
    report = validate_store(str(tmp_path))
    assert report.ok, report.findings


def test_an_attempt_published_while_validate_runs_is_not_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate may run beside a campaign: an attempt reserved and accepted after the copy
    was taken is missing from the copy, but its object was not listed (the listing comes
    first), so it is not judged against a database older than it."""
    with RunStore.open(str(tmp_path)) as store:
        to_acceptance(store, "before", 1_000)
    take = Snapshot.take

    def take_then_publish(*args: Any, **kwargs: Any) -> Snapshot:
        snapshot = take(*args, **kwargs)
        with RunStore.open(str(tmp_path)) as store:
            to_acceptance(store, "during", 5_000)
        return snapshot

    monkeypatch.setattr(Snapshot, "take", take_then_publish)
    report = validate_store(str(tmp_path))
    assert report.ok, report.findings
    assert report.checked["attempts"] == 1 and len(attempt_objects(tmp_path)) == 2


def test_a_healthy_store_and_an_unregistered_observation_are_no_finding(tmp_path: Path) -> None:
    """A store with an accepted attempt reports nothing. Then an observation object no row
    registers (publish_artifact died after its rename, or it was lost with the WAL) is an
    independent orphan recovery imports: not this finding."""
    with RunStore.open(str(tmp_path)) as store:
        to_acceptance(store, "kept", 1_000)
    healthy = validate_store(str(tmp_path))
    assert healthy.ok and healthy.checked["unregistered_objects"] == 0, healthy.findings
    lose_wal(
        tmp_path,
        lambda store: None,
        lambda store, _: observed(store, *started(store, "lost", 2_000), 2_100, select=False),
    )
    assert not attempt_objects(tmp_path) - {p.split("/")[1] for p in registered_paths(tmp_path)}
    assert any(p.name.startswith("observation-") for p in (tmp_path / "artifacts").iterdir())
    report = validate_store(str(tmp_path))
    assert report.ok, report.findings


# --- hostile objects -----------------------------------------------------------------------


def place_attempt_object(root: Path, runtime: dict[str, bytes]) -> str:
    """Complete an attempt object holding ``stdout.log`` and the ``runtime`` files with the
    store's own completion code, and place it at its address, registered by nothing."""
    scratch = root / "scratch-object"
    scratch.mkdir()
    (scratch / "stdout.log").write_bytes(b"log\n")
    inventory = objects.scan(str(scratch), reserved=("manifest.json", *runtime))
    completed = objects.complete(str(scratch), inventory, runtime)
    path = objects.address(ArtifactKind.ATTEMPT, completed.tree_sha256)[1]
    os.rename(scratch, root / path)
    return path


@pytest.fixture
def store_copy(copy: Path) -> Iterator[Path]:
    """The inspection group's built store (see corrupt_world), healthy before the test."""
    assert validate_store(str(copy), quick=True).ok
    yield copy


HOSTILE = {
    "not JSON": {"outcome.json": b"not json \xff"},
    "deeply nested": {"outcome.json": b"[" * 100_000 + b"]" * 100_000},
    "not an outcome": {"outcome.json": b'{"attempt":{}}'},
    "without outcome.json": {},
}


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_outcome_bytes_are_a_finding_not_a_crash(
    store_copy: Path, case: str, quick: bool
) -> None:
    path = place_attempt_object(store_copy, HOSTILE[case])
    report = validate_store(str(store_copy), quick=quick)
    ((subject, message),) = unregistered_findings(report)
    assert subject == path
    assert "outcome.json" in message, message
    assert [f.code for f in report.findings] == [UNREGISTERED]


def test_an_outcome_larger_than_the_bound_is_not_read(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("runstore.inspection.validate.unregistered.OUTCOME_LIMIT", 1_000)
    path = place_attempt_object(store_copy, {"outcome.json": b" " * 1_001})
    ((subject, message),) = unregistered_findings(validate_store(str(store_copy)))
    assert subject == path and "1001 bytes" in message, message


def test_an_unregistered_object_that_does_not_verify_is_not_judged(store_copy: Path) -> None:
    """Only a complete object is a claim of the runtime: one whose bytes do not match its
    manifest is recovery's to reject (``corrupt``), and nothing the database lost."""
    path = place_attempt_object(store_copy, {"outcome.json": b"not json"})
    (store_copy / path / "stdout.log").write_bytes(b"LOG\n")
    assert validate_store(str(store_copy)).ok
