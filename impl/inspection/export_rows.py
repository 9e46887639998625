"""The rows of ``runstore export``, streamed from an inspection snapshot (SPEC.md section 16.3).

Rules of this file: reads only, on a snapshot's private copy, and never the whole of a
table at once. Every listing is one query in the order of an indexed unique key, its rows
streamed from the SQL seam's cursor (:func:`runstore.sql.iterate`), so the rows in view
are chosen once per file (the revision clause is a subquery over every decision: run per
page, it would cost a pass over the decisions per page), the export is linear in the
store, and memory holds a row (a page of :data:`PAGE_SLOTS` accepted slots for the
index, with their observations). The order of rows, the columns and the JSON line
of an accepted result are pinned here and in SPEC.md; nothing in this file writes a file
or touches an artifact: it names the artifacts each row depends on, and the caller
verifies them. Slot summaries and their merged metrics come from
:func:`runstore.inspection.reader.summarize`, one page of slots at a time; a slot's
repetition and its run's parameters from :mod:`runstore.inspection.export_runs`, and the
line's encoding from :mod:`runstore.inspection.export_json`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import Final

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.canonical import ns_to_json
from runstore.inspection.export_json import LineValue
from runstore.inspection.export_json import encode_line
from runstore.inspection.export_json import metric_numbers
from runstore.inspection.export_runs import ParameterColumns
from runstore.inspection.export_runs import RunParameters
from runstore.inspection.export_runs import run_parameters
from runstore.inspection.export_runs import slot_repetitions
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import View
from runstore.inspection.reader import campaign_of
from runstore.inspection.reader import in_list
from runstore.inspection.reader import observation_metrics
from runstore.inspection.reader import summarize

PAGE_SLOTS: Final = 100
"""Accepted slots per page of ``index.jsonl`` and ``metrics.csv``."""

CsvRow = list[str | int | None]

ATTEMPT_COLUMNS: Final = (
    "campaign",
    "attempt_id",
    "slot_id",
    "candidate_id",
    "problem_id",
    "logical_slot",
    "role",
    "retry_index",
    "state",
    "failure_code",
    "censor_reason",
    "started_at_ns",
    "finished_at_ns",
    "final_artifact_id",
)
OBSERVATION_COLUMNS: Final = (
    "observation_id",
    "observation_slot_id",
    "observation_logical_slot",
    "attempt_id",
    "attempt_slot_id",
    "valid",
    "completion",
    "artifact_id",
    "registered_at_ns",
    "selected",
)
METRIC_COLUMNS: Final = (
    "campaign",
    "slot_id",
    "candidate_id",
    "problem_id",
    "logical_slot",
    "observation_slot_id",
    "observation_logical_slot",
    "observation_id",
    "metric",
    "value",
    "repetition",
)
"""The fixed columns of ``metrics.csv``; the parameter columns follow them."""


@attrs.frozen(kw_only=True)
class ArtifactRef:
    """A registered artifact as an exported row names it."""

    id: str
    path: str
    content_sha256: str
    manifest_sha256: str

    def to_json(self) -> dict[str, JSON]:
        return attrs.asdict(self)  # every field a string, in the order declared


@attrs.frozen(kw_only=True)
class SelectedObservation:
    """The selected observation of one observation slot of an accepted slot, with its own
    metrics (``(name, value)`` sorted by name). Its attempt may be an earlier one of the
    same slot (a stream keeps checkpoints a failed attempt selected)."""

    observation_slot_id: str
    logical_slot: str
    observation_id: str
    attempt_id: str
    artifact: ArtifactRef
    metrics: tuple[tuple[str, str], ...]
    attempt_slot_id: str = ""
    """The attempt slot the observation's row names (its slot's, unless the row was edited
    past the schema's keys)."""

    def to_line(self) -> dict[str, LineValue]:
        """This observation as an element of an ``index.jsonl`` line's ``observations``."""
        texts: dict[str, JSON] = dict(self.metrics)
        return {
            "observation_slot_id": self.observation_slot_id,
            "logical_slot": self.logical_slot,
            "observation_id": self.observation_id,
            "attempt_id": self.attempt_id,
            "artifact": self.artifact.to_json(),
            "metrics": texts,
            "metric_numbers": metric_numbers(self.metrics),
        }


