"""runstore.audit: replaying a store's committed event log through the executable model and
requiring the model's projection to equal the stored one (SPEC.md section 16.2).

Rules of this package: the one runtime user of :mod:`runstore.model`; it reads only
through an inspection :class:`~runstore.inspection.snapshot.Snapshot` (never the store's
own files, never writing), and reports the first divergence as a value, never by raising.
Modules: ``slot_rows`` (every row, read one attempt slot at a time), ``stored`` (the rows,
as values), ``partition`` (one slot's rows and the projection it must reach), ``counters``
(the global checks), ``replay`` (events back into model calls) and ``projection`` (the
comparable projection of a database or a model state, which the tests and the crash
simulator share). Memory holds one batch of partitions (:data:`BATCH_SLOTS` slots), never
the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

import attrs
from runstore.canonical import JSON
from runstore.inspection.snapshot import Snapshot
from runstore.model import ModelState
from runstore.model import Refusal
from runstore.model import register_exclusion
from runstore.records import ApplicabilityDecision

from .counters import counter_divergence
from .counters import unreadable_artifact
from .partition import Draft
from .partition import Partition
from .partition import complete
from .partition import draft
from .projection import Projection
from .projection import attempt_row
from .projection import model_projection
from .replay import Diverged
from .replay import Divergence
from .replay import Replay
from .slot_rows import SlotRows
from .slot_rows import artifact_rows
from .slot_rows import observation_rows
from .stored import StoredEvent
from .stored import Unreadable
from .stored import observation
from .stored import record

BATCH_SLOTS = 256
"""Partitions whose artifacts are looked up together (one query per batch)."""


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
    """Slot by slot, holding one batch of partitions at a time. The divergence reported
    is, in this order: the first unreadable row (artifacts first, then slot by slot), the
    first row that belongs to no attempt slot, a gap in the global counters, and the
    partitions' divergence with the smallest event sequence (one without a sequence last;
    with a counter divergence no partition is replayed, only read)."""
    unreadable = unreadable_artifact(connection)
    if unreadable is not None:
        raise Diverged(unreadable)
    counters = counter_divergence(connection)
    rows = SlotRows(connection)
    earliest: Divergence | None = None
    batch: list[Draft] = []
    for slot in rows.slots():
        try:
            drafted = draft(slot)
        except Unreadable as error:
            raise _unreadable(error) from None
        if counters is None:
            batch.append(drafted)
        if len(batch) >= BATCH_SLOTS:
            earliest = _earlier(earliest, _replay_batch(connection, batch))
            batch = []
    earliest = _earlier(earliest, _replay_batch(connection, batch))
    for decision_id, record_json in rows.exclusions():
        refusal = _exclusion_refusal(decision_id, record_json)
        if refusal is not None:
            raise Diverged(refusal)
    stray = rows.first_stray()
    if stray is not None:
        table, row = stray
        code = "registration_refused" if table in ("decisions", "runs") else "projection_differs"
        message = f"table {table}: {_row(row)} belongs to no registered attempt slot"
        raise Diverged(Divergence(code=code, sequence=None, attempt_id=None, message=message))
    if counters is not None:
        raise Diverged(counters)
    if earliest is not None:
        raise Diverged(earliest)


def _exclusion_refusal(decision_id: str, record_json: str) -> Divergence | None:
    """An exclusion registered alone, checked as the model registers one: its record
    rebuilt (its id recomputed) and accepted by ``register_exclusion``."""
    try:
        decision = record(ApplicabilityDecision, decision_id, record_json)
    except Unreadable as error:
        raise _unreadable(error) from None
    _, result = register_exclusion(ModelState(), decision)
    if isinstance(result, Refusal):
        message = f"{decision_id}: {result.code}: {result.message}"
        return Divergence(
            code="registration_refused", sequence=None, attempt_id=None, message=message
        )
    return None


def _unreadable(error: Unreadable) -> Diverged:
    return Diverged(
        Divergence(code="unreadable", sequence=None, attempt_id=None, message=str(error))
    )


def _earlier(first: Divergence | None, second: Divergence | None) -> Divergence | None:
    """The divergence with the smaller event sequence (one without a sequence last; the
    first one on a tie)."""
    if first is None or second is None:
        return first or second

    def key(divergence: Divergence) -> tuple[bool, int]:
        return divergence.sequence is None, divergence.sequence or 0

    return second if key(second) < key(first) else first


def _replay_batch(connection: sqlite3.Connection, drafts: list[Draft]) -> Divergence | None:
    """Look up the batch's artifacts and foreign observations, then replay each partition;
    the earliest divergence."""
    if not drafts:
        return None
    needed: set[str] = set().union(*(drafted.needed for drafted in drafts))
    foreign_ids: set[str] = set().union(*(drafted.foreign for drafted in drafts))
    artifacts = artifact_rows(connection, needed)
    try:
        foreign = {
            key: observation(row[:-1], row[-1])
            for key, row in observation_rows(connection, foreign_ids).items()
        }
        partitions = [complete(drafted, artifacts, foreign) for drafted in drafts]
    except Unreadable as error:
        raise _unreadable(error) from None
    earliest: Divergence | None = None
    for partition in partitions:
        earliest = _earlier(earliest, _replay_partition(partition))
    return earliest


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
