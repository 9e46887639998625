"""``validate``'s row checks: every identified record, and the attempts' recorded history.

Rules of this file: reads only, on the connection of a raw inspection snapshot, with
set-based queries whose rows are streamed from a cursor (:func:`stream`), so time grows
linearly with the store and memory stays bounded; grouping and neighbour comparisons
(``GROUP BY``, ``lag() OVER``) happen in SQL. Ids, record documents and event payloads are
recomputed by the value layer (:mod:`runstore.records`, :mod:`runstore.identity`,
:mod:`runstore.attempt_record`, :mod:`runstore.payloads`, :mod:`runstore.edges`), never
re-implemented here. Nothing raises for what it finds: each defect goes to the ``report``
callback as ``(code, subject, message)``; a ``sqlite3.DatabaseError`` is left to the
caller. Subjects are a record's id column for the identified records, the attempt id for
history, and ``table:rowid`` for other rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from runstore.attempt_record import attempt_document
from runstore.canonical import JSON, decode_object, encode
from runstore.edges import LEGAL_EDGES
from runstore.enums import TERMINAL_STATES, AttemptState
from runstore.errors import IdentityMismatchError, RunStoreError
from runstore.identity import run_attempt_id
from runstore.payloads import (
    ATTEMPT_FINALIZING,
    ATTEMPT_FINISHED,
    ATTEMPT_RESERVED,
    ATTEMPT_TRANSITION,
    CLAIMED,
    OBSERVATION_REGISTERED,
    SUPERSEDED,
    finalizing_payload,
    finished_payload,
    observation_payload,
    reserved_payload,
    transition_payload,
)
from runstore.records import (
    ApplicabilityDecision,
    AttemptSlot,
    Observation,
    ObservationSlot,
    ResolvedRun,
)
from runstore.requests import Accepted, Censored, Failed, Superseded, TerminalOutcome

Report = Callable[[str, str, str], None]
"""``report(code, subject, message)``: how a check hands over one finding."""
Row = tuple[Any, ...]

RECORD_NOT_CANONICAL: Final = "record_not_canonical"
RECORD_INVALID: Final = "record_invalid"
IDENTITY_MISMATCH: Final = "identity_mismatch"
COLUMN_MISMATCH: Final = "column_mismatch"
REVISION_GAP: Final = "revision_gap"
TRANSITION_MISMATCH: Final = "transition_mismatch"
EVENT_MISMATCH: Final = "event_mismatch"
EVENT_GAP: Final = "event_gap"
EVENT_ORPHAN: Final = "event_orphan"

CODES: Final = (
    RECORD_NOT_CANONICAL,
    RECORD_INVALID,
    IDENTITY_MISMATCH,
    COLUMN_MISMATCH,
    REVISION_GAP,
    TRANSITION_MISMATCH,
    EVENT_MISMATCH,
    EVENT_GAP,
    EVENT_ORPHAN,
)

TERMINAL_VALUES: Final = frozenset(state.value for state in TERMINAL_STATES)
TERMINAL_SQL: Final = "('accepted', 'censored', 'superseded', 'failed')"
_OBSERVATION_KEYS: Final = frozenset(
    {"observation_id", "slot_id", "artifact_id", "references", "registered", "selected"}
)


def stream(
    connection: sqlite3.Connection, query: str, params: Sequence[object] = ()
) -> Iterator[Row]:
    """The rows of ``query`` one at a time from a cursor. :func:`runstore.sql.execute`
    materializes a whole result, which a 100,000-attempt store must not; the private copy
    read here needs no tracing or fault injection."""
    cursor = connection.execute(query, params)
    try:
        yield from cursor
    finally:
        cursor.close()


# --- identified records --------------------------------------------------------------------

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
    document = _canonical_object(subject, data, report)
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


def _canonical_object(subject: str, data: object, report: Report) -> dict[str, JSON] | None:
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


# --- attempts ------------------------------------------------------------------------------


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
    document = _canonical_object(stored_id, data, report)
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


# --- history -------------------------------------------------------------------------------


def check_revisions(connection: sqlite3.Connection, report: Report) -> None:
    """Each attempt's transitions are exactly revisions 0..revision, and the last one's
    ``to_state`` and ``at_ns`` are the attempt's ``state`` and ``updated_at_ns``."""
    query = (
        "SELECT a.id, a.revision, a.state, a.updated_at_ns, count(t.revision), "
        "min(t.revision), max(t.revision), "
        "(SELECT to_state || ' ' || at_ns FROM attempt_transitions "
        " WHERE attempt_id = a.id AND revision = a.revision) "
        "FROM attempts AS a LEFT JOIN attempt_transitions AS t ON t.attempt_id = a.id "
        "GROUP BY a.id ORDER BY a.id"
    )
    for attempt_id, revision, state, updated, count, low, high, last in stream(connection, query):
        if (count, low, high) != (revision + 1, 0, revision):
            report(
                REVISION_GAP,
                attempt_id,
                f"revision {revision} but {count} transitions ({low}..{high})",
            )
        if last != f"{state} {updated}":
            report(
                TRANSITION_MISMATCH,
                attempt_id,
                f"the attempt is {state} at {updated}, its revision {revision} "
                f"transition is {last or 'missing'}",
            )


