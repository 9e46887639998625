"""Slot states and the ``status`` report, read from an inspection snapshot.

Rules of this file: reads only, on a :class:`~runstore.inspection.snapshot.Snapshot`'s
private copy, in a handful of set-based queries (one per table family, never one per
slot), so the cost grows linearly with the store. The indexed columns carry everything
except metrics, which come from the selected observations' ``record_json``. Nothing here
assumes the runner's naming conventions: ``<campaign>/<name>`` ids only make the
``campaign`` filter and the per-campaign grouping meaningful, and an id without ``/``
belongs to campaign ``""``. The derivation of a slot's state (SPEC.md section 15.6) lives
here once, in :func:`derive_state`.
"""

from __future__ import annotations

import enum
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Final
from typing import Literal

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.errors import InvalidRecordError
from runstore.inspection.snapshot import Snapshot
from runstore.metrics import stored_metrics

INTERRUPTED_CODE: Final = "interrupted_attempt"
_TERMINAL_VALUES: Final = frozenset(state.value for state in TERMINAL_STATES)


class SlotState(enum.Enum):
    """The state ``status`` reports for an attempt slot."""

    PENDING = "pending"
    RUNNING = "running"
    ACCEPTED = "accepted"
    FAILED = "failed"
    CENSORED = "censored"
    SUPERSEDED = "superseded"
    INTERRUPTED = "interrupted"


_BY_LATEST: Final = {
    AttemptState.FAILED.value: SlotState.FAILED,
    AttemptState.CENSORED.value: SlotState.CENSORED,
    AttemptState.SUPERSEDED.value: SlotState.SUPERSEDED,
}


def derive_state(
    *,
    attempts: int,
    accepted: bool,
    running: bool,
    latest_state: str | None,
    latest_failure_code: str | None,
) -> SlotState:
    """A slot's state: accepted when it has an accepted attempt; else running when an
    attempt is nonterminal; else pending without attempts; else from its latest attempt
    (highest retry index): ``interrupted`` for ``Failed(interrupted_attempt)``, otherwise
    ``failed``, ``censored`` or ``superseded``."""
    if accepted:
        return SlotState.ACCEPTED
    if running:
        return SlotState.RUNNING
    if attempts == 0 or latest_state is None:
        return SlotState.PENDING
    if latest_state == AttemptState.FAILED.value and latest_failure_code == INTERRUPTED_CODE:
        return SlotState.INTERRUPTED
    return _BY_LATEST.get(latest_state, SlotState.RUNNING)


def campaign_of(identifier: str) -> str:
    """``"<campaign>/<rest>"`` -> ``"<campaign>"``; ``""`` for an id without ``/``."""
    head, slash, _rest = identifier.partition("/")
    return head if slash else ""


@attrs.frozen(kw_only=True)
class SlotSummary:
    """One attempt slot as committed in the snapshot. ``metrics`` holds ``(name, value)``
    pairs sorted by name, merged from the ``result["metrics"]`` of the selected
    observations of an accepted slot's observation slots (in observation-slot order, a
    later slot's value winning); it is empty for any other slot."""

    slot_id: str
    run_id: str
    candidate_id: str
    problem_id: str
    logical_spec_id: str
    logical_slot: str
    execution_kind: str
    role: str
    state: SlotState
    attempts: int
    accepted_attempt_id: str | None
    latest_attempt_id: str | None
    latest_state: str | None
    latest_failure_code: str | None
    metrics: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, JSON]:
        return {
            "slot_id": self.slot_id,
            "run_id": self.run_id,
            "candidate_id": self.candidate_id,
            "problem_id": self.problem_id,
            "logical_spec_id": self.logical_spec_id,
            "logical_slot": self.logical_slot,
            "execution_kind": self.execution_kind,
            "role": self.role,
            "state": self.state.value,
            "attempts": self.attempts,
            "accepted_attempt_id": self.accepted_attempt_id,
            "latest_attempt_id": self.latest_attempt_id,
            "latest_state": self.latest_state,
            "latest_failure_code": self.latest_failure_code,
            "metrics": dict(self.metrics),
        }


_STATE_VALUES: Final = tuple(state.value for state in SlotState)


