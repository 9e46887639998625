"""Writer spec tests: registering resolved records with ``register_slots`` (every slot kind
and role) and ``register_one_shot`` (its one-shot form), in lockstep with the model.

A warm-up owns no observation slot; a one-shot or fresh-observation measurement owns exactly
one result slot; a stream measurement owns one or more checkpoint slots with distinct
indices. Identical re-registration changes nothing. Every refusal is the model's code for
the same call and leaves the durable projection unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from runstore import Accepted
from runstore import ExecutionKind
from runstore import ObservationSlot
from runstore import ObservationSlotKind
from runstore import SlotRole
from runstore.testing import factories
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import Writer

from conformance.writer.world import World


def refused(world: World, code: str, call: Callable[[Writer], object]) -> None:
    """``call`` is refused with ``code`` by the store and the model alike, and the durable
    projection does not change."""
    world.refused(code, lambda: world.lockstep(call))
    world.check()


KINDS = [
    (ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, 1),
    (ExecutionKind.FRESH_OBSERVATION, SlotRole.MEASUREMENT, 1),
    (ExecutionKind.STREAM, SlotRole.MEASUREMENT, 1),
    (ExecutionKind.STREAM, SlotRole.MEASUREMENT, 3),
    (ExecutionKind.ONE_SHOT, SlotRole.WARMUP, 0),
    (ExecutionKind.FRESH_OBSERVATION, SlotRole.WARMUP, 0),
    (ExecutionKind.STREAM, SlotRole.WARMUP, 0),
]


@pytest.mark.parametrize(("kind", "role", "members"), KINDS)
def test_every_slot_kind_registers_with_its_memberships(
    world: World, kind: ExecutionKind, role: SlotRole, members: int
) -> None:
    fixture = sc.slot_fixture(kind, role, checkpoints=members)
    assert len(fixture.observation_slots) == members
    assert world.lockstep(lambda w: w.register_slots(*fixture.arguments())) == fixture.slot_id
    world.check()
    assert world.rows("SELECT execution_kind, role FROM attempt_slots") == [
        (kind.value, role.value)
    ]
    memberships = world.rows(
        "SELECT observation_slot_id, attempt_slot_id FROM attempt_observation_slots"
    )
    assert sorted(memberships) == sorted((s.id, fixture.slot_id) for s in fixture.observation_slots)


def test_identical_registration_again_changes_nothing(world: World) -> None:
    fixture = world.registered(ExecutionKind.STREAM, checkpoints=2)
    before = world.projection()
    assert world.lockstep(lambda w: w.register_slots(*fixture.arguments())) == fixture.slot_id
    assert world.projection() == before


def test_slots_of_one_run_share_its_decision_and_run(world: World) -> None:
    for name, kind in (("a", ExecutionKind.ONE_SHOT), ("b", ExecutionKind.STREAM)):
        world.register(sc.slot_fixture(kind, name=name))
    world.check()
    assert world.rows("SELECT count(*) FROM applicability_decisions") == [(1,)]
    assert world.rows("SELECT count(*) FROM resolved_runs") == [(1,)]
    assert world.rows("SELECT count(*) FROM attempt_slots") == [(2,)]


def test_register_one_shot_is_register_slots_for_a_one_shot_measurement(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)  # register_one_shot
    assert world.lockstep(lambda w: w.register_slots(*fixture.arguments())) == fixture.slot_id
    world.check()
    stream = sc.slot_fixture(ExecutionKind.STREAM, name="stream")
    refused(
        world,
        "invalid_record",
        lambda w: w.register_one_shot(
            stream.decision, stream.run, stream.attempt_slot, stream.observation_slots[0]
        ),
    )


def test_a_registered_stream_and_warmup_run_to_acceptance(world: World) -> None:
    stream = sc.slot_fixture(ExecutionKind.STREAM, checkpoints=1, name="stream")
    warmup = sc.slot_fixture(role=SlotRole.WARMUP, name="warmup")
    for fixture in (stream, warmup):
        world.register(fixture)
    guard = world.claim(
        world.walk(world.start(stream, "r-s"), sc.EXECUTION_PATH, 1_100), "c-s", 1_200
    )
    world.publish(guard.attempt, stream.observation_slots[0], "checkpoint-0", 1_300)
    world.finish(guard.attempt, Accepted(), "attempt-s", 1_400)
    guard = world.claim(world.start(warmup, "r-w"), "c-w", 1_500)
    world.finish(guard.attempt, Accepted(), "attempt-w", 1_600)
    world.check()
    assert world.rows("SELECT count(*) FROM attempts WHERE state = 'accepted'") == [(2,)]


# --- refusals, in check order -----------------------------------------------------------------


def test_an_excluded_decision_is_refused(world: World) -> None:
    fixture = sc.slot_fixture()
    excluded = factories.decision(applicable=False)
    run = factories.resolved_run(excluded)
    slot = attrs.evolve(fixture.attempt_slot, run_id=run.id)
    refused(world, "invalid_record", lambda w: w.register_slots(excluded, run, slot, ()))


def test_a_run_of_another_decision_is_refused(world: World) -> None:
    fixture = sc.slot_fixture()
    other = factories.decision("other-candidate")
    refused(
        world,
        "invalid_record",
        lambda w: w.register_slots(other, *fixture.arguments()[1:]),
    )


def test_an_attempt_slot_of_another_run_is_refused(world: World) -> None:
    fixture = sc.slot_fixture()
    foreign = sc.slot_fixture()
    other_run = factories.resolved_run(factories.decision("other-candidate"))
    slot = attrs.evolve(foreign.attempt_slot, run_id=other_run.id)
    refused(
        world,
        "invalid_record",
        lambda w: w.register_slots(fixture.decision, fixture.run, slot, ()),
    )


def test_an_observation_slot_owned_by_another_attempt_slot_is_refused(world: World) -> None:
    fixture = sc.slot_fixture(name="a")
    other = sc.slot_fixture(name="b")
    refused(
        world,
        "observation_slot_mismatch",
        lambda w: w.register_slots(
            fixture.decision, fixture.run, fixture.attempt_slot, other.observation_slots
        ),
    )


def _member(owner: sc.SlotFixture, name: str, index: int | None) -> ObservationSlot:
    kind = ObservationSlotKind.RESULT if index is None else ObservationSlotKind.CHECKPOINT
    return ObservationSlot(
        run_id=owner.run.id,
        logical_slot=name,
        kind=kind,
        checkpoint_index=index,
        attempt_slot_id=owner.slot_id,
    )


SHAPES = {
    "warm-up owning a result slot": (ExecutionKind.ONE_SHOT, SlotRole.WARMUP, [("r", None)]),
    "one-shot without a result slot": (ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, []),
    "one-shot with two result slots": (
        ExecutionKind.ONE_SHOT,
        SlotRole.MEASUREMENT,
        [("r1", None), ("r2", None)],
    ),
    "one-shot owning a checkpoint": (ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, [("c", 0)]),
    "fresh observation owning a checkpoint": (
        ExecutionKind.FRESH_OBSERVATION,
        SlotRole.MEASUREMENT,
        [("c", 0)],
    ),
    "stream without checkpoints": (ExecutionKind.STREAM, SlotRole.MEASUREMENT, []),
    "stream owning a result slot": (ExecutionKind.STREAM, SlotRole.MEASUREMENT, [("r", None)]),
    "stream repeating a checkpoint index": (
        ExecutionKind.STREAM,
        SlotRole.MEASUREMENT,
        [("c1", 0), ("c2", 0)],
    ),
    "repeated logical slot": (ExecutionKind.STREAM, SlotRole.MEASUREMENT, [("c", 0), ("c", 1)]),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_membership_of_the_wrong_shape_is_refused(world: World, shape: str) -> None:
    kind, role, members = SHAPES[shape]
    owner = sc.slot_fixture(kind, role, name="owner")
    slots = tuple(_member(owner, name, index) for name, index in members)
    refused(
        world,
        "invalid_record",
        lambda w: w.register_slots(owner.decision, owner.run, owner.attempt_slot, slots),
    )


def test_a_logical_slot_taken_by_another_record_is_a_conflict(world: World) -> None:
    world.register(sc.slot_fixture(name="same"))
    stream = sc.slot_fixture(ExecutionKind.STREAM, name="same")  # same run and logical slot
    refused(world, "registration_conflict", lambda w: w.register_slots(*stream.arguments()))


def test_an_observation_slot_name_taken_in_the_run_is_a_conflict(world: World) -> None:
    first = sc.slot_fixture(name="a")
    world.register(first)
    second = sc.slot_fixture(name="b")
    clash = _member(second, first.observation_slots[0].logical_slot, None)
    refused(
        world,
        "registration_conflict",
        lambda w: w.register_slots(second.decision, second.run, second.attempt_slot, (clash,)),
    )


def test_a_registered_slot_with_other_members_is_a_conflict(world: World) -> None:
    stream = sc.slot_fixture(ExecutionKind.STREAM, checkpoints=2, name="stream")
    world.register(stream)
    fewer = stream.observation_slots[:1]
    refused(
        world,
        "registration_conflict",
        lambda w: w.register_slots(stream.decision, stream.run, stream.attempt_slot, fewer),
    )


def test_an_exclusion_registers_alone_once_and_an_applicable_decision_is_refused(
    world: World,
) -> None:
    """``register_exclusion`` keeps a decision that admits no run (a campaign revision that
    stops measuring a pair records it so); again it changes nothing; an applicable decision
    is ``invalid_record``, and nothing is written."""
    excluded = factories.decision("other", "p", applicable=False)
    assert world.lockstep(lambda w: w.register_exclusion(excluded)) == excluded.id
    world.check()
    assert world.lockstep(lambda w: w.register_exclusion(excluded)) == excluded.id
    world.check()
    assert world.rows("SELECT id, applicable FROM applicability_decisions") == [(excluded.id, 0)]
    assert world.rows("SELECT count(*) FROM resolved_runs") == [(0,)]
    refused(world, "invalid_record", lambda w: w.register_exclusion(factories.decision()))
    assert world.rows("SELECT count(*) FROM applicability_decisions") == [(1,)]
