"""Refusals that depend only on an operation's arguments: the membership shape of a slot
registration and the reference list of a terminal commit.

Rules of this file: value layer; pure functions of records and plain values that return the
:class:`~runstore.errors.RunStoreError` the writer raises (the model turns it into a
``Refusal``), or None. The writer (:mod:`runstore.store.registration`,
:mod:`runstore.store.finalization`) and the model call these, so the argument rules exist once;
what needs the database or the model's state (conflicts, unknown artifacts) stays with each.
"""

from __future__ import annotations

from collections.abc import Sequence

from runstore.enums import ExecutionKind
from runstore.enums import ObservationSlotKind
from runstore.enums import SlotRole
from runstore.errors import InvalidRecordError
from runstore.errors import ObservationSlotMismatchError
from runstore.errors import RunStoreError
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.requests import Reference


def references_refusal(references: Sequence[Reference]) -> RunStoreError | None:
    """``invalid_record`` for a repeated ``(role, artifact_id)`` reference (each
    :class:`~runstore.requests.Reference` checked its own role when it was built)."""
    if len(set(references)) != len(references):
        return InvalidRecordError("a reference repeats an artifact within a role")
    return None


def one_shot_refusal(attempt_slot: AttemptSlot) -> RunStoreError | None:
    """``invalid_record`` unless ``attempt_slot`` is a one-shot measurement (the only kind
    ``register_one_shot`` takes)."""
    if (attempt_slot.execution_kind, attempt_slot.role) != (
        ExecutionKind.ONE_SHOT,
        SlotRole.MEASUREMENT,
    ):
        return InvalidRecordError("register_one_shot needs a one-shot measurement")
    return None


def membership_refusal(
    attempt_slot: AttemptSlot, observation_slots: Sequence[ObservationSlot]
) -> RunStoreError | None:
    """``invalid_record`` unless the observation slots have the shape the attempt slot's
    kind needs: a warm-up owns none; a one-shot or fresh-observation measurement exactly one
    result slot; a stream measurement one or more checkpoint slots with distinct checkpoint
    indices. Logical slot names are distinct within the call."""
    kinds = [slot.kind for slot in observation_slots]
    if len({slot.logical_slot for slot in observation_slots}) != len(observation_slots):
        return InvalidRecordError("observation slots repeat a logical slot")
    if attempt_slot.role is SlotRole.WARMUP:
        ok = not observation_slots
    elif attempt_slot.execution_kind is ExecutionKind.STREAM:
        indices = [slot.checkpoint_index for slot in observation_slots]
        ok = bool(observation_slots) and set(kinds) == {ObservationSlotKind.CHECKPOINT}
        ok = ok and len(set(indices)) == len(indices)
    else:
        ok = kinds == [ObservationSlotKind.RESULT]
    if not ok:
        return InvalidRecordError(
            f"a {attempt_slot.role.value} {attempt_slot.execution_kind.value} slot cannot own "
            f"observation slots of kinds {[kind.value for kind in kinds]}"
        )
    return None


def exclusion_refusal(decision: ApplicabilityDecision) -> RunStoreError | None:
    """``invalid_record`` when a decision registered as an exclusion admits its pair."""
    if decision.applicable:
        return InvalidRecordError("an exclusion must be a decision with applicable false")
    return None


def registration_refusal(
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slots: Sequence[ObservationSlot],
) -> RunStoreError | None:
    """The argument checks of a slot registration, in order: ``invalid_record`` (the
    decision is an exclusion; the run does not resolve this decision and candidate; the
    attempt slot is of another run), ``observation_slot_mismatch`` (an observation slot is
    of another run or not owned by this attempt slot), then :func:`membership_refusal`."""
    if not decision.applicable:
        return InvalidRecordError("an excluded decision cannot be resolved")
    if (run.decision_id, run.candidate_id) != (decision.id, decision.candidate_id):
        return InvalidRecordError("the run does not resolve this decision")
    if attempt_slot.run_id != run.id:
        return InvalidRecordError("the attempt slot belongs to another run")
    for slot in observation_slots:
        if (slot.run_id, slot.attempt_slot_id) != (run.id, attempt_slot.id):
            return ObservationSlotMismatchError(
                f"observation slot {slot.logical_slot} is not owned by this attempt slot"
            )
    return membership_refusal(attempt_slot, observation_slots)