def zero_counts() -> dict[str, int]:
    """Every slot state with the count 0."""
    return dict.fromkeys(_STATE_VALUES, 0)


@attrs.frozen(kw_only=True)
class StatusReport:
    """Counts of slot states per candidate, per problem and in total (every state present,
    zeros included), attempt rows by their ``state`` column, every slot, and the excluded
    ``(candidate_id, problem_id)`` pairs (decisions with ``applicable`` false)."""

    slots: tuple[SlotSummary, ...]
    by_candidate: dict[str, dict[str, int]]
    by_problem: dict[str, dict[str, int]]
    totals: dict[str, int]
    attempts_by_state: dict[str, int]
    excluded: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, JSON]:
        def counts(table: dict[str, dict[str, int]]) -> dict[str, JSON]:
            return {name: dict(by_state) for name, by_state in sorted(table.items())}

        return {
            "slots": [slot.to_json() for slot in self.slots],
            "by_candidate": counts(self.by_candidate),
            "by_problem": counts(self.by_problem),
            "totals": dict(self.totals),
            "attempts_by_state": dict(self.attempts_by_state),
            "excluded": [
                {"candidate_id": candidate, "problem_id": problem}
                for candidate, problem in self.excluded
            ],
        }


# --- queries ---------------------------------------------------------------------------------

_SLOTS: Final = """
SELECT s.id, s.run_id, r.candidate_id, d.problem_id, r.logical_spec_id, s.logical_slot,
       s.execution_kind, s.role
FROM attempt_slots AS s
JOIN resolved_runs AS r ON r.id = s.run_id
JOIN applicability_decisions AS d ON d.id = r.decision_id
"""

_ATTEMPTS: Final = """
SELECT a.slot_id, a.retry_index, a.id, a.state, a.failure_code
FROM attempts AS a
JOIN attempt_slots AS s ON s.id = a.slot_id
JOIN resolved_runs AS r ON r.id = s.run_id
"""

_SELECTED: Final = """
SELECT m.attempt_slot_id, os.logical_slot, o.record_json
FROM attempt_observation_slots AS m
JOIN observation_slots AS os ON os.id = m.observation_slot_id
JOIN selected_observations AS so ON so.slot_id = m.observation_slot_id
JOIN observations AS o ON o.id = so.observation_id
JOIN attempt_slots AS s ON s.id = m.attempt_slot_id
JOIN resolved_runs AS r ON r.id = s.run_id
WHERE EXISTS (
    SELECT 1 FROM attempts AS a WHERE a.slot_id = m.attempt_slot_id AND a.state = 'accepted')
"""

CAMPAIGN_CLAUSE: Final = "substr(r.candidate_id, 1, length(:prefix)) = :prefix"
"""The condition (on ``resolved_runs AS r``, parameter ``prefix`` = ``"<campaign>/"``) that
keeps one campaign's candidates; ``status``, ``export`` and ``report`` share it."""

Revision = int | Literal["all"] | None
"""Which revision of each pair a reader shows (SPEC.md section 15.9): None for each
pair's latest, an int ``k`` for each pair as it stood in revision ``k`` (its latest
revision at most ``k``), ``"all"`` for every revision."""

ALL_REVISIONS: Final = "all"

DECISION_REVISION: Final = (
    "CASE WHEN json_type(record_json, '$.evidence.revision') = 'integer'"
    " AND json_extract(record_json, '$.evidence.revision') >= 0"
    " THEN json_extract(record_json, '$.evidence.revision') ELSE 0 END"
)
"""A decision's revision: its evidence's nonnegative integer ``revision``, else 0 (the rule
:func:`runstore.runner.revisions.revision_of` applies to a record)."""

VIEW_DECISIONS: Final = f"""
SELECT id FROM (
    SELECT id, revision, MAX(revision) OVER (PARTITION BY candidate_id, problem_id) AS newest
    FROM (SELECT id, candidate_id, problem_id, {DECISION_REVISION} AS revision
          FROM applicability_decisions)
    WHERE :view_revision IS NULL OR revision <= :view_revision)
WHERE revision = newest
"""
"""The decisions in view (parameter ``view_revision``: None for the latest, else the
revision): for each candidate x problem, its decisions of the highest revision at most
``view_revision``. One pass over the decisions, whatever the number of slots."""


