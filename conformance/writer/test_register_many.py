"""Writer spec tests: ``register_many``, a batch of slot registrations and exclusions in one
transaction (SPEC.md section 6, "Registration in batches").

Hypothesis draws programs of batches from a pool of items (every slot kind, exclusions,
identical repeats, and items each check refuses: a conflicting key, an attempt slot with
other members, an observation slot name taken, a mismatched or misshapen membership, an
applicable decision as an exclusion), with the ``held`` precondition absent, right or off
by one. Each batch goes to the model (``runstore.model.register_many``: the sequence of its
items, all or nothing) and to a real store: both must give the same ids, or the same code
with the same message (naming the item); after each batch the durable projection, read
through a fresh connection, must equal the model's. A second store registers each accepted
batch's items one call at a time (``register_slots``, ``register_exclusion``), and its
tables, rowids included, must equal the batch store's: a batch writes the rows its items'
own calls write.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck
from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore import ExecutionKind
from runstore import ObservationSlot
from runstore import ObservationSlotKind
from runstore import RunStore
from runstore import RunStoreError
from runstore import SlotRole
from runstore import model as m
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.registration_batch import Item
from runstore.testing import factories

A = factories.slots("a")
B = factories.slots("b", kind=ExecutionKind.STREAM, checkpoints=2)
WARMUP = factories.slots("w", role=SlotRole.WARMUP)
FRESH = factories.slots("f", kind=ExecutionKind.FRESH_OBSERVATION)
OTHER = factories.slots("o", candidate="other")
A_AS_STREAM = factories.slots("a", kind=ExecutionKind.STREAM)
"""The same run and logical slot as ``A``, another record: ``registration_conflict``."""
C = factories.slots("c")
CLASH = ObservationSlot(
    run_id=C.run.id,
    logical_slot=A.observation_slots[0].logical_slot,
    kind=ObservationSlotKind.RESULT,
    checkpoint_index=None,
    attempt_slot_id=C.attempt_slot.id,
)
EXCLUDED = factories.decision("other", "elsewhere", applicable=False)

POOL: dict[str, Item] = {
    "a": A.arguments(),
    "b": B.arguments(),
    "warmup": WARMUP.arguments(),
    "fresh": FRESH.arguments(),
    "other candidate": OTHER.arguments(),
    "exclusion": EXCLUDED,
    "a as a stream (conflict)": A_AS_STREAM.arguments(),
    "b with fewer members (conflict)": (B.decision, B.run, B.attempt_slot, B.observation_slots[:1]),
    "observation name taken (conflict)": (C.decision, C.run, C.attempt_slot, (CLASH,)),
    "c": C.arguments(),
    "members of another slot (mismatch)": (A.decision, A.run, A.attempt_slot, B.observation_slots),
    "one-shot without its result (invalid)": (A.decision, A.run, A.attempt_slot, ()),
    "applicable exclusion (invalid)": factories.decision("third", "p3"),
    "a as a list": list(A.arguments()),  # type: ignore[dict-item]
}
CANDIDATES = [factories.CANDIDATE, "other"]
TABLES = (
    "applicability_decisions",
    "resolved_runs",
    "attempt_slots",
    "observation_slots",
    "attempt_observation_slots",
)

items = st.sampled_from(sorted(POOL)).map(POOL.__getitem__)
batches = st.lists(items, max_size=7)
precondition = st.sampled_from(["none", "right", "one more", "one less"])


def held_by(state: m.ModelState, candidate_ids: Sequence[str]) -> int:
    """Decisions and runs of ``candidate_ids`` in the model's state."""
    return sum(d.candidate_id in candidate_ids for d in state.decisions.values()) + sum(
        r.candidate_id in candidate_ids for r in state.runs.values()
    )


