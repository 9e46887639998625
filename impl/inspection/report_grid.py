"""The HTML report's data as one grid: problems x candidates, each pair's slot states, its
stored texts and its statistics, and each metric's declaration (SPEC.md section 16.4).

Rules of this file: values only, from a :class:`~runstore.inspection.reader.StatusReport`
(slot states, stored texts) and :mod:`runstore.inspection.results`' pair results
(statistics: the numbers ``status`` prints). Which slots of a pair carry its result is
decided here once (:func:`_cell`): its non-warm-up slots. Ids are in natural order
(:func:`natural`: ``p2`` before ``p10``); when every id belongs to one campaign, display
names drop ``<campaign>/``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.inspection.measurements import MetricInfo
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import StatusReport
from runstore.inspection.reader import campaign_of
from runstore.inspection.results import MetricResult
from runstore.inspection.results import PairResult

STATES: Final = (
    SlotState.PENDING,
    SlotState.RUNNING,
    SlotState.ACCEPTED,
    SlotState.FAILED,
    SlotState.INTERRUPTED,
    SlotState.CENSORED,
    SlotState.SUPERSEDED,
)
"""Column order of the state counts (the order ``runstore status`` prints)."""

WARMUP_ROLE: Final = "warmup"
_DIGITS: Final = re.compile(r"([0-9]+)")


def natural(identifier: str) -> tuple[object, ...]:
    """The sort key of natural order: runs of ASCII digits compare as numbers
    (``input-3000`` before ``input-10000``), the rest as text, ties by the text itself."""
    parts = _DIGITS.split(identifier)
    return (
        tuple((int(part), part) if index % 2 else part for index, part in enumerate(parts)),
        identifier,
    )


@attrs.frozen(kw_only=True)
class Cell:
    """One candidate x problem pair: how many of its result-carrying slots are in each
    state (empty when nothing is registered), whether it is excluded, the stored texts of
    its accepted slots per metric (slot order), and its statistics (None without any)."""

    states: tuple[tuple[SlotState, int], ...]
    excluded: bool
    texts: Mapping[str, tuple[str, ...]]
    result: PairResult | None

    @property
    def accepted(self) -> bool:
        return any(state is SlotState.ACCEPTED for state, _ in self.states)

    def label(self) -> str:
        """``excluded``, ``not registered``, the one slot's state, or counts by state
        (``2 accepted, 1 failed``) when the pair has several slots."""
        if self.excluded:
            return "excluded"
        if not self.states:
            return "not registered"
        if sum(count for _, count in self.states) == 1:
            return self.states[0][0].value
        return ", ".join(f"{count} {state.value}" for state, count in self.states)

    def css(self) -> str:
        if self.excluded:
            return "excluded"
        return " ".join(state.value for state, _ in self.states) or "absent"

    def statistics(self, metric: str) -> MetricResult | None:
        return None if self.result is None else self.result.metric(metric)


@attrs.frozen(kw_only=True)
class Metric:
    """A metric as the page reads it: its declaration (or the reader's default) and
    whether the campaign declared it."""

    info: MetricInfo
    declared: bool

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def lower_is_better(self) -> bool:
        return self.info.direction == "lower"


@attrs.frozen(kw_only=True)
class Grid:
    """The report as problems x candidates (ids in natural order) with its metrics (names
    sorted).
    ``campaign`` is the one campaign every id belongs to, if any: display names drop it."""

    campaign: str | None
    candidates: tuple[str, ...]
    problems: tuple[str, ...]
    cells: Mapping[tuple[str, str], Cell]
    metrics: tuple[Metric, ...]

    def name(self, identifier: str) -> str:
        if self.campaign is not None and campaign_of(identifier) == self.campaign:
            return identifier[len(self.campaign) + 1 :]
        return identifier

    def cell(self, candidate: str, problem: str) -> Cell:
        return self.cells[(candidate, problem)]


def grid(report: StatusReport, results: Sequence[PairResult]) -> Grid:
    """``report`` and ``results`` (of the same snapshot and scope) as one grid. A pair is
    in it when it has a slot, an exclusion or a result; a metric when any accepted slot
    stores it."""
    # The order the reader sorts pairs in, so the page never depends on the caller's.
    results = sorted(
        results, key=lambda r: (r.group.campaign, r.group.candidate_id, r.group.problem_id)
    )
    excluded = set(report.excluded)
    by_pair: dict[tuple[str, str], list[SlotSummary]] = {}
    for slot in report.slots:
        by_pair.setdefault((slot.candidate_id, slot.problem_id), []).append(slot)
    pair_result = {(r.group.candidate_id, r.group.problem_id): r for r in results}
    pairs = {*by_pair, *excluded, *pair_result}
    candidates = sorted({*report.by_candidate, *(c for c, _ in pairs)}, key=natural)
    problems = sorted({*report.by_problem, *(p for _, p in pairs)}, key=natural)
    cells = {
        (c, p): _cell(
            by_pair.get((c, p), []), excluded=(c, p) in excluded, result=pair_result.get((c, p))
        )
        for c in candidates
        for p in problems
    }
    campaigns = {campaign_of(identifier) for identifier in (*candidates, *problems)}
    single = next(iter(campaigns)) if len(campaigns) == 1 else None
    return Grid(
        campaign=single or None,
        candidates=tuple(candidates),
        problems=tuple(problems),
        cells=cells,
        metrics=_metrics(cells, results),
    )


def _cell(slots: Sequence[SlotSummary], *, excluded: bool, result: PairResult | None) -> Cell:
    """A pair's cell from its slots: a warm-up carries no result, so its non-warm-up slots
    decide (all of them if it has no other); accepted slots' texts in slot order."""
    carrying = [slot for slot in slots if slot.role != WARMUP_ROLE] or list(slots)
    counts = {state: sum(1 for slot in carrying if slot.state is state) for state in STATES}
    texts: dict[str, list[str]] = {}
    for slot in carrying:
        if slot.state is SlotState.ACCEPTED and slot.role != WARMUP_ROLE:
            for name, text in slot.metrics:
                texts.setdefault(name, []).append(text)
    return Cell(
        states=tuple((state, count) for state, count in counts.items() if count),
        excluded=excluded,
        texts={name: tuple(found) for name, found in sorted(texts.items())},
        result=result,
    )


def _metrics(
    cells: Mapping[tuple[str, str], Cell], results: Sequence[PairResult]
) -> tuple[Metric, ...]:
    """Each metric name a cell stores or a result summarizes, with the declaration of the
    first pair (by campaign, candidate and problem) that reports it, or that declares it
    when no pair has a number for it."""
    found: dict[str, Metric] = {}
    for result in results:
        for metric in result.metrics:
            found.setdefault(
                metric.name, Metric(info=metric.info, declared=metric.name in result.group.declared)
            )
    declared = {name: info for r in reversed(results) for name, info in r.group.declared.items()}
    for cell in cells.values():
        for name in cell.texts:
            if name not in found:
                info = declared.get(name)
                found[name] = Metric(info=info or MetricInfo(name=name), declared=info is not None)
    return tuple(found[name] for name in sorted(found))