def revision_clause(
    revision: Revision, column: str = "r.decision_id"
) -> tuple[str, dict[str, object]]:
    """The condition keeping the decisions (``column``) in view of ``revision``, and its
    parameters; ``("", {})`` for every revision."""
    if revision == ALL_REVISIONS:
        return "", {}
    if revision is not None and (type(revision) is not int or revision < 0):
        raise InvalidRecordError("revision must be None, 'all' or an int >= 0")
    return f"{column} IN ({VIEW_DECISIONS})", {"view_revision": revision}


def in_list(ids: Sequence[str], name: str = "id") -> tuple[str, dict[str, str]]:
    """The placeholders of ``IN (...)`` for ``ids`` (``:<name>0, :<name>1, ...``; ``NULL``
    for none) and their values."""
    marks = [f":{name}{i}" for i in range(len(ids))]
    return ", ".join(marks) or "NULL", {f"{name}{i}": value for i, value in enumerate(ids)}


@attrs.frozen
class View:
    """What a reader shows: one campaign's candidates (None: every campaign) in one
    revision (:data:`Revision`)."""

    campaign: str | None = None
    revision: Revision = None

    def clause(self) -> tuple[str, dict[str, object]]:
        """``" AND <condition>"`` on ``resolved_runs AS r`` and its parameters (``""``
        when everything is in view)."""
        query, params = scope("WHERE 1", self.campaign, None, "", self.revision)
        condition = query.removeprefix("WHERE 1")
        return condition, params


def scope(
    base: str,
    campaign: str | None,
    slot_ids: Sequence[str] | None,
    slot_column: str,
    revision: Revision = None,
) -> tuple[str, dict[str, object]]:
    """``base`` (which names ``resolved_runs AS r``) narrowed to the revision in view, a
    campaign's candidates and/or some slots."""
    clauses: list[str] = []
    clause, params = revision_clause(revision)
    if clause:
        clauses.append(clause)
    if campaign is not None:
        clauses.append(CAMPAIGN_CLAUSE)
        params["prefix"] = f"{campaign}/"
    if slot_ids is not None:
        marks, values = in_list(slot_ids, "slot")
        clauses.append(f"{slot_column} IN ({marks})")
        params.update(values)
    if not clauses:
        return base, params
    joiner = " AND " if "WHERE" in base else " WHERE "
    return base + joiner + " AND ".join(clauses), params


def observation_metrics(record_json: str) -> dict[str, str]:
    """The metrics of an observation record's ``result``, read by the metrics format's one
    rule (:func:`runstore.metrics.stored_metrics`); ``{}`` for a record that is not JSON."""
    try:
        record = json.loads(record_json)
    except ValueError:
        return {}
    return stored_metrics(record.get("result") if isinstance(record, dict) else None)


@attrs.define
class _Progress:
    attempts: int = 0
    accepted_id: str | None = None
    running: bool = False
    latest_index: int = -1
    latest_id: str | None = None
    latest_state: str | None = None
    latest_failure_code: str | None = None


