"""The HTML report of a ``status`` report: one self-contained page (SPEC.md section
16.4).

Rules of this file: rendering only, from a :class:`~runstore.inspection.reader.StatusReport`
(no store, no snapshot, no clock, no I/O), so the same report always gives the same bytes;
writing the file is the caller's business. The page is HTML5 with inline CSS
(:mod:`runstore.inspection.report_style`) and inline SVG (:mod:`runstore.inspection.svg`):
no script, no external reference, and a Content-Security-Policy that forbids fetching
anything. Every piece of text from the store goes through :func:`html.escape`. Metric
values are printed as stored; they are parsed only to chart them and to find each
problem's lowest and highest value. Which slot of a candidate x problem pair carries its
result is decided here once (:func:`_cell`): its non-warm-up slots.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from html import escape
from typing import Final

import attrs
from runstore.inspection import svg
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import StatusReport
from runstore.inspection.reader import campaign_of
from runstore.inspection.report_style import STYLE

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
CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'"
"""Nothing may be fetched or run, even if a future change forgot a rule of this file."""


@attrs.frozen(kw_only=True)
class _Cell:
    """One candidate x problem pair: the states of its result-carrying slots (empty when
    nothing is registered), whether it is excluded, and its accepted metrics."""

    states: tuple[SlotState, ...]
    excluded: bool
    metrics: Mapping[str, str]

    def label(self) -> str:
        if self.excluded:
            return "excluded"
        return ", ".join(state.value for state in self.states) or "not registered"

    def css(self) -> str:
        if self.excluded:
            return "excluded"
        return " ".join(state.value for state in self.states) or "absent"


@attrs.frozen(kw_only=True)
class _Grid:
    """The report rearranged as candidates x problems (ids sorted) with its metric names.
    ``campaign`` is the one campaign every id belongs to, if any: display names drop it."""

    campaign: str | None
    candidates: tuple[str, ...]
    problems: tuple[str, ...]
    cells: Mapping[tuple[str, str], _Cell]
    metrics: tuple[str, ...]

    def name(self, identifier: str) -> str:
        if self.campaign is not None and campaign_of(identifier) == self.campaign:
            return identifier[len(self.campaign) + 1 :]
        return identifier

    def cell(self, candidate: str, problem: str) -> _Cell:
        return self.cells[(candidate, problem)]


def render_report(report: StatusReport, *, title: str) -> str:
    """The whole HTML page for ``report`` as a string, deterministic (the same report and
    title give the same string). The page holds the title, the counts of slot states (in
    total, per candidate, per problem, per pair) and attempt states, the excluded pairs, and
    per metric a grouped bar chart (numeric values only) and a table of accepted values
    with each problem's lowest and highest value marked. When every id belongs to one
    campaign (``<campaign>/<name>``), names are shown without it."""
    grid = _grid(report)
    body = [
        f"<h1>{escape(title)}</h1>",
        _meta(report, grid),
        _nav(grid),
        *_status(report, grid),
        *_results(grid),
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


# --- the report as a grid --------------------------------------------------------------------


def _grid(report: StatusReport) -> _Grid:
    excluded = set(report.excluded)
    candidates = sorted(
        {*report.by_candidate, *(s.candidate_id for s in report.slots), *(c for c, _ in excluded)}
    )
    problems = sorted(
        {*report.by_problem, *(s.problem_id for s in report.slots), *(p for _, p in excluded)}
    )
    by_pair: dict[tuple[str, str], list[SlotSummary]] = {}
    for slot in report.slots:
        by_pair.setdefault((slot.candidate_id, slot.problem_id), []).append(slot)
    cells = {
        (c, p): _cell(by_pair.get((c, p), []), excluded=(c, p) in excluded)
        for c in candidates
        for p in problems
    }
    metrics = sorted({name for cell in cells.values() for name in cell.metrics})
    campaigns = {campaign_of(identifier) for identifier in (*candidates, *problems)}
    single = next(iter(campaigns)) if len(campaigns) == 1 else None
    return _Grid(
        campaign=single or None,
        candidates=tuple(candidates),
        problems=tuple(problems),
        cells=cells,
        metrics=tuple(metrics),
    )


def _cell(slots: Sequence[SlotSummary], *, excluded: bool) -> _Cell:
    """A pair's cell from its slots: a warm-up carries no result, so its non-warm-up slots
    decide (all of them if it has no other); accepted slots' metrics merge in slot order."""
    carrying = [slot for slot in slots if slot.role != WARMUP_ROLE] or list(slots)
    states = sorted({slot.state for slot in carrying}, key=STATES.index)
    metrics: dict[str, str] = {}
    for slot in carrying:
        if slot.state is SlotState.ACCEPTED:
            metrics.update(slot.metrics)
    return _Cell(states=tuple(states), excluded=excluded, metrics=metrics)


