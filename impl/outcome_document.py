"""The outcome document over SQL: the snapshot of the records an attempt's outcome binds,
and the canonical ``outcome.json`` bytes the publisher writes into the attempt's final
artifact (SPEC.md section 13).

Rules of this file: every function runs inside the caller's open transaction (a read or a
write one) and never commits; every statement goes through :func:`runstore.sql.execute`.
It only reads: its caller has already checked that the attempt exists and is finalizing
(or, for a recomputation after the fact, is terminal), that the references name
registered artifacts, and so on; a row that cannot be missing is a
:class:`~runstore.errors.DatabaseError`. Which records a snapshot holds is decided here
over SQL and, on purpose a second time, over the model's state by
:mod:`runstore.model.outcome_document`; the two hand their pieces to the value layer's
:mod:`runstore.outcome_json`, which fixes the document's shape and order, and the
conformance tests require equal bytes. Records are the stored ``record_json`` objects,
decoded canonically; artifacts are their indexed columns only. No owner token, lease id,
staging path or verification, registration or selection time is read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import attrs
from runstore import outcome_json, sql
from runstore.canonical import JSON, decode_object
from runstore.enums import TERMINAL_STATES, AttemptState
from runstore.errors import DatabaseError
from runstore.requests import Accepted, Censored, TerminalOutcome


@attrs.frozen(kw_only=True)
class _Attempt:
    slot_id: str
    retry_index: int
    finalizing_revision: int
    started_at_ns: int


def _one(connection: sqlite3.Connection, what: str, query: str, key: str) -> sql.Row:
    rows = sql.execute(connection, query, (key,))
    if len(rows) != 1:
        raise DatabaseError(f"{what} {key} is not registered")
    return rows[0]


def _record(text: str) -> dict[str, JSON]:
    return decode_object(text.encode("utf-8"))


def _attempt(connection: sqlite3.Connection, attempt_id: str) -> _Attempt:
    """The attempt's identity and reservation start, and the revision it had while
    finalizing: its current one while finalizing, the one before its terminal step after."""
    slot_id, retry_index, state, revision, started_at_ns = _one(
        connection,
        "attempt",
        "SELECT slot_id, retry_index, state, revision, started_at_ns FROM attempts WHERE id = ?",
        attempt_id,
    )
    current = AttemptState(state)
    if current is AttemptState.FINALIZING:
        finalizing = revision
    elif current in TERMINAL_STATES:
        finalizing = revision - 1
    else:
        raise AssertionError(f"attempt {attempt_id} is {state}, it has not been finalizing")
    return _Attempt(
        slot_id=slot_id,
        retry_index=retry_index,
        finalizing_revision=finalizing,
        started_at_ns=started_at_ns,
    )


def _artifact(connection: sqlite3.Connection, artifact_id: str) -> dict[str, JSON]:
    """The artifact's entry (its indexed columns, never its verification time)."""
    row = _one(
        connection,
        "artifact",
        "SELECT id, kind, path, content_sha256, manifest_sha256 FROM artifacts WHERE id = ?",
        artifact_id,
    )
    return outcome_json.artifact_entry(*row)


def _observations(connection: sqlite3.Connection, rows: Sequence[sql.Row]) -> list[dict[str, JSON]]:
    """Observation entries for ``(id, record_json, artifact_id)`` rows: each with its own
    directory's entry and its references."""
    entries = []
    for observation_id, record_json, artifact_id in rows:
        references = sql.execute(
            connection,
            "SELECT role, artifact_id FROM observation_artifacts WHERE observation_id = ? "
            "ORDER BY role, artifact_id",
            (observation_id,),
        )
        entries.append(
            outcome_json.observation_entry(
                _record(record_json),
                _artifact(connection, artifact_id),
                [(role, _artifact(connection, referenced)) for role, referenced in references],
            )
        )
    return entries


def _snapshot(
    connection: sqlite3.Connection, attempt_id: str, slot_id: str, outcome: TerminalOutcome
) -> dict[str, JSON]:
    run_id, slot_record = _one(
        connection,
        "attempt slot",
        "SELECT run_id, record_json FROM attempt_slots WHERE id = ?",
        slot_id,
    )
    decision_id, run_record = _one(
        connection,
        "resolved run",
        "SELECT decision_id, record_json FROM resolved_runs WHERE id = ?",
        run_id,
    )
    (decision_record,) = _one(
        connection,
        "applicability decision",
        "SELECT record_json FROM applicability_decisions WHERE id = ?",
        decision_id,
    )
    members = sql.execute(
        connection,
        "SELECT s.record_json FROM attempt_observation_slots AS m "
        "JOIN observation_slots AS s ON s.id = m.observation_slot_id "
        "WHERE m.attempt_slot_id = ? ORDER BY s.id",
        (slot_id,),
    )
    produced = sql.execute(
        connection,
        "SELECT id, record_json, artifact_id FROM observations WHERE attempt_id = ? ORDER BY id",
        (attempt_id,),
    )
    selected = None
    if isinstance(outcome, Accepted | Censored):
        chosen = sql.execute(
            connection,
            "SELECT o.id, o.record_json, o.artifact_id FROM attempt_observation_slots AS m "
            "JOIN selected_observations AS x ON x.slot_id = m.observation_slot_id "
            "JOIN observations AS o ON o.id = x.observation_id "
            "WHERE m.attempt_slot_id = ? ORDER BY m.observation_slot_id",
            (slot_id,),
        )
        selected = _observations(connection, chosen)
    return outcome_json.snapshot_document(
        decision=_record(decision_record),
        run=_record(run_record),
        attempt_slot=_record(slot_record),
        observation_slots=[_record(record) for (record,) in members],
        produced=_observations(connection, produced),
        selected=selected,
    )


def snapshot(
    connection: sqlite3.Connection, attempt_id: str, outcome: TerminalOutcome
) -> dict[str, JSON]:
    """The ``snapshot`` object of the attempt's outcome document for ``outcome``: the
    decision, the resolved run and the attempt slot of the attempt, the observation slots
    that slot owns, the observations this attempt produced and, for an accepted or
    censored outcome only, the selected observation of each owned observation slot that
    has one (whichever attempt produced it)."""
    attempt = _attempt(connection, attempt_id)
    return _snapshot(connection, attempt_id, attempt.slot_id, outcome)


def outcome_document(
    connection: sqlite3.Connection,
    attempt_id: str,
    outcome: TerminalOutcome,
    references: Sequence[tuple[str, str]],
    finished_at_ns: int,
) -> bytes:
    """The canonical bytes of the attempt's ``outcome.json`` for ``outcome``, its
    dependency ``references`` (``(role, artifact id)`` pairs, any order) and the immutable
    finish time ``finished_at_ns``, with :func:`snapshot` as its ``snapshot``."""
    attempt = _attempt(connection, attempt_id)
    return outcome_json.outcome_document(
        attempt_id=attempt_id,
        slot_id=attempt.slot_id,
        retry_index=attempt.retry_index,
        finalizing_revision=attempt.finalizing_revision,
        outcome=outcome,
        started_at_ns=attempt.started_at_ns,
        finished_at_ns=finished_at_ns,
        dependencies=[(role, _artifact(connection, artifact)) for role, artifact in references],
        snapshot=_snapshot(connection, attempt_id, attempt.slot_id, outcome),
    )
