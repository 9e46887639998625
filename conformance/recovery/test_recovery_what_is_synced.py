"""What a recovery pass synchronizes, and what it does not (SPEC.md section 14.2 steps 4
and 6, section 14.3), one test per rule, seen through the two seams' observers:

- independent orphans: every file and directory of each one is synced, then
  ``artifacts/``, all before the transaction that registers them (step 6);
- candidates: validating a candidate synchronizes nothing of it; only the one imported
  is synced (section 14.3), so one that is rejected, or that names a live attempt, never
  is;
- recovery's own stage: removing it after its failure commits is best effort and does
  not sync ``artifacts/`` (step 4 e, as publication's cleanup, section 11 step 9).

Rules of this file: every durability call (before it runs) and every SQL statement of
this process is logged in order while the pass runs; expected values are SPEC.md's.
"""

from __future__ import annotations

from pathlib import Path

from runstore import ArtifactKind
from runstore import Censored
from runstore import recovery_report as codes
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.recovery.world import crash_artifact
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import make_object
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

Log = list[tuple[str, str]]


def synced_inside(log: Log, directory: Path) -> list[str]:
    """The targets of the syncs in ``log`` at or under ``directory``."""
    inside = f"{directory}/"
    return [
        target
        for operation, target in log
        if operation.startswith("fsync") and (target == str(directory) or target.startswith(inside))
    ]


def test_orphans_are_synced_whole_then_their_parent_before_they_are_registered(
    world: PublicationWorld, seen: Log
) -> None:
    """SPEC.md section 14.2 step 6: every unregistered object of another kind is verified
    with its files and directories synced, and they are registered in one transaction
    after ``artifacts/`` is synced: each orphan's every file and directory, and then
    ``artifacts/``, are synced before the statement that inserts their rows."""
    guard = world.executing(sc.slot_fixture())
    orphans = [
        crash_artifact(world, guard, kind, DATA, start=start)
        for kind, start in ((ArtifactKind.DATASET, 2_000), (ArtifactKind.SOURCE, 2_100))
    ]
    seen.clear()
    report = recover(world, 5_000)
    assert sorted(a.path for a in report.imported_artifacts) == sorted(map(store_path, orphans))

    insert = next(
        i
        for i, (kind, text) in enumerate(seen)
        if kind == "sql" and "INSERT INTO artifacts" in text
    )
    before = seen[:insert]
    files = {target for kind, target in before if kind == "fsync_file"}
    directories = [target for kind, target in before if kind == "fsync_dir"]
    for orphan in orphans:
        for path in orphan.rglob("*"):
            if path.is_file():
                assert str(path) in files, f"{path} was not synced before its registration"
            else:
                assert str(path) in directories, f"{path} was not synced before its registration"
        assert str(orphan) in directories
    last_orphan_sync = max(
        i for i, target in enumerate(directories) if target.startswith(str(world.artifacts) + "/")
    )
    assert str(world.artifacts) in directories[last_orphan_sync + 1 :]


def test_validating_a_candidate_syncs_nothing_of_it(world: PublicationWorld, seen: Log) -> None:
    """SPEC.md section 14.3: validating a candidate synchronizes nothing of it (only the
    one imported is synced, section 14.2 step 4): a live owner's published outcome, read
    and left to its owner, and a candidate rejected as ``malformed_outcome`` are both
    read and neither is synced."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_500)
    owners = crash_finalization(world, guard, Censored(reason="budget"))
    malformed = make_object(
        world, ArtifactKind.ATTEMPT, {"log.txt": b"x"}, {"outcome.json": b"hello"}
    )
    seen.clear()
    report = recover(world, 5_000)
    assert [(r.path, r.code) for r in report.rejected_artifacts] == [
        (store_path(malformed), codes.MALFORMED_OUTCOME)
    ]
    assert report.terminals == ()
    for candidate in (owners, malformed):
        assert synced_inside(seen, candidate) == [], f"{candidate.name} was synced"


def test_recoverys_own_stage_is_removed_without_syncing_its_parent(
    world: PublicationWorld, seen: Log
) -> None:
    """SPEC.md section 14.2 step 4 (e): after the interrupted failure commits, its private
    stage is removed, best effort, and ``artifacts/`` is not synced after the removal (as
    publication's cleanup, section 11 step 9: a stage a power loss brings back holds
    nothing the store needs, and no lease names it, so the next pass quarantines it)."""
    world.executing(sc.slot_fixture())
    seen.clear()
    (terminal,) = recover(world, EXPIRES).terminals
    assert terminal.state.value == "failed"
    assert world.stages() == []
    removal = next(
        i
        for i, (operation, target) in enumerate(seen)
        if operation == "remove_tree" and Path(target).name.startswith(".staging-")
    )
    after = [(operation, target) for operation, target in seen[removal + 1 :] if operation != "sql"]
    assert not any(operation.startswith("fsync") for operation, _ in after), after
