"""``compare`` for people: one table per metric, one row per problem x candidate, with
the baseline's and the candidate's ``median ± MAD`` and the verdict in words
(SPEC.md section 17.5).

Rules of this file: rendering only, from the ``compare`` document (what ``--json``
prints).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from runstore.analysis.numbers import plus_minus
from runstore.cli.output import table


def _cell(statistics: Mapping[str, Any], unit: str) -> str:
    text = plus_minus(statistics["median"], statistics["mad"], unit)
    return text + (" !" if statistics["unstable"] else "")


def compare_tables(document: Mapping[str, Any]) -> tuple[list[Table], list[str]]:
    """Per metric, each problem's baseline row (result ``baseline``) and then one row per
    compared candidate, as hyperfine lists them: no cell is repeated on every row."""
    against = document["baseline_candidate"] or document["baseline_campaign"]
    if document.get("baseline_revision") is not None:
        against = f"revision {document['baseline_revision']} (revision {document['revision']})"
    tables = []
    for metric in document["metrics"]:
        rows = [row for row in document["rows"] if row["metric"] == metric]
        if not rows:
            continue
        arrow = "lower is better" if rows[0]["direction"] == "lower" else "higher is better"
        shown: list[list[object]] = []
        previous: tuple[str, str] | None = None
        for row in rows:
            unit = row["unit"]
            if (row["problem"], row["baseline"]) != previous:
                base = row["baseline_statistics"]
                problem = (
                    row["problem"] if previous is None or previous[0] != row["problem"] else ""
                )
                shown.append([problem, row["baseline"], _cell(base, unit), base["n"], "baseline"])
            mine = row["candidate_statistics"]
            shown.append(["", row["candidate"], _cell(mine, unit), mine["n"], row["words"]])
            previous = (row["problem"], row["baseline"])
        columns = ["problem", "candidate", "median ± MAD", "n", "result"]
        tables.append(table(f"{metric} ({arrow}) against {against}", columns, shown))
    lines = []
    if document["missing"]:
        missing = document["missing"]
        lines.append(f"no baseline for {len(missing)} pairs: " + ", ".join(missing[:10]))
    unchanged = document.get("unchanged") or []
    if unchanged:
        lines.append(
            f"unchanged between the revisions ({len(unchanged)} pairs, the same results): "
            + ", ".join(unchanged[:10])
            + (f" and {len(unchanged) - 10} more" if len(unchanged) > 10 else "")
        )
    if not document["rows"]:
        lines.append("nothing to compare: no pair has results on both sides")
    lines.append(
        "ratios: Hodges-Lehmann estimates with 95% intervals; significance: two-sided "
        "Mann-Whitney U at 0.05 (SPEC.md section 17)"
    )
    return tables, lines
