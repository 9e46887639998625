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

import itertools
import json
import sqlite3
from collections.abc import Sequence

import attrs
from runstore import outcome_json
from runstore import sql
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.errors import DatabaseError
from runstore.errors import IllegalTransitionError
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Reference
from runstore.requests import TerminalOutcome


@attrs.frozen(kw_only=True)
class _Attempt:
    slot_id: str
    retry_index: int
    finalizing_revision: int
    started_at_ns: int


@attrs.frozen(kw_only=True)
class _Observation:
    """One observation row with its ``(role, artifact id)`` references, as read."""

    record_json: str
    artifact_id: str
    references: tuple[tuple[str, str], ...]


@attrs.frozen(kw_only=True)
class _Reads:
    """Every row a snapshot (and the document's dependencies) is built from, read by three
    statements; nothing is checked or decoded yet. ``head`` is the attempt slot's
    ``run_id`` and record, the run's ``decision_id`` and record and the decision's record,
    NULL from the first missing row on; ``artifacts`` maps each artifact id read to its
    indexed columns."""

    head: sql.Row
    members: tuple[str, ...]
    produced: tuple[_Observation, ...]
    selected: tuple[_Observation, ...] | None
    artifacts: dict[str, sql.Row]


_HEAD_SQL = (
    "SELECT a.slot_id, a.retry_index, a.state, a.revision, a.started_at_ns, "
    "s.run_id, s.record_json, r.decision_id, r.record_json, d.record_json "
    "FROM attempts AS a "
    "LEFT JOIN attempt_slots AS s ON s.id = a.slot_id "
    "LEFT JOIN resolved_runs AS r ON r.id = s.run_id "
    "LEFT JOIN applicability_decisions AS d ON d.id = r.decision_id "
    "WHERE a.id = ?"
)
"""The attempt with its slot, run and decision records, by primary keys: one row, or none
when the attempt is missing (a missing slot, run or decision leaves NULL columns)."""

_RECORDS_SQL = (
    "SELECT 0, s.id, s.record_json, NULL, NULL, NULL "
    "FROM attempt_observation_slots AS m JOIN observation_slots AS s "
    "ON s.id = m.observation_slot_id WHERE m.attempt_slot_id = ?1 "
    "UNION ALL "
    "SELECT 1, o.id, o.record_json, o.artifact_id, r.role, r.artifact_id "
    "FROM observations AS o LEFT JOIN observation_artifacts AS r ON r.observation_id = o.id "
    "WHERE o.attempt_id = ?2 "
    "UNION ALL "
    "SELECT 2, m.observation_slot_id, o.record_json, o.artifact_id, r.role, r.artifact_id "
    "FROM attempt_observation_slots AS m "
    "JOIN selected_observations AS x ON x.slot_id = m.observation_slot_id "
    "JOIN observations AS o ON o.id = x.observation_id "
    "LEFT JOIN observation_artifacts AS r ON r.observation_id = o.id "
    "WHERE ?3 AND m.attempt_slot_id = ?1 "
    "ORDER BY 1, 2, 5, 6"
)
"""Three parts told apart by the first column, each keyed by the second: 0, the
observation slots the attempt slot owns (by id); 1, the observations the attempt produced
(by id); 2, only when ``?3`` is true, the selected observation of each owned observation
slot that has one (by that slot's id). An observation comes as one row per reference
(ordered by role, then artifact id), or one row with NULL reference columns when it has
none; keys are unique within a part (primary keys), so a part's entry is its run of rows
with one key."""

_ARTIFACTS_SQL = (
    "SELECT id, kind, path, content_sha256, manifest_sha256 FROM artifacts "
    "WHERE id IN (SELECT value FROM json_each(?))"
)
"""The indexed columns of every artifact whose id is in the JSON array ``?``: one
statement with a fixed text however many artifacts a snapshot names."""


def _record(text: str) -> dict[str, JSON]:
    return decode_object(text.encode("utf-8"))


def _attempt(connection: sqlite3.Connection, attempt_id: str) -> tuple[_Attempt, sql.Row]:
    """The attempt's identity and reservation start, and the revision it had while
    finalizing: its current one while finalizing, the one before its terminal step after;
    with the rest of :data:`_HEAD_SQL`'s row (see :attr:`_Reads.head`)."""
    rows = sql.execute(connection, _HEAD_SQL, (attempt_id,))
    if len(rows) != 1:
        raise DatabaseError(f"attempt {attempt_id} is not registered")
    slot_id, retry_index, state, revision, started_at_ns = rows[0][:5]
    current = AttemptState(state)
    if current is AttemptState.FINALIZING:
        finalizing = revision
    elif current in TERMINAL_STATES:
        finalizing = revision - 1
    else:
        raise IllegalTransitionError(
            f"attempt {attempt_id} is {state}: only a finalizing or terminal attempt has an "
            "outcome document"
        )
    attempt = _Attempt(
        slot_id=slot_id,
        retry_index=retry_index,
        finalizing_revision=finalizing,
        started_at_ns=started_at_ns,
    )
    return attempt, rows[0][5:]


