"""Observations and selections in the model: registering a published observation of an
attempt with its references, and optionally selecting it for its slot.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. The writer's counterpart is
:mod:`runstore.store.observations`; the check sequence is written twice on purpose (the lockstep
tests hold the two together). A slot's first selection is final.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from runstore import arguments
from runstore import payloads
from runstore.enums import ArtifactKind
from runstore.errors import ClaimRequiredError
from runstore.errors import InvalidRecordError
from runstore.errors import ObservationSlotMismatchError
from runstore.errors import RegistrationConflictError
from runstore.errors import UnknownArtifactError
from runstore.errors import UnknownSlotError
from runstore.model.artifacts import with_artifact
from runstore.model.events import append_event
from runstore.model.guard import check_guard
from runstore.model.state import ModelState
from runstore.model.state import ObservationRow
from runstore.model.state import Refusal
from runstore.model.state import SelectionRow
from runstore.model.state import put
from runstore.model.state import refuse
from runstore.model.state import refused
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration
from runstore.records import Observation
from runstore.requests import Reference
from runstore.shapes import references_refusal


def register_observation(
    state: ModelState,
    guard: OwnedAttempt,
    observation: Observation,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    *,
    select: bool,
    now_ns: int,
) -> tuple[ModelState, ObservationReceipt | Refusal]:
    """Register a published observation of this attempt, optionally selecting it.

    Allowed in any nonterminal state. Check order: ``invalid_record`` (argument types),
    ``out_of_range`` (``now_ns``), ``invalid_record`` (the artifact is not of kind
    observation; then :func:`references_refusal`), the guarded sequence, ``unknown_slot``
    (the observation slot is not registered), ``observation_slot_mismatch`` (the
    observation names another attempt, or its slot is not owned by this attempt's slot),
    ``registration_conflict`` (the artifact id is registered with other digests; the
    observation is registered with another artifact or other references),
    ``unknown_artifact`` (a reference names an artifact that is neither registered nor the
    observation's own), then, when ``select``: ``claim_required`` (the attempt holds no
    claim) and ``invalid_record`` (the observation is not valid).

    Commits the artifact, the observation row and its references (each reused when already
    registered identically), when ``select`` and the slot has no selection yet the
    selection, and one ``observation_registered`` event at the effective now. An existing
    selection is preserved: selecting again is not an error. An identical re-registration
    that selects nothing new commits nothing at all (no event). No transition, no revision
    change. Result: the receipt (same guard; whether this call selected).
    """
    error = arguments.register_observation_arguments(
        guard, observation, artifact, references, select, now_ns
    )
    if error is not None:
        return state, refused(error)
    shape = None
    if artifact.kind is not ArtifactKind.OBSERVATION:
        shape = refuse(InvalidRecordError, "an observation artifact must be of kind observation")
    if shape is None and (error := references_refusal(references)) is not None:
        shape = refused(error)
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
    pairs = [reference.pair for reference in references]  # as the rows and the payload hold them
    wanted = {(observation.id, role, artifact_id) for role, artifact_id in pairs}
    if existing is not None:
        if existing.artifact_id != artifact.id:
            return state, refuse(
                RegistrationConflictError, "the observation is registered with another artifact"
            )
        kept = {row for row in state.observation_artifacts if row[0] == observation.id}
        if kept != wanted:
            return state, refuse(
                RegistrationConflictError, "the observation is registered with other references"
            )
    for role, artifact_id in pairs:
        if artifact_id not in registered.artifacts:
            return state, refuse(UnknownArtifactError, f"{role} artifact {artifact_id} is unknown")
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
            new_state,
            observations=put(new_state.observations, observation.id, row),
            observation_artifacts=new_state.observation_artifacts | wanted,
        )
    selected = select and slot.id not in new_state.selections
    if existing is not None and not selected:
        current = state.selections.get(slot.id)
        return state, ObservationReceipt(
            attempt=guard,
            observation_id=observation.id,
            selected=False,
            selection=None if current is None else current.observation_id,
            event_sequence=None,
        )
    if selected:
        selection = SelectionRow(
            slot_id=slot.id, observation_id=observation.id, selected_at_ns=checked.now_ns
        )
        new_state = attrs.evolve(
            new_state, selections=put(new_state.selections, slot.id, selection)
        )
    payload = payloads.observation_payload(
        observation.id, slot.id, artifact.id, pairs, existing is None, selected
    )
    new_state, sequence = append_event(
        new_state,
        kind=payloads.OBSERVATION_REGISTERED,
        attempt_id=guard.attempt_id,
        at_ns=checked.now_ns,
        payload=payload,
    )
    current = new_state.selections.get(slot.id)
    return new_state, ObservationReceipt(
        attempt=guard,
        observation_id=observation.id,
        selected=selected,
        selection=None if current is None else current.observation_id,
        event_sequence=sequence,
    )
