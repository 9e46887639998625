"""``validate``'s second part, the records (SPEC.md section 16.1, *Records*): every
identified record and every attempt's ``record_json``.

Rules of this file: reads only, streamed (:mod:`.reading`). Ids and record documents are
recomputed by the value layer (:mod:`runstore.records`, :mod:`runstore.identity`,
:mod:`runstore.attempt_record`), never re-implemented here; each defect goes to the
``report`` callback; subjects are a record's id column.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from runstore.attempt_record import attempt_document
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.canonical import encode
from runstore.enums import AttemptState
from runstore.errors import IdentityMismatchError
from runstore.errors import RunStoreError
from runstore.identity import run_attempt_id
from runstore.inspection.validate.findings import Report
from runstore.inspection.validate.reading import Row
from runstore.inspection.validate.reading import stream
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome

RECORD_NOT_CANONICAL: Final = "record_not_canonical"
RECORD_INVALID: Final = "record_invalid"
IDENTITY_MISMATCH: Final = "identity_mismatch"
COLUMN_MISMATCH: Final = "column_mismatch"
CODES: Final = (RECORD_NOT_CANONICAL, RECORD_INVALID, IDENTITY_MISMATCH, COLUMN_MISMATCH)


_Record = ApplicabilityDecision | ResolvedRun | AttemptSlot | ObservationSlot | Observation

_PRODUCER: Final = (
    "(SELECT attempt_slot_id FROM attempt_observation_slots WHERE observation_slot_id = t.id)"
)
_RECORDS: Final[tuple[tuple[str, type[_Record], str], ...]] = (
    ("applicability_decisions", ApplicabilityDecision, "candidate_id problem_id applicable"),
    ("resolved_runs", ResolvedRun, "decision_id candidate_id logical_spec_id"),
    ("attempt_slots", AttemptSlot, "run_id logical_slot execution_kind role"),
    ("observation_slots", ObservationSlot, "run_id logical_slot kind checkpoint_index"),
    ("observations", Observation, "slot_id attempt_id valid completion"),
)
"""(table, record class, its indexed columns)."""


def check_records(connection: sqlite3.Connection, report: Report) -> dict[str, int]:
    """Every identified record: its ``record_json`` canonical and valid, its id recomputed,
    its id and indexed columns equal to the document's; an observation slot's producer
    (its membership row) equal to its ``attempt_slot_id``. Returns rows checked per table."""
    counts: dict[str, int] = {}
    for table, kind, names in _RECORDS:
        columns = tuple(names.split())
        producer = _PRODUCER if kind is ObservationSlot else "NULL"
        query = (
            f"SELECT t.id, CAST(t.record_json AS BLOB), {producer}, {', '.join(columns)} "
            f"FROM {table} AS t ORDER BY t.rowid"
        )
        counts[table] = 0
        for row in stream(connection, query):
            counts[table] += 1
            _check_record(kind, columns, row, report)
    return counts


def _check_record(kind: type[_Record], columns: tuple[str, ...], row: Row, report: Report) -> None:
    stored_id, data, producer, *values = row
    decoded = _decoded(kind, stored_id, data, report)
    if decoded is None:
        return
    record, document = decoded
    if document["id"] != stored_id:
        report(
            IDENTITY_MISMATCH, stored_id, f"the id column is not the recomputed {document['id']}"
        )
    differing = [
        name
        for name, value in zip(columns, values, strict=True)
        if document[name] != value  # a bool field is stored as 0/1, and True == 1
    ]
    if differing:
        report(COLUMN_MISMATCH, stored_id, f"columns differ from record_json: {differing}")
    if isinstance(record, ObservationSlot) and producer != record.attempt_slot_id:
        report(
            COLUMN_MISMATCH,
            stored_id,
            f"its membership names producer {producer!r:.100}, the record {record.attempt_slot_id}",
        )


def _decoded(
    kind: type[_Record], subject: str, data: object, report: Report
) -> tuple[_Record, dict[str, JSON]] | None:
    """The record ``data`` holds and its document (whose ``"id"`` is then the recomputed
    id), or None after reporting why it cannot be trusted. ``data`` is exactly the
    encoding of the document (canonical-only decoding), and the document holds exactly the
    record's fields, so the record re-encodes to ``data``."""
    document = canonical_object(subject, data, report)
    if document is None:
        return None
    try:
        record = kind.from_json(document)
    except IdentityMismatchError as error:
        report(IDENTITY_MISMATCH, subject, error.message)
        return None
    except RunStoreError as error:
        report(RECORD_INVALID, subject, f"record_json: {error.message}")
        return None
    return record, document


