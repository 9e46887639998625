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
from mutation.results import Mutant
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


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, seconds_left = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds_left:02d}s" if minutes else f"{seconds_left}s"


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
    parts.append(duration(result.seconds))
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
                    **({"diff": m.diff} if m.fate in ("survived", "error") else {}),
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
    for number, result in enumerate(results):
        base = baselines.get(result.module)
        anchor = f"m{number}"
        cells = (
            percent(result.score),
            result.killed,
            result.fates["survived"],
            result.fates["equivalent"],
            result.fates["skipped"],
            result.fates["error"],
            percent(base.score) if base else "",
        )
        name = html.escape(result.module)
        link = f"<a href='#{anchor}'>{name}</a>" if _listed(result) else name
        rows.append(
            f"<tr><td>{link}</td>"
            + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells)
            + "</tr>"
        )
        if _listed(result):
            sections.append(f"<h2 id='{anchor}'>{name}</h2>{_module_section(result)}")
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
        "text-align:right}td:first-child,th:first-child,"
        "table.index td,table.index th{text-align:left}"
        "table.index code{white-space:pre-wrap}pre{background:#f4f4f4;padding:6px}"
        ".error{color:#a00}</style></head><body>"
        f"<h1>Mutation report ({html.escape(scope)})</h1>"
        f"<table><tr>{head}</tr>{''.join(rows)}</table>"
        "<p>Each module with survivors or errors: an index (line, operator, change), then the "
        "diff of each.</p>"
        f"{''.join(sections) or '<p>No survivor and no error.</p>'}"
        "</body></html>\n"
    )


def _listed(result: ModuleResult) -> bool:
    return bool(result.fates["survived"] or result.fates["error"])


def _module_section(result: ModuleResult) -> str:
    """A module's survivors and errors: one index row each (the change in one line), then
    each with its diff (and, for an error, the worker's first line of output)."""
    listed = [m for m in result.mutants if m.fate in ("survived", "error")]
    index = "".join(
        f"<tr><td><a href='#{_anchor(result, m)}'>{m.line}</a></td>"
        f"<td>{html.escape(m.operator)}</td><td class='{m.fate}'>{m.fate}</td>"
        f"<td><code>{html.escape(m.original)}</code> &rarr; "
        f"<code>{html.escape(m.mutated)}</code></td></tr>"
        for m in listed
    )
    items = "".join(
        f"<li id='{_anchor(result, m)}'><b>line {m.line}</b> {html.escape(m.operator)}"
        + (f" <span class='error'>error: {html.escape(m.note)}</span>" if m.fate == "error" else "")
        + f"<pre>{html.escape(m.diff)}</pre></li>"
        for m in listed
    )
    return (
        "<table class='index'><tr><th>line</th><th>operator</th><th>fate</th><th>change</th>"
        f"</tr>{index}</table><ul>{items}</ul>"
    )


def _anchor(result: ModuleResult, mutant: Mutant) -> str:
    name = result.module.replace("/", "-").replace(".", "-")
    return f"{name}-{mutant.line}-{mutant.operator.replace('/', '-')}-{mutant.occurrence}"