def tables(path: str) -> dict[str, list[tuple[object, ...]]]:
    """Every registration table with rowids, read through a fresh connection."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            table: connection.execute(f"SELECT rowid, * FROM {table} ORDER BY rowid").fetchall()
            for table in TABLES
        }
    finally:
        connection.close()


def one_at_a_time(store: RunStore, batch: Sequence[Item]) -> None:
    for item in batch:
        if isinstance(item, list | tuple):
            store.register_slots(*item)
        else:
            store.register_exclusion(item)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=st.lists(st.tuples(batches, precondition), min_size=1, max_size=4))
@example(program=[([OTHER.arguments(), A.arguments(), EXCLUDED, B.arguments()], "right")])
def test_a_batch_is_its_items_in_sequence_all_or_nothing(
    program: list[tuple[list[Item], str]],
) -> None:
    roots = [tempfile.mkdtemp(prefix="runstore-many-") for _ in range(2)]
    stores = [RunStore.open(root) for root in roots]
    batch_store, sequence_store = stores
    state = m.ModelState()
    try:
        for batch, mode in program:
            offset = {"none": None, "right": 0, "one more": 1, "one less": -1}[mode]
            held = None if offset is None else held_by(state, CANDIDATES) + offset
            if held is not None and held < 0:
                held = None
            new_state, expected = m.register_many(state, batch, CANDIDATES, held)
            try:
                actual: object = batch_store.register_many(
                    batch, candidate_ids=CANDIDATES, held=held
                )
            except RunStoreError as error:
                assert isinstance(expected, m.Refusal), (error, expected)
                assert (error.code, error.message) == (expected.code, expected.message)
                assert new_state is state
            else:
                assert actual == expected
                state = new_state
                one_at_a_time(sequence_store, batch)
            assert store_projection(batch_store.database_path) == model_projection(state)
            assert tables(batch_store.database_path) == tables(sequence_store.database_path)
    finally:
        for store in stores:
            store.close()
        for root in roots:
            shutil.rmtree(root)


@pytest.fixture
def store(tmp_path: object) -> object:
    with RunStore.open(str(tmp_path)) as opened:
        yield opened


def test_a_refused_item_in_the_middle_leaves_the_store_as_it_was(store: RunStore) -> None:
    """Items before and after the refused one are not written either; the message names
    the refused item by its index, and its code is its own call's."""
    store.register_many([A.arguments()])
    before = store_projection(store.database_path)
    batch = [B.arguments(), EXCLUDED, A_AS_STREAM.arguments(), WARMUP.arguments()]
    with pytest.raises(RunStoreError) as info:
        store.register_many(batch)
    assert info.value.code == "registration_conflict"
    assert info.value.message.startswith("items[2]: ")
    assert store_projection(store.database_path) == before


def test_identical_items_again_change_nothing_and_return_their_ids(store: RunStore) -> None:
    batch = [A.arguments(), EXCLUDED, B.arguments(), A.arguments()]
    ids = (A.attempt_slot.id, EXCLUDED.id, B.attempt_slot.id, A.attempt_slot.id)
    assert store.register_many(batch) == ids
    before = tables(store.database_path)
    assert store.register_many(batch) == ids
    assert tables(store.database_path) == before
    assert store.register_many([]) == ()


def test_the_held_count_refuses_a_batch_planned_against_fewer_records(store: RunStore) -> None:
    """``held`` counts the decisions and runs of ``candidate_ids``: another candidate's
    records do not move it, and a batch planned before a registration of its own
    candidates is refused whole."""
    assert store.register_many([OTHER.arguments()], candidate_ids=["candidate"], held=0)
    store.register_many([A.arguments()], candidate_ids=["candidate"], held=0)
    before = tables(store.database_path)
    with pytest.raises(RunStoreError) as info:
        store.register_many([B.arguments()], candidate_ids=["candidate"], held=0)
    assert info.value.code == "registration_conflict"
    assert "not the 0" in info.value.message
    assert tables(store.database_path) == before
    store.register_many([B.arguments()], candidate_ids=["candidate"], held=2)
