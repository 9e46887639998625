"""``compare``: each candidate against a baseline, problem by problem and metric by metric
(SPEC.md section 17.5).

Rules of this file: values only, from :mod:`runstore.inspection.results`' pair results and
:mod:`runstore.analysis.compare`'s tests. Two forms: a baseline candidate of one campaign
(every other candidate of that campaign against it, on each problem), or a baseline
campaign (each pair of the compared campaign against the pair with the same candidate and
problem names in the baseline campaign: before and after). A name that matches nothing is
``comparison_invalid`` listing what the store holds; nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any

import attrs
from runstore.analysis.compare import Comparison
from runstore.analysis.compare import compare
from runstore.analysis.compare import describe
from runstore.errors import ComparisonInvalidError
from runstore.inspection.measurements import MetricInfo
from runstore.inspection.results import MetricResult
from runstore.inspection.results import PairResult

_LISTED = 20
"""How many known names a refusal lists."""


@attrs.frozen(kw_only=True)
class Row:
    """One metric of one pair against its baseline pair."""

    problem: str
    candidate: str
    baseline: str
    """The baseline's label: its candidate name, or ``<campaign>/<candidate>``."""
    info: MetricInfo
    baseline_metric: MetricResult
    candidate_metric: MetricResult
    comparison: Comparison
    words: str

    def to_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "metric": self.info.name,
            **self.info.to_json(),
            "baseline_statistics": self.baseline_metric.summary.to_json(),
            "candidate_statistics": self.candidate_metric.summary.to_json(),
            "comparison": self.comparison.to_json(),
            "words": self.words,
        }


@attrs.frozen(kw_only=True)
class ComparisonReport:
    campaign: str
    baseline_candidate: str | None
    baseline_campaign: str | None
    metrics: tuple[str, ...]
    rows: tuple[Row, ...]
    missing: tuple[str, ...]
    """Pairs with no baseline to compare with (``candidate x problem``)."""
    revision: int | None = None
    """The campaign's revision compared (None: each pair's latest)."""
    baseline_revision: int | None = None
    """With a revision as the baseline: that revision."""
    unchanged: tuple[str, ...] = ()
    """Against a revision: the pairs both revisions share (the same run, so the same
    results), which are not compared with themselves."""

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "baseline_candidate": self.baseline_candidate,
            "baseline_campaign": self.baseline_campaign,
            "baseline_revision": self.baseline_revision,
            "revision": self.revision,
            "metrics": list(self.metrics),
            "rows": [row.to_json() for row in self.rows],
            "missing": list(self.missing),
            "unchanged": list(self.unchanged),
        }


def campaigns(results: Iterable[PairResult]) -> list[str]:
    return sorted({result.group.campaign for result in results})


def choose_campaign(results: Sequence[PairResult], campaign: str | None) -> str:
    """``campaign`` when the store holds it, the only campaign when ``campaign`` is None."""
    known = campaigns(results)
    if campaign is None:
        if len(known) == 1:
            return known[0]
        if not known:
            raise ComparisonInvalidError("the store holds no campaign with results")
        raise ComparisonInvalidError(
            f"the store holds {len(known)} campaigns; pick one with --campaign: {_list(known)}"
        )
    if campaign not in known:
        raise ComparisonInvalidError(
            f"no campaign {campaign!r} with results; the store holds: {_list(known) or 'none'}"
        )
    return campaign