def canonical_object(subject: str, data: object, report: Report) -> dict[str, JSON] | None:
    """The JSON object ``data`` encodes canonically. Decoding is canonical-only (SPEC.md
    section 2), so a document it returns re-encodes to exactly ``data``."""
    if not isinstance(data, bytes):
        report(RECORD_NOT_CANONICAL, subject, f"the document is {type(data).__name__}, not text")
        return None
    try:
        return decode_object(data)
    except RunStoreError as error:
        report(RECORD_NOT_CANONICAL, subject, error.message)
        return None


def check_attempts(connection: sqlite3.Connection, report: Report) -> int:
    """Every attempt's ``record_json``: canonical, its id ``run_attempt_id(slot_id,
    retry_index)`` and equal to the id column, and exactly the attempt document
    (:func:`runstore.attempt_record.attempt_document`) of the row's columns."""
    query = (
        "SELECT id, slot_id, retry_index, state, revision, started_at_ns, updated_at_ns, "
        "finished_at_ns, failure_code, censor_reason, final_artifact_id, "
        "CAST(record_json AS BLOB) FROM attempts ORDER BY rowid"
    )
    count = 0
    for row in stream(connection, query):
        count += 1
        _check_attempt(row, report)
    return count


def _check_attempt(row: Row, report: Report) -> None:
    stored_id, slot_id, retry_index, state, revision, started, updated, finished = row[:8]
    failure_code, reason, final_artifact, data = row[8:]
    document = canonical_object(stored_id, data, report)
    if document is None:
        return
    try:
        recomputed = run_attempt_id(document.get("slot_id"), document.get("retry_index"))  # type: ignore[arg-type]
    except RunStoreError as error:
        report(RECORD_INVALID, stored_id, f"record_json: {error.message}")
        return
    if document.get("id") != recomputed:
        report(IDENTITY_MISMATCH, stored_id, f"record_json's id is not the recomputed {recomputed}")
    if stored_id != recomputed:
        report(IDENTITY_MISMATCH, stored_id, f"the id column is not the recomputed {recomputed}")
    try:
        outcome = outcome_of(state, failure_code, reason, document.get("details"))
        if outcome is not None and (finished is None or final_artifact is None):
            raise ValueError("a terminal attempt without its finish time or final artifact")
        expected = attempt_document(
            attempt_id=stored_id,
            slot_id=slot_id,
            retry_index=retry_index,
            state=AttemptState(state),
            revision=revision,
            started_at_ns=started,
            updated_at_ns=updated,
            outcome=outcome,
            finished_at_ns=finished,
            final_artifact_id=final_artifact,
        )
    except (RunStoreError, ValueError) as error:
        report(RECORD_INVALID, stored_id, f"its columns make no attempt record: {error}")
        return
    if encode(expected) != data:  # bytes, not dicts: in Python True == 1
        keys = sorted(
            k
            for k in expected.keys() | document.keys()
            if repr(expected.get(k)) != repr(document.get(k))
        )
        report(COLUMN_MISMATCH, stored_id, f"record_json differs from the columns in {keys}")


def outcome_of(
    state: str, failure_code: str | None, reason: str | None, details: object
) -> TerminalOutcome | None:
    """The terminal outcome a row in ``state`` records (None while nonterminal); a failed
    attempt's ``details`` come from its record. Refuses what the value layer refuses."""
    if state == AttemptState.ACCEPTED.value:
        return Accepted()
    if state == AttemptState.SUPERSEDED.value:
        return Superseded()
    if state == AttemptState.CENSORED.value:
        return Censored(reason=reason)  # type: ignore[arg-type]
    if state == AttemptState.FAILED.value:
        return Failed(code=failure_code, details=details)  # type: ignore[arg-type]
    return None
