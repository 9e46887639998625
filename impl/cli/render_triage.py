"""``failures``' text: each cause of unsatisfied slots, its slots and one excerpt, in lines
that fit an 80-column terminal (SPEC.md section 15.6, "When a slot fails").

Rules of this file: rendering only, from the document ``failures --json`` prints
(:meth:`runstore.inspection.failures.FailureReport.to_json`), so the text never shows
what the JSON does not. Prose wraps at :data:`WIDTH` columns (or a narrower terminal's);
a path or a command line stands alone on its line, indented, and is never broken (a
long store root can make it wider). Log lines are the reader's already visible,
bounded text, each cut to the width.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any
from typing import Final

from rich.cells import cell_len
from runstore.cli import wording

WIDTH: Final = 80
SHOWN_SLOTS: Final = 10
"""How many slots of a group are named (the first by name); the rest are counted."""


def _wrapped(text: str, width: int, indent: str = "") -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells, ending in ``…`` when cut."""
    if cell_len(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += cell_len(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + "…"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _heading(group: Mapping[str, Any]) -> str:
    count, state = group["count"], group["state"]
    slots = _plural(count, "slot")
    if state == "censored":
        return f"censored ({group['reason']}): {slots}"
    if state == "superseded":
        return f"superseded: {slots} whose latest attempt lost the slot to another, none accepted"
    if state == "interrupted":
        return f"{group['code']}: {slots} interrupted (recovery ended their attempts)"
    return f"{group['code']}: {slots} {state}"


def _excerpt(excerpt: Mapping[str, Any], width: int) -> list[str]:
    cause = wording.cause(
        excerpt["state"], excerpt["failure_code"], excerpt["details"], excerpt["reason"]
    )
    lines = _wrapped(f"{excerpt['slot']}, attempt {excerpt['attempt']}: {cause}", width, "  ")
    logs = excerpt.get("logs")
    if not isinstance(logs, Mapping):
        lines.append("  no logs: the attempt has no attempt artifact")
    elif not isinstance(logs.get("stderr_tail"), list):
        lines += _wrapped(f"stderr.log not shown: {logs.get('problem')}", width, "  ")
    elif not logs["stderr_tail"]:
        lines.append("  stderr.log is empty")
    else:
        lines.append("  stderr.log, last lines:")
        lines += [_cut(f"    | {line}", width) for line in logs["stderr_tail"]]
    if isinstance(logs, Mapping) and logs.get("stderr"):
        lines += ["  log:", f"    {logs['stderr']}"]
    lines += ["  more:", f"    {excerpt['explain_command']}", f"    {excerpt['logs_command']}"]
    return lines


def failures_lines(document: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """``failures``' text: a summary line, then per group a heading, its slots (the first
    :data:`SHOWN_SLOTS` by name, then ``and N more``) and its excerpt."""
    width = max(min(width, WIDTH), 40)
    where = f" in campaign {document['campaign']}" if document["campaign"] else ""
    groups = document["groups"]
    if not groups:
        return _wrapped(
            f"no failures{where}: {_plural(document['slots'], 'slot')}, "
            "each accepted, running or pending",
            width,
        )
    lines = _wrapped(
        f"{document['unsatisfied']} of {_plural(document['slots'], 'slot')} unsatisfied"
        f"{where}, {_plural(len(groups), 'cause')}:",
        width,
    )
    for group in groups:
        lines += ["", *_wrapped(_heading(group), width)]
        slots = group["slots"]
        named = ", ".join(slots[:SHOWN_SLOTS])
        if len(slots) > SHOWN_SLOTS:
            named += f" and {len(slots) - SHOWN_SLOTS} more"
        lines += _wrapped(named, width, "  ")
        lines += _excerpt(group["excerpt"], width)
    return lines
