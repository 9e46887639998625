"""Splitting a store's rows by attempt slot, so the audit replays each slot on its own model
state and its cost grows linearly with the store (SPEC.md section 16.2, "Partitions").

Rules of this file: pure over :class:`~runstore.audit.stored.Stored` and a stored
projection; no model calls. Attempt slots never interact in the model except through two
global counters, the event sequence and the fencing token; inside a partition both are
renumbered from 1 in stored order (events by sequence, leases by token), on the stored
rows and the expected projection alike, and :func:`counter_divergence` checks the global
counters themselves: contiguous from 1, and leases created by events in event order.
Every projection row must fall in some partition (:func:`unassigned`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import attrs
from runstore.enums import LeasePurpose
from runstore.model.state import LeaseRow

from .projection import Projection
from .replay import Divergence
from .stored import Stored
from .stored import StoredEvent

Row = tuple[Any, ...]


@attrs.frozen(kw_only=True)
class Partition:
    """One attempt slot: the rows its replay draws from, and the projection it must reach."""

    slot_id: str
    stored: Stored
    expected: Projection


class _Index:
    """Which attempt slot each row belongs to, and the renumbering of the counters."""

    def __init__(self, stored: Stored, projection: Projection) -> None:
        self.slot_of_attempt = {row[0]: row[1] for row in projection["attempts"]}
        self.slot_of_observation_slot = {row[0]: row[1] for row in projection["memberships"]}
        self.slot_of_observation = {row[0]: row[3] for row in projection["observations"]}
        self.slot_of_lease = {
            row[0]: self.slot_of_attempt.get(row[3]) for row in projection["leases"]
        }
        self.slots_of_run: dict[str, list[str]] = defaultdict(list)
        self.slots_of_decision: dict[str, list[str]] = defaultdict(list)
        for attempt_slot in stored.attempt_slots.values():
            self.slots_of_run[attempt_slot.run_id].append(attempt_slot.id)
            run = stored.runs.get(attempt_slot.run_id)
            if run is not None:
                self.slots_of_decision[run.decision_id].append(attempt_slot.id)
        self.sequence: dict[int, int] = {}  # stored sequence -> partition sequence
        self.token: dict[int, int] = {}  # stored token -> partition token
        counts: dict[str | None, int] = defaultdict(int)
        for event in stored.events:
            slot = self.slot_of_attempt.get(event.attempt_id)
            counts[slot] += 1
            self.sequence[event.sequence] = counts[slot]
        counts.clear()
        for row in sorted(projection["leases"], key=lambda row: row[1]):
            slot = self.slot_of_lease.get(row[0])
            counts[slot] += 1
            self.token[row[1]] = counts[slot]

    def slots(self, table: str, row: Row) -> list[str | None]:
        """The attempt slots ``row`` of ``table`` belongs to (a decision or run: several)."""
        if table == "decisions":
            return list(self.slots_of_decision.get(row[0], [None]))
        if table == "runs":
            return list(self.slots_of_run.get(row[0], [None]))
        return [self._slot(table, row)]

    def _slot(self, table: str, row: Row) -> str | None:
        owner: dict[str, Callable[[Row], str | None]] = {
            "attempt_slots": lambda r: r[0],
            "memberships": lambda r: r[1],
            "attempts": lambda r: r[1],
            "transitions": lambda r: self.slot_of_attempt.get(r[0]),
            "events": lambda r: self.slot_of_attempt.get(r[2]),
            "leases": lambda r: self.slot_of_attempt.get(r[3]),
            "claims": lambda r: r[0],
            "observations": lambda r: r[3],
            "selections": lambda r: self.slot_of_observation_slot.get(r[0]),
            "attempt_artifacts": lambda r: self.slot_of_attempt.get(r[0]),
            "observation_artifacts": lambda r: self.slot_of_observation.get(r[0]),
            "leased_artifacts": lambda r: self.slot_of_lease.get(r[0]),
        }
        return owner[table](row)

    def renumbered(self, table: str, row: Row) -> Row:
        """``row`` with its event sequence and fencing token as the partition numbers them."""
        if table == "events":
            return (self.sequence.get(row[0], 0), *row[1:])
        if table == "transitions":
            return (*row[:5], self.sequence.get(row[5], 0))
        if table == "leases":
            return (row[0], self.token.get(row[1], 0), *row[2:])
        return row


def _needed(stored: Stored, attempts: set[str], leases: list[LeaseRow]) -> frozenset[str]:
    """The artifacts a partition's calls name: final artifacts, references, roots, and the
    observation artifacts and references of its events."""
    needed: set[str] = set()
    for attempt_id in attempts:
        final = stored.attempt_final.get(attempt_id)
        if final is not None:
            needed.add(final)
        needed.update(artifact for _, artifact in stored.references.get(attempt_id, []))
    for lease in leases:
        needed.update(stored.rooted.get(lease.id, []))
    return frozenset(needed)


def _event_artifacts(events: list[StoredEvent]) -> set[str]:
    found: set[str] = set()
    for event in events:
        artifact = event.payload.get("artifact_id")
        if isinstance(artifact, str):
            found.add(artifact)
        references = event.payload.get("references")
        if isinstance(references, list):
            for item in references:
                if isinstance(item, dict) and isinstance(item.get("artifact_id"), str):
                    found.add(str(item["artifact_id"]))
    return found


def split(stored: Stored, projection: Projection) -> tuple[list[Partition], Row | None]:
    """The partitions, in attempt slot id order, and the first projection row that belongs
    to no attempt slot (None when every row does)."""
    index = _Index(stored, projection)
    expected: dict[str, Projection] = defaultdict(lambda: {name: [] for name in projection})
    stray: Row | None = None
    for table, rows in projection.items():
        if table == "artifacts":
            continue
        for row in rows:
            for slot in index.slots(table, row):
                if slot is None or slot not in stored.attempt_slots:
                    stray = stray or (table, *row)
                    continue
                expected[slot][table].append(index.renumbered(table, row))
    artifacts = {row[0]: row for row in projection["artifacts"]}
    partitions = []
    for slot_id in sorted(stored.attempt_slots):
        part = _partition(stored, index, slot_id, expected[slot_id], artifacts)
        partitions.append(part)
    return partitions, stray


def _partition(
    stored: Stored,
    index: _Index,
    slot_id: str,
    expected: Projection,
    artifacts: dict[str, Row],
) -> Partition:
    attempts = {row[0] for row in expected["attempts"]}
    leases = {
        attempt_id: [
            attrs.evolve(lease, fencing_token=index.token[lease.fencing_token])
            for lease in stored.leases.get(attempt_id, [])
        ]
        for attempt_id in attempts
    }
    events = [
        attrs.evolve(event, sequence=index.sequence[event.sequence], origin=event.sequence)
        for event in stored.events
        if event.attempt_id in attempts
    ]
    slot = stored.attempt_slots[slot_id]
    run = stored.runs.get(slot.run_id)
    decision = None if run is None else stored.decisions.get(run.decision_id)
    all_leases = [lease for rows in leases.values() for lease in rows]
    needed = _needed(stored, attempts, all_leases) | _event_artifacts(events)
    expected["artifacts"] = [artifacts[key] for key in needed if key in artifacts]
    for table in expected:
        expected[table].sort()
    part = attrs.evolve(
        stored,
        decisions={} if decision is None else {decision.id: decision},
        runs={} if run is None else {run.id: run},
        attempt_slots={slot_id: slot},
        members={slot_id: stored.members.get(slot_id, [])},
        leases=leases,
        events=events,
        needed=needed,
    )
    return Partition(slot_id=slot_id, stored=part, expected=expected)


def counter_divergence(stored: Stored, projection: Projection) -> Divergence | None:
    """The global counters: event sequences and fencing tokens each exactly 1..n, and the
    leases events create (reservations, claimed finalizations) in event order."""
    sequences = [event.sequence for event in stored.events]
    if sequences != list(range(1, len(sequences) + 1)):
        gap = next(i + 1 for i, s in enumerate(sequences) if s != i + 1)
        return _counter(gap, f"event sequences are not contiguous: {gap} is missing")
    tokens = sorted(row[1] for row in projection["leases"])
    if tokens != list(range(1, len(tokens) + 1)):
        gap = next(i + 1 for i, t in enumerate(tokens) if t != i + 1)
        return _counter(None, f"fencing tokens are not contiguous: {gap} is missing")
    last = 0
    for event, lease in _created_leases(stored):
        if lease.fencing_token <= last:
            message = f"lease {lease.id} has token {lease.fencing_token}, not above {last}"
            return _counter(event.sequence, message)
        last = lease.fencing_token
    return None


def _created_leases(stored: Stored) -> Iterator[tuple[StoredEvent, LeaseRow]]:
    for event in stored.events:
        if event.attempt_id is None:
            continue
        if event.kind == "attempt_reserved":
            purpose = LeasePurpose.RESERVATION
        elif event.payload.get("claim") == "claimed":
            purpose = LeasePurpose.FINALIZATION
        else:
            continue
        lease = (
            stored.lease(event.attempt_id, purpose) if event.attempt_id in stored.leases else None
        )
        if lease is not None:
            yield event, lease


def _counter(sequence: int | None, message: str) -> Divergence:
    return Divergence(
        code="event_differs" if sequence is not None else "projection_differs",
        sequence=sequence,
        attempt_id=None,
        message=message,
    )
