"""The outcome's snapshot is rechecked under the write lock (SPEC.md sections 11 and 13):
records the document describes that change between the finish-time check and the final
transaction refuse the commit with ``snapshot_changed``.

The change is made by a second handle on the same root while the first publisher is between
its two transactions (from the durability seam's observer, at the no-replace rename), which
is the only window a concurrent writer has: no transaction is open then.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from collections.abc import Iterator

import pytest
from runstore import ArtifactKind
from runstore import Censored
from runstore import Failed
from runstore import Next
from runstore import OwnedAttempt
from runstore import RunStore
from runstore import RunStoreError
from runstore import durable
from runstore.testing import fixtures as sc
from runstore.testing.publishing import at
from runstore.testing.publishing import files

from conformance.publication.world import DATA
from conformance.publication.world import PublicationWorld
from conformance.publication.world import orphan_verifies


@contextlib.contextmanager
def during_rename(world: PublicationWorld, change: Callable[[RunStore], object]) -> Iterator[None]:
    """While inside, an observer runs ``change(second_store)`` once, just before the
    publisher's no-replace rename; the previous observer is restored after."""
    done: list[bool] = []

    def observer(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "rename_noreplace" and not done:
            done.append(True)
            with RunStore.open(world.root) as second:
                change(second)

    previous = durable.install_observer(observer)
    try:
        yield
    finally:
        durable.install_observer(previous)


def test_an_observation_produced_meanwhile_refuses_the_stale_outcome(
    world: PublicationWorld,
) -> None:
    fixture = sc.slot_fixture()
    guard: OwnedAttempt = world.finalizing(world.executing(fixture), 1_500)
    observation = sc.observation(fixture.observation_slots[0], guard)
    result = files(**{"result.json": b'{"score":2}'})
    published = world.publish_artifact(guard, ArtifactKind.OBSERVATION, result, at(1_600))

    def register(second: RunStore) -> None:
        second.register_observation(
            guard, observation, published.artifact, (), select=False, now_ns=1_700
        )

    with during_rename(world, register), pytest.raises(RunStoreError) as refused:
        world.store.publish_finalization(
            guard, Failed(code="exit_status", details={}), (), DATA, at(1_650).fresh()
        )
    assert refused.value.code == "snapshot_changed", refused.value
    assert world.rows("SELECT state FROM attempts") == [("finalizing",)]
    orphan = orphan_verifies(world, ArtifactKind.ATTEMPT)
    stale = json.loads((orphan / "outcome.json").read_bytes())
    assert stale["snapshot"]["produced_observations"] == []

    # Published again, the outcome describes the observation and commits.
    again = world.store.publish_finalization(
        guard, Failed(code="exit_status", details={}), (), DATA, at(1_800).fresh()
    )
    document = json.loads((world.root / again.artifact.path / "outcome.json").read_bytes())
    produced = document["snapshot"]["produced_observations"]
    assert [entry["observation"]["id"] for entry in produced] == [observation.id]
    assert again.terminal.state.value == "failed"


def test_a_selection_made_meanwhile_refuses_a_stale_censored_outcome(
    world: PublicationWorld,
) -> None:
    """Censored snapshots include the slot's selected observations: another attempt's
    selection committed meanwhile makes the document stale."""
    fixture = sc.slot_fixture()
    censored = world.finalizing(world.executing(fixture), 1_500)
    other = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_510)
    other = world.walk(other, sc.EXECUTION_PATH, 1_520)
    claim = world.claim(other, "claim-1", 1_530)
    assert claim.claimed
    other = claim.attempt
    result = files(**{"result.json": b'{"score":3}'})
    published = world.publish_artifact(other, ArtifactKind.OBSERVATION, result, at(1_540))
    observation = sc.observation(fixture.observation_slots[0], other)

    def select(second: RunStore) -> None:
        second.register_observation(
            other, observation, published.artifact, (), select=True, now_ns=1_700
        )

    with during_rename(world, select), pytest.raises(RunStoreError) as refused:
        world.store.publish_finalization(
            censored, Censored(reason="budget"), (), DATA, at(1_650).fresh()
        )
    assert refused.value.code == "snapshot_changed", refused.value
    states = dict(world.rows("SELECT id, state FROM attempts"))
    assert states[censored.attempt_id] == "finalizing"