_TRANSITIONS: Final = (
    "SELECT t.attempt_id, t.revision, t.from_state, t.to_state, t.at_ns, t.event_sequence, "
    "e.kind, CAST(e.payload_json AS BLOB), e.attempt_id, e.at_ns, a.slot_id, a.retry_index, "
    "a.failure_code, a.censor_reason, "
    f"CASE WHEN t.to_state IN {TERMINAL_SQL} THEN CAST(a.record_json AS BLOB) END, "
    "lag(t.revision) OVER w, lag(t.to_state) OVER w, lag(t.at_ns) OVER w, a.state "
    "FROM attempt_transitions AS t "
    "LEFT JOIN events AS e ON e.sequence = t.event_sequence "
    "LEFT JOIN attempts AS a ON a.id = t.attempt_id "
    "WINDOW w AS (PARTITION BY t.attempt_id ORDER BY t.revision) "
    "ORDER BY t.attempt_id, t.revision"
)


def check_transitions(connection: sqlite3.Connection, report: Report) -> int:
    """Each transition continues its predecessor (from its ``to_state``, no earlier, along
    a legal edge; revision 0 is the reservation) and is announced by an event of the same
    attempt and time whose kind and payload (:mod:`runstore.payloads`) are exactly the
    ones this step writes. Returns the number of transitions."""
    count = 0
    for row in stream(connection, _TRANSITIONS):
        count += 1
        attempt_id, revision = row[0], row[1]
        for step_problem in _transition_problems(row):
            report(TRANSITION_MISMATCH, attempt_id, f"revision {revision}: {step_problem}")
        problem = _event_problem(row)
        if problem is not None:
            report(
                EVENT_MISMATCH, f"events:{row[5]}", f"{attempt_id} revision {revision}: {problem}"
            )
    return count


def _transition_problems(row: Row) -> Iterator[str]:
    _, revision, source, target, at_ns = row[:5]
    previous_revision, previous_state, previous_at = row[15:18]
    if revision == 0:
        if (source, target) != (None, AttemptState.RESERVED.value):
            yield f"revision 0 is {source} -> {target}, not the reservation"
        return
    if previous_revision == revision - 1:
        if source != previous_state:
            yield f"it starts from {source}, revision {previous_revision} ended in {previous_state}"
        if at_ns < previous_at:
            yield f"its time {at_ns} precedes revision {previous_revision}'s {previous_at}"
    if (source, target) not in LEGAL_EDGES:
        yield f"{source} -> {target} is not a legal edge"


def _expected_kind(revision: int, target: str) -> str:
    if revision == 0:
        return ATTEMPT_RESERVED
    if target == AttemptState.FINALIZING.value:
        return ATTEMPT_FINALIZING
    if target in TERMINAL_VALUES:
        return ATTEMPT_FINISHED
    return ATTEMPT_TRANSITION


def _event_problem(row: Row) -> str | None:
    attempt_id, revision, source, target, at_ns, _, kind, data, event_attempt, event_at = row[:10]
    if kind is None:
        return "its event is missing"
    if (event_attempt, event_at) != (attempt_id, at_ns):
        return f"the event belongs to {event_attempt!r:.100} at {event_at}"
    if kind != _expected_kind(revision, target):
        return f"event kind {kind} announces a {source} -> {target} step"
    try:
        expected = _expected_payload(row, data)
    except (RunStoreError, ValueError) as error:
        return f"no payload to compare: {error}"
    if expected is not None and encode(expected) != data:
        return f"the {kind} payload is not the one this step writes"
    return None


def _expected_payload(row: Row, data: bytes) -> dict[str, JSON] | None:
    """The payload the writer builds for this transition; None when the attempt's own
    record cannot say (that is reported by :func:`check_attempts`). The stored payload
    ``data`` is decoded only for a move to finalizing, whose ``claim`` it must name
    (canonical decoding of every payload is :func:`check_events`' business)."""
    _, revision, source, target = row[:4]
    slot_id, retry_index, failure_code, reason, record = row[10:15]
    if slot_id is None:
        return None  # the attempt row is missing: a foreign_key finding
    if revision == 0:
        return reserved_payload(slot_id, retry_index)
    if target == AttemptState.FINALIZING.value:
        claim = decode_object(data).get("claim")
        if claim not in (None, CLAIMED, SUPERSEDED):
            raise ValueError(f"claim {claim!r:.40} is neither claimed nor superseded")
        return finalizing_payload(AttemptState(source), revision, claim)
    if target in TERMINAL_VALUES:
        if row[18] != target or not isinstance(record, bytes):
            return None  # the projection is not this step's: reported by check_revisions
        details = decode_object(record).get("details")
        outcome = outcome_of(target, failure_code, reason, details)
        assert outcome is not None
        return finished_payload(outcome, revision)
    return transition_payload(AttemptState(source), AttemptState(target), revision)


