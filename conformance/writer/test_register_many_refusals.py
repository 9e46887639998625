"""``register_many``'s refusals from the outside in (CONVENTIONS 13), written from SPEC.md
section 6 ("Registration in batches") rather than from the code: ill-typed, out-of-range and
hostile arguments to the store's and the model's entry points.

An ill-typed or out-of-range argument is refused before any transaction opens: the store
raises ``invalid_record`` or ``out_of_range`` and its database and WAL stay byte for byte
as they were; the model returns the very state object it was given, with the same code and
message. A refusal decided inside the transaction (an item's own checks, the held count)
leaves every durable row as it was and delivers no event.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runstore import ExecutionKind
from runstore import model as m
from runstore.registration_batch import MAX_ITEMS
from runstore.testing import factories

from conformance.writer.world import World

A = factories.slots("a")
B = factories.slots("b", kind=ExecutionKind.STREAM, checkpoints=2)
EXCLUDED = factories.decision("other", "elsewhere", applicable=False)


def slots() -> Iterator[object]:
    yield A.arguments()


BEFORE_ANY_TRANSACTION = [
    # (items, candidate_ids, held, code, message)
    ("abc", (), None, "invalid_record", "items must be a list or tuple, not str"),
    ({A.decision}, (), None, "invalid_record", "items must be a list or tuple, not set"),
    (slots(), (), None, "invalid_record", "items must be a list or tuple, not generator"),
    (None, (), None, "invalid_record", "items must be a list or tuple, not NoneType"),
    (
        [A.arguments()[:3]],
        (),
        None,
        "invalid_record",
        "items[0] must be an ApplicabilityDecision or a 4-item list or tuple, not tuple",
    ),
    (
        [EXCLUDED, {"decision": A.decision}],
        (),
        None,
        "invalid_record",
        "items[1] must be an ApplicabilityDecision or a 4-item list or tuple, not dict",
    ),
    (
        [(A.run, A.decision, A.attempt_slot, A.observation_slots)],
        (),
        None,
        "invalid_record",
        "items[0].decision must be an ApplicabilityDecision, not ResolvedRun",
    ),
    (
        [(*A.arguments()[:3], A.observation_slots[0])],
        (),
        None,
        "invalid_record",
        "items[0].observation_slots must be a list or tuple, not ObservationSlot",
    ),
    (
        [(*A.arguments()[:3], [A.observation_slots[0], "result"])],
        (),
        None,
        "invalid_record",
        "items[0].observation_slots[1] must be an ObservationSlot, not str",
    ),
    ([], "candidate", None, "invalid_record", "candidate_ids must be a list or tuple, not str"),
    ([], ["candidate", 7], None, "invalid_record", "candidate_ids[1] must be a str, not int"),
    ([], (), True, "invalid_record", "held must be an int, not bool"),
    ([], (), 1.0, "invalid_record", "held must be an int, not float"),
    ([], (), "0", "invalid_record", "held must be an int, not str"),
    ([], (), -1, "out_of_range", "held=-1 is outside 0..2**53-1"),
    ([], (), 2**53, "out_of_range", f"held={2**53} is outside 0..2**53-1"),
    (
        [EXCLUDED] * (MAX_ITEMS + 1),
        (),
        None,
        "out_of_range",
        f"register_many takes at most {MAX_ITEMS} items, not {MAX_ITEMS + 1}",
    ),
    ([], ["\ud800"], 0, "invalid_record", "candidate_ids[0] contains a control character"),
    ([], ["candidate", ""], None, "invalid_record", "candidate_ids[1] must be nonempty"),
    ([], ["x" * 257], 0, "invalid_record", "candidate_ids[0] is longer than 256"),
    ([], ["\ud800"], -1, "out_of_range", "held=-1 is outside 0..2**53-1"),
    # types come first: an ill-typed item is reported even with an out-of-range held
    ([None], (), -1, "invalid_record", "items[0] must be an ApplicabilityDecision"),
]


@pytest.mark.parametrize(
    ("items", "candidate_ids", "held", "code", "message"),
    BEFORE_ANY_TRANSACTION,
    ids=[case[4][:50] for case in BEFORE_ANY_TRANSACTION],
)
def test_an_argument_refused_before_the_transaction_leaves_the_files_untouched(
    world: World, items: object, candidate_ids: object, held: object, code: str, message: str
) -> None:
    world.register(factories.slots("held"))  # a store with something to lose
    error = world.refused_untouched(
        code,
        lambda: world.store.register_many(
            items,  # type: ignore[arg-type]
            candidate_ids=candidate_ids,  # type: ignore[arg-type]
            held=held,  # type: ignore[arg-type]
        ),
    )
    assert error.message.startswith(message), error.message
    state = world.model.state
    new_state, refusal = m.register_many(state, items, candidate_ids, held)  # type: ignore[arg-type]
    assert new_state is state
    assert isinstance(refusal, m.Refusal)
    assert refusal.code == code


IN_THE_TRANSACTION = {
    "an applicable decision as an exclusion": (
        [EXCLUDED, factories.decision("third", "p")],
        "invalid_record",
        "items[1]: an exclusion must be a decision with applicable false",
    ),
    "an excluded decision with a run": (
        [(EXCLUDED, factories.resolved_run(EXCLUDED), A.attempt_slot, ())],
        "invalid_record",
        "items[0]: an excluded decision cannot be resolved",
    ),
    "observation slots of another attempt slot": (
        [A.arguments(), (A.decision, A.run, A.attempt_slot, B.observation_slots)],
        "observation_slot_mismatch",
        "items[1]: observation slot b/checkpoint-0 is not owned by this attempt slot",
    ),
    "a one-shot without its result slot": (
        [(A.decision, A.run, A.attempt_slot, ())],
        "invalid_record",
        "items[0]: a measurement one_shot slot cannot own observation slots of kinds []",
    ),
    "a key taken by an earlier item": (
        [A.arguments(), factories.slots("a", kind=ExecutionKind.STREAM).arguments()],
        "registration_conflict",
        "items[1]: a logical slot of this run is registered with another record",
    ),
    "an earlier item's slot with fewer members": (
        [B.arguments(), (B.decision, B.run, B.attempt_slot, B.observation_slots[1:])],
        "registration_conflict",
        "items[1]: the attempt slot is registered with other observation slots",
    ),
    "the same observation slot owned twice in one item": (
        [(B.decision, B.run, B.attempt_slot, (B.observation_slots[0],) * 2)],
        "invalid_record",
        "items[0]: observation slots repeat a logical slot",
    ),
}


@pytest.mark.parametrize("case", sorted(IN_THE_TRANSACTION))
def test_an_item_refused_in_the_transaction_writes_nothing(world: World, case: str) -> None:
    items, code, message = IN_THE_TRANSACTION[case]
    world.register(factories.slots("held"))
    error = world.refused(code, world.store.register_many, items)
    assert error.message == message
    state = world.model.state
    new_state, refusal = m.register_many(state, items)
    assert new_state is state
    assert refusal == m.Refusal(code=code, message=message)
    world.check()


def test_a_held_count_that_is_stale_writes_nothing(world: World) -> None:
    world.register(factories.slots("held"))  # one decision and one run of "candidate"
    for held in (0, 1, 3):
        error = world.refused(
            "registration_conflict",
            lambda h=held: world.store.register_many(
                [A.arguments()], candidate_ids=["candidate"], held=h
            ),
        )
        assert error.message.startswith("the candidates hold 2 registered decisions and runs")
        state = world.model.state
        new_state, refusal = m.register_many(state, [A.arguments()], ["candidate"], held)
        assert new_state is state and isinstance(refusal, m.Refusal)
        assert (refusal.code, refusal.message) == (error.code, error.message)
    assert world.store.register_many([A.arguments()], candidate_ids=["candidate"], held=2)
