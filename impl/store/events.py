"""Appending history: one event and one transition row per revision.

Rules of this file: helpers that run inside the caller's write transaction and never
commit. Payload documents are built by :mod:`runstore.payloads` (shared with the model) and
stored here as canonical JSON; the event's sequence is allocated by SQLite. Moving the
attempt projection itself is :func:`runstore.store.attempts.transition`. Events reach subscribers
only after their transaction commits (:class:`runstore.store.RunStore`).
"""

from __future__ import annotations

import sqlite3

from runstore import canonical
from runstore import sql
from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.receipts import CommittedEvent


def append_event(
    connection: sqlite3.Connection,
    kind: str,
    attempt_id: str,
    at_ns: int,
    payload: dict[str, JSON],
) -> CommittedEvent:
    """Insert one event; its sequence is allocated by SQLite."""
    document = canonical.encode_built(payload)
    rows = sql.execute(
        connection,
        "INSERT INTO events (kind, attempt_id, at_ns, payload_json) VALUES (?, ?, ?, ?) "
        "RETURNING sequence",
        (kind, attempt_id, at_ns, document.decode("utf-8")),
    )
    return CommittedEvent(
        sequence=rows[0][0], kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=document
    )


def append_transition(
    connection: sqlite3.Connection,
    attempt_id: str,
    revision: int,
    source: AttemptState | None,
    target: AttemptState,
    event: CommittedEvent,
) -> None:
    """Insert the transition row of ``revision``, linked to its ``event`` (same time)."""
    sql.execute(
        connection,
        "INSERT INTO attempt_transitions (attempt_id, revision, from_state, to_state, at_ns, "
        "event_sequence) VALUES (?, ?, ?, ?, ?, ?)",
        (
            attempt_id,
            revision,
            None if source is None else source.value,
            target.value,
            event.at_ns,
            event.sequence,
        ),
    )


def append_history(
    connection: sqlite3.Connection,
    kind: str,
    attempt_id: str,
    revision: int,
    source: AttemptState | None,
    target: AttemptState,
    at_ns: int,
    payload: dict[str, JSON],
) -> CommittedEvent:
    """Append one event and its transition (the pair every revision has)."""
    event = append_event(connection, kind, attempt_id, at_ns, payload)
    append_transition(connection, attempt_id, revision, source, target, event)
    return event
