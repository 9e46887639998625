"""Accepted measurements grouped by candidate x problem, with what the runs declare
(SPEC.md section 17.5).

Rules of this file: reads only, on a snapshot's private copy, in two set-based queries
whatever the number of slots, sorted alike by pair and merged as they stream, so memory
holds one pair's values at a time (:func:`iter_groups`). A group is one resolved run (one
candidate x problem pair); its values are the metrics of its accepted measurement slots,
one value per slot and metric, in repetition order. A slot's metrics are merged from the
selected observations of its observation slots in observation-slot order (a later
checkpoint's value wins), as ``status`` merges them; a stream's checkpoints are also kept
one by one for curves. Only the run's ``specification`` is read for parameters and
declared metrics, and ``repetition`` from the attempt slot's ``specification`` (0 when
absent), so nothing here depends on how a runner names its slots. Warm-up slots never
count.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Final

import attrs
from runstore import sql
from runstore.analysis.summary import MAX_MAGNITUDE
from runstore.canonical import JSON
from runstore.inspection.reader import Revision
from runstore.inspection.reader import campaign_of
from runstore.inspection.reader import observation_metrics
from runstore.inspection.reader import scope

DEFAULT_DIRECTION: Final = "lower"


@attrs.frozen(kw_only=True)
class MetricInfo:
    """How to read a metric: which way is better, its unit, its noise threshold (a relative
    spread), as the run declares it; an undeclared metric is ``lower``, no unit, none."""

    name: str
    direction: str = DEFAULT_DIRECTION
    unit: str = ""
    threshold: float | None = None
    threshold_text: str | None = None

    def to_json(self) -> dict[str, JSON]:
        return {
            "direction": self.direction,
            "unit": self.unit,
            "threshold": self.threshold_text,
        }


@attrs.frozen(kw_only=True)
class Value:
    """One accepted slot's value of one metric: its repetition, the exact decimal text the
    store holds, and that text read as a float."""

    repetition: int
    text: str
    number: float
    slot_id: str
    attempt_id: str


@attrs.frozen(kw_only=True)
class CheckpointValue:
    repetition: int
    checkpoint: int
    text: str
    number: float


@attrs.frozen(kw_only=True)
class Group:
    """One candidate x problem pair (one resolved run) of a campaign."""

    campaign: str
    candidate: str
    problem: str
    candidate_id: str
    problem_id: str
    run_id: str
    parameters: Mapping[str, JSON]
    candidate_parameters: Mapping[str, JSON]
    declared: Mapping[str, MetricInfo]
    slots: int
    """Measurement slots of the pair."""
    values: Mapping[str, tuple[Value, ...]]
    """Metric name -> the accepted slots' values, by repetition."""
    checkpoints: Mapping[str, tuple[CheckpointValue, ...]]
    """Metric name -> a stream's per-checkpoint values (empty for other slot kinds)."""

    def numbers(self, metric: str) -> list[float]:
        return [value.number for value in self.values.get(metric, ())]

    def info(self, metric: str) -> MetricInfo:
        return self.declared.get(metric) or MetricInfo(name=metric)

    @property
    def accepted(self) -> int:
        return len({value.slot_id for values in self.values.values() for value in values})


def _campaign_sql(column: str) -> str:
    """:func:`~runstore.inspection.reader.campaign_of` in SQL."""
    return (
        f"CASE WHEN instr({column}, '/') > 0 "
        f"THEN substr({column}, 1, instr({column}, '/') - 1) ELSE '' END"
    )


def _short_sql(column: str) -> str:
    """:func:`_short` in SQL (``length`` and ``instr`` count characters alike)."""
    return (
        f"CASE WHEN instr({column}, '/') > 0 AND instr({column}, '/') < length({column}) "
        f"THEN substr({column}, instr({column}, '/') + 1) ELSE {column} END"
    )


PAIR_ORDER: Final = (
    f"{_campaign_sql('r.candidate_id')}, {_short_sql('r.candidate_id')}, "
    f"{_short_sql('d.problem_id')}, r.id"
)
"""A pair's place: by campaign, candidate and problem (each by code point, which SQLite's
binary collation of UTF-8 text is), then run id; the order of :func:`iter_groups`."""

_RUNS: Final = """
SELECT r.id, r.candidate_id, d.problem_id, r.record_json,
       (SELECT count(*) FROM attempt_slots AS s WHERE s.run_id = r.id AND s.role = 'measurement')
FROM resolved_runs AS r
JOIN applicability_decisions AS d ON d.id = r.decision_id
WHERE 1"""