def _extremes(values: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """The keys holding the lowest and the highest numeric value of ``values`` (ties all
    marked); both empty unless at least two numeric values differ."""
    numbers = {key: n for key, text in values.items() if (n := svg.number(text)) is not None}
    if len(set(numbers.values())) < 2:
        return set(), set()
    low, high = min(numbers.values()), max(numbers.values())
    return (
        {key for key, n in numbers.items() if n == low},
        {key for key, n in numbers.items() if n == high},
    )


# --- HTML pieces -----------------------------------------------------------------------------


def _meta(report: StatusReport, grid: _Grid) -> str:
    parts = []
    if grid.campaign is not None:
        parts.append(f"campaign {escape(grid.campaign)}")
    parts.append(f"{len(grid.candidates)} candidates &times; {len(grid.problems)} problems")
    parts.append(f"{len(report.slots)} slots, {report.totals.get('accepted', 0)} accepted")
    return f'<p class="meta">{" &middot; ".join(parts)}</p>'


def _nav(grid: _Grid) -> str:
    links = ['<li><a href="#status">Status</a></li>', '<li><a href="#results">Results</a></li>']
    links += [
        f'<li><a href="#metric-{i}">{escape(name)}</a></li>' for i, name in enumerate(grid.metrics)
    ]
    return f"<nav><ul>{''.join(links)}</ul></nav>"


def _name(grid: _Grid, identifier: str, scope: str = "row") -> str:
    """A header cell: the display name, with the full id as its tooltip."""
    return f'<th scope="{scope}" title="{escape(identifier)}">{escape(grid.name(identifier))}</th>'


def _table(caption: str, header: Iterable[str], rows: Iterable[Iterable[str]], css: str) -> str:
    """A table in a horizontally scrolling box; ``caption``, ``header`` and ``rows`` are
    HTML already (escaped by the caller)."""
    lines = [
        f'<div class="scroll"><table class="{css}">',
        f"<caption>{caption}</caption>",
        f"<thead><tr>{''.join(header)}</tr></thead>",
        "<tbody>",
        *(f"<tr>{''.join(row)}</tr>" for row in rows),
        "</tbody></table></div>",
    ]
    return "\n".join(lines)


def _count(value: int) -> str:
    return f'<td class="zero">{value}</td>' if value == 0 else f"<td>{value}</td>"


def _state_header(first: str) -> list[str]:
    return [f'<th scope="col">{first}</th>'] + [
        f'<th scope="col">{state.value}</th>' for state in STATES
    ]


def _counts(caption: str, label: str, table: Mapping[str, Mapping[str, int]], grid: _Grid) -> str:
    rows = [
        [_name(grid, name), *(_count(table[name].get(state.value, 0)) for state in STATES)]
        for name in sorted(table)
    ]
    return _table(caption, _state_header(label), rows, "counts")


def _status(report: StatusReport, grid: _Grid) -> list[str]:
    totals = [
        ['<th scope="row">all slots</th>', *(_count(report.totals.get(s.value, 0)) for s in STATES)]
    ]
    attempts = sorted(report.attempts_by_state.items())
    parts = [
        '<h2 id="status">Status</h2>',
        _table("Slots by state", _state_header(""), totals, "counts"),
        _counts("Slots by candidate", "candidate", report.by_candidate, grid),
        _counts("Slots by problem", "problem", report.by_problem, grid),
        _pairs(grid),
    ]
    if attempts:
        header = [f'<th scope="col">{escape(state)}</th>' for state, _ in attempts]
        parts.append(_table("Attempts by state", header, [[_count(n) for _, n in attempts]], ""))
    if report.excluded:
        items = "".join(
            f"<li>{escape(grid.name(c))} on {escape(grid.name(p))}</li>" for c, p in report.excluded
        )
        parts.append(f"<p>Excluded pairs (not applicable):</p><ul>{items}</ul>")
    return parts


def _pair_header(grid: _Grid) -> list[str]:
    return ['<th scope="col">candidate \\ problem</th>'] + [
        _name(grid, problem, scope="col") for problem in grid.problems
    ]


def _state_cell(cell: _Cell) -> str:
    return f'<td class="state {escape(cell.css())}">{escape(cell.label())}</td>'


def _pairs(grid: _Grid) -> str:
    rows = [
        [_name(grid, c), *(_state_cell(grid.cell(c, p)) for p in grid.problems)]
        for c in grid.candidates
    ]
    return _table("Slot state per candidate and problem", _pair_header(grid), rows, "pairs")


def _results(grid: _Grid) -> list[str]:
    parts = ['<h2 id="results">Results</h2>']
    if not grid.metrics:
        parts.append('<p class="note">No accepted results yet.</p>')
        return parts
    parts.append(
        '<p class="note">In each table, per problem: <span class="lowest">lowest &#9660;</span>'
        ' and <span class="highest">highest &#9650;</span> value (marked only where values'
        " differ; whether lower or higher is better depends on the metric). A cell without"
        " an accepted value shows the slot's state.</p>"
    )
    for index, metric in enumerate(grid.metrics):
        parts += _metric(grid, index, metric)
    return parts


def _metric(grid: _Grid, index: int, metric: str) -> list[str]:
    values = {
        (c, p): text
        for (c, p), cell in grid.cells.items()
        if (text := cell.metrics.get(metric)) is not None
    }
    numeric = {key: text for key, text in values.items() if svg.number(text) is not None}
    parts = [f'<section id="metric-{index}">', f"<h3>{escape(metric)}</h3>"]
    if numeric:
        row = {c: i for i, c in enumerate(grid.candidates)}
        column = {p: i for i, p in enumerate(grid.problems)}
        chart = svg.grouped_bars(
            caption=f"{metric} per problem and candidate",
            groups=[grid.name(p) for p in grid.problems],
            series=[grid.name(c) for c in grid.candidates],
            values={(column[p], row[c]): text for (c, p), text in numeric.items()},
        )
        parts.append(f'<div class="scroll">{chart}</div>')
    if len(numeric) < len(values):
        parts.append(
            f'<p class="note">{len(values) - len(numeric)} value(s) are not numbers and are'
            " not charted.</p>"
        )
    parts += [_metric_table(grid, metric, values), "</section>"]
    return parts


def _metric_table(grid: _Grid, metric: str, values: Mapping[tuple[str, str], str]) -> str:
    marks: dict[tuple[str, str], str] = {}
    for p in grid.problems:
        column = {c: values[(c, p)] for c in grid.candidates if (c, p) in values}
        lowest, highest = _extremes(column)
        for c in lowest:
            marks[(c, p)] = "lowest"
        for c in highest:
            marks[(c, p)] = "highest"
    rows = [
        [
            _name(grid, c),
            *(_value_cell(grid.cell(c, p), metric, marks.get((c, p))) for p in grid.problems),
        ]
        for c in grid.candidates
    ]
    return _table(f"{escape(metric)}: accepted values", _pair_header(grid), rows, "metric")


def _value_cell(cell: _Cell, metric: str, mark: str | None) -> str:
    text = cell.metrics.get(metric)
    if text is None:
        if SlotState.ACCEPTED in cell.states:
            return '<td class="state absent" title="accepted without this metric">&ndash;</td>'
        return _state_cell(cell)
    if mark is None:
        return f'<td class="value">{escape(text)}</td>'
    return f'<td class="value {mark}" title="{mark} for this problem">{escape(text)}</td>'
