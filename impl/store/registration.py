"""Registering resolved records: a decision, its run, one attempt slot of any kind and the
observation slots it owns (``register_slots``), the one-shot form, and an exclusion (a
decision that admits no run, ``register_exclusion``).

Rules of this file: runs inside the caller's write transaction and never commits. The
argument checks are :mod:`runstore.shapes` (shared with the model); the conflict checks and
the INSERTs mirror :func:`runstore.model.registration.register_slots`. Registering
identical records again is a no-op; records are immutable once registered (the schema's
triggers refuse updates), and identities are recomputed from the records themselves.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from runstore import canonical
from runstore import sql
from runstore.errors import RegistrationConflictError
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.shapes import exclusion_refusal
from runstore.shapes import one_shot_refusal
from runstore.shapes import registration_refusal


def register_one_shot(
    connection: sqlite3.Connection,
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slot: ObservationSlot,
) -> str:
    """:func:`register_slots` for a one-shot measurement with its single result slot;
    first refuses any other attempt slot with ``invalid_record``."""
    refusal = one_shot_refusal(attempt_slot)
    if refusal is not None:
        raise refusal
    return register_slots(connection, decision, run, attempt_slot, (observation_slot,))


def register_slots(
    connection: sqlite3.Connection,
    decision: ApplicabilityDecision,
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
    refusal = registration_refusal(decision, run, attempt_slot, observation_slots)
    if refusal is not None:
        raise refusal
    found = _registered(connection, decision, run, attempt_slot, observation_slots)
    if found["conflict"]:
        raise RegistrationConflictError(
            "a logical slot of this run is registered with another record"
        )
    if found["attempt_slot"]:
        members = found["member"]
        if {row[0] for row in members} != {slot.id for slot in observation_slots}:
            raise RegistrationConflictError(
                "the attempt slot is registered with other observation slots"
            )
        return attempt_slot.id
    if not found["decision"]:
        _insert_decision(connection, decision)
    if not found["run"]:
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
    existing = {row[0] for row in found["observation_slot"]}
    for slot in observation_slots:
        if slot.id not in existing:
            existing.add(slot.id)
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


def register_exclusion(connection: sqlite3.Connection, decision: ApplicabilityDecision) -> str:
    """Register an exclusion: a decision with ``applicable`` false, alone (it has no run);
    returns its id. ``invalid_record`` for an applicable decision; registering it again is
    a no-op."""
    refusal = exclusion_refusal(decision)
    if refusal is not None:
        raise refusal
    held = sql.execute(
        connection, "SELECT 1 FROM applicability_decisions WHERE id = ?", (decision.id,)
    )
    if not held:
        _insert_decision(connection, decision)
    return decision.id


def _insert_decision(connection: sqlite3.Connection, decision: ApplicabilityDecision) -> None:
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
    sql.execute(
        connection,
        "INSERT INTO resolved_runs (id, logical_spec_id, decision_id, candidate_id, applicable, "
        "record_json) VALUES (?, ?, ?, ?, 1, ?)",
        (run.id, run.logical_spec_id, run.decision_id, run.candidate_id, _document(run.to_json())),
    )


_REGISTERED_SQL = (
    "SELECT id, 'conflict' FROM attempt_slots "
    "WHERE run_id = ?1 AND logical_slot = ?2 AND id != ?3 "
    "UNION ALL SELECT s.id, 'conflict' FROM json_each(?4) AS k JOIN observation_slots AS s "
    "ON s.run_id = json_extract(k.value, '$[0]') "
    "AND s.logical_slot = json_extract(k.value, '$[1]') "
    "AND s.id != json_extract(k.value, '$[2]') "
    "UNION ALL SELECT id, 'attempt_slot' FROM attempt_slots WHERE id = ?3 "
    "UNION ALL SELECT observation_slot_id, 'member' FROM attempt_observation_slots "
    "WHERE attempt_slot_id = ?3 "
    "UNION ALL SELECT id, 'decision' FROM applicability_decisions WHERE id = ?5 "
    "UNION ALL SELECT id, 'run' FROM resolved_runs WHERE id = ?6 "
    "UNION ALL SELECT s.id, 'observation_slot' FROM json_each(?4) AS k "
    "JOIN observation_slots AS s ON s.id = json_extract(k.value, '$[2]')"
)
"""Every row :func:`register_slots` decides on, read by one statement, each tagged with
what it is: ``conflict``, a record holding the ``(run_id, logical_slot)`` key of one of the
records being registered under another id (the attempt slot's key is ``?1, ?2`` with id
``?3``; the observation slots' are the ``[run_id, logical_slot, id]`` triples of the JSON
array ``?4``); ``attempt_slot``, the attempt slot when it is registered, and ``member``,
its registered observation slots; ``decision`` and ``run``, the decision and the run when
registered; ``observation_slot``, each of the observation slots already registered."""

_TAGS = ("conflict", "attempt_slot", "member", "decision", "run", "observation_slot")


def _registered(
    connection: sqlite3.Connection,
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slots: Sequence[ObservationSlot],
) -> dict[str, list[sql.Row]]:
    """:data:`_REGISTERED_SQL`'s rows by tag (every tag present), each row ``(id,)``. The
    JSON array is written without ASCII escapes, so text SQLite cannot bind fails here as
    it would as a parameter of its own."""
    keys = json.dumps(
        [[slot.run_id, slot.logical_slot, slot.id] for slot in observation_slots],
        ensure_ascii=False,
    )
    rows = sql.execute(
        connection,
        _REGISTERED_SQL,
        (
            attempt_slot.run_id,
            attempt_slot.logical_slot,
            attempt_slot.id,
            keys,
            decision.id,
            run.id,
        ),
    )
    found: dict[str, list[sql.Row]] = {tag: [] for tag in _TAGS}
    for record_id, tag in rows:
        found[tag].append((record_id,))
    return found


def _document(document: canonical.JSON) -> str:
    return canonical.encode(document).decode("utf-8")