_WITH_ACCEPTED: Final = """ AND EXISTS (
    SELECT 1 FROM attempt_slots AS s JOIN attempts AS a ON a.slot_id = s.id
    WHERE s.run_id = r.id AND s.role = 'measurement' AND a.state = 'accepted')"""


_ACCEPTED_COLUMNS: Final = """
SELECT r.id, a.slot_id, a.id, os.logical_slot, os.checkpoint_index, o.record_json, s.record_json"""

_ACCEPTED_VALUES: Final = """
JOIN applicability_decisions AS d ON d.id = r.decision_id
JOIN attempt_observation_slots AS m ON m.attempt_slot_id = a.slot_id
JOIN observation_slots AS os ON os.id = m.observation_slot_id
JOIN selected_observations AS so ON so.slot_id = m.observation_slot_id
JOIN observations AS o ON o.id = so.observation_id
WHERE a.state = 'accepted' AND s.role = 'measurement'"""

_ACCEPTED: Final = (
    _ACCEPTED_COLUMNS
    + """
FROM attempts AS a
JOIN attempt_slots AS s ON s.id = a.slot_id
JOIN resolved_runs AS r ON r.id = s.run_id"""
    + _ACCEPTED_VALUES
)
"""Each accepted measurement slot's selected observations with its run and slot records."""

_ACCEPTED_OF_RUNS: Final = (
    _ACCEPTED_COLUMNS
    + """
FROM json_each(:runs) AS chosen
JOIN resolved_runs AS r ON r.id = chosen.value
JOIN attempt_slots AS s ON s.run_id = r.id
JOIN attempts AS a ON a.slot_id = s.id"""
    + _ACCEPTED_VALUES
)
""":data:`_ACCEPTED` for the runs listed in the JSON array parameter ``runs`` (reached by
the slots' index on ``run_id``, not by a scan of every attempt)."""


def specification_of(record_json: str) -> dict[str, JSON]:
    """A run's or an attempt slot's ``specification`` object; ``{}`` when it has none."""
    try:
        document = json.loads(record_json)
    except ValueError:
        return {}
    found = document.get("specification") if isinstance(document, dict) else None
    return found if isinstance(found, dict) else {}


def repetition_of(specification: Mapping[str, JSON]) -> int:
    """An attempt slot's repetition: ``specification.repetition`` when it is an integer of
    at least 0 (never a boolean), else 0."""
    repetition = specification.get("repetition", 0)
    return repetition if type(repetition) is int and repetition >= 0 else 0


def _declared(specification: Mapping[str, JSON]) -> dict[str, MetricInfo]:
    metrics = specification.get("metrics")
    declared: dict[str, MetricInfo] = {}
    if not isinstance(metrics, dict):
        return declared
    for name, item in metrics.items():
        if not isinstance(item, dict):
            continue
        direction = item.get("direction")
        unit = item.get("unit", "")
        threshold = item.get("threshold")
        number = _finite(threshold) if isinstance(threshold, str) else None
        declared[name] = MetricInfo(
            name=name,
            direction=direction if direction in ("lower", "higher") else DEFAULT_DIRECTION,
            unit=unit if isinstance(unit, str) else "",
            threshold=number if number is not None and number > 0 else None,
            threshold_text=threshold if isinstance(threshold, str) and number else None,
        )
    return declared


