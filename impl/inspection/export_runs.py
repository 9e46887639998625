"""What an exported row says about its run and its attempt slot: the run's parameters as
columns, and the slot's repetition (SPEC.md section 16.3, ``metrics.csv`` and
``summary.csv``).

Rules of this file: reads only, on a snapshot's private copy, through the SQL seam. The
parameter columns of an export are fixed before its first row: one query over the runs in
scope collects the distinct names (SQLite's ``json_each``, so memory holds names, never
records). A row's cells then come from its own run's ``specification``, read here by one
rule for every file: ``parameters`` and ``candidate_parameters`` when they are objects,
else none. A parameter value is written as its canonical text (:func:`parameter_text`).
The repetition is :func:`runstore.inspection.measurements.repetition_of`'s (the rule
``status`` and ``compare`` group values by), so nothing depends on how a runner names its
slots.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Final

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.canonical import encode
from runstore.inspection.measurements import repetition_of
from runstore.inspection.measurements import specification_of
from runstore.inspection.reader import View
from runstore.inspection.reader import in_list
from runstore.inspection.reader import scope

PROBLEM_PREFIX: Final = "param."
"""Column name prefix of a problem parameter (``specification.parameters``)."""
CANDIDATE_PREFIX: Final = "candidate_param."
"""Column name prefix of a candidate parameter (``specification.candidate_parameters``)."""

PROBLEM_KEY: Final = "parameters"
CANDIDATE_KEY: Final = "candidate_parameters"


def parameter_text(value: JSON) -> str:
    """A parameter value as a CSV field: a string as it is (a float parameter is already
    its exact decimal text), an integer in decimal, a boolean ``true``/``false``, anything
    else (``null``, an array, an object) as its canonical JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return encode(value).decode("utf-8")


@attrs.frozen(kw_only=True)
class RunParameters:
    """A run's problem and candidate parameters (each empty when the run has none)."""

    problem: Mapping[str, JSON]
    candidate: Mapping[str, JSON]

    @classmethod
    def of(cls, specification: Mapping[str, JSON]) -> RunParameters:
        """The parameters a run's ``specification`` holds (objects only)."""
        problem = specification.get(PROBLEM_KEY)
        candidate = specification.get(CANDIDATE_KEY)
        return cls(
            problem=problem if isinstance(problem, dict) else {},
            candidate=candidate if isinstance(candidate, dict) else {},
        )


NO_PARAMETERS: Final = RunParameters(problem={}, candidate={})


@attrs.frozen(kw_only=True)
class ParameterColumns:
    """The parameter names of an export's scope, each tuple sorted by code point: the
    ``param.<name>`` columns, then the ``candidate_param.<name>`` columns."""

    problem: tuple[str, ...] = ()
    candidate: tuple[str, ...] = ()

    def header(self) -> list[str]:
        return [
            *(PROBLEM_PREFIX + name for name in self.problem),
            *(CANDIDATE_PREFIX + name for name in self.candidate),
        ]

    def cells(self, parameters: RunParameters) -> list[str]:
        """One field per column: the value's :func:`parameter_text`, or empty when the
        run lacks that parameter."""
        return [
            *(_cell(parameters.problem, name) for name in self.problem),
            *(_cell(parameters.candidate, name) for name in self.candidate),
        ]


def _cell(parameters: Mapping[str, JSON], name: str) -> str:
    return parameter_text(parameters[name]) if name in parameters else ""


_NAMES: Final = """
SELECT DISTINCT j.key
FROM resolved_runs AS r, json_each(r.record_json, '$.specification.{key}') AS j
WHERE json_type(r.record_json, '$.specification.{key}') = 'object'
"""


def parameter_columns(connection: sqlite3.Connection, view: View) -> ParameterColumns:
    """Every problem and candidate parameter name of the runs in scope (every run, or the
    runs of ``campaign``'s candidates), whether or not a run has results."""
    found: dict[str, tuple[str, ...]] = {}
    for key in (PROBLEM_KEY, CANDIDATE_KEY):
        query, params = scope(_NAMES.format(key=key), view.campaign, None, "", view.revision)
        found[key] = tuple(sorted(str(row[0]) for row in sql.execute(connection, query, params)))
    return ParameterColumns(problem=found[PROBLEM_KEY], candidate=found[CANDIDATE_KEY])


def run_parameters(
    connection: sqlite3.Connection, run_ids: Sequence[str]
) -> dict[str, RunParameters]:
    """The parameters of some runs, by run id (one query)."""
    marks, params = in_list(sorted(set(run_ids)))
    query = f"SELECT r.id, r.record_json FROM resolved_runs AS r WHERE r.id IN ({marks})"
    return {
        run_id: RunParameters.of(specification_of(record_json))
        for run_id, record_json in sql.execute(connection, query, params)
    }


def slot_repetitions(connection: sqlite3.Connection, slot_ids: Sequence[str]) -> dict[str, int]:
    """The repetition of some attempt slots, by slot id (one query)."""
    marks, params = in_list(sorted(set(slot_ids)))
    query = f"SELECT s.id, s.record_json FROM attempt_slots AS s WHERE s.id IN ({marks})"
    return {
        slot_id: repetition_of(specification_of(record_json))
        for slot_id, record_json in sql.execute(connection, query, params)
    }
