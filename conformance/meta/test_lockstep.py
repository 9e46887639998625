"""The shared lockstep of ``runstore.testing.lockstep`` has teeth: the writer tests, the
stateful test, the crash continuation and the vector generator all rely on it to notice a
disagreement between the store and the model."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import FirstAttempt
from runstore import Next
from runstore import RunStore
from runstore import RunStoreError
from runstore import model as m
from runstore.testing import fixtures as sc
from runstore.testing import script
from runstore.testing.lockstep import Diverged
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import lockstep

FIXTURE = sc.slot_fixture()
REGISTRATION = (FIXTURE.decision, FIXTURE.run, FIXTURE.attempt_slot, FIXTURE.observation_slots[0])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore.open(tmp_path) as store:
        yield store


def test_agreement_returns_the_result_and_a_shared_refusal_is_re_raised(store: RunStore) -> None:
    model = ModelWriter(m.ModelState())
    assert lockstep(model, store, lambda w: w.register_one_shot(*REGISTRATION)) == FIXTURE.slot_id
    lease = sc.lease("reservation-0", 10_000)
    guard = lockstep(model, store, lambda w: w.reserve(FIXTURE.slot_id, FirstAttempt(), lease, 1))
    assert model.state.attempts[guard.attempt_id].revision == 0
    before = model.state
    again = sc.lease("reservation-1", 10_000)
    with pytest.raises(RunStoreError) as info:
        lockstep(model, store, lambda w: w.reserve(FIXTURE.slot_id, FirstAttempt(), again, 2))
    assert info.value.code == "retry_not_authorized"
    assert model.state is before


def test_a_refusal_on_one_side_only_diverges(store: RunStore) -> None:
    store.register_one_shot(*REGISTRATION)  # the model never hears of the slot
    lease = sc.lease("reservation-0", 10_000)
    with pytest.raises(Diverged):
        lockstep(
            ModelWriter(m.ModelState()),
            store,
            lambda w: w.reserve(FIXTURE.slot_id, FirstAttempt(), lease, 1),
        )


def test_different_results_diverge(store: RunStore) -> None:
    model = ModelWriter(m.ModelState())
    model.register_one_shot(*REGISTRATION)
    model.reserve(FIXTURE.slot_id, FirstAttempt(), sc.lease("model-only", 10_000), 1)
    store.register_one_shot(*REGISTRATION)
    lease = sc.lease("reservation-1", 10_000)
    with pytest.raises(Diverged):  # retry 1 on the model, retry 0 on the store
        lockstep(model, store, lambda w: w.reserve(FIXTURE.slot_id, Next(retry=True), lease, 2))


def test_a_refusal_that_changes_the_model_state_breaks_the_contract() -> None:
    writer = ModelWriter(m.ModelState())
    refusal = m.Refusal(code="unknown_slot", message="no such slot")
    with pytest.raises(Diverged):
        writer.apply((m.ModelState(), refusal))


@pytest.mark.parametrize("name", sorted(script.OPERATIONS))
def test_the_model_writer_takes_what_the_store_takes(name: str) -> None:
    """Each writer method a call script may name (``script.OPERATIONS``) exists on
    ``ModelWriter`` (most of them the model operation of the same name) with the store
    method's parameters, in order and of the same kinds (``select`` and ``now_ns``
    keyword-only where the store has them so), under the same names, but for the guard the
    model's operations call ``guard`` and the store ``attempt`` (every caller passes it by
    position)."""

    def parameters(method: object) -> list[tuple[str, object]]:
        found = list(inspect.signature(method).parameters.values())[1:]  # self, or the state
        return [(p.name, p.kind) for p in found]

    store, model = parameters(getattr(RunStore, name)), parameters(getattr(ModelWriter, name))
    if store and store[0][0] == "attempt":
        assert model[0] in (store[0], ("guard", store[0][1]))
        store, model = store[1:], model[1:]
    assert model == store
    assert callable(getattr(ModelWriter(m.ModelState()), name))
