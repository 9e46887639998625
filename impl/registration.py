"""Registering resolved records: a decision, its run, one attempt slot of any kind and the
observation slots it owns (``register_slots``), and the one-shot form the CLI uses.

Rules of this file: runs inside the caller's write transaction and never commits. The
argument checks are :mod:`runstore.shapes` (shared with the model); the conflict checks and
the INSERTs mirror :func:`runstore.model.registration.register_slots`. Registering
identical records again is a no-op; records are immutable once registered (the schema's
triggers refuse updates), and identities are recomputed from the records themselves.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore import canonical, sql
from runstore.errors import RegistrationConflictError
from runstore.records import ApplicabilityDecision, AttemptSlot, ObservationSlot, ResolvedRun
from runstore.shapes import one_shot_refusal, registration_refusal


def register_one_shot(
    connection: sqlite3.Connection,
    candidate: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slot: ObservationSlot,
) -> str:
    """:func:`register_slots` for a one-shot measurement with its single result slot;
    first refuses any other attempt slot with ``invalid_record``."""
    refusal = one_shot_refusal(attempt_slot)
    if refusal is not None:
        raise refusal
    return register_slots(connection, candidate, run, attempt_slot, (observation_slot,))


def register_slots(
    connection: sqlite3.Connection,
    candidate: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slots: Sequence[ObservationSlot],
) -> str:
    """Register a decision, its run, one attempt slot and every observation slot it owns,
    with their memberships; returns the attempt slot's id.

    Check order: :func:`runstore.shapes.registration_refusal` (``invalid_record``,
    ``observation_slot_mismatch``, then the membership shape), then
    ``registration_conflict`` (another record holds one of the ``(run_id, logical_slot)``
    keys, or the attempt slot is registered with another set of observation slots).
    """
    refusal = registration_refusal(candidate, run, attempt_slot, observation_slots)
    if refusal is not None:
        raise refusal
    keyed: list[tuple[str, AttemptSlot | ObservationSlot]] = [("attempt_slots", attempt_slot)]
    keyed += [("observation_slots", slot) for slot in observation_slots]
    for table, record in keyed:
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
        if {row[0] for row in members} != {slot.id for slot in observation_slots}:
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
    for slot in observation_slots:
        if not _exists(connection, "observation_slots", slot.id):
            sql.execute(
                connection,
                "INSERT INTO observation_slots (id, run_id, logical_slot, kind, "
                "checkpoint_index, record_json) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    slot.id,
                    slot.run_id,
                    slot.logical_slot,
                    slot.kind.value,
                    slot.checkpoint_index,
                    _document(slot.to_json()),
                ),
            )
        sql.execute(
            connection,
            "INSERT INTO attempt_observation_slots (observation_slot_id, attempt_slot_id, "
            "run_id) VALUES (?, ?, ?)",
            (slot.id, attempt_slot.id, run.id),
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
