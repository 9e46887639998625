"""Observations and selections in the model: registering a published observation of an
attempt, and optionally selecting it for its slot.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. The writer's counterpart is
:mod:`runstore.observations`; the check sequence is written twice on purpose (the lockstep
tests hold the two together). A slot's first selection is final.
"""

from __future__ import annotations

import attrs
from runstore.enums import ArtifactKind
from runstore.errors import (
    ClaimRequiredError,
    InvalidRecordError,
    ObservationSlotMismatchError,
    RegistrationConflictError,
    UnknownSlotError,
)
from runstore.model.artifacts import with_artifact
from runstore.model.guard import check_guard
from runstore.model.state import ModelState, ObservationRow, Refusal, SelectionRow, put, refuse
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration, Observation


def register_observation(
    state: ModelState,
    guard: OwnedAttempt,
    observation: Observation,
    artifact: ArtifactRegistration,
    select: bool,
    now_ns: int,
) -> tuple[ModelState, OwnedAttempt | Refusal]:
    """Register a published observation of this attempt, optionally selecting it.

    Allowed in any nonterminal state. Check order: ``out_of_range`` (``now_ns``),
    ``invalid_record`` (the artifact is not of kind observation), the guarded sequence,
    ``unknown_slot`` (the observation slot is not registered),
    ``observation_slot_mismatch`` (the observation names another attempt, or its slot is
    not owned by this attempt's slot), ``registration_conflict`` (the artifact id is
    registered with other digests, or the observation is registered with another
    artifact), then, when ``select``: ``claim_required`` (the attempt holds no claim) and
    ``invalid_record`` (the observation is not valid).

    Commits the artifact and the observation row (each reused when already registered
    identically), and, when ``select`` and the slot has no selection yet, the selection.
    An existing selection is preserved: selecting again is not an error and changes
    nothing. No event, no transition, no revision change. Result: the same guard.
    """
    shape = None
    if artifact.kind is not ArtifactKind.OBSERVATION:
        shape = refuse(InvalidRecordError, "an observation artifact must be of kind observation")
    checked = check_guard(state, guard, now_ns, shape=shape)
    if isinstance(checked, Refusal):
        return state, checked
    slot = state.observation_slots.get(observation.slot_id)
    if slot is None:
        return state, refuse(UnknownSlotError, f"observation slot {observation.slot_id} is unknown")
    if observation.attempt_id != guard.attempt_id or slot.attempt_slot_id != guard.slot_id:
        return state, refuse(
            ObservationSlotMismatchError, "the observation is not this attempt's, for its slots"
        )
    registered = with_artifact(state, artifact)
    if isinstance(registered, Refusal):
        return state, registered
    existing = state.observations.get(observation.id)
    if existing is not None and existing.artifact_id != artifact.id:
        return state, refuse(
            RegistrationConflictError, "the observation is registered with another artifact"
        )
    if select and checked.claim is None:
        return state, refuse(ClaimRequiredError, "selecting needs the slot's finalization claim")
    if select and not observation.valid:
        return state, refuse(InvalidRecordError, "an invalid observation cannot be selected")
    new_state = registered
    if existing is None:
        row = ObservationRow(
            observation=observation,
            attempt_slot_id=slot.attempt_slot_id,
            artifact_id=artifact.id,
            registered_at_ns=checked.now_ns,
        )
        new_state = attrs.evolve(
            new_state, observations=put(new_state.observations, observation.id, row)
        )
    if select and slot.id not in new_state.selections:
        selection = SelectionRow(
            slot_id=slot.id, observation_id=observation.id, selected_at_ns=checked.now_ns
        )
        new_state = attrs.evolve(
            new_state, selections=put(new_state.selections, slot.id, selection)
        )
    return new_state, guard
