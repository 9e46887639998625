"""What a run tells: a line per module, a JSON document and an HTML page.

The summary line of a module: its score (killed of scored), the counts of each fate, the
time, and against the baseline (``new``, ``=``, ``+x.x`` or ``DROP -x.x``). The JSON
report holds every mutant of every module run (operator, line, fate, the changed text and,
for survivors, the diff); the HTML page is the same with survivors' diffs shown. Rules of
this file: rendering only, from :class:`mutation.results.ModuleResult` values.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path

from mutation.results import ModuleResult
from mutation.settings import Baseline


def percent(score: float | None) -> str:
    return "   n/a" if score is None else f"{100 * score:5.1f}%"


def versus(result: ModuleResult, baseline: Baseline | None, whole: bool) -> str:
    if not whole or result.score is None:
        return ""
    if baseline is None:
        return "  [no baseline]"
    delta = 100 * (result.score - baseline.score)
    if delta < -1e-9:
        return f"  [DROP {delta:+.1f} below the baseline {percent(baseline.score).strip()}]"
    return f"  [baseline {percent(baseline.score).strip()}, {delta:+.1f}]"


def summary_line(result: ModuleResult, baseline: Baseline | None, whole: bool) -> str:
    fates = result.fates
    parts = [
        f"{result.module}: {percent(result.score)} killed ({result.killed}/{result.scored})",
        f"survived {fates['survived']}",
        f"equivalent {fates['equivalent']}",
        f"skipped {fates['skipped']}",
    ]
    if result.timeouts:
        parts.append(f"timeouts {result.timeouts}")
    if fates["error"]:
        parts.append(f"ERRORS {fates['error']}")
    minutes, seconds = divmod(int(result.seconds), 60)
    parts.append(f"{minutes}m{seconds:02d}s")
    return ", ".join(parts) + versus(result, baseline, whole)


def to_document(results: Sequence[ModuleResult], tree: str, scope: str) -> dict[str, object]:
    modules = {}
    for result in results:
        modules[result.module] = {
            "score": result.score,
            "killed": result.killed,
            "scored": result.scored,
            "fates": dict(sorted(result.fates.items())),
            "timeouts": result.timeouts,
            "seconds": round(result.seconds, 1),
            "mutants": [
                {
                    "operator": m.operator,
                    "occurrence": m.occurrence,
                    "line": m.line,
                    "fate": m.fate,
                    "original": m.original,
                    "mutated": m.mutated,
                    **({"diff": m.diff} if m.fate == "survived" else {}),
                    **({"note": m.note} if m.note else {}),
                }
                for m in result.mutants
            ],
        }
    return {"tool": "cosmic-ray", "tree": tree, "scope": scope, "modules": modules}


def write_reports(
    directory: Path,
    results: Sequence[ModuleResult],
    tree: str,
    scope: str,
    baselines: Mapping[str, Baseline],
) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "mutation.json"
    json_path.write_text(json.dumps(to_document(results, tree, scope), indent=1) + "\n")
    html_path = directory / "mutation.html"
    html_path.write_text(_html(results, scope, baselines), encoding="utf-8")
    return json_path, html_path


def _html(results: Sequence[ModuleResult], scope: str, baselines: Mapping[str, Baseline]) -> str:
    rows = []
    sections = []
    for result in results:
        base = baselines.get(result.module)
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(cell))}</td>"
                for cell in (
                    result.module,
                    percent(result.score),
                    result.killed,
                    result.fates["survived"],
                    result.fates["equivalent"],
                    result.fates["skipped"],
                    result.fates["error"],
                    percent(base.score) if base else "",
                )
            )
            + "</tr>"
        )
        survivors = result.survivors()
        if survivors:
            items = "".join(
                f"<li><b>line {m.line}</b> {html.escape(m.operator)}"
                f"<pre>{html.escape(m.diff)}</pre></li>"
                for m in survivors
            )
            sections.append(f"<h2>{html.escape(result.module)}</h2><ul>{items}</ul>")
    head = "".join(
        f"<th>{name}</th>"
        for name in (
            "module",
            "score",
            "killed",
            "survived",
            "equivalent",
            "skipped",
            "errors",
            "baseline",
        )
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Mutation report</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;"
        "text-align:right}td:first-child{text-align:left}pre{background:#f4f4f4;"
        "padding:6px}</style></head><body>"
        f"<h1>Mutation report ({html.escape(scope)})</h1>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
        f"<p>Survivors, with the diff of each:</p>{''.join(sections) or '<p>none</p>'}"
        "</body></html>\n"
    )
