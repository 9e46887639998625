"""Observations and selections: registering a published observation of an attempt, and
optionally selecting it for its slot.

Rules of this file: runs inside the caller's write transaction and never commits. The check
sequence mirrors :func:`runstore.model.observations.register_observation` check for check
(written twice on purpose; the lockstep tests hold the two together). A slot's first
selection is final: the schema refuses updating or deleting it, and a later request to
select leaves it unchanged without an error.
"""

from __future__ import annotations

import sqlite3

from runstore import canonical, sql
from runstore.artifacts import artifact_conflicts, insert_artifact
from runstore.enums import ArtifactKind
from runstore.errors import (
    ClaimRequiredError,
    InvalidRecordError,
    ObservationSlotMismatchError,
    RegistrationConflictError,
    UnknownSlotError,
)
from runstore.guard import check_guard
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration, Observation


def register_observation(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    observation: Observation,
    artifact: ArtifactRegistration,
    select: bool,
    now_ns: int,
) -> OwnedAttempt:
    """Register a published observation of this attempt, optionally selecting it.

    Check order: out_of_range, invalid_record (artifact not of kind observation), the
    guarded sequence, unknown_slot (observation slot), observation_slot_mismatch,
    registration_conflict (artifact digests; observation registered with another
    artifact), then for ``select``: claim_required, invalid_record (not valid). An
    existing selection is preserved. No event, no transition.
    """
    shape = None
    if artifact.kind is not ArtifactKind.OBSERVATION:
        shape = InvalidRecordError("an observation artifact must be of kind observation")
    checked = check_guard(connection, guard, now_ns, shape=shape)
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
    if existing and existing[0][0] != artifact.id:
        raise RegistrationConflictError("the observation is registered with another artifact")
    if select and checked.claim_lease is None:
        raise ClaimRequiredError("selecting needs the slot's finalization claim")
    if select and not observation.valid:
        raise InvalidRecordError("an invalid observation cannot be selected")
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
    if select:
        sql.execute(
            connection,
            "INSERT INTO selected_observations (slot_id, observation_id, valid, selected_at_ns) "
            "VALUES (?, ?, 1, ?) ON CONFLICT (slot_id) DO NOTHING",
            (observation.slot_id, observation.id, checked.now_ns),
        )
    return guard
