"""When recovery abandons a stage (SPEC.md section 14.2, steps 2 and 5; the stages
themselves are section 11's): one test per case of the rule, each named for it.

A free stage (its ``lock`` not held by anyone) is abandoned, so quarantined intact, when
no lease names it, when its lease is released, or when its lease is unreleased but
expired at its judging time (``max(t, the attempt's updated_at_ns, acquired_at_ns)``,
section 14.1). A held stage is never abandoned, whatever its lease says.

Rules of this file: each test makes exactly one case on a real store, through the
publisher's own code where the case can arise there (``world.store``, never in lockstep:
the model does not see these leftovers), and beside an attempt whose owner is still live,
so that the stage is judged on its own and not because its attempt failed in the same
pass (that order is ``test_paths.py::test_stages_are_settled_after_attempts``). Expected
values are SPEC.md's. Cases pinned elsewhere already and not repeated here: a hand-made
stage with no lease in an otherwise empty store (``test_paths.py::
test_unregistered_staging_directory``), and a held stage whose lease expired, which
defers its attempt (``test_paths.py::test_active_process_locks``).
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runstore import ArtifactKind
from runstore import RecoveryReport
from runstore import durable
from runstore.store.publication import staging
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import ScriptedClock
from conformance.publication.world import lock_is_free
from conformance.recovery.world import attempt_row
from conformance.recovery.world import crash_populate
from conformance.recovery.world import leases
from conformance.recovery.world import recover
from conformance.recovery.world import store_path
from conformance.recovery.world import tree

FIRST_STAGE = f"staging-{1:032x}"
"""The lease id of the first stage (deterministic tokens)."""


def quarantined_intact(world: PublicationWorld, stage: Path, contents: object) -> None:
    """The stage is gone from ``artifacts/`` and sits, unchanged, in the quarantine."""
    assert not stage.exists()
    assert tree(world.artifacts / ".quarantine" / stage.name) == contents


def test_a_free_stage_whose_lease_expired_unreleased_is_abandoned(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.2, step 5: a free stage whose staging lease is unreleased but
    expired at its judging time is quarantined, even while its attempt's owner is live;
    then its lease, whose stage is gone, is released at that judging time. Expiry is
    exclusive (section 6), so one nanosecond earlier the stage is its owner's.

    The writer keeps every live stage's expiry equal to the reservation's (``renew``
    extends both), so a live owner with an expired stage is made here by extending the
    reservation alone, a write the schema allows (expiry only moves forward); SPEC.md
    section 6 leaves such stages to recovery ("released or expired stages are left for
    recovery")."""
    guard = world.executing(sc.slot_fixture())  # executing at 1_103, expires at EXPIRES
    stage = crash_populate(world, guard, start=2_000)  # lease acquired at 2_000, unreleased
    assert world.lease(FIRST_STAGE)[:3] == (2_000, EXPIRES, None)
    with sqlite3.connect(world.database_path, isolation_level=None) as connection:
        connection.execute(
            "UPDATE leases SET expires_at_ns = ? WHERE id = 'reservation-0'", (EXPIRES * 2,)
        )
    connection.close()
    contents = tree(stage)
    row = attempt_row(world, guard.attempt_id)

    assert recover(world, EXPIRES - 1) == RecoveryReport()
    assert tree(stage) == contents

    report = recover(world, EXPIRES)
    assert report == RecoveryReport(quarantined_stages=(store_path(stage),))
    quarantined_intact(world, stage, contents)
    assert leases(world, guard.attempt_id) == {"reservation-0": None, FIRST_STAGE: EXPIRES}
    assert attempt_row(world, guard.attempt_id) == row
    assert recover(world, EXPIRES + 1) == RecoveryReport()