# --- events --------------------------------------------------------------------------------


def check_events(connection: sqlite3.Connection, report: Report) -> int:
    """Event payloads canonical; sequences 1, 2, 3, ... with no gap (and none cut off the
    end: ``sqlite_sequence`` is the last one); every step event announcing a transition;
    every ``observation_registered`` payload exactly the shape the writer builds, naming
    an observation of that attempt, slot and artifact. Returns the number of events."""
    count = 0
    for sequence, data in stream(
        connection, "SELECT sequence, CAST(payload_json AS BLOB) FROM events ORDER BY sequence"
    ):
        count += 1
        _canonical_object(f"events:{sequence}", data, report)
    gaps = (
        "SELECT sequence, previous FROM (SELECT sequence, "
        "lag(sequence, 1, 0) OVER (ORDER BY sequence) AS previous FROM events) "
        "WHERE sequence != previous + 1"
    )
    for sequence, previous in stream(connection, gaps):
        report(EVENT_GAP, f"events:{sequence}", f"event {sequence} follows event {previous}")
    _check_event_tail(connection, report)
    orphans = (
        "SELECT e.sequence, e.kind FROM events AS e WHERE e.kind != ? AND NOT EXISTS "
        "(SELECT 1 FROM attempt_transitions AS t WHERE t.event_sequence = e.sequence)"
    )
    for sequence, kind in stream(connection, orphans, (OBSERVATION_REGISTERED,)):
        report(EVENT_ORPHAN, f"events:{sequence}", f"event kind {kind} announces no transition")
    _check_observation_events(connection, report)
    return count


def _check_event_tail(connection: sqlite3.Connection, report: Report) -> None:
    query = (
        "SELECT (SELECT max(sequence) FROM events), "
        "(SELECT seq FROM sqlite_sequence WHERE name = 'events')"
    )
    for last, allocated in stream(connection, query):
        if allocated is not None and (last or 0) < allocated:
            report(
                EVENT_GAP,
                "events",
                f"events after {last or 0} are missing (sequence {allocated} was allocated)",
            )


_OBSERVATION_EVENTS: Final = (
    "SELECT e.sequence, e.attempt_id, CAST(e.payload_json AS BLOB), o.slot_id, o.artifact_id, "
    "o.attempt_id FROM events AS e LEFT JOIN observations AS o ON o.id = "
    "CASE WHEN json_valid(e.payload_json) THEN json_extract(e.payload_json, '$.observation_id') "
    "END WHERE e.kind = ? ORDER BY e.sequence"
)


def _check_observation_events(connection: sqlite3.Connection, report: Report) -> None:
    for row in stream(connection, _OBSERVATION_EVENTS, (OBSERVATION_REGISTERED,)):
        problem = _observation_event_problem(row)
        if problem is not None:
            report(EVENT_MISMATCH, f"events:{row[0]}", problem)


def _observation_event_problem(row: Row) -> str | None:
    _, event_attempt, data, slot_id, artifact_id, producer = row
    try:
        payload = decode_object(data)
    except RunStoreError:
        return None  # reported as record_not_canonical
    if set(payload) != _OBSERVATION_KEYS:
        return f"observation_registered payload keys are {sorted(payload)}"
    references = payload["references"]
    if not isinstance(references, list) or not all(
        isinstance(item, dict) and set(item) == {"artifact_id", "role"} for item in references
    ):
        return "its references are not a list of {artifact_id, role} objects"
    pairs = [
        (str(item["role"]), str(item["artifact_id"]))
        for item in references
        if isinstance(item, dict)
    ]
    observation_id, slot, artifact = (
        str(payload[key]) for key in ("observation_id", "slot_id", "artifact_id")
    )
    # str() and bool() cannot hide a wrong type: the rebuilt bytes would differ.
    rebuilt = observation_payload(
        observation_id,
        slot,
        artifact,
        pairs,
        bool(payload["registered"]),
        bool(payload["selected"]),
    )
    if encode(rebuilt) != data:
        return "the payload is not the shape the writer builds"
    if slot_id is None:
        return f"it names no registered observation ({observation_id!r:.100})"
    if (slot, artifact, event_attempt) != (slot_id, artifact_id, producer):
        return "its slot, artifact or attempt differ from the observation's"
    return None
