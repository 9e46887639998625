"""``status`` for people: slot counts, and one row per candidate x problem with each
metric as ``median ± MAD unit`` (SPEC.md section 15.7).

Rules of this file: rendering only, from the ``status`` document (what ``--json``
prints). The results table fits the console's width: metric columns that do not fit go
to a continuation table that repeats the pair's names, so no cell is folded over lines.
A pair whose statistics are unstable (section 17.2) is marked ``!`` and listed under the
tables with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

from rich.table import Table
from runstore.analysis.numbers import plus_minus
from runstore.cli.output import table

STATES: Final = (
    "pending",
    "running",
    "accepted",
    "failed",
    "interrupted",
    "censored",
    "superseded",
)
MAX_NOTES: Final = 10
_GAP: Final = 3
"""Columns of padding rich puts between two columns (plain or boxed)."""


def status_tables(document: Mapping[str, Any], width: int) -> tuple[list[Table], list[str]]:
    """The tables and the trailing lines of ``status`` for a console ``width`` wide."""
    tables = [
        _counts("by candidate", "candidate", document["by_candidate"]),
        _counts("by problem", "problem", document["by_problem"]),
    ]
    results = [result for result in document.get("results", ()) if result["metrics"]]
    tables += result_tables(results, width)
    totals = document["totals"]
    tables.append(table("total", list(STATES), [[totals.get(state, 0) for state in STATES]]))
    return tables, unstable_lines(results)


ALWAYS_SHOWN: Final = ("accepted", "failed")
"""The count columns every per-candidate and per-problem table shows; another state's
column appears only when some slot is in it (the ``total`` table shows all seven), so the
table fits 80 columns without breaking a header."""


def _counts(title: str, label: str, counts: Mapping[str, Mapping[str, int]]) -> Table:
    states = [
        state
        for state in STATES
        if state in ALWAYS_SHOWN or any(by_state.get(state, 0) for by_state in counts.values())
    ]
    rows = [
        [_short(name), *(by_state.get(state, 0) for state in states)]
        for name, by_state in sorted(counts.items())
    ]
    return table(title, [label, *states], rows)


def _short(identifier: str) -> str:
    return identifier.split("/", 1)[-1]


def metric_cell(metric: Mapping[str, Any]) -> str:
    """``median ± MAD unit``, with ``!`` when the statistics are unstable."""
    statistics = metric["statistics"]
    text = plus_minus(statistics["median"], statistics["mad"], metric["unit"])
    return text + (" !" if statistics["unstable"] else "")


def _header(name: str, metric: Mapping[str, Any]) -> str:
    arrow = "↓" if metric["direction"] == "lower" else "↑"
    return f"{name} {arrow}"


def result_tables(results: Sequence[Mapping[str, Any]], width: int) -> list[Table]:
    """One row per pair; metrics in as many column groups as the width needs."""
    if not results:
        return []
    names = sorted({name for result in results for name in result["metrics"]})
    first = {
        name: next(r["metrics"][name] for r in results if name in r["metrics"]) for name in names
    }
    fixed_columns = ["candidate", "problem", "n"]
    fixed_rows = [
        [result["candidate"], result["problem"], f"{result['accepted']}/{result['slots']}"]
        for result in results
    ]
    cells = {
        name: [
            metric_cell(result["metrics"][name]) if name in result["metrics"] else "-"
            for result in results
        ]
        for name in names
    }
    headers = {name: _header(name, first[name]) for name in names}

    def column_width(header: str, column: Sequence[str]) -> int:
        return max(len(header), *(len(cell) for cell in column)) + _GAP

    fixed_width = sum(
        column_width(header, [row[index] for row in fixed_rows])
        for index, header in enumerate(fixed_columns)
    )
    groups: list[list[str]] = [[]]
    used = fixed_width
    for name in names:
        needed = column_width(headers[name], cells[name])
        if groups[-1] and used + needed > width:
            groups.append([])
            used = fixed_width
        groups[-1].append(name)
        used += needed
    tables = []
    for index, group in enumerate(groups):
        title = "results (median ± MAD)" if index == 0 else "results, continued"
        rows = [
            [*fixed_rows[row], *(cells[name][row] for name in group)] for row in range(len(results))
        ]
        tables.append(table(title, [*fixed_columns, *(headers[name] for name in group)], rows))
    return tables


def unstable_lines(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """``! candidate x problem: metric: reason; ...`` for each unstable metric, at most
    :data:`MAX_NOTES` lines and a count of the rest."""
    notes = [
        f"! {result['candidate']} x {result['problem']}: {name}: "
        + "; ".join(metric["statistics"]["reasons"])
        for result in results
        for name, metric in sorted(result["metrics"].items())
        if metric["statistics"]["unstable"]
    ]
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"! ... and {len(notes) - MAX_NOTES} more unstable"]
    return notes
