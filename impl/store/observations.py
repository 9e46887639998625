"""Observations and selections: registering a published observation of an attempt with its
result, metric and other references, and optionally selecting it for its slot.

Rules of this file: runs inside the caller's write transaction and never commits. The check
sequence mirrors :func:`runstore.model.observations.register_observation` check for check
(written twice on purpose; the lockstep tests hold the two together). A slot's first
selection is final: the schema refuses updating or deleting it, and a later request to
select leaves it unchanged without an error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore import canonical
from runstore import payloads
from runstore import sql
from runstore.enums import ArtifactKind
from runstore.errors import ClaimRequiredError
from runstore.errors import InvalidRecordError
from runstore.errors import ObservationSlotMismatchError
from runstore.errors import RegistrationConflictError
from runstore.errors import UnknownArtifactError
from runstore.errors import UnknownSlotError
from runstore.receipts import CommittedEvent
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration
from runstore.records import Observation
from runstore.requests import Reference
from runstore.shapes import references_refusal
from runstore.store.artifacts import artifact_conflicts
from runstore.store.artifacts import artifact_exists
from runstore.store.artifacts import insert_artifact
from runstore.store.events import append_event
from runstore.store.guard import check_guard


def register_observation(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    observation: Observation,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    *,
    select: bool,
    now_ns: int,
) -> tuple[ObservationReceipt, CommittedEvent | None]:
    """Register a published observation of this attempt, optionally selecting it.

    Check order: out_of_range, invalid_record (artifact not of kind observation; bad
    references), the guarded sequence, unknown_slot (observation slot),
    observation_slot_mismatch, registration_conflict (artifact digests; observation
    registered with another artifact or other references), unknown_artifact (a
    reference), then for ``select``: claim_required, invalid_record (not valid). An
    existing selection is preserved. One ``observation_registered`` event, no transition;
    an identical re-registration that selects nothing new writes nothing and has no event.
    """
    shape = None
    if artifact.kind is not ArtifactKind.OBSERVATION:
        shape = InvalidRecordError("an observation artifact must be of kind observation")
    checked = check_guard(connection, guard, now_ns, shape=shape or references_refusal(references))
    pairs = [reference.pair for reference in references]  # as the rows and the payload hold them
    slot = sql.execute(
        connection,
        "SELECT attempt_slot_id FROM attempt_observation_slots WHERE observation_slot_id = ?",
        (observation.slot_id,),
    )
    if not slot:
        raise UnknownSlotError(f"observation slot {observation.slot_id} is unknown")
    if observation.attempt_id != guard.attempt_id or slot[0][0] != guard.slot_id:
        raise ObservationSlotMismatchError("the observation is not this attempt's, for its slots")
    if artifact_conflicts(connection, artifact):
        raise RegistrationConflictError(f"artifact {artifact.id} is registered with other digests")
    existing = sql.execute(
        connection, "SELECT artifact_id FROM observations WHERE id = ?", (observation.id,)
    )
    if existing:
        if existing[0][0] != artifact.id:
            raise RegistrationConflictError("the observation is registered with another artifact")
        kept = sql.execute(
            connection,
            "SELECT role, artifact_id FROM observation_artifacts WHERE observation_id = ?",
            (observation.id,),
        )
        if set(kept) != set(pairs):
            raise RegistrationConflictError("the observation is registered with other references")
    for role, artifact_id in pairs:
        if artifact_id != artifact.id and not artifact_exists(connection, artifact_id):
            raise UnknownArtifactError(f"{role} artifact {artifact_id} is unknown")
    if select and checked.claim_lease is None:
        raise ClaimRequiredError("selecting needs the slot's finalization claim")
    if select and not observation.valid:
        raise InvalidRecordError("an invalid observation cannot be selected")
    current = _selection(connection, observation.slot_id)
    selected = select and current is None
    if existing and not selected:
        return _receipt(guard, observation, False, current, None), None
    insert_artifact(connection, artifact)
    if not existing:
        sql.execute(
            connection,
            "INSERT INTO observations (id, slot_id, attempt_id, attempt_slot_id, valid, "
            "completion, artifact_id, artifact_kind, registered_at_ns, record_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'observation', ?, ?)",
            (
                observation.id,
                observation.slot_id,
                observation.attempt_id,
                guard.slot_id,
                int(observation.valid),
                observation.completion.value,
                artifact.id,
                checked.now_ns,
                canonical.encode(observation.to_json()).decode("utf-8"),
            ),
        )
        for role, artifact_id in pairs:
            sql.execute(
                connection,
                "INSERT INTO observation_artifacts (observation_id, role, artifact_id) "
                "VALUES (?, ?, ?)",
                (observation.id, role, artifact_id),
            )
    if selected:
        sql.execute(
            connection,
            "INSERT INTO selected_observations (slot_id, observation_id, valid, selected_at_ns) "
            "VALUES (?, ?, 1, ?)",
            (observation.slot_id, observation.id, checked.now_ns),
        )
    payload = payloads.observation_payload(
        observation.id, observation.slot_id, artifact.id, pairs, not existing, selected
    )
    event = append_event(
        connection, payloads.OBSERVATION_REGISTERED, guard.attempt_id, checked.now_ns, payload
    )
    selection = observation.id if selected else current
    return _receipt(guard, observation, selected, selection, event.sequence), event


def _selection(connection: sqlite3.Connection, slot_id: str) -> str | None:
    """The observation selected in the observation slot, if any."""
    rows = sql.execute(
        connection, "SELECT observation_id FROM selected_observations WHERE slot_id = ?", (slot_id,)
    )
    return rows[0][0] if rows else None


def _receipt(
    guard: OwnedAttempt,
    observation: Observation,
    selected: bool,
    selection: str | None,
    sequence: int | None,
) -> ObservationReceipt:
    return ObservationReceipt(
        attempt=guard,
        observation_id=observation.id,
        selected=selected,
        selection=selection,
        event_sequence=sequence,
    )