def _list(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (f" (and {len(names) - _LISTED} more)" if len(names) > _LISTED else "")


def _metrics(pairs: Sequence[PairResult], wanted: Sequence[str] | None) -> tuple[str, ...]:
    known = sorted({metric.name for pair in pairs for metric in pair.metrics})
    if not wanted:
        return tuple(known)
    for name in wanted:
        if name not in known:
            raise ComparisonInvalidError(f"no metric {name!r}; the results hold: {_list(known)}")
    return tuple(dict.fromkeys(wanted))


def _row(pair: PairResult, base: PairResult, metric: str, baseline_label: str) -> Row | None:
    mine, theirs = pair.metric(metric), base.metric(metric)
    if mine is None or theirs is None:
        return None
    info = theirs.info
    comparison = compare(
        [value.number for value in theirs.values],
        [value.number for value in mine.values],
        direction=info.direction,
        threshold=info.threshold,
    )
    return Row(
        problem=pair.group.problem,
        candidate=pair.group.candidate,
        baseline=baseline_label,
        info=info,
        baseline_metric=theirs,
        candidate_metric=mine,
        comparison=comparison,
        words=describe(comparison, direction=info.direction, unit=info.unit),
    )


def _rows(
    pairs: Sequence[PairResult],
    names: Sequence[str],
    base_of: Callable[[PairResult], PairResult | None],
    label_of: Callable[[PairResult], str],
) -> tuple[tuple[Row, ...], tuple[str, ...]]:
    """Each pair against its baseline pair, by metric, then problem, then candidate; and
    the pairs without a baseline pair (``candidate x problem``)."""
    rows: list[Row] = []
    missing: list[str] = []
    for metric in names:
        for pair in sorted(pairs, key=lambda p: (p.group.problem, p.group.candidate)):
            base = base_of(pair)
            if base is None:
                missing.append(f"{pair.group.candidate} x {pair.group.problem}")
                continue
            row = _row(pair, base, metric, label_of(pair))
            if row is not None:
                rows.append(row)
    return tuple(rows), tuple(dict.fromkeys(missing))


def against_candidate(
    results: Sequence[PairResult],
    *,
    campaign: str | None,
    baseline: str,
    metrics: Sequence[str] | None = None,
) -> ComparisonReport:
    """Every other candidate of the campaign against ``baseline``, on each problem both
    have results for; rows by metric, then problem, then candidate (file order is not
    kept by the store, so names sort)."""
    chosen = choose_campaign(results, campaign)
    pairs = [result for result in results if result.group.campaign == chosen]
    candidates = sorted({pair.group.candidate for pair in pairs})
    if baseline not in candidates:
        raise ComparisonInvalidError(
            f"no candidate {baseline!r} in campaign {chosen!r}; it has: {_list(candidates)}"
        )
    names = _metrics(pairs, metrics)
    bases = {pair.group.problem: pair for pair in pairs if pair.group.candidate == baseline}
    others = [pair for pair in pairs if pair.group.candidate != baseline]
    rows, missing = _rows(
        others, names, lambda pair: bases.get(pair.group.problem), lambda pair: baseline
    )
    return ComparisonReport(
        campaign=chosen,
        baseline_candidate=baseline,
        baseline_campaign=None,
        metrics=names,
        rows=rows,
        missing=missing,
    )


def against_campaign(
    results: Sequence[PairResult],
    *,
    campaign: str | None,
    baseline_campaign: str,
    metrics: Sequence[str] | None = None,
) -> ComparisonReport:
    """Each pair of ``campaign`` against the pair of ``baseline_campaign`` with the same
    candidate and problem names (before and after)."""
    before = choose_campaign(results, baseline_campaign)
    after_pairs_all = [r for r in results if r.group.campaign != before]
    after = choose_campaign(after_pairs_all, campaign)
    pairs = [result for result in results if result.group.campaign == after]
    bases = {(r.group.candidate, r.group.problem): r for r in results if r.group.campaign == before}
    names = _metrics(pairs, metrics)
    rows, missing = _rows(
        pairs,
        names,
        lambda pair: bases.get((pair.group.candidate, pair.group.problem)),
        lambda pair: f"{before}/{pair.group.candidate}",
    )
    return ComparisonReport(
        campaign=after,
        baseline_candidate=None,
        baseline_campaign=before,
        metrics=names,
        rows=rows,
        missing=missing,
    )


def against_revision(
    results: Sequence[PairResult],
    baseline_results: Sequence[PairResult],
    *,
    campaign: str | None,
    revision: int,
    baseline_revision: int,
    metrics: Sequence[str] | None = None,
) -> ComparisonReport:
    """Each pair of ``campaign`` as ``results`` hold it (one revision) against the same
    pair in ``baseline_results`` (another revision of the campaign); a pair whose run is
    the same in both (it did not change between them) is listed as unchanged instead."""
    chosen = choose_campaign(results, campaign)
    pairs = [result for result in results if result.group.campaign == chosen]
    bases = {
        (r.group.candidate, r.group.problem): r
        for r in baseline_results
        if r.group.campaign == chosen
    }

    def base_of(pair: PairResult) -> PairResult | None:
        return bases.get((pair.group.candidate, pair.group.problem))

    unchanged = [
        pair for pair in pairs if (base := base_of(pair)) and base.group.run_id == pair.group.run_id
    ]
    compared = [pair for pair in pairs if pair not in unchanged]
    names = _metrics(pairs, metrics)
    rows, missing = _rows(
        compared,
        names,
        base_of,
        lambda pair: f"{pair.group.candidate} (revision {baseline_revision})",
    )
    return ComparisonReport(
        campaign=chosen,
        baseline_candidate=None,
        baseline_campaign=None,
        metrics=names,
        rows=rows,
        missing=missing,
        revision=revision,
        baseline_revision=baseline_revision,
        unchanged=tuple(f"{p.group.candidate} x {p.group.problem}" for p in unchanged),
    )
