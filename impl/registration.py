"""Registering resolved one-shot records: decision, run, attempt slot, observation slot.

Rules of this file: runs inside the caller's write transaction and never commits. The
checks and their order are the model's (``runstore.model.registration``). Registering
identical records again is a no-op; records are immutable once registered (the schema's
triggers refuse updates), and identities are recomputed from the records themselves.
"""

from __future__ import annotations

import sqlite3

from runstore import canonical, sql
from runstore.enums import ExecutionKind, ObservationSlotKind, SlotRole
from runstore.errors import (
    InvalidRecordError,
    ObservationSlotMismatchError,
    RegistrationConflictError,
)
from runstore.records import ApplicabilityDecision, AttemptSlot, ObservationSlot, ResolvedRun


def register_one_shot(
    connection: sqlite3.Connection,
    candidate: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slot: ObservationSlot,
) -> str:
    """Register a one-shot measurement slot with its single result slot; returns the
    attempt slot's id.

    Check order: invalid_record (not a one-shot measurement; an excluded decision; a run
    that does not resolve this decision and candidate; an attempt slot of another run),
    observation_slot_mismatch (the observation slot is not of this run or not owned by
    this attempt slot), invalid_record (not a result slot), registration_conflict (another
    record holds one of the ``(run_id, logical_slot)`` keys, or the attempt slot is
    registered with other observation slots).
    """
    if (attempt_slot.execution_kind, attempt_slot.role) != (
        ExecutionKind.ONE_SHOT,
        SlotRole.MEASUREMENT,
    ):
        raise InvalidRecordError("register_one_shot needs a one-shot measurement")
    if not candidate.applicable:
        raise InvalidRecordError("an excluded decision cannot be resolved")
    if (run.decision_id, run.candidate_id) != (candidate.id, candidate.candidate_id):
        raise InvalidRecordError("the run does not resolve this decision")
    if attempt_slot.run_id != run.id:
        raise InvalidRecordError("the attempt slot belongs to another run")
    if (observation_slot.run_id, observation_slot.attempt_slot_id) != (run.id, attempt_slot.id):
        raise ObservationSlotMismatchError(
            f"observation slot {observation_slot.logical_slot} is not owned by this attempt slot"
        )
    if observation_slot.kind is not ObservationSlotKind.RESULT:
        raise InvalidRecordError("a one-shot slot owns exactly one result slot")
    for table, record in (("attempt_slots", attempt_slot), ("observation_slots", observation_slot)):
        if sql.execute(
            connection,
            f"SELECT 1 FROM {table} WHERE run_id = ? AND logical_slot = ? AND id != ?",
            (record.run_id, record.logical_slot, record.id),
        ):
            raise RegistrationConflictError(
                "a logical slot of this run is registered with another record"
            )
    if _exists(connection, "attempt_slots", attempt_slot.id):
        members = sql.execute(
            connection,
            "SELECT observation_slot_id FROM attempt_observation_slots WHERE attempt_slot_id = ?",
            (attempt_slot.id,),
        )
        if {row[0] for row in members} != {observation_slot.id}:
            raise RegistrationConflictError(
                "the attempt slot is registered with other observation slots"
            )
        return attempt_slot.id
    _insert_decision(connection, candidate)
    _insert_run(connection, run)
    sql.execute(
        connection,
        "INSERT INTO attempt_slots (id, run_id, logical_slot, execution_kind, role, record_json) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            attempt_slot.id,
            attempt_slot.run_id,
            attempt_slot.logical_slot,
            attempt_slot.execution_kind.value,
            attempt_slot.role.value,
            _document(attempt_slot.to_json()),
        ),
    )
    if not _exists(connection, "observation_slots", observation_slot.id):
        sql.execute(
            connection,
            "INSERT INTO observation_slots (id, run_id, logical_slot, kind, checkpoint_index, "
            "record_json) VALUES (?, ?, ?, ?, ?, ?)",
            (
                observation_slot.id,
                observation_slot.run_id,
                observation_slot.logical_slot,
                observation_slot.kind.value,
                observation_slot.checkpoint_index,
                _document(observation_slot.to_json()),
            ),
        )
    sql.execute(
        connection,
        "INSERT INTO attempt_observation_slots (observation_slot_id, attempt_slot_id, run_id) "
        "VALUES (?, ?, ?)",
        (observation_slot.id, attempt_slot.id, run.id),
    )
    return attempt_slot.id


def _insert_decision(connection: sqlite3.Connection, decision: ApplicabilityDecision) -> None:
    if _exists(connection, "applicability_decisions", decision.id):
        return
    sql.execute(
        connection,
        "INSERT INTO applicability_decisions (id, candidate_id, problem_id, applicable, "
        "record_json) VALUES (?, ?, ?, ?, ?)",
        (
            decision.id,
            decision.candidate_id,
            decision.problem_id,
            int(decision.applicable),
            _document(decision.to_json()),
        ),
    )


def _insert_run(connection: sqlite3.Connection, run: ResolvedRun) -> None:
    if _exists(connection, "resolved_runs", run.id):
        return
    sql.execute(
        connection,
        "INSERT INTO resolved_runs (id, logical_spec_id, decision_id, candidate_id, applicable, "
        "record_json) VALUES (?, ?, ?, ?, 1, ?)",
        (run.id, run.logical_spec_id, run.decision_id, run.candidate_id, _document(run.to_json())),
    )


def _exists(connection: sqlite3.Connection, table: str, record_id: str) -> bool:
    return bool(sql.execute(connection, f"SELECT 1 FROM {table} WHERE id = ?", (record_id,)))


def _document(document: canonical.JSON) -> str:
    return canonical.encode(document).decode("utf-8")