def _read(
    connection: sqlite3.Connection,
    attempt_id: str,
    attempt: _Attempt,
    head: sql.Row,
    outcome: TerminalOutcome,
    dependencies: Sequence[str],
) -> _Reads:
    """Read the snapshot's records (:data:`_RECORDS_SQL`), then every artifact they and
    ``dependencies`` name (:data:`_ARTIFACTS_SQL`)."""
    with_selection = isinstance(outcome, Accepted | Censored)
    rows = sql.execute(connection, _RECORDS_SQL, (attempt.slot_id, attempt_id, int(with_selection)))
    members: list[str] = []
    parts: dict[int, list[_Observation]] = {1: [], 2: []}
    for (part, _key), group in itertools.groupby(rows, key=lambda row: (row[0], row[1])):
        first, *rest = group
        if part == 0:
            members.append(first[2])
            continue
        references = tuple((role, ref) for *_, role, ref in (first, *rest) if role is not None)
        parts[part].append(
            _Observation(record_json=first[2], artifact_id=first[3], references=references)
        )
    wanted = set(dependencies)
    for observation in (*parts[1], *parts[2]):
        wanted.add(observation.artifact_id)
        wanted.update(ref for _, ref in observation.references)
    found = sql.execute(connection, _ARTIFACTS_SQL, (json.dumps(sorted(wanted)),))
    return _Reads(
        head=head,
        members=tuple(members),
        produced=tuple(parts[1]),
        selected=tuple(parts[2]) if with_selection else None,
        artifacts={row[0]: row for row in found},
    )


def _artifact(reads: _Reads, artifact_id: str) -> dict[str, JSON]:
    """The artifact's entry (its indexed columns, never its verification time)."""
    row = reads.artifacts.get(artifact_id)
    if row is None:
        raise DatabaseError(f"artifact {artifact_id} is not registered")
    return outcome_json.artifact_entry(*row)


def _observations(reads: _Reads, observations: Sequence[_Observation]) -> list[dict[str, JSON]]:
    """Observation entries: each with its own directory's entry and its references."""
    return [
        outcome_json.observation_entry(
            _record(observation.record_json),
            _artifact(reads, observation.artifact_id),
            [(role, _artifact(reads, referenced)) for role, referenced in observation.references],
        )
        for observation in observations
    ]


def _snapshot(slot_id: str, reads: _Reads) -> dict[str, JSON]:
    """The snapshot object from ``reads``, each missing row refused and each record decoded
    (:func:`runstore.canonical.decode_object`: stored records are checked as input) in the
    order the records were once read one by one."""
    run_id, slot_record, decision_id, run_record, decision_record = reads.head
    if run_id is None:
        raise DatabaseError(f"attempt slot {slot_id} is not registered")
    if decision_id is None:
        raise DatabaseError(f"resolved run {run_id} is not registered")
    if decision_record is None:
        raise DatabaseError(f"applicability decision {decision_id} is not registered")
    selected = None if reads.selected is None else _observations(reads, reads.selected)
    return outcome_json.snapshot_document(
        decision=_record(decision_record),
        run=_record(run_record),
        attempt_slot=_record(slot_record),
        observation_slots=[_record(record) for record in reads.members],
        produced=_observations(reads, reads.produced),
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
    attempt, head = _attempt(connection, attempt_id)
    reads = _read(connection, attempt_id, attempt, head, outcome, ())
    return _snapshot(attempt.slot_id, reads)


def outcome_document(
    connection: sqlite3.Connection,
    attempt_id: str,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    finished_at_ns: int,
) -> bytes:
    """The canonical bytes of the attempt's ``outcome.json`` for ``outcome``, its
    dependency ``references`` (any order) and the immutable
    finish time ``finished_at_ns``, with :func:`snapshot` as its ``snapshot``."""
    attempt, head = _attempt(connection, attempt_id)
    named = [reference.artifact_id for reference in references]
    reads = _read(connection, attempt_id, attempt, head, outcome, named)
    dependencies = [(r.role, _artifact(reads, r.artifact_id)) for r in references]
    return outcome_json.outcome_document(
        attempt_id=attempt_id,
        slot_id=attempt.slot_id,
        retry_index=attempt.retry_index,
        finalizing_revision=attempt.finalizing_revision,
        outcome=outcome,
        started_at_ns=attempt.started_at_ns,
        finished_at_ns=finished_at_ns,
        dependencies=dependencies,
        snapshot=_snapshot(attempt.slot_id, reads),
    )
