"""Statistics of each candidate x problem pair's accepted repetitions (SPEC.md section 17.5).

Documents here (``to_json``) are plain JSON with floats (the statistics), not canonical
JSON: they are printed, never hashed.

Rules of this file: values only, from :mod:`runstore.inspection.measurements`' groups and
:mod:`runstore.analysis.summary`'s statistics; ``status``, ``report`` and ``export``'s
``summary.csv`` all read them from here, so the three never disagree. A metric's direction,
unit and threshold are what its run declares (SPEC.md section 15.1, ``[metrics]``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import attrs
from runstore.analysis.summary import Summary
from runstore.analysis.summary import summarize
from runstore.inspection.measurements import Group
from runstore.inspection.measurements import MetricInfo
from runstore.inspection.measurements import Value
from runstore.inspection.measurements import iter_groups
from runstore.inspection.measurements import measurement_groups
from runstore.inspection.reader import Revision
from runstore.inspection.reader import StatusReport


@attrs.frozen(kw_only=True)
class MetricResult:
    """One metric of one pair: how to read it, its statistics and the values behind them."""

    info: MetricInfo
    summary: Summary
    values: tuple[Value, ...]

    @property
    def name(self) -> str:
        return self.info.name

    def to_json(self) -> dict[str, Any]:
        return {
            **self.info.to_json(),
            "statistics": self.summary.to_json(),
            "values": [value.text for value in self.values],
            "repetitions": [value.repetition for value in self.values],
        }


@attrs.frozen(kw_only=True)
class PairResult:
    """One candidate x problem pair with the statistics of every metric its accepted
    measurement slots report, sorted by metric name."""

    group: Group
    metrics: tuple[MetricResult, ...]

    def metric(self, name: str) -> MetricResult | None:
        return next((metric for metric in self.metrics if metric.name == name), None)

    @property
    def unstable(self) -> bool:
        return any(metric.summary.unstable for metric in self.metrics)

    def to_json(self) -> dict[str, Any]:
        group = self.group
        return {
            "campaign": group.campaign,
            "candidate": group.candidate,
            "problem": group.problem,
            "candidate_id": group.candidate_id,
            "problem_id": group.problem_id,
            "run_id": group.run_id,
            "slots": group.slots,
            "accepted": group.accepted,
            "parameters": dict(group.parameters),
            "candidate_parameters": dict(group.candidate_parameters),
            "metrics": {metric.name: metric.to_json() for metric in self.metrics},
        }


def pair_result(group: Group) -> PairResult:
    """The statistics of ``group``'s metrics (each over the values it has)."""
    metrics = []
    for name, values in sorted(group.values.items()):  # never empty: one per value read
        info = group.info(name)
        metrics.append(
            MetricResult(
                info=info,
                summary=summarize([value.number for value in values], threshold=info.threshold),
                values=values,
            )
        )
    return PairResult(group=group, metrics=tuple(metrics))


def pair_results(
    connection: sqlite3.Connection, *, campaign: str | None = None, revision: Revision = None
) -> tuple[PairResult, ...]:
    """Every pair in view (of one campaign, or all), sorted by campaign, candidate and
    problem, with its statistics."""
    groups = measurement_groups(connection, campaign=campaign, revision=revision)
    return tuple(pair_result(group) for group in groups)


def iter_pair_results(
    connection: sqlite3.Connection,
    *,
    campaign: str | None = None,
    revision: Revision = None,
    limit: int | None = None,
    accepted: bool = False,
) -> Iterator[PairResult]:
    """The pairs of :func:`pair_results`, in its order, one at a time as their values
    stream (only the first ``limit`` with a limit; only those with an accepted measurement
    slot when ``accepted``): memory holds one pair's values."""
    groups = iter_groups(
        connection, campaign=campaign, revision=revision, limit=limit, accepted=accepted
    )
    return map(pair_result, groups)


def metric_infos(results: Sequence[PairResult]) -> dict[str, MetricInfo]:
    """Each metric name the results report, with the declaration of the first pair that
    reports it (a campaign declares a metric once for all its runs)."""
    found: dict[str, MetricInfo] = {}
    for result in results:
        for metric in result.metrics:
            found.setdefault(metric.name, metric.info)
    return dict(sorted(found.items()))


@attrs.frozen(kw_only=True)
class StatusView:
    """``status``'s document: the slot counts of :func:`runstore.inspection.reader.status`
    and, under ``results``, every pair's statistics."""

    report: StatusReport
    results: tuple[PairResult, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self.report.to_json(), "results": [result.to_json() for result in self.results]}
