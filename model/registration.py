"""Registering resolved records: decisions, runs, attempt slots and their observation slots,
one call at a time or a batch of them (``register_many``: the sequence of its items, all or
nothing).

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Registration is idempotent: registering
identical records again changes nothing and succeeds.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence

import attrs
from runstore import arguments
from runstore.errors import RegistrationConflictError
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import put
from runstore.model.state import refuse
from runstore.model.state import refused
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.registration_batch import Item
from runstore.registration_batch import batch_refusal
from runstore.registration_batch import held_refusal
from runstore.shapes import exclusion_refusal
from runstore.shapes import one_shot_refusal
from runstore.shapes import registration_refusal


def register_exclusion(
    state: ModelState, decision: ApplicabilityDecision
) -> tuple[ModelState, str | Refusal]:
    """Register an exclusion (a decision with ``applicable`` false, which resolves no run);
    ``invalid_record`` for anything else. Registering it again changes nothing.

    Result: the decision's id."""
    error = arguments.register_exclusion_arguments(decision)
    if error is not None:
        return state, refused(error)
    error = exclusion_refusal(decision)
    if error is not None:
        return state, refused(error)
    if decision.id in state.decisions:
        return state, decision.id
    return attrs.evolve(state, decisions=put(state.decisions, decision.id, decision)), decision.id


def register_one_shot(
    state: ModelState,
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slot: ObservationSlot,
) -> tuple[ModelState, str | Refusal]:
    """Register a one-shot measurement slot with its single result slot.

    Refuses with ``invalid_record`` an attempt slot that is not a one-shot measurement or
    an observation slot that is not a result slot; otherwise as :func:`register_slots`.
    """
    error = arguments.register_one_shot_arguments(decision, run, attempt_slot, observation_slot)
    if error is not None:
        return state, refused(error)
    error = one_shot_refusal(attempt_slot)
    if error is not None:
        return state, refused(error)
    return register_slots(state, decision, run, attempt_slot, (observation_slot,))


def _key_taken(
    registered: Iterable[AttemptSlot | ObservationSlot], record: AttemptSlot | ObservationSlot
) -> bool:
    """Whether another record holds ``record``'s unique ``(run_id, logical_slot)`` key."""
    return any(
        (other.run_id, other.logical_slot) == (record.run_id, record.logical_slot)
        and other.id != record.id
        for other in registered
    )


def register_slots(
    state: ModelState,
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slots: Sequence[ObservationSlot],
) -> tuple[ModelState, str | Refusal]:
    """Register a decision, its run, one attempt slot and all its observation slots.

    Check order: :func:`runstore.shapes.registration_refusal` (``invalid_record``: the
    decision is not applicable, the run does not name this decision and candidate, the
    attempt slot is not of this run; ``observation_slot_mismatch``: an observation slot is
    not of this run or not owned by this attempt slot; ``invalid_record``: the membership
    shape), then ``registration_conflict``: a different record already holds one of the
    ``(run_id, logical_slot)`` keys, or the attempt slot is registered with another set of
    observation slots.

    Result: the attempt slot's id.
    """
    error = arguments.register_slots_arguments(decision, run, attempt_slot, observation_slots)
    if error is not None:
        return state, refused(error)
    error = registration_refusal(decision, run, attempt_slot, observation_slots)
    if error is not None:
        return state, refused(error)
    if _key_taken(state.attempt_slots.values(), attempt_slot) or any(
        _key_taken(state.observation_slots.values(), slot) for slot in observation_slots
    ):
        return state, refuse(
            RegistrationConflictError,
            "a logical slot of this run is registered with another record",
        )
    if attempt_slot.id in state.attempt_slots:
        registered = {slot.id for slot in state.member_slots(attempt_slot.id)}
        if registered != {slot.id for slot in observation_slots}:
            return state, refuse(
                RegistrationConflictError,
                "the attempt slot is registered with other observation slots",
            )
        return state, attempt_slot.id
    observation_table = state.observation_slots
    for slot in observation_slots:
        observation_table = put(observation_table, slot.id, slot)
    new_state = attrs.evolve(
        state,
        decisions=put(state.decisions, decision.id, decision),
        runs=put(state.runs, run.id, run),
        attempt_slots=put(state.attempt_slots, attempt_slot.id, attempt_slot),
        observation_slots=observation_table,
    )
    return new_state, attempt_slot.id


def register_many(
    state: ModelState,
    items: Sequence[Item],
    candidate_ids: Sequence[str] = (),
    held: int | None = None,
) -> tuple[ModelState, tuple[str, ...] | Refusal]:
    """Register ``items`` in order, all or nothing: each an exclusion
    (:func:`register_exclusion`) or a ``(decision, run, attempt_slot, observation_slots)``
    tuple (:func:`register_slots`), each applied to the state the items before it left.

    Check order: the argument types of the whole call (``invalid_record``), then
    ``out_of_range`` (:func:`runstore.registration_batch.batch_refusal`), then, when
    ``held`` is given, ``registration_conflict`` unless the state holds exactly ``held``
    decisions and runs whose candidate is one of ``candidate_ids``; then the items in
    order: the first item refused refuses the whole call, with its code and its message
    prefixed ``items[i]: `` (:func:`runstore.registration_batch.named`), and the input
    state is returned unchanged.

    Result: each item's id (its attempt slot's, or the exclusion's)."""
    error = arguments.register_many_arguments(items, candidate_ids, held)
    if error is None:
        error = batch_refusal(items, candidate_ids, held)
    if error is not None:
        return state, refused(error)
    if held is not None:
        wanted = set(candidate_ids)
        found = sum(d.candidate_id in wanted for d in state.decisions.values()) + sum(
            r.candidate_id in wanted for r in state.runs.values()
        )
        if found != held:
            return state, refused(held_refusal(found, held))
    current = state
    results: list[str] = []
    for index, item in enumerate(items):
        if isinstance(item, ApplicabilityDecision):
            current, result = register_exclusion(current, item)
        else:
            current, result = register_slots(current, *item)
        if isinstance(result, Refusal):
            return state, Refusal(code=result.code, message=f"items[{index}]: {result.message}")
        results.append(result)
    return current, tuple(results)
