"""The HTML report of a campaign: one self-contained page (SPEC.md section 16.4).

Rules of this file: it assembles the page from a
:class:`~runstore.inspection.reader.StatusReport`, the pairs' statistics
(:mod:`runstore.inspection.results`) and, when asked for, a baseline comparison
(:mod:`runstore.inspection.comparison`); no store, no snapshot, no clock, no I/O, so the
same inputs always give the same bytes, and writing the file is the caller's business.
The sections are drawn by :mod:`~runstore.inspection.report_metrics`,
:mod:`~runstore.inspection.report_baseline` and :mod:`~runstore.inspection.report_status`.
The page is HTML5 with inline CSS (:mod:`runstore.inspection.report_style`) and inline
SVG: no script, no external reference, and a Content-Security-Policy that forbids
fetching anything. Every piece of text from the store goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Final

from runstore.inspection.comparison import ComparisonReport
from runstore.inspection.reader import StatusReport
from runstore.inspection.report_baseline import HINT
from runstore.inspection.report_baseline import baseline_section
from runstore.inspection.report_grid import STATES
from runstore.inspection.report_grid import Grid
from runstore.inspection.report_grid import grid as build_grid
from runstore.inspection.report_metrics import metric_section
from runstore.inspection.report_status import status_section
from runstore.inspection.report_style import STYLE
from runstore.inspection.results import PairResult

CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'"
"""Nothing may be fetched or run, even if a future change forgot a rule of this file."""

READING: Final = (
    '<p class="note">Each table cell is a pair\'s <strong>median &plusmn; MAD</strong> '
    "(median absolute deviation) over its accepted repetitions, with n, the number of "
    'values (<code>n=2/3</code>: 2 of 3 measurement slots); <span class="unstable">!</span> '
    "marks unstable statistics (hover it for why). In each chart a problem is a row and a "
    "candidate a line in it: the dot is the median, the line the median's interval (95% "
    "from 6 values; with fewer it is their range, its coverage in the tooltip), the rings "
    "the repetitions. An axis is logarithmic when its positive values span more than a "
    "hundredfold.</p>"
)


def render_report(
    report: StatusReport,
    results: Sequence[PairResult],
    *,
    title: str,
    comparison: ComparisonReport | None = None,
) -> str:
    """The whole HTML page as a string, deterministic (the same inputs give the same
    string). ``results`` are the pairs' statistics of the same snapshot and scope as
    ``report``; ``comparison``, when given, adds the baseline view. The page holds the
    title and counts, per metric its direction, an interval chart, checkpoint curves for
    stream slots and a table of ``median ± MAD`` with each problem's best (or lowest and
    highest) median marked, the baseline view (or a line saying how to get it), and the
    status: slot counts by state in total, per candidate, per problem and per pair,
    attempt counts and the excluded pairs. When every id belongs to one campaign
    (``<campaign>/<name>``), names are shown without it."""
    grid = build_grid(report, results)
    body = [
        f"<h1>{escape(title)}</h1>",
        _meta(report, grid),
        _nav(grid, comparison),
        '<h2 id="results">Results</h2>',
        *_results(grid),
        *(baseline_section(grid, comparison) if comparison is not None else [HINT]),
        *status_section(report, grid),
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>{STYLE}</style>",
            "</head>",
            "<body>",
            "<main>",
            *body,
            "</main>",
            "</body>",
            "</html>",
            "",
        ]
    )


def _meta(report: StatusReport, grid: Grid) -> str:
    parts = []
    if grid.campaign is not None:
        parts.append(f"campaign {escape(grid.campaign)}")
    parts.append(
        f"{_count(len(grid.candidates), 'candidate')} &times; "
        f"{_count(len(grid.problems), 'problem')}"
    )
    states = ", ".join(
        f"{report.totals.get(state.value, 0)} {state.value}"
        for state in STATES
        if report.totals.get(state.value, 0)
    )
    parts.append(_count(len(report.slots), "slot") + (f" ({states})" if states else ""))
    return f'<p class="meta">{" &middot; ".join(parts)}</p>'


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _nav(grid: Grid, comparison: ComparisonReport | None) -> str:
    links = ['<li><a href="#results">Results</a></li>']
    links += [
        f'<li><a href="#metric-{i}">{escape(metric.name)}</a></li>'
        for i, metric in enumerate(grid.metrics)
    ]
    if comparison is not None:
        links.append('<li><a href="#baseline">Against the baseline</a></li>')
    links.append('<li><a href="#status">Status</a></li>')
    return f"<nav><ul>{''.join(links)}</ul></nav>"


def _results(grid: Grid) -> list[str]:
    if not grid.metrics:
        return ['<p class="note">No accepted results yet.</p>']
    parts = [READING]
    for index, metric in enumerate(grid.metrics):
        parts += metric_section(grid, index, metric)
    return parts
