"""The kit's report (SPEC.md section 18.4): each check with pass, fail or not implemented,
as text for people and as one JSON document.

Rules of this file: values and pure functions. A failure's detail names the first case
that failed and, for bytes, the first differing byte with both sides around it
(:func:`first_difference`).
"""

from __future__ import annotations

import textwrap
from typing import Any

import attrs

PASS, FAIL, NOT_IMPLEMENTED = "pass", "fail", "not_implemented"


@attrs.define
class Check:
    """One check: its ``name`` (a vector file and section, or a campaign), its status,
    how many cases it ran, and what failed (or why it was not implemented)."""

    name: str
    status: str = PASS
    cases: int = 0
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "cases": self.cases,
            "detail": self.detail,
        }


@attrs.define
class Report:
    implementation: str
    level: str
    checks: list[Check] = attrs.Factory(list)
    protocol: int = 1

    @property
    def failed(self) -> bool:
        return any(check.status == FAIL for check in self.checks)

    def check(self, name: str) -> Check:
        """The check called ``name`` (KeyError when the report has none)."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "implementation": self.implementation,
            "level": self.level,
            "checks": [check.to_json() for check in self.checks],
        }

    def header(self) -> str:
        return f"conformance of {self.implementation} at level {self.level}\n"

    def row(self, check: Check, width: int | None = None) -> str:
        """One check's line and its detail's lines, indented; with ``width`` (a terminal's)
        each detail line is wrapped to it, and a transcript's request or response line
        (``> ``, ``< ``) longer than two screen lines is cut there, saying how much is left
        out (``--transcript FILE`` and ``--json`` keep every line whole)."""
        word = {PASS: "pass", FAIL: "FAIL", NOT_IMPLEMENTED: "not implemented"}[check.status]
        cases = f"{check.cases:>5} case" + ("" if check.cases == 1 else "s")
        lines = [f"  {check.name:<{NAME_WIDTH}}  {word:<15}  {cases}"]
        for line in check.detail.splitlines():
            if width is None:
                lines.append(DETAIL_INDENT + line)
            elif line.startswith(("> ", "< ")):
                cut = 2 * max(width, 40) - len(DETAIL_INDENT) - 32  # room for the note
                more = len(line) - cut
                lines.append(
                    DETAIL_INDENT
                    + (line if more <= 0 else f"{line[:cut]} ... ({more} more characters)")
                )
            else:
                lines += textwrap.wrap(
                    line,
                    max(width, 40),
                    initial_indent=DETAIL_INDENT,
                    subsequent_indent=DETAIL_INDENT + "  ",
                    break_on_hyphens=False,
                )
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        counts = {s: sum(c.status == s for c in self.checks) for s in (PASS, FAIL, NOT_IMPLEMENTED)}
        return (
            f"{counts[PASS]} passed, {counts[FAIL]} failed, "
            f"{counts[NOT_IMPLEMENTED]} not implemented\n"
        )

    def text(self) -> str:
        return self.header() + "".join(map(self.row, self.checks)) + self.summary()


NAME_WIDTH = 38
"""The width of a check's name in the report's rows (the longest name is 38)."""
DETAIL_INDENT = "      "


def first_difference(expected: bytes, got: bytes) -> str:
    """Where two byte strings first differ, with up to 16 bytes of each around it: three
    lines (the offset and sizes, then each side's window), so the windows align."""
    offset = next(
        (i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
        min(len(expected), len(got)),
    )
    start = max(0, offset - 8)
    return (
        f"first difference at byte {offset} (expected {len(expected)} bytes, got {len(got)})\n"
        f"expected ...{expected[start : offset + 8]!r}...\n"
        f"     got ...{got[start : offset + 8]!r}..."
    )
