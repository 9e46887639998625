"""The report's results: per metric, its direction in words, an interval plot of each pair's
median, checkpoint curves for stream slots, and a problems x candidates table of
``median ± MAD unit`` with each problem's best (or lowest and highest) median marked
(SPEC.md section 16.4).

Rules of this file: rendering only, from the :class:`~runstore.inspection.report_grid.Grid`.
Statistics are :mod:`runstore.inspection.results`' (the numbers ``status`` prints), written
by :mod:`runstore.analysis.numbers`, never with more digits; a stored text is printed as
stored and only where no statistic exists. Charts are drawn by
:mod:`runstore.inspection.chart_intervals` and :mod:`runstore.inspection.chart_curves`.
Every text from the store goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Final

from runstore.analysis.numbers import bracketed
from runstore.analysis.numbers import check_unit
from runstore.analysis.numbers import plus_minus
from runstore.analysis.numbers import significant
from runstore.analysis.numbers import with_unit
from runstore.analysis.summary import median_of_sorted
from runstore.errors import InvalidRecordError
from runstore.inspection.chart_curves import Curve
from runstore.inspection.chart_curves import curve_panel
from runstore.inspection.chart_intervals import Interval
from runstore.inspection.chart_intervals import interval_plot
from runstore.inspection.chart_intervals import values_of
from runstore.inspection.chart_scale import wants_log
from runstore.inspection.measurements import MetricInfo
from runstore.inspection.report_grid import Grid
from runstore.inspection.report_grid import Metric
from runstore.inspection.report_html import legend
from runstore.inspection.report_html import name_cell
from runstore.inspection.report_html import table
from runstore.inspection.report_status import problem_header
from runstore.inspection.report_status import state_cell
from runstore.inspection.results import MetricResult

_TOOLTIP_VALUES: Final = 20
"""A chart's tooltip lists at most this many stored values."""

BEST: Final = "\u2605"
LOWEST: Final = "\u25bc"
HIGHEST: Final = "\u25b2"


def unit_of(info: MetricInfo) -> str:
    """The declared unit when it is plain text (SPEC.md 17.1), else none: a store's text
    never makes the page fail."""
    try:
        return check_unit(info.unit)
    except InvalidRecordError:
        return ""


def direction_words(metric: Metric) -> str:
    """``lower is better``, ``higher is better``, or that none is declared."""
    if not metric.declared:
        return "direction not declared"
    return "lower is better" if metric.lower_is_better else "higher is better"


def _direction_line(metric: Metric) -> str:
    unit = unit_of(metric.info)
    if metric.declared:
        words = direction_words(metric)
        parts = [
            f"<strong>{words[0].upper()}{words[1:]}</strong> (declared in the campaign's "
            f'<code>[metrics]</code>); <span class="mark best">{BEST}</span> marks each '
            "problem's best median"
        ]
    else:
        parts = [
            "<strong>No direction declared</strong> in the campaign's <code>[metrics]</code>: "
            "<code>status</code> and <code>compare</code> read it as lower is better, so this "
            f'page marks no best, only each problem\'s <span class="mark">{LOWEST}</span> lowest '
            f'and <span class="mark">{HIGHEST}</span> highest median'
        ]
    parts.append(f"unit: {escape(unit)}" if unit else "no unit")
    if metric.info.threshold is not None:
        limit = significant(100 * metric.info.threshold, 3)
        parts.append(f"unstable (!) above a spread (MAD / median) of {limit}%")
    return f'<p class="direction">{"; ".join(parts)}.</p>'


def marks(metric: Metric, medians: Mapping[str, float]) -> dict[str, str]:
    """Candidate -> its mark on one problem, from the candidates' medians: ``best`` (ties
    all marked) when a direction is declared, else ``lowest`` and ``highest``; nothing
    unless two medians differ."""
    if len(set(medians.values())) < 2:
        return {}
    low, high = min(medians.values()), max(medians.values())
    if metric.declared:
        best = low if metric.lower_is_better else high
        return {c: "best" for c, median in medians.items() if median == best}
    found = {c: "lowest" for c, median in medians.items() if median == low}
    found.update({c: "highest" for c, median in medians.items() if median == high})
    return found


