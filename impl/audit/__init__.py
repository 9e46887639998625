"""runstore.audit: replaying a store's committed event log through the executable model and
requiring the model's projection to equal the stored one (SPEC.md section 16.2).

Rules of this package: the one runtime user of :mod:`runstore.model`; it reads only
through an inspection :class:`~runstore.inspection.snapshot.Snapshot` (never the store's
own files, never writing), and reports the first divergence as a value, never by raising.
Modules: ``stored`` (the rows, as values), ``replay`` (events back into model calls) and
``projection`` (the comparable projection of a database or a model state, which the
tests and the crash simulator share).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

import attrs
from runstore.canonical import JSON
from runstore.inspection.snapshot import Snapshot

from .partition import Partition
from .partition import counter_divergence
from .partition import split
from .projection import Projection
from .projection import attempt_row
from .projection import connection_projection
from .projection import model_projection
from .replay import Diverged
from .replay import Divergence
from .replay import Replay
from .stored import StoredEvent
from .stored import Unreadable
from .stored import read


@attrs.frozen(kw_only=True)
class AuditReport:
    """The audit of one snapshot: how much was replayed and the first divergence."""

    root: str
    events: int
    attempts: int
    divergence: Divergence | None

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def to_json(self) -> dict[str, JSON]:
        return {
            "root": self.root,
            "ok": self.ok,
            "events": self.events,
            "attempts": self.attempts,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
        }


def audit(snapshot: Snapshot) -> AuditReport:
    """Replay ``snapshot``'s event log from an empty model state and compare: each event
    as replayed with the stored row, each attempt after its last event, then every table
    of the projection. The first difference is the report's divergence."""
    return audit_connection(snapshot.connection, snapshot.root)


def audit_connection(connection: sqlite3.Connection, root: str) -> AuditReport:
    """:func:`audit` over any read connection on a run store database (the tests use a
    read-only connection on a store their process holds open)."""
    attempts = int(connection.execute("SELECT count(*) FROM attempts").fetchone()[0])
    events = int(connection.execute("SELECT count(*) FROM events").fetchone()[0])
    divergence = None
    try:
        _replay(connection)
    except Diverged as diverged:
        divergence = diverged.divergence
    return AuditReport(root=root, events=events, attempts=attempts, divergence=divergence)


def _replay(connection: sqlite3.Connection) -> None:
    try:
        stored = read(connection)
    except Unreadable as error:
        raise Diverged(
            Divergence(code="unreadable", sequence=None, attempt_id=None, message=str(error))
        ) from None
    projection = connection_projection(connection)
    partitions, stray = split(stored, projection)
    if stray is not None:
        table, *row = stray
        code = "registration_refused" if table in ("decisions", "runs") else "projection_differs"
        message = f"table {table}: {_row(tuple(row))} belongs to no registered attempt slot"
        raise Diverged(Divergence(code=code, sequence=None, attempt_id=None, message=message))
    counters = counter_divergence(stored, projection)
    if counters is not None:
        raise Diverged(counters)
    found = [d for d in map(_replay_partition, partitions) if d is not None]
    if found:
        raise Diverged(min(found, key=lambda d: (d.sequence is None, d.sequence or 0)))


def _replay_partition(partition: Partition) -> Divergence | None:
    """Replay one attempt slot; its first divergence, or None."""
    replay = Replay(partition.stored)
    kept = {row[0]: row for row in partition.expected["attempts"]}
    events = partition.stored.events
    last = {event.attempt_id: event.sequence for event in events}
    try:
        replay.register()
        for event in events:
            replay.apply(event)
            if last.get(event.attempt_id) == event.sequence:
                _compare_attempt(replay, event, kept)
        replay.seed_stages(every=True)
        _compare_projection(partition.expected, model_projection(replay.state))
    except Diverged as diverged:
        return diverged.divergence
    return None


def _compare_attempt(replay: Replay, event: StoredEvent, kept: dict[str, Any]) -> None:
    attempt_id = str(event.attempt_id)
    replayed = attempt_row(replay.state.attempts[attempt_id])  # its events replayed it
    stored = kept.get(attempt_id)
    if replayed != stored:
        message = f"after its last event: stored {_row(stored)}, replayed {_row(replayed)}"
        raise Diverged(
            Divergence(
                code="attempt_differs",
                sequence=event.reported,
                attempt_id=attempt_id,
                message=message,
            )
        )


def _compare_projection(stored: Projection, replayed: Projection) -> None:
    for table in stored:
        if stored[table] == replayed[table]:
            continue
        only_stored = _first(set(stored[table]) - set(replayed[table]))
        only_replayed = _first(set(replayed[table]) - set(stored[table]))
        message = (
            f"table {table}: stored only {_row(only_stored)}; replayed only {_row(only_replayed)}"
        )
        raise Diverged(
            Divergence(code="projection_differs", sequence=None, attempt_id=None, message=message)
        )


def _first(rows: Iterable[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    return min(rows, default=None, key=repr)


def _row(row: tuple[Any, ...] | None) -> str:
    if row is None:
        return "nothing"
    text = ", ".join(v.decode() if isinstance(v, bytes) else repr(v) for v in row)
    return f"({text[:400]})"


__all__ = ["AuditReport", "Divergence", "audit", "audit_connection"]