def _finite(text: str) -> float | None:
    """``text`` as a float the statistics take: finite and at most
    :data:`~runstore.analysis.summary.MAX_MAGNITUDE` in magnitude; None otherwise (left
    out, as a text that is not a number is: a pair's ``n`` then shows fewer values than
    slots, and nothing a worker wrote makes a reading command fail)."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) and abs(number) <= MAX_MAGNITUDE else None


def _short(identifier: str) -> str:
    """``"<campaign>/<name>"`` -> ``"<name>"`` (an id without ``/`` as it is)."""
    return identifier.partition("/")[2] or identifier


def measurement_groups(
    connection: sqlite3.Connection, *, campaign: str | None = None, revision: Revision = None
) -> tuple[Group, ...]:
    """Every candidate x problem pair in view (of one campaign, or all), sorted by campaign,
    candidate and problem, with its accepted measurement values."""
    groups = iter_groups(connection, campaign=campaign, revision=revision)
    return tuple(sorted(groups, key=lambda g: (g.campaign, g.candidate, g.problem, g.run_id)))


def iter_groups(
    connection: sqlite3.Connection,
    *,
    campaign: str | None = None,
    revision: Revision = None,
    limit: int | None = None,
    accepted: bool = False,
) -> Iterator[Group]:
    """The pairs of :func:`measurement_groups`, in its order, one at a time (only the first
    ``limit`` with a limit; only those with an accepted measurement slot when
    ``accepted``): two queries sorted alike by :data:`PAIR_ORDER`, the runs and their
    accepted values, merged as they stream, so memory holds one pair's values."""
    runs, params = scope(_RUNS + (_WITH_ACCEPTED if accepted else ""), campaign, None, "", revision)
    values, _ = scope(_ACCEPTED, campaign, None, "a.slot_id", revision)
    run_rows: Iterable[tuple[str, str, str, str, int]]
    if limit is not None:
        # The first ``limit`` runs, then only their values (by the runs' index on run_id).
        params = {**params, "pair_limit": limit}
        run_rows = sql.execute(
            connection, f"{runs} ORDER BY {PAIR_ORDER} LIMIT :pair_limit", params
        )
        values, params = _ACCEPTED_OF_RUNS, {"runs": json.dumps([row[0] for row in run_rows])}
    else:
        run_rows = sql.iterate(connection, f"{runs} ORDER BY {PAIR_ORDER}", params)
    values += f" ORDER BY {PAIR_ORDER}, a.slot_id, os.logical_slot"
    found = sql.iterate(connection, values, params)
    pending = next(found, None)
    for run_id, candidate_id, problem_id, record_json, slots in run_rows:
        rows = []
        while pending is not None and pending[0] == run_id:
            rows.append(pending)
            pending = next(found, None)
        yield _group(run_id, candidate_id, problem_id, record_json, slots, rows)


def _group(
    run_id: str,
    candidate_id: str,
    problem_id: str,
    record_json: str,
    slots: int,
    rows: list[tuple[str, str, str, str, int | None, str, str]],
) -> Group:
    """One pair from its run's row and its accepted measurement slots' selected
    observations (by slot, then observation slot)."""
    merged: dict[str, dict[str, str]] = {}
    attempt_of: dict[str, str] = {}
    repetition: dict[str, int] = {}
    curves: dict[str, list[CheckpointValue]] = {}
    for _, slot_id, attempt_id, _logical, checkpoint, observation_json, slot_json in rows:
        metrics = observation_metrics(observation_json)
        merged.setdefault(slot_id, {}).update(metrics)
        attempt_of[slot_id] = attempt_id
        if slot_id not in repetition:
            repetition[slot_id] = repetition_of(specification_of(slot_json))
        if checkpoint is None:
            continue
        for name, text in metrics.items():
            number = _finite(text)
            if number is not None:
                curves.setdefault(name, []).append(
                    CheckpointValue(
                        repetition=repetition[slot_id],
                        checkpoint=checkpoint,
                        text=text,
                        number=number,
                    )
                )
    values: dict[str, list[Value]] = {}
    for slot_id, metrics in merged.items():
        for name, text in metrics.items():
            number = _finite(text)
            if number is None:
                continue
            values.setdefault(name, []).append(
                Value(
                    repetition=repetition[slot_id],
                    text=text,
                    number=number,
                    slot_id=slot_id,
                    attempt_id=attempt_of[slot_id],
                )
            )
    specification = specification_of(record_json)
    parameters = specification.get("parameters")
    candidate_parameters = specification.get("candidate_parameters")
    return Group(
        campaign=campaign_of(candidate_id),
        candidate=_short(candidate_id),
        problem=_short(problem_id),
        candidate_id=candidate_id,
        problem_id=problem_id,
        run_id=run_id,
        parameters=parameters if isinstance(parameters, dict) else {},
        candidate_parameters=candidate_parameters if isinstance(candidate_parameters, dict) else {},
        declared=_declared(specification),
        slots=slots,
        values={
            name: tuple(sorted(found, key=lambda v: (v.repetition, v.slot_id)))
            for name, found in sorted(values.items())
        },
        checkpoints={
            name: tuple(sorted(found, key=lambda c: (c.checkpoint, c.repetition)))
            for name, found in sorted(curves.items())
        },
    )