@attrs.frozen(kw_only=True)
class AcceptedResult:
    """One attempt slot with an accepted attempt: its summary (merged metrics included),
    its repetition, its run's parameters, the accepted attempt and the selected
    observations in observation-slot id order."""

    summary: SlotSummary
    repetition: int
    parameters: RunParameters
    attempt_id: str
    retry_index: int
    finished_at_ns: int
    final_artifact: ArtifactRef
    observations: tuple[SelectedObservation, ...]

    def index_line(self) -> bytes:
        """The line of ``index.jsonl``, newline included: canonical JSON, but for the
        ``metric_numbers`` members, JSON numbers written as their stored text."""
        summary = self.summary
        texts: dict[str, JSON] = dict(summary.metrics)
        observations: list[LineValue] = [item.to_line() for item in self.observations]
        line: dict[str, LineValue] = {
            "campaign": campaign_of(summary.candidate_id),
            "slot_id": summary.slot_id,
            "run_id": summary.run_id,
            "candidate_id": summary.candidate_id,
            "problem_id": summary.problem_id,
            "logical_spec_id": summary.logical_spec_id,
            "logical_slot": summary.logical_slot,
            "execution_kind": summary.execution_kind,
            "role": summary.role,
            "attempt_id": self.attempt_id,
            "retry_index": self.retry_index,
            "finished_at_ns": ns_to_json(self.finished_at_ns),
            "final_artifact": self.final_artifact.to_json(),
            "observations": observations,
            "metrics": texts,
            "metric_numbers": metric_numbers(summary.metrics),
        }
        return encode_line(line) + b"\n"

    def metric_rows(self, columns: ParameterColumns) -> Iterator[CsvRow]:
        """The rows of ``metrics.csv``: per observation slot (id order), per metric (name
        order), each ending with the repetition and ``columns``' cells of the run."""
        summary = self.summary
        tail: CsvRow = [self.repetition, *columns.cells(self.parameters)]
        head: CsvRow = [
            campaign_of(summary.candidate_id),
            summary.slot_id,
            summary.candidate_id,
            summary.problem_id,
            summary.logical_slot,
        ]
        for observation in self.observations:
            for name, value in observation.metrics:
                yield [
                    *head,
                    observation.observation_slot_id,
                    observation.logical_slot,
                    observation.observation_id,
                    name,
                    value,
                    *tail,
                ]


# --- listing ------------------------------------------------------------------------------


def _view(view: View) -> tuple[str, dict[str, Any]]:
    """The clause (on ``resolved_runs AS r``) keeping the rows in view, and its parameters:
    the same rule as ``status --campaign``/``--revision``."""
    return view.clause()


def _pages(rows: Iterator[sql.Row], size: int) -> Iterator[list[sql.Row]]:
    """``rows`` in lists of ``size`` (the last one shorter)."""
    page: list[sql.Row] = []
    for row in rows:
        page.append(row)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def _artifact(row: sql.Row, start: int) -> ArtifactRef:
    """The artifact in the four columns from ``start`` (id, path and both digests)."""
    return ArtifactRef(
        id=row[start],
        path=row[start + 1],
        content_sha256=row[start + 2],
        manifest_sha256=row[start + 3],
    )


def _optional_artifact(row: sql.Row, start: int) -> ArtifactRef | None:
    """As :func:`_artifact`, for a LEFT JOIN: None when there is none."""
    return None if row[start] is None else _artifact(row, start)


# --- attempts.csv ------------------------------------------------------------------------------

