"""The kit's report (SPEC.md section 18.4): each check with pass, fail or not implemented,
as text for people and as one JSON document.

Rules of this file: values and pure functions. A failure's detail names the first case
that failed and, for bytes, the first differing byte with both sides around it
(:func:`first_difference`).
"""

from __future__ import annotations

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

    def row(self, check: Check) -> str:
        """One check's line (and its detail's lines, indented)."""
        word = {PASS: "pass", FAIL: "FAIL", NOT_IMPLEMENTED: "not implemented"}[check.status]
        cases = f"{check.cases:>5} case" + ("" if check.cases == 1 else "s")
        lines = [f"  {check.name:<{NAME_WIDTH}}  {word:<15}  {cases}"]
        lines.extend("      " + line for line in check.detail.splitlines())
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


def first_difference(expected: bytes, got: bytes) -> str:
    """Where two byte strings first differ, with up to 16 bytes of each around it."""
    offset = next(
        (i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
        min(len(expected), len(got)),
    )
    start = max(0, offset - 8)
    return (
        f"first difference at byte {offset} (expected {len(expected)} bytes, got {len(got)}): "
        f"expected ...{expected[start : offset + 8]!r}... got ...{got[start : offset + 8]!r}..."
    )
