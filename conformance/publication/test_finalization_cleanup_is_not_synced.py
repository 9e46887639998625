"""The cleanup after ``publish_finalization``'s commit (SPEC.md section 11: "is the same
path with these differences", here the same as ``publish_artifact``'s step 9): the stage
is removed after the final commit, best effort, and ``artifacts/`` is not synced after
this removal, for a released stage holds nothing the store needs and recovery removes one
whose cleanup a power loss undid. ``test_stage_creation_and_cleanup.py`` pins this for
``publish_artifact``; here it is the final artifact's publication, for every terminal
outcome, observed through the durability seam's recorder (the order of persistence
effects).
"""

from __future__ import annotations

import os

import pytest
from runstore import durable

from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files

LOGS = files(**{"stderr.log": b"done\n"})


@pytest.mark.parametrize("name", ["accepted", "censored", "superseded", "failed"])
def test_the_cleanup_after_a_finalization_commit_does_not_sync_artifacts(
    world: PublicationWorld, name: str
) -> None:
    """SPEC.md 11 step 9, for ``publish_finalization``: the stage directory's removal is
    the last persistence effect; no sync of ``artifacts/`` (or of anything) follows it."""
    guard, outcome = world.terminal_scenario(name)
    effects: list[tuple[str, tuple[str, ...]]] = []
    previous = durable.install_recorder(lambda effect, paths: effects.append((effect, paths)))
    try:
        published = world.publish_finalization(guard, outcome, (), LOGS, at(2_000))
    finally:
        durable.install_recorder(previous)
    assert published.terminal.state is outcome.state
    (stage_removed,) = [
        index
        for index, (effect, paths) in enumerate(effects)
        if effect == "rmdir" and os.path.basename(paths[0]).startswith(".staging-")
    ]
    assert effects[stage_removed + 1 :] == []
    # The removal is the cleanup's, after the commit: the object was synced at its address.
    renamed = [i for i, (effect, _) in enumerate(effects) if effect == "rename"]
    assert renamed and renamed[-1] < stage_removed
    assert ("fsync_dir", (str(world.artifacts),)) in effects[renamed[-1] : stage_removed]
    assert world.stages() == []