def test_a_free_stage_that_no_lease_names_is_abandoned(world: PublicationWorld) -> None:
    """SPEC.md section 14.2, step 5: a free stage that no lease row names (a publisher
    that died after creating its stage and before its lease committed, section 11 step 2)
    is quarantined, while a live owner's stage beside it is left; nothing is written to
    the database, since there is no lease to release."""
    guard = world.executing(sc.slot_fixture())
    live = crash_populate(world, guard, start=2_000)
    dead = staging.create_stage(str(world.root))  # the publisher's own stage creation
    dead.unlock()  # its process died: the kernel dropped the lock
    orphaned = Path(dead.path)
    assert world.rows("SELECT count(*) FROM leases WHERE staging_path = ?", (dead.store_path,)) == [
        (0,)
    ]
    contents, kept = tree(orphaned), tree(live)
    projection = world.projection()

    report = recover(world, 5_000)
    assert report == RecoveryReport(quarantined_stages=(dead.store_path,))
    quarantined_intact(world, orphaned, contents)
    assert world.stages() == [live] and tree(live) == kept
    assert world.projection() == projection


def test_a_free_stage_whose_lease_was_released_is_abandoned(world: PublicationWorld) -> None:
    """SPEC.md section 14.2, step 5: a free stage whose lease is released (a publication
    committed and its cleanup was lost, section 11 step 9) is quarantined, though its
    attempt's owner is live; its lease keeps the release time of the commit."""
    guard = world.executing(sc.slot_fixture())

    def lose_cleanup(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "remove_tree" and ".staging-" in target:
            raise OSError(errno.EIO, "cleanup lost", target)

    previous = durable.install_observer(lose_cleanup)
    try:
        published = world.store.publish_artifact(
            guard, ArtifactKind.DATASET, DATA, ScriptedClock([2_000, 2_001, 2_002])
        )
    finally:
        durable.install_observer(previous)
    (stage,) = world.stages()
    assert lock_is_free(stage / "lock")
    assert world.lease(FIRST_STAGE)[2] == 2_002
    contents = tree(stage)
    projection = world.projection()

    report = recover(world, 5_000)
    assert report == RecoveryReport(quarantined_stages=(store_path(stage),))
    quarantined_intact(world, stage, contents)
    assert world.projection() == projection
    assert (world.root / published.artifact.path).is_dir()


@pytest.mark.parametrize("lease", ["released", "missing"])
def test_a_held_stage_is_never_abandoned(world: PublicationWorld, lease: str) -> None:
    """SPEC.md section 14.2, step 2: a stage whose lock someone holds is busy and left
    alone, though its lease alone would abandon it: ``released`` is a publisher between
    its final commit and its cleanup (section 11 step 9), seen by a pass far past its
    attempt's expiry, which that stage's lease defers; ``missing`` is a stage no lease
    names, held by its creator. Once the lock is free, the same stage is abandoned or
    gone."""
    guard = world.executing(sc.slot_fixture())
    seen: list[Any] = []

    def recover_during_cleanup(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "remove_tree" and not seen:
            seen.append(world.projection())  # first, so recovery's own calls pass by
            seen.append((recover(world, EXPIRES * 2), Path(target).is_dir()))
            seen.append(world.projection())

    if lease == "released":
        previous = durable.install_observer(recover_during_cleanup)
        try:
            world.store.publish_artifact(
                guard, ArtifactKind.DATASET, DATA, ScriptedClock([2_000, 2_001, 2_002])
            )
        finally:
            durable.install_observer(previous)
        before, (report, present), after = seen
        assert after == before
        path = staging.store_path_for(f"{1:032x}")
        assert report == RecoveryReport(busy_stages=(path,))
        assert present and world.stages() == []  # the publisher's cleanup then removed it
        assert leases(world, guard.attempt_id)[FIRST_STAGE] == 2_002
        return

    held = staging.create_stage(str(world.root))
    contents = tree(Path(held.path))
    projection = world.projection()
    try:
        report = recover(world, 5_000)
        assert report == RecoveryReport(busy_stages=(held.store_path,))
        assert tree(Path(held.path)) == contents
        assert world.projection() == projection
    finally:
        held.unlock()
    assert recover(world, 5_000) == RecoveryReport(quarantined_stages=(held.store_path,))
    quarantined_intact(world, Path(held.path), contents)
