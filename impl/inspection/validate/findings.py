"""``validate``'s findings: the report, and the log every check hands its findings to.

Rules of this file: values and the log only (no query). A check reports a defect as
``report(code, subject, message)``; :class:`Log` keeps at most a cap of findings per code
and then one ``findings_truncated`` summary per code (SPEC.md section 16.1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Final

import attrs
from runstore.canonical import JSON

Report = Callable[[str, str, str], None]
"""``report(code, subject, message)``: how a check hands over one finding."""

MESSAGE_LIMIT: Final = 500
"""A finding's message is one line of at most this many characters."""
FINDINGS_TRUNCATED: Final = "findings_truncated"


@attrs.frozen(kw_only=True)
class Finding:
    """One defect: a stable lower_snake_case ``code``, the ``subject`` it concerns (a
    record id, ``table:rowid``, an artifact path, or ``"database"``) and a one-line
    ``message``."""

    code: str
    subject: str
    message: str

    def to_json(self) -> dict[str, JSON]:
        return {"code": self.code, "message": self.message, "subject": self.subject}


@attrs.frozen(kw_only=True)
class ValidationReport:
    """What ``validate`` checked (``checked``: rows or artifacts per kind) and found."""

    root: str
    quick: bool
    checked: dict[str, int]
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """True exactly when nothing was found."""
        return not self.findings

    def to_json(self) -> dict[str, JSON]:
        return {
            "checked": dict(sorted(self.checked.items())),
            "findings": [finding.to_json() for finding in self.findings],
            "ok": self.ok,
            "quick": self.quick,
            "root": self.root,
        }


class Log:
    """The findings so far: at most ``cap`` per code, the rest counted."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._kept: list[Finding] = []
        self._counts: Counter[str] = Counter()

    def __call__(self, code: str, subject: str, message: str) -> None:
        self._counts[code] += 1
        if self._counts[code] <= self._cap:
            line = " ".join(str(message).split())[:MESSAGE_LIMIT]
            self._kept.append(Finding(code=code, subject=str(subject), message=line))

    def findings(self) -> tuple[Finding, ...]:
        """The kept findings in the order found, then one ``findings_truncated`` per code
        that had more than ``cap`` (its subject is that code)."""
        summaries = [
            Finding(
                code=FINDINGS_TRUNCATED,
                subject=code,
                message=f"{count - self._cap} more {code} findings not listed ({count} in all)",
            )
            for code, count in sorted(self._counts.items())
            if count > self._cap
        ]
        return (*self._kept, *summaries)
