"""``validate``'s third part, the history (SPEC.md section 16.1, *History*): each
attempt's transitions along legal edges, each announced by the event the writer writes,
and the event log without gaps.

Rules of this file: reads only, streamed (:mod:`.reading`); neighbour comparisons
(``lag() OVER``) happen in SQL. Payloads are rebuilt by :mod:`runstore.payloads` and edges
read from :mod:`runstore.edges`, never re-implemented here; subjects are the attempt id
for history and ``events:<sequence>`` for an event.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final

from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.canonical import encode
from runstore.edges import LEGAL_EDGES
from runstore.enums import AttemptState
from runstore.errors import RunStoreError
from runstore.inspection.validate.findings import Report
from runstore.inspection.validate.reading import TERMINAL_SQL
from runstore.inspection.validate.reading import TERMINAL_VALUES
from runstore.inspection.validate.reading import Row
from runstore.inspection.validate.reading import stream
from runstore.inspection.validate.records import canonical_object
from runstore.inspection.validate.records import outcome_of
from runstore.payloads import ATTEMPT_FINALIZING
from runstore.payloads import ATTEMPT_FINISHED
from runstore.payloads import ATTEMPT_RESERVED
from runstore.payloads import ATTEMPT_TRANSITION
from runstore.payloads import CLAIMED
from runstore.payloads import OBSERVATION_REGISTERED
from runstore.payloads import SUPERSEDED
from runstore.payloads import finalizing_payload
from runstore.payloads import finished_payload
from runstore.payloads import observation_payload
from runstore.payloads import reserved_payload
from runstore.payloads import transition_payload

REVISION_GAP: Final = "revision_gap"
TRANSITION_MISMATCH: Final = "transition_mismatch"
EVENT_MISMATCH: Final = "event_mismatch"
EVENT_GAP: Final = "event_gap"
EVENT_ORPHAN: Final = "event_orphan"
CODES: Final = (REVISION_GAP, TRANSITION_MISMATCH, EVENT_MISMATCH, EVENT_GAP, EVENT_ORPHAN)
_OBSERVATION_KEYS: Final = frozenset(
    {"observation_id", "slot_id", "artifact_id", "references", "registered", "selected"}
)


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
        canonical_object(f"events:{sequence}", data, report)
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
