"""Writer tests that kill mutants of the rewritten finalization code (see
``tools/writer_mutations.toml``): each pins one behaviour a surviving mutant broke, on a
real store in lockstep with the model."""

from __future__ import annotations

from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Failed
from runstore import Reference
from runstore.testing import fixtures as sc

from conformance.writer.world import World

S = AttemptState


def test_a_commit_time_before_the_finish_time_is_clamped_up_to_it(world: World) -> None:
    """commit_time_not_clamped_to_finish: the commit time is clamped up to the finish
    time, so the leases are released at the finish time, never before it."""
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.advance(guard, S.FINALIZING, 1_200)
    receipt = world.finish(guard, Failed(code="oom", details={}), "a", 1_300, finished=1_600)
    assert receipt.finished_at_ns == 1_600
    assert world.rows("SELECT updated_at_ns, finished_at_ns FROM attempts") == [(1_600, 1_600)]
    assert world.rows("SELECT released_at_ns FROM leases") == [(1_600,)]
    world.check()


def test_re_registering_an_observation_with_other_references_is_a_conflict(
    world: World,
) -> None:
    """observation_references_conflict_unchecked: the same observation and artifact with
    other references is refused, and the kept references and events are unchanged."""
    fixture = sc.slot_fixture()
    world.register(fixture)
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    metric = sc.artifact(ArtifactKind.OBSERVATION, "metric-0")
    world.observe(guard, sc.observation(member, guard), metric, False, 1_200)
    observation = sc.observation(member, guard, score=2)
    artifact = sc.artifact(ArtifactKind.OBSERVATION, "observation-0")
    world.observe(guard, observation, artifact, False, 1_300, [Reference("metrics", metric.id)])
    world.refused(
        "registration_conflict",
        lambda: world.store.register_observation(
            guard,
            observation,
            artifact,
            [Reference("inputs", metric.id)],
            select=False,
            now_ns=1_400,
        ),
    )
    assert world.rows(
        "SELECT role, artifact_id FROM observation_artifacts WHERE observation_id = ?",
        (observation.id,),
    ) == [("metrics", metric.id)]
    world.check()


def test_an_observation_referencing_an_unknown_artifact_is_refused(world: World) -> None:
    """observation_reference_existence_unchecked: a reference to an artifact that is
    neither registered nor the observation's own is unknown_artifact, and nothing is
    written."""
    fixture = sc.slot_fixture()
    world.register(fixture)
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    unknown = sc.artifact(ArtifactKind.OBSERVATION, "never-registered")
    error = world.refused(
        "unknown_artifact",
        lambda: world.store.register_observation(
            guard,
            sc.observation(member, guard),
            sc.artifact(ArtifactKind.OBSERVATION, "observation-0"),
            [Reference("inputs", unknown.id)],
            select=False,
            now_ns=1_200,
        ),
    )
    assert unknown.id in str(error)
    assert world.rows("SELECT count(*) FROM observations") == [(0,)]
    world.check()


def test_re_selecting_an_already_selected_observation_writes_nothing(world: World) -> None:
    """observation_reregistration_writes_event: an identical re-registration asking to
    select an observation whose slot already has a selection selects nothing new, so it
    writes nothing and has no event."""
    fixture = sc.slot_fixture()
    world.register(fixture)
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200).attempt
    observation = world.publish(guard, member, "observation-0", 1_300)
    events = world.rows("SELECT count(*) FROM events")
    delivered = len(world.delivered)
    artifact = sc.artifact(ArtifactKind.OBSERVATION, "observation-0")
    receipt = world.observe(guard, observation, artifact, True, 1_400)
    assert (receipt.selected, receipt.selection, receipt.event_sequence) == (
        False,
        observation.id,
        None,
    )
    assert world.rows("SELECT count(*) FROM events") == events
    assert len(world.delivered) == delivered
    world.check()
