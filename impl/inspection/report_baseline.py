"""The report's baseline view: per metric, a problems x candidates heat table of each
candidate's ratio to a baseline candidate, with its interval and the verdict in words
(SPEC.md section 16.4).

Rules of this file: rendering only, from a
:class:`~runstore.inspection.comparison.ComparisonReport` (``compare --baseline``'s rows,
nothing recomputed: the words are :func:`runstore.analysis.compare.describe`'s) and the
:class:`~runstore.inspection.report_grid.Grid` for names. A cell's colour repeats its
words (better, worse, no significant difference) and never stands alone. Every text from
the store goes through :func:`html.escape`.
"""

from __future__ import annotations

import math
from html import escape
from typing import Final

from runstore.analysis.compare import ALPHA
from runstore.analysis.numbers import bracketed
from runstore.analysis.numbers import plus_minus
from runstore.analysis.numbers import significant
from runstore.inspection.comparison import ComparisonReport
from runstore.inspection.comparison import Row
from runstore.inspection.report_grid import Grid
from runstore.inspection.report_html import corner
from runstore.inspection.report_html import name_cell
from runstore.inspection.report_html import table
from runstore.inspection.report_metrics import direction_words
from runstore.inspection.report_metrics import unit_of

STRONG: Final = 2.0
MEDIUM: Final = 1.25
"""A significant factor from these up gets a stronger tint."""

_LISTED: Final = 20
_ABSENT: Final = '<td class="state absent" title="no result on both sides">&ndash;</td>'

NOTE: Final = (
    '<p class="note">Each cell compares a candidate with the baseline on one problem: the '
    "ratio candidate / baseline (a Hodges&ndash;Lehmann estimate) with its interval, "
    "written as the factor by which the candidate is better or worse, or <em>no "
    "significant difference</em> unless a two-sided Mann&ndash;Whitney test gives p "
    "&lt; 0.05 (and the change exceeds the metric's threshold). Shading repeats the "
    'words: <span class="ratio better s2">better</span> <span class="ratio worse s2">'
    'worse</span> (stronger from 1.25x and 2x), <span class="ratio same">no significant '
    "difference</span>. Hover a cell for the ratio, p and both medians.</p>"
)

HINT: Final = (
    '<p class="note">To compare every candidate with one of them, problem by problem, add '
    "<code>--baseline CANDIDATE</code> to <code>runstore report</code>: the page then shows "
    "each candidate's ratio to it with its interval and a significance verdict.</p>"
)
"""What the page says in place of the baseline view when none was asked for."""


def _strength(row: Row) -> int:
    comparison = row.comparison
    if not comparison.significant or comparison.ratio is None:
        return 1
    factor = max(comparison.ratio, 1 / comparison.ratio)
    return 3 if factor >= STRONG else 2 if factor >= MEDIUM else 1


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def _cell(grid: Grid, row: Row, candidate: str, problem: str) -> str:
    """The verdict's words, shaded by verdict and strength; the tooltip gives the ratio
    with its interval's coverage, p and both medians; ``data-*`` hold the exact ratio."""
    comparison = row.comparison
    unit = unit_of(row.info)
    base, mine = row.baseline_metric.summary, row.candidate_metric.summary
    level = f"{significant(100 * comparison.ci_level, 3)}% interval"
    tip = [f"{grid.name(candidate)} against {row.baseline} on {grid.name(problem)}"]
    low, high = comparison.ratio_low, comparison.ratio_high
    if comparison.ratio is not None and low is not None and high is not None:
        tip.append(
            f"ratio candidate / baseline {significant(comparison.ratio)} "
            f"[{significant(low)}, {significant(high)}] ({level})"
        )
    else:
        difference = comparison.difference, comparison.difference_low, comparison.difference_high
        tip.append(f"difference {bracketed(*difference, unit, signed=True)} ({level})")
    tip += [
        f"p = {significant(comparison.p_value, 2)} ({comparison.method})",
        f"baseline {plus_minus(base.median, base.mad, unit)} (n = {comparison.n_baseline})",
        f"candidate {plus_minus(mine.median, mine.mad, unit)} (n = {comparison.n_candidate})",
    ]
    return (
        f'<td class="ratio {comparison.verdict} s{_strength(row)}" '
        f'data-verdict="{comparison.verdict}" data-ratio="{_number(comparison.ratio)}" '
        f'data-ratio-low="{_number(low)}" data-ratio-high="{_number(high)}" '
        f'title="{escape("; ".join(tip))}">{_words(row.words)}</td>'
    )


