"""Recovery's durability steps and its recheck under the write lock (SPEC.md section 14),
seen through the two seams' observers: what is synced before the import commits, that a
quarantine never replaces, and that an owner found live again under the write lock is left
alone.
"""

from __future__ import annotations

import shutil

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import Failed
from runstore import RunStore
from runstore import durable
from runstore.errors import DestinationConflictError
from runstore.errors import OutOfRangeError
from runstore.store.recovery.disk import QUARANTINE_ATTEMPTS
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import ClockScript
from conformance.publication.world import PublicationWorld
from conformance.recovery.world import addresses
from conformance.recovery.world import attempt_row
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crash_populate
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

TERMINAL_UPDATE = "UPDATE attempts SET state"


def test_the_imported_object_and_its_parent_are_synced_before_the_import_commits(
    world: PublicationWorld, seen: list[tuple[str, str]]
) -> None:
    guard, _ = world.ready_to_accept(sc.slot_fixture())
    orphan = crash_finalization(world, guard, Accepted(), crash_at=4)
    seen.clear()
    (terminal,) = recover(world, EXPIRES).terminals
    assert attempt_row(world, terminal.attempt_id)["final_artifact_id"].endswith(orphan.name)
    commit = next(
        i
        for i, (kind, text) in enumerate(seen)
        if kind == "sql" and text.startswith(TERMINAL_UPDATE)
    )
    before = seen[:commit]
    synced_files = {target for kind, target in before if kind == "fsync_file"}
    synced_dirs = {target for kind, target in before if kind == "fsync_dir"}
    for path in orphan.rglob("*"):
        if path.is_file():
            assert str(path) in synced_files, f"{path.name} was not synced before the import"
    assert str(orphan) in synced_dirs
    assert str(world.artifacts) in synced_dirs


def test_a_quarantine_never_replaces_what_is_already_there(world: PublicationWorld) -> None:
    """A power loss between a quarantine's rename and its syncs may leave the stage under
    both names: the next pass moves it to the first free ``<name>.<n>``."""
    guard = world.executing(sc.slot_fixture())
    stage = crash_populate(world, guard)
    taken = world.artifacts / ".quarantine" / stage.name
    taken.mkdir(parents=True)  # empty: a replacing rename would silently take its place
    (taken.parent / f"{stage.name}.1").mkdir()
    report = recover(world, EXPIRES)
    assert report.quarantined_stages == (store_path(stage),)
    assert not stage.exists() and list(taken.iterdir()) == []
    assert list((taken.parent / f"{stage.name}.1").iterdir()) == []
    moved = taken.parent / f"{stage.name}.2"
    assert (moved / "object" / "partial.bin").read_bytes() == b"half"
    assert recover(world, EXPIRES).quarantined_stages == ()


def test_a_quarantine_refuses_when_every_name_is_taken(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    stage = crash_populate(world, guard)
    holding = world.artifacts / ".quarantine"
    holding.mkdir()
    for n in range(QUARANTINE_ATTEMPTS):
        (holding / (f"{stage.name}.{n}" if n else stage.name)).mkdir()
    with pytest.raises(DestinationConflictError):
        recover(world, EXPIRES)
    assert stage.is_dir() and (stage / "object" / "partial.bin").read_bytes() == b"half"
    assert all(not any(path.iterdir()) for path in holding.iterdir())


def test_an_owner_found_live_again_under_the_write_lock_is_left_alone(
    world: PublicationWorld,
) -> None:
    """Between the pass's reading and its import transaction, the owner (its clock behind
    the recoverer's) renews: the import's recheck finds it live and commits nothing."""
    guard, _ = world.ready_to_accept(sc.slot_fixture())
    orphan = crash_finalization(world, guard, Accepted(), crash_at=4)
    owner = RunStore.open(world.root)
    renewed: list[object] = []

    def revive(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "fsync_file" and not renewed:
            renewed.append(owner.renew(guard, EXPIRES + 5_000, EXPIRES - 1))

    previous = durable.install_observer(revive)
    try:
        report = recover(world, EXPIRES)
    finally:
        durable.install_observer(previous)
        owner.close()
    assert renewed, "the owner never renewed"
    assert report.terminals == ()
    assert attempt_row(world, guard.attempt_id)["state"] == "finalizing"
    assert store_path(orphan) in [store_path(p) for p in addresses(world, ArtifactKind.ATTEMPT)]
    assert recover(world, EXPIRES + 5_000).terminals[0].state.value == "accepted"


def test_a_terminal_commit_never_releases_a_stage_before_its_acquisition(
    world: PublicationWorld,
) -> None:
    """A publication whose clock ran ahead left its stage (acquired at 5,000, lease
    unreleased); the owner then commits with its clock back at 1,600. Every lease of the
    attempt is released, the stage's at its acquisition, never before it (SPEC.md section
    6), on the store and in the model alike."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_500)
    clock = ClockScript(samples=(5_000, 2**63))  # refused at its second sample
    with pytest.raises(OutOfRangeError):
        world.publish_artifact(guard, ArtifactKind.DATASET, DATA, clock)
    assert world.stage_lease(1)[0] == 5_000
    failed = Failed(code="worker_exit", details={"exit": 1})
    final = sc.artifact(ArtifactKind.ATTEMPT, "after-the-stage")
    world.lockstep(lambda w: w.commit_finalization(guard, failed, final, [], 1_600, 1_600))
    assert world.lease("reservation-0")[2] == 1_600
    assert world.stage_lease(1)[2] == 5_000


def test_a_stage_that_vanishes_during_the_pass_is_passed_over(world: PublicationWorld) -> None:
    """A publisher's cleanup does not wait for recovery: a stage removed between the
    listing and its quarantine is neither quarantined nor an error, and its lease, whose
    stage is now missing, is released."""
    first = crash_populate(world, world.executing(sc.slot_fixture(name="one")))
    other = world.executing(sc.slot_fixture(name="two"), "reservation-1")
    second = crash_populate(world, other, start=2_100)
    gone: list[str] = []

    def cleanup(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "flock_exclusive" and first.name in target:
            shutil.rmtree(second, ignore_errors=bool(gone))
            gone.append(second.name)

    previous = durable.install_observer(cleanup)
    try:
        report = recover(world, EXPIRES)
    finally:
        durable.install_observer(previous)
    assert gone[:1] == [second.name] and not second.exists()
    assert report.quarantined_stages == (store_path(first),)
    assert len(report.terminals) == 2
    released = world.rows("SELECT released_at_ns FROM leases WHERE purpose = 'staging'")
    assert [row[0] is not None for row in released] == [True, True]
