"""Registering resolved records: decisions, runs, attempt slots and their observation slots.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Registration is idempotent: registering
identical records again changes nothing and succeeds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
from runstore.errors import (
    InvalidRecordError,
    ObservationSlotMismatchError,
    RegistrationConflictError,
)
from runstore.model.state import ModelState, Refusal, put, refuse
from runstore.records import (
    ApplicabilityDecision,
    AttemptSlot,
    ExecutionKind,
    ObservationSlot,
    ObservationSlotKind,
    ResolvedRun,
    SlotRole,
)


def register_one_shot(
    state: ModelState,
    candidate: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slot: ObservationSlot,
) -> tuple[ModelState, str | Refusal]:
    """Register a one-shot measurement slot with its single result slot.

    Refuses with ``invalid_record`` an attempt slot that is not a one-shot measurement or
    an observation slot that is not a result slot; otherwise as :func:`register_slots`.
    """
    if (attempt_slot.execution_kind, attempt_slot.role) != (
        ExecutionKind.ONE_SHOT,
        SlotRole.MEASUREMENT,
    ):
        return state, refuse(InvalidRecordError, "register_one_shot needs a one-shot measurement")
    return register_slots(state, candidate, run, attempt_slot, (observation_slot,))


def _shape_refusal(attempt_slot: AttemptSlot, slots: Sequence[ObservationSlot]) -> Refusal | None:
    """The membership shape each slot kind needs.

    A warm-up owns no observation slot. A one-shot or fresh-observation measurement owns
    exactly one result slot. A stream measurement owns one or more checkpoint slots with
    distinct checkpoint indices. Logical slot names are distinct within the call.
    """
    kinds = [slot.kind for slot in slots]
    if len({slot.logical_slot for slot in slots}) != len(slots):
        return refuse(InvalidRecordError, "observation slots repeat a logical slot")
    if attempt_slot.role is SlotRole.WARMUP:
        ok = not slots
    elif attempt_slot.execution_kind is ExecutionKind.STREAM:
        indices = [slot.checkpoint_index for slot in slots]
        ok = bool(slots) and set(kinds) == {ObservationSlotKind.CHECKPOINT}
        ok = ok and len(set(indices)) == len(indices)
    else:
        ok = kinds == [ObservationSlotKind.RESULT]
    if not ok:
        return refuse(
            InvalidRecordError,
            f"a {attempt_slot.role.value} {attempt_slot.execution_kind.value} slot cannot own "
            f"observation slots of kinds {[kind.value for kind in kinds]}",
        )
    return None


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
    candidate: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slots: Sequence[ObservationSlot],
) -> tuple[ModelState, str | Refusal]:
    """Register a decision, its run, one attempt slot and all its observation slots.

    Check order:

    1. ``invalid_record``: the decision is not applicable; the run does not name this
       decision and candidate; the attempt slot is not of this run.
    2. ``observation_slot_mismatch``: an observation slot is not of this run or not owned
       by this attempt slot.
    3. ``invalid_record``: the membership shape (see ``_shape_refusal``).
    4. ``registration_conflict``: a different record already holds one of the
       ``(run_id, logical_slot)`` keys, or the attempt slot is registered with another set
       of observation slots.

    Result: the attempt slot's id.
    """
    if not candidate.applicable:
        return state, refuse(InvalidRecordError, "an excluded decision cannot be resolved")
    if (run.decision_id, run.candidate_id) != (candidate.id, candidate.candidate_id):
        return state, refuse(InvalidRecordError, "the run does not resolve this decision")
    if attempt_slot.run_id != run.id:
        return state, refuse(InvalidRecordError, "the attempt slot belongs to another run")
    for slot in observation_slots:
        if (slot.run_id, slot.attempt_slot_id) != (run.id, attempt_slot.id):
            return state, refuse(
                ObservationSlotMismatchError,
                f"observation slot {slot.logical_slot} is not owned by this attempt slot",
            )
    shape = _shape_refusal(attempt_slot, observation_slots)
    if shape is not None:
        return state, shape
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
        decisions=put(state.decisions, candidate.id, candidate),
        runs=put(state.runs, run.id, run),
        attempt_slots=put(state.attempt_slots, attempt_slot.id, attempt_slot),
        observation_slots=observation_table,
    )
    return new_state, attempt_slot.id