def _words(words: str) -> str:
    """``describe``'s words with the factor and the bracket (or the parenthesis) each kept
    on one line: ``1.82x faster`` / ``[1.70, 1.95]``."""
    for cut in (" [", " ("):
        head, found, tail = words.partition(cut)
        if found:
            return (
                f'<span class="words">{escape(head)}</span> '
                f'<span class="words">{escape(found[1:] + tail)}</span>'
            )
    return escape(words)


def _powerless(comparison: ComparisonReport) -> str:
    """A note when no row could ever be significant: with ``m`` and ``n`` values the rank
    test's smallest p is ``2 / C(m + n, m)`` (SPEC.md 17.1), at least 0.05 for 3 and 3."""
    sizes = {(row.comparison.n_baseline, row.comparison.n_candidate) for row in comparison.rows}
    reachable = any(2 / math.comb(m + n, m) < ALPHA for m, n in sizes)
    if not sizes or reachable or any(row.comparison.p_value < ALPHA for row in comparison.rows):
        return ""
    m, n = min(sizes, key=lambda pair: math.comb(sum(pair), pair[0]))
    smallest = significant(2 / math.comb(m + n, m), 2)
    return (
        f'<p class="note">With {m} and {n} values the rank test cannot reach p &lt; {ALPHA} '
        f"(its smallest p is {smallest}), so no difference here can be significant: 4 or "
        "more repetitions a side can.</p>"
    )


def _campaign_ids(grid: Grid, campaign: str) -> dict[tuple[str, str], str]:
    """``("candidate" | "problem", name)`` -> id, for the pairs of ``campaign`` with results
    (the comparison names candidates and problems without their campaign)."""
    ids: dict[tuple[str, str], str] = {}
    for cell in grid.cells.values():
        if cell.result is not None and cell.result.group.campaign == campaign:
            group = cell.result.group
            ids[("candidate", group.candidate)] = group.candidate_id
            ids[("problem", group.problem)] = group.problem_id
    return ids


def baseline_section(grid: Grid, comparison: ComparisonReport) -> list[str]:
    """The baseline view of ``comparison`` (``--baseline``): one table per metric with one
    row per problem and one column per other candidate of its campaign (in the grid's
    order); a pair without a result on both sides shows a dash."""
    ids = _campaign_ids(grid, comparison.campaign)
    baseline = comparison.baseline_candidate or ""
    baseline_id = ids.get(("candidate", baseline), baseline)
    known = set(ids.values())
    candidates = tuple(c for c in grid.candidates if c in known and c != baseline_id)
    problems = [p for p in grid.problems if p in known]
    heading = f'<h2 id="baseline">Against the baseline {escape(grid.name(baseline_id))}</h2>'
    powerless = _powerless(comparison)
    parts = [heading, NOTE] + ([powerless] if powerless else [])
    header = [corner("problem \\ candidate")] + [
        name_cell(grid, c, scope="col") for c in candidates
    ]
    for index, metric in enumerate(grid.metrics):
        rows = {
            (ids.get(("candidate", row.candidate)), ids.get(("problem", row.problem))): row
            for row in comparison.rows
            if row.info.name == metric.name
        }
        if not rows:
            continue
        body = [
            [
                name_cell(grid, p),
                *(
                    _cell(grid, found, c, p) if (found := rows.get((c, p))) else _ABSENT
                    for c in candidates
                ),
            ]
            for p in problems
        ]
        caption = (
            f"{escape(metric.name)} ({escape(direction_words(metric))}): each candidate against "
            f"{escape(grid.name(baseline_id))}"
        )
        parts += [
            f'<section class="baseline" id="baseline-{index}">',
            table(caption, header, body, "ratios"),
            "</section>",
        ]
    if comparison.missing:
        shown = ", ".join(comparison.missing[:_LISTED])
        more = len(comparison.missing) - _LISTED
        parts.append(
            f'<p class="note">No baseline result for {len(comparison.missing)} pair(s): '
            f"{escape(shown)}{f' and {more} more' if more > 0 else ''}.</p>"
        )
    if not comparison.rows:
        parts.append('<p class="note">Nothing to compare: no pair has results on both sides.</p>')
    return parts