def statistics_text(result: MetricResult, unit: str) -> str:
    """A pair's statistics as the tables show them: ``median ± MAD unit``."""
    return plus_minus(result.summary.median, result.summary.mad, unit)


def _mark_span(mark: str, metric: Metric) -> str:
    if mark == "best":
        tip = f"best median for this problem ({direction_words(metric)})"
        return f'<span class="mark best" title="{tip}">{BEST}</span>'
    glyph = LOWEST if mark == "lowest" else HIGHEST
    return f'<span class="mark" title="{mark} median for this problem">{glyph}</span>'


def _stat_cell(result: MetricResult, slots: int, mark: str | None, metric: Metric) -> str:
    """``median ± MAD unit`` on the first line; the mark, the unstable sign and n on a
    second, smaller one (so a column is as wide as its statistics, not wider)."""
    summary = result.summary
    css = ["stat"] + ([mark] if mark else []) + (["unstable"] if summary.unstable else [])
    about = []
    if mark:
        about.append(_mark_span(mark, metric))
    if summary.unstable:
        why = escape("unstable: " + "; ".join(summary.reasons))
        about.append(f'<span class="unstable" title="{why}">!</span>')
    of = f"/{slots}" if slots > summary.n else ""
    about.append(
        '<span class="n" title="values of this metric / measurement slots">'
        f"n={summary.n}{of}</span>"
    )
    value = escape(statistics_text(result, unit_of(metric.info)))
    return (
        f'<td class="{" ".join(css)}"><span class="value">{value}</span> '
        f'<span class="about">{" ".join(about)}</span></td>'
    )


def _table(grid: Grid, metric: Metric) -> str:
    rows = []
    for p in grid.problems:
        medians = {
            c: found.summary.median
            for c in grid.candidates
            if (found := grid.cell(c, p).statistics(metric.name)) is not None
        }
        marked = marks(metric, medians)
        row = [name_cell(grid, p)]
        for c in grid.candidates:
            cell = grid.cell(c, p)
            found = cell.statistics(metric.name)
            texts = cell.texts.get(metric.name)
            if found is not None:
                slots = cell.result.group.slots if cell.result is not None else 0
                row.append(_stat_cell(found, slots, marked.get(c), metric))
            elif texts:
                shown = escape(", ".join(dict.fromkeys(texts)))
                tip = "not a number the statistics take: not charted"
                row.append(f'<td class="text" title="{tip}">{shown}</td>')
            elif cell.accepted:
                row.append(
                    '<td class="state absent" title="accepted without this metric">&ndash;</td>'
                )
            else:
                row.append(state_cell(cell))
        rows.append(row)
    caption = f"{escape(metric.name)}: median &plusmn; MAD per problem and candidate"
    return table(caption, problem_header(grid), rows, "metric")


def _tooltip(grid: Grid, c: str, p: str, result: MetricResult, unit: str) -> str:
    summary = result.summary
    texts = [value.text for value in result.values]
    shown = ", ".join(texts[:_TOOLTIP_VALUES]) + (", …" if len(texts) > _TOOLTIP_VALUES else "")
    interval = bracketed(summary.median, summary.ci_low, summary.ci_high, unit)
    level = significant(100 * summary.ci_level, 3)
    return (
        f"{grid.name(c)} on {grid.name(p)}: median {interval} (interval covering the median "
        f"with {level}%), MAD {significant(summary.mad)}, n = {summary.n}; values: {shown}"
    )


