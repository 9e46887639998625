"""Writer spec tests: an attempt slot's observation slots are fixed by its first
registration (SPEC.md section 6, registration).

Registering an attempt slot again with another set of observation slots is
``registration_conflict`` whether the set presented is smaller, larger or simply other than
the registered one, and the refusal writes nothing (no new observation slot, no new
membership). Identical re-registration changes nothing. In lockstep with the model.
"""

from __future__ import annotations

import pytest
from runstore import ExecutionKind
from runstore.testing import fixtures as sc

from conformance.writer.world import World

MEMBERSHIPS = "SELECT observation_slot_id, attempt_slot_id FROM attempt_observation_slots"

# (registered first, presented again): indices into one stream attempt slot's three
# checkpoint slots.
CASES = {
    "more": ((0,), (0, 1)),
    "fewer": ((0, 1), (0,)),
    "other": ((1,), (0,)),
    "overlapping": ((0, 1), (1, 2)),
}


@pytest.mark.parametrize(("first", "again"), list(CASES.values()), ids=list(CASES))
def test_an_attempt_slot_registered_again_with_another_set_of_observation_slots_conflicts(
    world: World, first: tuple[int, ...], again: tuple[int, ...]
) -> None:
    """SPEC.md section 6: ``registration_conflict`` when the attempt slot is registered with
    another set of observation slots (fewer, more or other ones alike); the refusal writes
    no observation slot and no membership."""
    every = sc.slot_fixture(ExecutionKind.STREAM, checkpoints=3, name="s")
    records = (every.decision, every.run, every.attempt_slot)
    registered = [every.observation_slots[i] for i in first]
    presented = [every.observation_slots[i] for i in again]
    world.lockstep(lambda w: w.register_slots(*records, registered))
    world.refused(
        "registration_conflict",
        lambda: world.lockstep(lambda w: w.register_slots(*records, presented)),
    )
    assert sorted(world.rows(MEMBERSHIPS)) == sorted(
        (slot.id, every.slot_id) for slot in registered
    )
    world.check()


def test_an_attempt_slot_registered_again_with_the_same_observation_slots_changes_nothing(
    world: World,
) -> None:
    """SPEC.md section 6: identical re-registration changes nothing and returns the attempt
    slot's id, whatever the order the observation slots are presented in."""
    fixture = sc.slot_fixture(ExecutionKind.STREAM, checkpoints=2, name="s")
    world.register(fixture)
    before = world.projection()
    reordered = tuple(reversed(fixture.observation_slots))
    arguments = (fixture.decision, fixture.run, fixture.attempt_slot, reordered)
    assert world.lockstep(lambda w: w.register_slots(*arguments)) == fixture.slot_id
    assert world.projection() == before
    world.check()
