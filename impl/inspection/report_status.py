"""The report's status section: slot counts by state in total, per candidate and per
problem, attempt counts, the excluded pairs and each pair's slot states (SPEC.md section
16.4).

Rules of this file: rendering only, from the :class:`~runstore.inspection.reader.StatusReport`
and the :class:`~runstore.inspection.report_grid.Grid` built from it; every text from the
store goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from runstore.inspection.reader import StatusReport
from runstore.inspection.report_grid import STATES
from runstore.inspection.report_grid import Cell
from runstore.inspection.report_grid import Grid
from runstore.inspection.report_html import corner
from runstore.inspection.report_html import count
from runstore.inspection.report_html import name_cell
from runstore.inspection.report_html import table


def _state_header(first: str) -> list[str]:
    return [f'<th scope="col">{first}</th>'] + [
        f'<th scope="col">{state.value}</th>' for state in STATES
    ]


def _counts(caption: str, label: str, by_name: Mapping[str, Mapping[str, int]], grid: Grid) -> str:
    rows = [
        [name_cell(grid, name), *(count(by_name[name].get(state.value, 0)) for state in STATES)]
        for name in sorted(by_name)
    ]
    return table(caption, _state_header(label), rows, "counts")


def state_cell(cell: Cell) -> str:
    """A pair's slot states as a table cell (also what a metric's table shows for a pair
    without an accepted value)."""
    return f'<td class="state {escape(cell.css())}">{escape(cell.label())}</td>'


def problem_header(grid: Grid, candidates: tuple[str, ...] | None = None) -> list[str]:
    """The header of a problems x candidates table: the corner, then one column per
    candidate (all of the grid's unless ``candidates`` is given)."""
    return [corner("problem \\ candidate")] + [
        name_cell(grid, candidate, scope="col") for candidate in (candidates or grid.candidates)
    ]


def status_section(report: StatusReport, grid: Grid) -> list[str]:
    totals = [
        [
            '<th scope="row">all slots</th>',
            *(count(report.totals.get(state.value, 0)) for state in STATES),
        ]
    ]
    pairs = [
        [name_cell(grid, p), *(state_cell(grid.cell(c, p)) for c in grid.candidates)]
        for p in grid.problems
    ]
    parts = [
        '<h2 id="status">Status</h2>',
        table("Slots by state", _state_header(""), totals, "counts"),
        _counts("Slots by candidate", "candidate", report.by_candidate, grid),
        _counts("Slots by problem", "problem", report.by_problem, grid),
        table("Slot states per problem and candidate", problem_header(grid), pairs, "pairs"),
    ]
    attempts = sorted(report.attempts_by_state.items())
    if attempts:
        header = [f'<th scope="col">{escape(state)}</th>' for state, _ in attempts]
        parts.append(table("Attempts by state", header, [[count(n) for _, n in attempts]], ""))
    if report.excluded:
        items = "".join(
            f"<li>{escape(grid.name(c))} on {escape(grid.name(p))}</li>" for c, p in report.excluded
        )
        parts.append(f"<p>Excluded pairs (not applicable):</p><ul>{items}</ul>")
    return parts