def _chart(grid: Grid, metric: Metric) -> list[str]:
    unit = unit_of(metric.info)
    rows = [
        p
        for p in grid.problems
        if any(grid.cell(c, p).statistics(metric.name) for c in grid.candidates)
    ]
    intervals = []
    for row, p in enumerate(rows):
        for series, c in enumerate(grid.candidates):
            found = grid.cell(c, p).statistics(metric.name)
            if found is None:
                continue
            summary = found.summary
            intervals.append(
                Interval(
                    row=row,
                    series=series,
                    problem=p,
                    candidate=c,
                    median=summary.median,
                    low=summary.ci_low,
                    high=summary.ci_high,
                    repetitions=tuple((value.number, value.text) for value in found.values),
                    tooltip=_tooltip(grid, c, p, found, unit),
                )
            )
    if not intervals:
        return []
    title = f"{metric.name}{f' ({unit})' if unit else ''} · {direction_words(metric)}"
    charted = sorted({item.series for item in intervals})
    parts = [
        legend(grid, [grid.candidates[i] for i in charted]),
        '<div class="chart">'
        + interval_plot(
            caption=f"{metric.name}: median and interval per problem and candidate",
            axis_title=title,
            rows=[grid.name(p) for p in rows],
            series=[grid.name(c) for c in grid.candidates],
            intervals=intervals,
        )
        + "</div>",
    ]
    hidden = sum(
        1
        for item in intervals
        for value in (item.median, *(v for v, _ in item.repetitions))
        if value <= 0
    )
    if hidden and wants_log(values_of(intervals)):
        parts.append(
            f'<p class="note">On this log axis {hidden} value(s) &le; 0 (medians or '
            "repetitions) are not drawn, and an interval reaching 0 or below starts at the "
            "axis's left end; the table shows them.</p>"
        )
    return parts


def _curves(grid: Grid, metric: Metric) -> list[str]:
    unit = unit_of(metric.info)
    panels = []
    shown: set[int] = set()
    for p in grid.problems:
        curves = []
        for series, c in enumerate(grid.candidates):
            result = grid.cell(c, p).result
            checkpoints = result.group.checkpoints.get(metric.name, ()) if result else ()
            by_index: dict[int, list[float]] = {}
            for point in checkpoints:
                by_index.setdefault(point.checkpoint, []).append(point.number)
            if not by_index:
                continue
            medians = [(i, median_of_sorted(sorted(v))) for i, v in sorted(by_index.items())]
            points = tuple((i, median, with_unit(median, unit)) for i, median in medians)
            curves.append(Curve(series=series, candidate=c, name=grid.name(c), points=points))
            shown.add(series)
        if curves:
            panels.append(
                curve_panel(
                    caption=f"{metric.name} over the checkpoints of {grid.name(p)}",
                    title=grid.name(p),
                    series=len(grid.candidates),
                    curves=curves,
                )
            )
    if not panels:
        return []
    return [
        f"<h4>{escape(metric.name)} over the checkpoints (median over repetitions)</h4>",
        legend(grid, [grid.candidates[i] for i in sorted(shown)]),
        f'<div class="panels">{"".join(panels)}</div>',
    ]


def metric_section(grid: Grid, index: int, metric: Metric) -> list[str]:
    """One metric's section (``id="metric-<index>"``): direction, chart, curves, table."""
    parts = [
        f'<section id="metric-{index}" class="metric">',
        f"<h3>{escape(metric.name)}</h3>",
        _direction_line(metric),
        *_chart(grid, metric),
        *_curves(grid, metric),
    ]
    texts = sum(
        1
        for cell in grid.cells.values()
        if cell.texts.get(metric.name) and cell.statistics(metric.name) is None
    )
    if texts:
        parts.append(
            f'<p class="note">{texts} pair(s) hold values that are not numbers the statistics '
            "take (not finite, or beyond 1e300): shown in the table as stored, not charted.</p>"
        )
    parts += [_table(grid, metric), "</section>"]
    return parts