_ATTEMPTS: Final = """
SELECT a.id, a.slot_id, r.candidate_id, d.problem_id, s.logical_slot, s.role,
       a.retry_index, a.state, a.failure_code, a.censor_reason, a.started_at_ns,
       a.finished_at_ns, a.final_artifact_id,
       f.id, f.path, f.content_sha256, f.manifest_sha256
FROM attempts AS a
JOIN attempt_slots AS s ON s.id = a.slot_id
JOIN resolved_runs AS r ON r.id = s.run_id
JOIN applicability_decisions AS d ON d.id = r.decision_id
LEFT JOIN artifacts AS f ON f.id = a.final_artifact_id
WHERE 1{campaign}
ORDER BY a.slot_id, a.retry_index
"""


def attempt_rows(
    connection: sqlite3.Connection, view: View
) -> Iterator[tuple[CsvRow, ArtifactRef | None]]:
    """Every attempt (any state) of the snapshot or of one campaign, ordered by slot id
    then retry index, as an ``attempts.csv`` row and the final artifact it names."""
    clause, params = _view(view)
    for row in sql.iterate(connection, _ATTEMPTS.format(campaign=clause), params):
        yield [campaign_of(row[2]), *row[:13]], _optional_artifact(row, 13)


# --- observations.csv --------------------------------------------------------------------------

_OBSERVATIONS: Final = """
SELECT o.id, o.slot_id, os.logical_slot, o.attempt_id, o.attempt_slot_id, o.valid,
       o.completion, o.artifact_id, o.registered_at_ns, so.observation_id IS o.id,
       f.id, f.path, f.content_sha256, f.manifest_sha256
FROM observations AS o
JOIN observation_slots AS os ON os.id = o.slot_id
JOIN attempt_slots AS s ON s.id = o.attempt_slot_id
JOIN resolved_runs AS r ON r.id = s.run_id
JOIN artifacts AS f ON f.id = o.artifact_id
LEFT JOIN selected_observations AS so ON so.slot_id = o.slot_id
WHERE 1{campaign}
ORDER BY o.id
"""


def observation_rows(
    connection: sqlite3.Connection, view: View
) -> Iterator[tuple[CsvRow, ArtifactRef]]:
    """Every observation (selected or not) of the snapshot or of one campaign, ordered by
    observation id, as an ``observations.csv`` row and the artifact it names."""
    clause, params = _view(view)
    for row in sql.iterate(connection, _OBSERVATIONS.format(campaign=clause), params):
        yield list(row[:10]), _artifact(row, 10)


# --- index.jsonl and metrics.csv ---------------------------------------------------------------

_ACCEPTED_SLOTS: Final = """
SELECT a.slot_id
FROM attempts AS a
JOIN attempt_slots AS s ON s.id = a.slot_id
JOIN resolved_runs AS r ON r.id = s.run_id
WHERE a.state = 'accepted'{campaign}
ORDER BY a.slot_id
"""

_ACCEPTED_ATTEMPTS: Final = """
SELECT a.slot_id, a.id, a.retry_index, a.finished_at_ns,
       f.id, f.path, f.content_sha256, f.manifest_sha256
FROM attempts AS a
JOIN artifacts AS f ON f.id = a.final_artifact_id
WHERE a.state = 'accepted' AND a.slot_id IN ({ids})
"""

_SELECTED: Final = """
SELECT m.attempt_slot_id, m.observation_slot_id, os.logical_slot, o.id, o.attempt_id,
       f.id, f.path, f.content_sha256, f.manifest_sha256, o.record_json, o.attempt_slot_id
FROM attempt_observation_slots AS m
JOIN observation_slots AS os ON os.id = m.observation_slot_id
JOIN selected_observations AS so ON so.slot_id = m.observation_slot_id
JOIN observations AS o ON o.id = so.observation_id
JOIN artifacts AS f ON f.id = o.artifact_id
WHERE m.attempt_slot_id IN ({ids})
ORDER BY m.attempt_slot_id, m.observation_slot_id
"""


