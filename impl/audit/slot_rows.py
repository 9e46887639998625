"""The audit's reading: every committed row, one attempt slot at a time, so memory holds one
slot's rows whatever the store's size (SPEC.md section 16.2, "Partitions").

Rules of this file: reads only, through the connection it is given (an inspection
snapshot's private copy, or a read-only connection in the tests); no model, no decoding.
Each table is one query whose rows come ordered by the attempt slot they belong to (its
first column, ``NULL`` when the chain of keys that leads there is broken), driven through
the schema's indexes where they exist and sorted by SQLite otherwise; :class:`SlotRows`
merges the queries like a merge join, so each slot's rows are read once and every row
that belongs to no attempt slot is set aside as a stray (with the rows anti-joins find
whose owner is missing). A row's owner is the one SPEC's partition rule names: an attempt
slot's own rows by its id, an attempt's rows by its slot, an observation's by its
``attempt_slot_id``, a selection's by its observation slot's membership, a lease's roots
by the lease's attempt, a run by the ``run_id`` of a slot's record and a decision by the
``decision_id`` of that run's record. Rows keep the projection's columns
(:mod:`runstore.audit.projection`), so the expected projection of a partition is made of
them as they are.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any
from typing import Final

import attrs

Row = tuple[Any, ...]

_SLOT_RUN: Final = (
    "CASE WHEN json_valid(s.record_json) THEN json_extract(s.record_json, '$.run_id') END"
)
_RUN_DECISION: Final = (
    "CASE WHEN json_valid(r.record_json) THEN json_extract(r.record_json, '$.decision_id') END"
)
_ATTEMPT: Final = (
    "a.id, a.slot_id, a.retry_index, a.state, a.revision, a.started_at_ns, a.updated_at_ns, "
    "a.finished_at_ns, a.failure_code, a.censor_reason, a.final_artifact_id, "
    "CAST(a.record_json AS BLOB)"
)
_TRANSITION: Final = "t.attempt_id, t.revision, t.from_state, t.to_state, t.at_ns, t.event_sequence"
_EVENT: Final = "e.sequence, e.kind, e.attempt_id, e.at_ns, CAST(e.payload_json AS BLOB)"
_LEASE: Final = (
    "l.id, l.fencing_token, l.owner_token, l.attempt_id, l.purpose, l.acquired_at_ns, "
    "l.expires_at_ns, l.released_at_ns, l.staging_path"
)
_OBSERVATION: Final = (
    "o.id, o.slot_id, o.attempt_id, o.attempt_slot_id, o.valid, o.completion, o.artifact_id, "
    "o.registered_at_ns"
)
_NO_ATTEMPT: Final = "NOT EXISTS (SELECT 1 FROM attempts AS a WHERE a.id = {column})"

SLOTS: Final = f"""
SELECT s.id, s.record_json, r.id, r.record_json, d.id, d.record_json
FROM attempt_slots AS s
LEFT JOIN resolved_runs AS r ON r.id = {_SLOT_RUN}
LEFT JOIN applicability_decisions AS d ON d.id = {_RUN_DECISION}
ORDER BY s.id
"""
"""Each attempt slot with its record, its run's and that run's decision's (NULL when
missing)."""

OWNED: Final[dict[str, tuple[str, str | None]]] = {
    "memberships": (
        "SELECT m.attempt_slot_id, m.observation_slot_id, m.attempt_slot_id, o.record_json "
        "FROM attempt_observation_slots AS m "
        "LEFT JOIN observation_slots AS o ON o.id = m.observation_slot_id "
        "ORDER BY m.attempt_slot_id",
        None,
    ),
    "attempts": (f"SELECT a.slot_id, {_ATTEMPT} FROM attempts AS a ORDER BY a.slot_id", None),
    "transitions": (
        f"SELECT a.slot_id, {_TRANSITION} FROM attempts AS a "
        "JOIN attempt_transitions AS t ON t.attempt_id = a.id ORDER BY a.slot_id",
        f"SELECT {_TRANSITION} FROM attempt_transitions AS t "
        f"WHERE {_NO_ATTEMPT.format(column='t.attempt_id')}",
    ),
    "events": (
        f"SELECT a.slot_id, {_EVENT} FROM attempts AS a "
        "JOIN events AS e ON e.attempt_id = a.id ORDER BY a.slot_id, e.sequence",
        f"SELECT {_EVENT} FROM events AS e "
        f"WHERE e.attempt_id IS NULL OR {_NO_ATTEMPT.format(column='e.attempt_id')}",
    ),
    "leases": (
        f"SELECT a.slot_id, {_LEASE} FROM attempts AS a "
        "JOIN leases AS l ON l.attempt_id = a.id ORDER BY a.slot_id",
        f"SELECT {_LEASE} FROM leases AS l "
        f"WHERE l.attempt_id IS NULL OR {_NO_ATTEMPT.format(column='l.attempt_id')}",
    ),
    "claims": (
        "SELECT slot_id, slot_id, attempt_id, lease_id, claimed_at_ns "
        "FROM finalization_claims ORDER BY slot_id",
        None,
    ),
    "observations": (
        f"SELECT o.attempt_slot_id, {_OBSERVATION}, o.record_json FROM observations AS o "
        "ORDER BY o.attempt_slot_id",
        None,
    ),
    "selections": (
        "SELECT m.attempt_slot_id, x.slot_id, x.observation_id, x.selected_at_ns "
        "FROM attempt_observation_slots AS m "
        "JOIN selected_observations AS x ON x.slot_id = m.observation_slot_id "
        "ORDER BY m.attempt_slot_id",
        "SELECT x.slot_id, x.observation_id, x.selected_at_ns FROM selected_observations AS x "
        "WHERE NOT EXISTS (SELECT 1 FROM attempt_observation_slots AS m "
        "WHERE m.observation_slot_id = x.slot_id)",
    ),
    "attempt_artifacts": (
        "SELECT a.slot_id, x.attempt_id, x.role, x.artifact_id FROM attempts AS a "
        "JOIN attempt_artifacts AS x ON x.attempt_id = a.id ORDER BY a.slot_id",
        "SELECT x.attempt_id, x.role, x.artifact_id FROM attempt_artifacts AS x "
        f"WHERE {_NO_ATTEMPT.format(column='x.attempt_id')}",
    ),
    "observation_artifacts": (
        "SELECT o.attempt_slot_id, x.observation_id, x.role, x.artifact_id "
        "FROM observations AS o JOIN observation_artifacts AS x ON x.observation_id = o.id "
        "ORDER BY o.attempt_slot_id",
        "SELECT x.observation_id, x.role, x.artifact_id FROM observation_artifacts AS x "
        "WHERE NOT EXISTS (SELECT 1 FROM observations AS o WHERE o.id = x.observation_id)",
    ),
    "leased_artifacts": (
        "SELECT a.slot_id, x.lease_id, x.artifact_id FROM attempts AS a "
        "JOIN leases AS l ON l.attempt_id = a.id "
        "JOIN leased_artifacts AS x ON x.lease_id = l.id ORDER BY a.slot_id",
        "SELECT x.lease_id, x.artifact_id FROM leased_artifacts AS x WHERE NOT EXISTS ("
        "SELECT 1 FROM leases AS l JOIN attempts AS a ON a.id = l.attempt_id "
        "WHERE l.id = x.lease_id)",
    ),
}
"""Table -> (its rows keyed by owning slot, in slot order; the rows whose owner's key is
missing, or None when the key is the table's own column). A row's columns after the key
are the projection's; ``memberships`` and ``observations`` add the record of the
observation slot (NULL when missing) or observation, dropped from the projection row."""

EXTRA_COLUMNS: Final = {"memberships": 1, "observations": 1, "decisions": 2}
"""Trailing columns of a row that are not the projection's (a stray decision keeps its
``applicable`` column and record: an exclusion belongs to no slot)."""

UNOWNED: Final = {
    "decisions": (
        "SELECT d.id, d.applicable, d.record_json FROM applicability_decisions AS d "
        "WHERE d.id NOT IN ("
        f"SELECT {_RUN_DECISION} FROM attempt_slots AS s "
        f"JOIN resolved_runs AS r ON r.id = {_SLOT_RUN} WHERE {_RUN_DECISION} IS NOT NULL)"
    ),
    "runs": (
        "SELECT r.id FROM resolved_runs AS r WHERE r.id NOT IN ("
        f"SELECT {_SLOT_RUN} FROM attempt_slots AS s WHERE {_SLOT_RUN} IS NOT NULL)"
    ),
}
"""Decisions and runs no attempt slot's record leads to (a decision with its
``applicable`` column and record, for :meth:`SlotRows.exclusions`)."""

STRAY_ORDER: Final = (
    "decisions",
    "runs",
    "memberships",
    "attempts",
    "transitions",
    "events",
    "leases",
    "claims",
    "observations",
    "selections",
    "attempt_artifacts",
    "observation_artifacts",
    "leased_artifacts",
)
"""The tables in the projection's order, in which a stray row is looked for."""


