"""The rows of ``summary.csv``: each candidate x problem x metric's statistics, as ``status``
prints them (SPEC.md section 16.3, ``summary.csv``, and section 17.5).

Rules of this file: reads only, and computes nothing of its own: the pairs and their
statistics are :func:`runstore.inspection.results.pair_results`, the one source
``status`` and ``report`` read too, so the three never disagree. This file only lays them
out as rows: a double as Python's ``repr`` (the shortest text that reads back to the same
double), ``None`` as an empty field, a boolean as ``0``/``1``, the declared threshold as
its stored decimal text. Unlike the other files' listings this one is not paged: a pair's
statistics need all its values at once, so the pairs stream one at a time
(:func:`~runstore.inspection.results.iter_pair_results`), as ``status --json``'s do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Final

from runstore.inspection.export_rows import CsvRow
from runstore.inspection.export_runs import ParameterColumns
from runstore.inspection.export_runs import RunParameters
from runstore.inspection.reader import View
from runstore.inspection.results import iter_pair_results

SUMMARY_COLUMNS: Final = (
    "campaign",
    "candidate",
    "problem",
    "candidate_id",
    "problem_id",
    "run_id",
    "slots",
    "accepted",
    "metric",
    "direction",
    "unit",
    "threshold",
    "n",
    "mean",
    "stdev",
    "median",
    "mad",
    "min",
    "max",
    "ci_low",
    "ci_high",
    "ci_level",
    "outliers",
    "unstable",
    "reasons",
)
"""The fixed columns of ``summary.csv``; the parameter columns follow them."""

REASON_SEPARATOR: Final = "; "
"""Between the phrases of ``reasons`` (no phrase holds it)."""


def number_text(value: float | None) -> str | None:
    """A statistic as a field: ``repr`` of the double (``2.5``, ``1e-07``, ``-0.0``), or
    None (an empty field) for a statistic that is not defined (``stdev`` of one value)."""
    return None if value is None else repr(float(value))


def summary_rows(
    connection: sqlite3.Connection, view: View, columns: ParameterColumns
) -> Iterator[CsvRow]:
    """One row per pair (sorted by campaign, candidate, problem and run id) and metric
    (sorted by name) that has at least one value, of every campaign or of ``campaign``."""
    for result in iter_pair_results(connection, campaign=view.campaign, revision=view.revision):
        group = result.group
        head: CsvRow = [
            group.campaign,
            group.candidate,
            group.problem,
            group.candidate_id,
            group.problem_id,
            group.run_id,
            group.slots,
            group.accepted,
        ]
        parameters = RunParameters(problem=group.parameters, candidate=group.candidate_parameters)
        tail = columns.cells(parameters)
        for metric in result.metrics:
            info, summary = metric.info, metric.summary
            yield [
                *head,
                info.name,
                info.direction,
                info.unit,
                info.threshold_text,
                summary.n,
                number_text(summary.mean),
                number_text(summary.stdev),
                number_text(summary.median),
                number_text(summary.mad),
                number_text(summary.minimum),
                number_text(summary.maximum),
                number_text(summary.ci_low),
                number_text(summary.ci_high),
                number_text(summary.ci_level),
                summary.outliers,
                int(summary.unstable),
                REASON_SEPARATOR.join(summary.reasons),
                *tail,
            ]