def summarize(
    connection: sqlite3.Connection,
    *,
    campaign: str | None = None,
    slot_ids: Sequence[str] | None = None,
    revision: Revision = None,
) -> tuple[tuple[SlotSummary, ...], dict[str, int]]:
    """Slot summaries (sorted by candidate, problem, logical slot, slot id) and attempt
    rows by state, for every slot in view (``revision``) or only a campaign's, or for the
    given ``slot_ids`` whatever their revision. Three queries in all, whatever the number
    of slots."""
    if slot_ids is not None:
        revision = ALL_REVISIONS  # slots named by id are shown whatever their revision
    progress: dict[str, _Progress] = {}
    attempt_states: Counter[str] = Counter()
    query, params = scope(_ATTEMPTS, campaign, slot_ids, "a.slot_id", revision)
    for slot_id, retry_index, attempt_id, state, failure_code in sql.execute(
        connection, query, params
    ):
        entry = progress.setdefault(slot_id, _Progress())
        entry.attempts += 1
        attempt_states[state] += 1
        if state == AttemptState.ACCEPTED.value:
            entry.accepted_id = attempt_id
        elif state not in _TERMINAL_VALUES:
            entry.running = True
        if retry_index > entry.latest_index:
            entry.latest_index = retry_index
            entry.latest_id, entry.latest_state = attempt_id, state
            entry.latest_failure_code = failure_code

    metrics: dict[str, dict[str, str]] = {}
    query, params = scope(_SELECTED, campaign, slot_ids, "m.attempt_slot_id", revision)
    rows = sql.execute(connection, query, params)
    for slot_id, _logical_slot, record_json in sorted(rows, key=lambda row: (row[0], row[1])):
        metrics.setdefault(slot_id, {}).update(observation_metrics(record_json))

    summaries: list[SlotSummary] = []
    query, params = scope(_SLOTS, campaign, slot_ids, "s.id", revision)
    for row in sql.execute(connection, query, params):
        slot_id, run_id, candidate_id, problem_id, spec_id, logical_slot, kind, role = row
        entry = progress.get(slot_id, _Progress())
        state = derive_state(
            attempts=entry.attempts,
            accepted=entry.accepted_id is not None,
            running=entry.running,
            latest_state=entry.latest_state,
            latest_failure_code=entry.latest_failure_code,
        )
        summaries.append(
            SlotSummary(
                slot_id=slot_id,
                run_id=run_id,
                candidate_id=candidate_id,
                problem_id=problem_id,
                logical_spec_id=spec_id,
                logical_slot=logical_slot,
                execution_kind=kind,
                role=role,
                state=state,
                attempts=entry.attempts,
                accepted_attempt_id=entry.accepted_id,
                latest_attempt_id=entry.latest_id,
                latest_state=entry.latest_state,
                latest_failure_code=entry.latest_failure_code,
                metrics=tuple(sorted(metrics.get(slot_id, {}).items()))
                if state is SlotState.ACCEPTED
                else (),
            )
        )
    summaries.sort(key=lambda s: (s.candidate_id, s.problem_id, s.logical_slot, s.slot_id))
    return tuple(summaries), {state: attempt_states[state] for state in sorted(attempt_states)}


def slot_summaries(
    snapshot: Snapshot, *, campaign: str | None = None, revision: Revision = None
) -> tuple[SlotSummary, ...]:
    """Every attempt slot in view (of one campaign: candidate ids starting with
    ``"<campaign>/"``), sorted by (candidate_id, problem_id, logical_slot)."""
    return summarize(snapshot.connection, campaign=campaign, revision=revision)[0]


def _count(summaries: Iterable[SlotSummary], key: str) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for summary in summaries:
        name = summary.candidate_id if key == "candidate" else summary.problem_id
        table.setdefault(name, zero_counts())[summary.state.value] += 1
    return table


def status(
    snapshot: Snapshot, *, campaign: str | None = None, revision: Revision = None
) -> StatusReport:
    """The ``status`` report of the snapshot (or of one campaign's candidates), each pair
    in the revision in view."""
    connection = snapshot.connection
    slots, attempts_by_state = summarize(connection, campaign=campaign, revision=revision)
    totals = zero_counts()
    for summary in slots:
        totals[summary.state.value] += 1
    return StatusReport(
        slots=slots,
        by_candidate=_count(slots, "candidate"),
        by_problem=_count(slots, "problem"),
        totals=totals,
        attempts_by_state=attempts_by_state,
        excluded=excluded_pairs(connection, campaign, revision),
    )


def excluded_pairs(
    connection: sqlite3.Connection, campaign: str | None, revision: Revision
) -> tuple[tuple[str, str], ...]:
    """The ``(candidate_id, problem_id)`` of the decisions in view with ``applicable``
    false (of one campaign's candidates, or all), sorted."""
    query = "SELECT candidate_id, problem_id FROM applicability_decisions WHERE applicable = 0"
    clause, params = revision_clause(revision, "id")
    if clause:
        query += f" AND {clause}"
    if campaign is not None:
        query += " AND substr(candidate_id, 1, length(:prefix)) = :prefix"
        params["prefix"] = f"{campaign}/"
    return tuple(sorted((str(c), str(p)) for c, p in sql.execute(connection, query, params)))