@attrs.define
class SlotRecords:
    """One attempt slot's rows: its record, its run's and decision's (None when missing),
    and the projection rows of every table it owns (``memberships`` and ``observations``
    rows end with their record)."""

    slot_id: str
    slot_json: str
    run: tuple[str, str] | None
    decision: tuple[str, str] | None
    owned: dict[str, list[Row]]


def _blob(row: Row) -> Row:
    return tuple(bytes(value) if isinstance(value, bytes) else value for value in row)


class _Keyed:
    """One query's rows, ordered by their first column (the owning slot id), taken slot by
    slot; a row whose key matches no slot it is asked for is a stray."""

    def __init__(self, rows: Iterator[Row], strays: list[Row]) -> None:
        self._rows = rows
        self._strays = strays
        self._next = next(self._rows, None)

    def take(self, slot_id: str | None) -> list[Row]:
        """The rows of ``slot_id`` (every row left when None: strays)."""
        taken: list[Row] = []
        while self._next is not None:
            key = self._next[0]
            if key is not None and slot_id is not None and key > slot_id:
                break
            if key is not None and key == slot_id:
                taken.append(_blob(self._next[1:]))
            else:
                self._strays.append(_blob(self._next[1:]))
            self._next = next(self._rows, None)
        return taken


class SlotRows:
    """Every attempt slot's rows in slot id order (:meth:`slots`), then the strays
    (:attr:`strays`: table -> rows that belong to no attempt slot, complete once
    :meth:`slots` is exhausted)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self.strays: dict[str, list[Row]] = {table: [] for table in STRAY_ORDER}

    def slots(self) -> Iterator[SlotRecords]:
        connection = self._connection
        keyed = {
            table: _Keyed(iter(connection.execute(query)), self.strays[table])
            for table, (query, _) in OWNED.items()
        }
        for slot_id, slot_json, run_id, run_json, decision_id, decision_json in connection.execute(
            SLOTS
        ):
            yield SlotRecords(
                slot_id=slot_id,
                slot_json=slot_json,
                run=None if run_id is None else (run_id, run_json),
                decision=None if decision_id is None else (decision_id, decision_json),
                owned={table: stream.take(slot_id) for table, stream in keyed.items()},
            )
        for table, stream in keyed.items():
            stream.take(None)
            unowned = OWNED[table][1]
            if unowned is not None:
                self.strays[table].extend(_blob(row) for row in connection.execute(unowned))
        for table, query in UNOWNED.items():
            self.strays[table].extend(_blob(row) for row in connection.execute(query))

    def exclusions(self) -> list[tuple[str, str]]:
        """Take the stray decisions stored as not applicable out of the strays: an exclusion
        is registered alone and belongs to no slot. Returns their ids and records, for the
        caller to check."""
        kept: list[Row] = []
        found: list[Row] = []
        for row in self.strays["decisions"]:
            (found if row[1] == 0 else kept).append(row)
        self.strays["decisions"] = kept
        return [(row[0], row[2]) for row in found]

    def first_stray(self) -> tuple[str, Row] | None:
        """The first stray row, in :data:`STRAY_ORDER` and each table's row order (the
        projection row, without a keyed row's extra columns)."""
        for table in STRAY_ORDER:
            extra = EXTRA_COLUMNS.get(table, 0)
            rows = [row[: len(row) - extra] for row in self.strays[table]]
            if rows:
                return table, min(rows, key=_order)
        return None


