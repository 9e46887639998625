"""``status``'s slot counts, streamed: each slot's state folded into counts per candidate,
per problem, in total and per failure code as the rows come (SPEC.md sections 15.6 and
17.5), and the per-slot rows of ``status --slots`` from the same query.

Rules of this file: reads only, on a snapshot's private copy, through the SQL seam's
cursor (:func:`runstore.sql.iterate`), so memory holds the counts (one entry per
candidate, problem and failure code), never a row per slot. One query groups each slot's
attempts in SQL (how many, the accepted one, whether one is still running, the latest by
retry index); the state is :func:`runstore.inspection.reader.derive_state`'s, the one rule.
The slots in view are :func:`runstore.inspection.reader.scope`'s (campaign and revision),
as every reader's.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from typing import Any
from typing import Final

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.inspection.reader import Revision
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import derive_state
from runstore.inspection.reader import excluded_pairs
from runstore.inspection.reader import observation_metrics
from runstore.inspection.reader import scope
from runstore.inspection.reader import zero_counts

UNSATISFIED: Final = frozenset(SlotState) - {SlotState.ACCEPTED}
_FAILED: Final = UNSATISFIED - {SlotState.PENDING, SlotState.RUNNING}
"""The unsatisfied states that ended (``status`` lists them by failure code)."""

_GROUPED: Final = """
SELECT s.id AS slot_id, s.run_id AS run_id, r.candidate_id AS candidate_id,
       d.problem_id AS problem_id, r.logical_spec_id AS logical_spec_id,
       s.logical_slot AS logical_slot, s.execution_kind AS execution_kind, s.role AS role,
       count(a.id) AS attempts,
       max(CASE WHEN a.state = 'accepted' THEN a.id END) AS accepted_id,
       max(a.state NOT IN ('accepted', 'censored', 'superseded', 'failed')) AS running,
       max(a.retry_index) AS latest
FROM attempt_slots AS s
JOIN resolved_runs AS r ON r.id = s.run_id
JOIN applicability_decisions AS d ON d.id = r.decision_id
LEFT JOIN attempts AS a ON a.slot_id = s.id"""

_SLOTS: Final = """
SELECT g.slot_id, g.run_id, g.candidate_id, g.problem_id, g.logical_spec_id, g.logical_slot,
       g.execution_kind, g.role, g.attempts, g.accepted_id, g.running,
       l.id, l.state, l.failure_code, l.censor_reason
