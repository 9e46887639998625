"""``status`` for people and for ``--json``, from documents that stream (SPEC.md sections
15.7 and 17.5).

Rules of this file: rendering only, from the documents the readers make (the counts of
:class:`runstore.inspection.status_summary.StatusCounts`, one pair's ``PairResult``
document at a time, one slot's ``SlotLine`` at a time), never holding more rows than it
prints. By default every table is bounded: the per-candidate and per-problem counts show
:data:`MAX_NAMES` rows (those with the most unsatisfied slots, then the most slots) and
the pairs :data:`MAX_PAIRS`, each followed by what was left out and how to see it
(``--all``); the failures by code :data:`MAX_CODES`. The results table fits the console's
width: metric columns that do not fit go to a continuation table that repeats the pair's
names, so no cell is folded over lines. A pair whose statistics are unstable (section 17.2)
is marked ``!`` and listed under the tables with why. ``--json`` is written piece by
piece (:func:`json_chunks`), the same bytes ``json.dumps`` of the whole document would be.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

import attrs
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
MAX_NAMES: Final = 20
"""Rows of the per-candidate and per-problem tables without ``--all``."""
MAX_PAIRS: Final = 30
"""Rows of the results table without ``--all``."""
MAX_CODES: Final = 20
"""Rows of the failures table without ``--all``."""
ALL_HINT: Final = "status --all shows every row, --slots every slot, --json every statistic"
_GAP: Final = 3
"""Columns of padding rich puts between two columns (plain or boxed)."""


# --- the human summary -----------------------------------------------------------------


@attrs.define
class PairDigest:
    """The pairs the human ``status`` shows, folded one pair at a time (the first
    :data:`MAX_PAIRS`, or all with ``--all``), the first :data:`MAX_NOTES` notes on their
    unstable metrics with a count of the rest, and, from the counts, how many pairs there
    are in all (``pairs``) and how many are not fully accepted (``incomplete``)."""

    shown: list[Mapping[str, Any]] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)
    more_notes: int = 0
    pairs: int = 0
    incomplete: int = 0

    @classmethod
    def of(cls, results: Iterable[Mapping[str, Any]], counts: Mapping[str, Any]) -> PairDigest:
        digest = cls(pairs=counts["pairs"], incomplete=counts["incomplete_pairs"])
        for result in results:
            notes = _notes(result)
            room = MAX_NOTES - len(digest.notes)
            digest.notes += notes[:room]
            digest.more_notes += len(notes[room:])
            digest.shown.append(result)
        return digest

    def lines(self) -> list[str]:
        """The unstable notes, then what the results table left out."""
        lines = list(self.notes)
        if self.more_notes:
            lines.append(f"! ... and {self.more_notes} more unstable")
        hidden = self.pairs - len(self.shown)
        if hidden > 0:
            lines.append(
                f"... and {hidden} more pairs ({self.pairs} in all, {self.incomplete} not fully"
                f" accepted); {ALL_HINT}"
            )
        return lines


def status_tables(
    counts: Mapping[str, Any], pairs: PairDigest, width: int, *, every: bool = False
) -> tuple[list[Table], list[str]]:
    """The tables and the trailing lines of ``status`` for a console ``width`` wide:
    counts per candidate and per problem, the pairs' results, the failures by code and
    the totals (``every``: no table bounded)."""
    full = len({name.partition("/")[0] for name in counts["by_candidate"]}) > 1
    limit = None if every else MAX_NAMES
    tables = [
        _counts("by candidate", "candidate", counts["by_candidate"], limit, full),
        _counts("by problem", "problem", counts["by_problem"], limit, full),
    ]
    tables += result_tables([r for r in pairs.shown if r["metrics"]], width, full=full)
    failures = counts.get("failures", [])
    if failures:
        shown = failures if every else failures[:MAX_CODES]
        rows = [[item["state"], item["code"] or "-", item["slots"]] for item in shown]
        if len(shown) < len(failures):
            rest = sum(item["slots"] for item in failures[len(shown) :])
            rows.append(["...", f"and {len(failures) - len(shown)} more codes", rest])
        tables.append(table("unsatisfied by code", ["state", "code", "slots"], rows))
    totals = counts["totals"]
    tables.append(table("total", list(STATES), [[totals.get(state, 0) for state in STATES]]))
    lines = pairs.lines()
    truncated = not every and (
        len(counts["by_candidate"]) > MAX_NAMES
        or len(counts["by_problem"]) > MAX_NAMES
        or len(failures) > MAX_CODES
    )
    if truncated and not any(ALL_HINT in line for line in lines):
        lines.append(ALL_HINT)
    return tables, lines


ALWAYS_SHOWN: Final = ("accepted", "failed")
"""The count columns every per-candidate and per-problem table shows; another state's
column appears only when some slot is in it (the ``total`` table shows all seven), so the
table fits 80 columns without breaking a header."""


def _counts(
    title: str,
    label: str,
    counts: Mapping[str, Mapping[str, int]],
    limit: int | None,
    full: bool,
) -> Table:
    """One row per name, in name order; beyond ``limit`` names, the ``limit`` with the most
    unsatisfied slots (then the most slots) and a row counting the rest."""
    states = [
        state
        for state in STATES
        if state in ALWAYS_SHOWN or any(by_state.get(state, 0) for by_state in counts.values())
    ]
    names = sorted(counts)
    if limit is not None and len(names) > limit:

        def busiest(name: str) -> tuple[int, int, str]:
            total = sum(counts[name].values())
            return -(total - counts[name].get("accepted", 0)), -total, name

        names = sorted(names, key=busiest)[:limit]
        title = f"{title} (the {limit} of {len(counts)} with the most unsatisfied slots)"
    rows: list[list[object]] = [
        [_name(name, full), *(counts[name].get(state, 0) for state in states)] for name in names
    ]
    if len(names) < len(counts):
        rest = [name for name in counts if name not in set(names)]
        rows.append(
            [
                f"... and {len(rest)} more",
                *(sum(counts[name].get(state, 0) for name in rest) for state in states),
            ]
        )
    return table(title, [label, *states], rows)


def _name(identifier: str, full: bool) -> str:
    """An id as shown: without its campaign unless several campaigns are in view."""
    return identifier if full else identifier.split("/", 1)[-1]


def metric_cell(metric: Mapping[str, Any]) -> str:
    """``median ± MAD unit``, with ``!`` when the statistics are unstable."""
    statistics = metric["statistics"]
    text = plus_minus(statistics["median"], statistics["mad"], metric["unit"])
    return text + (" !" if statistics["unstable"] else "")


def _header(name: str, metric: Mapping[str, Any]) -> str:
    arrow = "↓" if metric["direction"] == "lower" else "↑"
    return f"{name} {arrow}"


def result_tables(
    results: Sequence[Mapping[str, Any]], width: int, *, full: bool = False
) -> list[Table]:
    """One row per pair; metrics in as many column groups as the width needs (``full``:
    candidates named with their campaign)."""
    if not results:
        return []
    names = sorted({name for result in results for name in result["metrics"]})
    first = {
        name: next(r["metrics"][name] for r in results if name in r["metrics"]) for name in names
    }
    fixed_columns = ["candidate", "problem", "n"]
    fixed_rows = [
        [
            f"{result['campaign']}/{result['candidate']}" if full else result["candidate"],
            result["problem"],
            f"{result['accepted']}/{result['slots']}",
        ]
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


def _notes(result: Mapping[str, Any]) -> list[str]:
    return [
        f"! {result['candidate']} x {result['problem']}: {name}: "
        + "; ".join(metric["statistics"]["reasons"])
        for name, metric in sorted(result["metrics"].items())
        if metric["statistics"]["unstable"]
    ]


# --- status --slots ----------------------------------------------------------------------

SLOT_COLUMNS: Final = ("candidate", "problem", "slot", "state", "attempts", "latest failure")
_MIN_NAME: Final = 8


def slot_lines(
    slots: Iterable[Mapping[str, Any]],
    counts: Mapping[str, Any],
    width: int,
    slot_width: int,
) -> Iterator[str]:
    """``status --slots``: a header and one line per slot (candidate, problem, logical
    slot, state, attempts, the latest attempt's failure code or censor reason), in fixed
    columns sized from the counts' names (``slot_width``: the longest logical slot) and cut
    to ``width`` by shortening the names (a cut name ends with ``~``)."""
    full = len({name.partition("/")[0] for name in counts["by_candidate"]}) > 1
    candidate = max([len(_name(n, full)) for n in counts["by_candidate"]] + [9])
    problem = max([len(_name(n, full)) for n in counts["by_problem"]] + [7])
    fixed = [max(slot_width, 4), 11, 8]
    over = candidate + problem + sum(fixed) + 2 * len(SLOT_COLUMNS) + 14 - width
    while over > 0 and max(candidate, problem) > _MIN_NAME:
        if candidate >= problem:
            candidate -= 1
        else:
            problem -= 1
        over -= 1
    widths = [candidate, problem, *fixed]

    def line(cells: Sequence[str]) -> str:
        shown = [_cut(cell, size).ljust(size) for cell, size in zip(cells, widths, strict=False)]
        return "  ".join([*shown, *cells[len(widths) :]]).rstrip()

    yield line(SLOT_COLUMNS)
    for slot in slots:
        code = slot.get("latest_failure_code") or slot.get("latest_censor_reason") or ""
        yield line(
            [
                _name(slot["candidate_id"], full),
                _name(slot["problem_id"], full),
                slot["logical_slot"],
                slot["state"],
                str(slot["attempts"]),
                code,
            ]
        )


def _cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "~"


# --- status --json -----------------------------------------------------------------------


def json_chunks(
    document: Mapping[str, Any], streamed: Mapping[str, Iterable[Mapping[str, Any]]]
) -> Iterator[str]:
    """The text of ``json.dumps({**document, **streamed}, sort_keys=True,
    ensure_ascii=False)`` and a newline, piece by piece: each member of ``streamed`` is a
    list written one element at a time as its iterable yields them."""

    def dumps(value: object) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)

    keys = sorted({*document, *streamed})
    yield "{"
    for index, key in enumerate(keys):
        yield ("" if index == 0 else ", ") + dumps(key) + ": "
        if key not in streamed:
            yield dumps(document[key])
            continue
        yield "["
        for position, item in enumerate(streamed[key]):
            yield ("" if position == 0 else ", ") + dumps(item)
        yield "]"
    yield "}\n"