def _order(row: Row) -> tuple[tuple[bool, Any], ...]:
    """Rows ordered as sorted tuples, a None before any value (so rows with NULLs compare)."""
    return tuple((value is not None, value) for value in row)


_LOOKUP_CHUNK: Final = 5000
"""Ids per lookup query (SQLite allows 32,766 parameters)."""


def _lookup(connection: sqlite3.Connection, query: str, ids: set[str]) -> list[Row]:
    """``query`` (whose ``{marks}`` is the id list) over ``ids``, in chunks."""
    ordered = sorted(ids)
    found: list[Row] = []
    for start in range(0, len(ordered), _LOOKUP_CHUNK):
        chunk = ordered[start : start + _LOOKUP_CHUNK]
        marks = ", ".join("?" * len(chunk))
        found.extend(_blob(row) for row in connection.execute(query.format(marks=marks), chunk))
    return found


def artifact_rows(connection: sqlite3.Connection, ids: set[str]) -> dict[str, Row]:
    """The ``artifacts`` projection rows of ``ids`` that exist, by id (a batch of
    partitions' needs: bounded by the batch, not the store)."""
    query = (
        "SELECT id, kind, path, content_sha256, manifest_sha256, verified_at_ns "
        "FROM artifacts WHERE id IN ({marks})"
    )
    return {row[0]: row for row in _lookup(connection, query, ids)}


def observation_rows(connection: sqlite3.Connection, ids: set[str]) -> dict[str, Row]:
    """The ``observations`` projection rows of ``ids`` that exist, each ending with its
    record, by id: observations an event names outside its own partition."""
    query = f"SELECT {_OBSERVATION}, o.record_json FROM observations AS o WHERE o.id IN ({{marks}})"
    return {row[0]: row for row in _lookup(connection, query, ids)}