def _observations(
    connection: sqlite3.Connection, slot_ids: Sequence[str]
) -> dict[str, list[SelectedObservation]]:
    """The selected observations of some attempt slots (each with its metrics, read as
    ``status`` reads them), by slot."""
    marks, params = in_list(slot_ids)
    found: dict[str, list[SelectedObservation]] = {}
    for row in sql.execute(connection, _SELECTED.format(ids=marks), params):
        found.setdefault(row[0], []).append(
            SelectedObservation(
                observation_slot_id=row[1],
                logical_slot=row[2],
                observation_id=row[3],
                attempt_id=row[4],
                artifact=_artifact(row, 5),
                metrics=tuple(sorted(observation_metrics(row[9]).items())),
                attempt_slot_id=row[10],
            )
        )
    return found


def _page_results(
    connection: sqlite3.Connection, slot_ids: Sequence[str]
) -> Iterator[AcceptedResult]:
    """The accepted results of one page of slots, in the page's (slot id) order."""
    summaries = {
        summary.slot_id: summary for summary in summarize(connection, slot_ids=slot_ids)[0]
    }
    marks, params = in_list(slot_ids)
    accepted = {
        row[0]: row for row in sql.execute(connection, _ACCEPTED_ATTEMPTS.format(ids=marks), params)
    }
    observations = _observations(connection, slot_ids)
    repetitions = slot_repetitions(connection, slot_ids)
    parameters = run_parameters(connection, [summary.run_id for summary in summaries.values()])
    for slot_id in slot_ids:
        row = accepted[slot_id]
        summary = summaries[slot_id]
        yield AcceptedResult(
            summary=summary,
            repetition=repetitions[slot_id],
            parameters=parameters[summary.run_id],
            attempt_id=row[1],
            retry_index=row[2],
            finished_at_ns=row[3],
            final_artifact=_artifact(row, 4),
            observations=tuple(observations.get(slot_id, ())),
        )


def accepted_results(connection: sqlite3.Connection, view: View) -> Iterator[AcceptedResult]:
    """Every attempt slot with an accepted attempt (warm-ups included), of the snapshot or
    of one campaign, ordered by slot id."""
    clause, params = _view(view)
    slots = sql.iterate(connection, _ACCEPTED_SLOTS.format(campaign=clause), params)
    for page in _pages(slots, PAGE_SLOTS):
        yield from _page_results(connection, [row[0] for row in page])


# --- the artifacts an export names ------------------------------------------------------------

_NAMED: Final = """
SELECT count(*) FROM (
    SELECT f.id FROM attempts AS a
    JOIN artifacts AS f ON f.id = a.final_artifact_id
    JOIN attempt_slots AS s ON s.id = a.slot_id
    JOIN resolved_runs AS r ON r.id = s.run_id
    WHERE 1{campaign}
    UNION
    SELECT f.id FROM observations AS o
    JOIN artifacts AS f ON f.id = o.artifact_id
    JOIN attempt_slots AS s ON s.id = o.attempt_slot_id
    JOIN resolved_runs AS r ON r.id = s.run_id
    WHERE 1{campaign}
    UNION
    SELECT f.id FROM attempts AS a
    JOIN attempt_slots AS s ON s.id = a.slot_id
    JOIN resolved_runs AS r ON r.id = s.run_id
    JOIN attempt_observation_slots AS m ON m.attempt_slot_id = a.slot_id
    JOIN selected_observations AS so ON so.slot_id = m.observation_slot_id
    JOIN observations AS o ON o.id = so.observation_id
    JOIN artifacts AS f ON f.id = o.artifact_id
    WHERE a.state = 'accepted'{campaign})
"""


def named_artifacts(connection: sqlite3.Connection, view: View) -> int:
    """How many distinct artifacts the export's rows name: the final artifacts of
    ``attempts.csv``, the artifacts of ``observations.csv`` and of the selected
    observations ``index.jsonl`` lists (counted by SQLite, no id held here)."""
    clause, params = _view(view)
    return int(sql.scalar(connection, _NAMED.format(campaign=clause), params))