FROM ({grouped} GROUP BY s.id) AS g
LEFT JOIN attempts AS l ON l.slot_id = g.slot_id AND l.retry_index = g.latest
{order}"""

_ORDER: Final = "ORDER BY g.candidate_id, g.problem_id, g.logical_slot, g.slot_id"

_METRICS: Final = """
SELECT s.id, os.logical_slot, o.record_json
FROM attempt_slots AS s
JOIN resolved_runs AS r ON r.id = s.run_id
JOIN applicability_decisions AS d ON d.id = r.decision_id
JOIN attempt_observation_slots AS m ON m.attempt_slot_id = s.id
JOIN observation_slots AS os ON os.id = m.observation_slot_id
JOIN selected_observations AS so ON so.slot_id = m.observation_slot_id
JOIN observations AS o ON o.id = so.observation_id
WHERE EXISTS (SELECT 1 FROM attempts AS a WHERE a.slot_id = s.id AND a.state = 'accepted')"""

_METRICS_ORDER: Final = (
    "ORDER BY r.candidate_id, d.problem_id, s.logical_slot, s.id, os.logical_slot"
)

_ATTEMPT_STATES: Final = """
SELECT a.state, count(*)
FROM attempts AS a
JOIN attempt_slots AS s ON s.id = a.slot_id
JOIN resolved_runs AS r ON r.id = s.run_id"""


@attrs.frozen(kw_only=True)
class SlotLine(SlotSummary):
    """One attempt slot as ``status --slots`` shows it: a
    :class:`~runstore.inspection.reader.SlotSummary` (``metrics`` only when asked for)
    with its latest attempt's censor reason too (``latest_code``: that attempt's failure
    code, or its censor reason)."""

    latest_censor_reason: str | None

    @property
    def latest_code(self) -> str | None:
        return self.latest_failure_code or self.latest_censor_reason

    def to_json(self) -> dict[str, JSON]:
        """A ``SlotSummary`` document with ``latest_censor_reason`` (``status --json
        --slots``' ``slots``)."""
        return {**super().to_json(), "latest_censor_reason": self.latest_censor_reason}


@attrs.frozen(kw_only=True)
class StatusCounts:
    """Counts of slot states per candidate, per problem and in total (every state present,
    zeros included), attempt rows by state, the excluded ``(candidate_id, problem_id)``
    pairs (decisions with ``applicable`` false) and the unsatisfied slots by state and
    code (``(state, latest failure code or censor reason, slots)``, most first)."""

    by_candidate: dict[str, dict[str, int]]
    by_problem: dict[str, dict[str, int]]
    totals: dict[str, int]
    attempts_by_state: dict[str, int]
    excluded: tuple[tuple[str, str], ...]
    failures: tuple[tuple[str, str | None, int], ...]
    longest_slot: int = 0
    """The length of the longest logical slot name (how wide ``--slots`` draws them)."""
    pairs: int = 0
    """Runs in view with a measurement slot (the pairs ``results`` lists)."""
    incomplete_pairs: int = 0
    """Those with fewer accepted measurement slots than measurement slots."""

    def to_json(self) -> dict[str, JSON]:
        def counts(table: dict[str, dict[str, int]]) -> dict[str, JSON]:
            return {name: dict(by_state) for name, by_state in sorted(table.items())}

        return {
            "by_candidate": counts(self.by_candidate),
            "by_problem": counts(self.by_problem),
            "totals": dict(self.totals),
            "attempts_by_state": dict(self.attempts_by_state),
            "excluded": [
                {"candidate_id": candidate, "problem_id": problem}
                for candidate, problem in self.excluded
            ],
            "failures": [
                {"state": state, "code": code, "slots": count}
                for state, code, count in self.failures
            ],
        }


def _slots_query(
    campaign: str | None, revision: Revision, *, order: str
) -> tuple[str, dict[str, object]]:
    grouped, params = scope(_GROUPED, campaign, None, "", revision)
    return _SLOTS.format(grouped=grouped, order=order), params


def _line(row: tuple[Any, ...], metrics: tuple[tuple[str, str], ...] = ()) -> SlotLine:
    (slot_id, run_id, candidate_id, problem_id, spec_id, logical_slot, kind, role) = row[:8]
    attempts, accepted_id, running, latest_id, latest_state, code, reason = row[8:]
    state = derive_state(
        attempts=attempts,
        accepted=accepted_id is not None,
        running=bool(running),
        latest_state=latest_state,
        latest_failure_code=code,
    )
    return SlotLine(
        slot_id=slot_id,
        run_id=run_id,
        candidate_id=candidate_id,
        problem_id=problem_id,
        logical_spec_id=spec_id,
        logical_slot=logical_slot,
        execution_kind=kind,
        role=role,
        state=state,
        attempts=attempts,
        accepted_attempt_id=accepted_id,
        latest_attempt_id=latest_id,
        latest_state=latest_state,
        latest_failure_code=code,
        latest_censor_reason=reason,
        metrics=metrics if state is SlotState.ACCEPTED else (),
    )


def slot_lines(
    connection: sqlite3.Connection,
    *,
    campaign: str | None = None,
    revision: Revision = None,
    metrics: bool = False,
) -> Iterator[SlotLine]:
    """Every slot in view, sorted by candidate, problem, logical slot and slot id, one at
    a time; with ``metrics``, each accepted slot's merged metrics (a second query in the
    same order, merged as it streams)."""
    query, params = _slots_query(campaign, revision, order=_ORDER)
    rows = sql.iterate(connection, query, params)
    if not metrics:
        yield from map(_line, rows)
        return
    base, metric_params = scope(_METRICS, campaign, None, "", revision)
    found = sql.iterate(connection, f"{base} {_METRICS_ORDER}", metric_params)
    pending = next(found, None)
    for row in rows:
        merged: dict[str, str] = {}
        while pending is not None and pending[0] == row[0]:
            merged.update(observation_metrics(pending[2]))
            pending = next(found, None)
        yield _line(row, tuple(sorted(merged.items())))


def status_counts(
    connection: sqlite3.Connection, *, campaign: str | None = None, revision: Revision = None
) -> StatusCounts:
    """The counts of every slot in view, folded as the rows stream (by run, so a pair's
    measurement slots come together; no row is kept)."""
    by_candidate: dict[str, dict[str, int]] = {}
    by_problem: dict[str, dict[str, int]] = {}
    totals = zero_counts()
    failures: Counter[tuple[str, str | None]] = Counter()
    longest = 0
    pair = _Pairs()
    query, params = _slots_query(campaign, revision, order="ORDER BY g.run_id")
    for row in sql.iterate(connection, query, params):
        # The row's columns as _line reads them, without building a SlotLine per slot.
        run_id, candidate_id, problem_id, logical_slot, role = (
            row[1],
            row[2],
            row[3],
            row[5],
            row[7],
        )
        found = derive_state(
            attempts=row[8],
            accepted=row[9] is not None,
            running=bool(row[10]),
            latest_state=row[12],
            latest_failure_code=row[13],
        )
        state = found.value
        for table, name in ((by_candidate, candidate_id), (by_problem, problem_id)):
            counts = table.get(name)
            if counts is None:
                counts = table[name] = zero_counts()
            counts[state] += 1
        totals[state] += 1
        longest = max(longest, len(logical_slot))
        if found in _FAILED:
            failures[state, row[13] or row[14]] += 1
        pair.add(run_id, role, found)
    pair.close()
    query, params = scope(_ATTEMPT_STATES, campaign, None, "", revision)
    attempts: dict[str, int] = dict(
        sorted(sql.execute(connection, query + " GROUP BY a.state", params))
    )
    return StatusCounts(
        by_candidate=by_candidate,
        by_problem=by_problem,
        totals=totals,
        attempts_by_state={str(state): int(count) for state, count in attempts.items()},
        excluded=excluded_pairs(connection, campaign, revision),
        failures=tuple(
            (state, code, count)
            for (state, code), count in sorted(
                failures.items(), key=lambda item: (-item[1], item[0][0], item[0][1] or "")
            )
        ),
        longest_slot=longest,
        pairs=pair.pairs,
        incomplete_pairs=pair.incomplete,
    )


@attrs.define
class _Pairs:
    """Pairs folded from slot lines that come by run: how many have a measurement slot,
    and how many of those have one not accepted."""

    run_id: str | None = None
    measured: bool = False
    missing: bool = False
    pairs: int = 0
    incomplete: int = 0

    def add(self, run_id: str, role: str, state: SlotState) -> None:
        if run_id != self.run_id:
            self.close()
            self.run_id, self.measured, self.missing = run_id, False, False
        if role == "measurement":
            self.measured = True
            self.missing |= state is not SlotState.ACCEPTED

    def close(self) -> None:
        """Count the run folded so far (once)."""
        if self.run_id is not None and self.measured:
            self.pairs += 1
            self.incomplete += self.missing
        self.run_id = None
