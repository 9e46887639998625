"""What a sweep found and what a suite of sweeps found, counted and printed the same way
for every method.

Rules of this file: pure values and their report lines; nothing here runs a process or
reads a store. A :class:`Finding` is one checked (or not checked) point of a sweep, a
:class:`SweepResult` one scenario's sweep by one method, a :class:`SuiteResult` several
sweeps by one method. Each method's family keeps the words its summary line has always
printed (``crashes=`` for process death, ``states=`` for the fault families,
``compared=`` for the method comparison: the same count under each family's name), as data
in :data:`FAMILIES`; ``tools/nightly``, the tests and ``tools/powerloss_teeth.py`` parse
them.

Statuses: ``ok`` and ``failure`` are checked points (:attr:`SweepResult.checked`);
``mismatch`` is a point whose execution left the reference path (reported, never counted
as tested); ``unfired`` an injected fault that found nothing to fail (I/O faults).
"""

from __future__ import annotations

from typing import Final

import attrs
from runstore.crashsim.timing import Phases

CHECKED: Final = ("ok", "failure")


@attrs.frozen
class Finding:
    """The finding at one point of a sweep: boundary ``k`` of the reference (for a power
    cut, the boundary its acceptable states are those of; -1 for the end of the run), inside
    ``operation`` (``step i (name)``), where ``boundary`` says exactly what was crashed,
    faulted or cut there."""

    scenario: str
    k: int
    status: str
    boundary: str
    operation: str
    acceptable: str = ""
    detail: str = ""
    image: int | None = None
    """With the image method (and the comparison): the boundary whose identical image (and
    identical acceptable states) was verified for this one; ``k`` itself when this image
    was the first."""
    undone: tuple[str, ...] | None = None
    """With power loss: what the cut undid (None for the methods that undo nothing)."""
    copies: int = 1
    """With power loss: how many (cut, choice) pairs left this very state with the same
    acceptable states (it is checked once)."""


@attrs.frozen
class Family:
    """How one family of methods counts and prints: the keys of a sweep's line (after
    ``<scenario>: ``) and of the suite's summary line (after ``prefix``), and whether a
    mismatch counts as a failure (it does where a changed path leaves a fault untested, or
    the two methods' copies uncompared)."""

    line: tuple[str, ...]
    summary: tuple[str, ...]
    prefix: str = ""
    mismatch_fails: bool = False


_CRASH = Family(
    ("boundaries", "crashes", "failures", "mismatches", "images", "seconds", "points_per_second"),
    ("scenarios", "boundaries", "crashes", "images", "failures", "seconds", "points_per_second"),
)
FAMILIES: Final[dict[str, Family]] = {
    "image": _CRASH,
    "kill": _CRASH,
    "io": Family(
        ("boundaries", "points", "states", "failures", "seconds"),
        ("scenarios", "points", "states", "unfired", "failures", "seconds"),
        prefix="faults=io ",
        mismatch_fails=True,
    ),
    "powerloss": Family(
        ("boundaries", "cuts", "states", "failures", "seconds"),
        ("scenarios", "cuts", "states", "sampled", "failures", "seconds"),
        prefix="faults=powerloss ",
    ),
    "compare": Family(
        ("compared", "distinct", "differences"),
        ("scenarios", "compared", "differences", "seconds"),
        mismatch_fails=True,
    ),
}
"""Method name -> its family."""


@attrs.frozen
class SweepResult:
    """One scenario's sweep by ``method``. ``problem`` is a failure of the fixture, the
    reference or the method's own preconditions (no point was checked, or not all)."""

    scenario: str
    method: str
    boundaries: int
    results: tuple[Finding, ...]
    seconds: float
    problem: str | None = None
    phases: Phases = attrs.field(factory=Phases)
    """Where the sweep's time went (see :mod:`runstore.crashsim.timing`)."""
    cuts: int = 0
    """With power loss: the cuts made (the chosen boundaries, their steps' effects, the end)."""
    sampled: int = 0
    """With power loss: how many cuts had more states than the limit (sampled)."""
    shrunk: str = ""
    """With power loss: the first failing state, shrunk (see :mod:`runstore.crashsim.powerloss`)."""

    def _with(self, *statuses: str) -> list[Finding]:
        return [r for r in self.results if r.status in statuses]

    @property
    def failures(self) -> list[Finding]:
        return self._with("failure")

    @property
    def mismatches(self) -> list[Finding]:
        return self._with("mismatch")

    @property
    def unfired(self) -> list[Finding]:
        return self._with("unfired")

    @property
    def checked(self) -> int:
        """The points (crashes, faults that fired, power-loss states) checked."""
        return len(self._with(*CHECKED))

    @property
    def images(self) -> int:
        """How many crash images were verified: one per crash point with the kill method,
        one per distinct image and acceptable states with the image method (with the
        comparison: how many different photographs the compared points left)."""
        return sum(1 for r in self.results if r.status != "mismatch" and r.image in (None, r.k))

    @property
    def failed(self) -> int:
        """What fails the sweep: its failures, its problem, and its mismatches where the
        family counts them."""
        mismatches = len(self.mismatches) if FAMILIES[self.method].mismatch_fails else 0
        return len(self.failures) + mismatches + (1 if self.problem else 0)

    def counts(self) -> dict[str, int]:
        """Every count a line may print, by its printed key."""
        checked, failed = self.checked, self.failed
        return {
            "boundaries": self.boundaries,
            "points": len(self.results),
            "compared": len(self.results),
            "crashes": checked,
            "states": checked,
            "images": self.images,
            "distinct": self.images,
            "unfired": len(self.unfired),
            "mismatches": len(self.mismatches),
            "failures": failed,
            "differences": failed,
            "cuts": self.cuts,
            "sampled": self.sampled,
        }

    def line(self) -> str:
        """``<scenario>: key=value ...`` with the family's keys."""
        per_second = self.checked / max(self.seconds, 1e-9)
        rates = {"seconds": self.seconds, "points_per_second": per_second}
        return f"{self.scenario}: {_pairs(FAMILIES[self.method].line, self.counts(), rates)}"


@attrs.frozen
class SuiteResult:
    """Several scenarios' sweeps by one method."""

    method: str
    sweeps: tuple[SweepResult, ...]
    seconds: float

    @property
    def failures(self) -> int:
        return sum(sweep.failed for sweep in self.sweeps)

    @property
    def mismatches(self) -> int:
        return sum(len(sweep.mismatches) for sweep in self.sweeps)

    def count(self, key: str) -> int:
        """The sum over the sweeps of the count printed as ``key``."""
        return sum(sweep.counts().get(key, 0) for sweep in self.sweeps)

    @property
    def points_per_second(self) -> float:
        return self.count("crashes") / self.seconds if self.seconds > 0 else 0.0

    @property
    def phases(self) -> Phases:
        total = Phases()
        for sweep in self.sweeps:
            total.add(sweep.phases)
        return total

    def summary(self) -> str:
        """The suite's summary line (the family's prefix and keys)."""
        family = FAMILIES[self.method]
        rates = {"seconds": self.seconds, "points_per_second": self.points_per_second}
        counts = {key: self.count(key) for key in family.summary if key not in rates}
        counts["scenarios"] = len(self.sweeps)
        return family.prefix + _pairs(family.summary, counts, rates)


def exit_status(*suites: SuiteResult) -> int:
    """0 when all is well, 1 on any failure, 2 when there is no failure but some point
    changed its execution path (not counted as tested)."""
    if any(suite.failures for suite in suites):
        return 1
    return 2 if any(suite.mismatches for suite in suites) else 0


def _pairs(keys: tuple[str, ...], counts: dict[str, int], rates: dict[str, float]) -> str:
    return " ".join(
        f"{key}={rates[key]:.1f}" if key in rates else f"{key}={counts[key]}" for key in keys
    )


def report_lines(result: SweepResult) -> list[str]:
    """The report lines of a sweep's problem, failures, shrunk failure, mismatches and
    unfired faults."""
    lines = []
    if result.problem:
        lines.append(f"FAILURE scenario={result.scenario}: {result.problem}")
    for finding in result.failures:
        facts = [f"  boundary: {finding.boundary}"]
        if finding.undone is not None:
            facts.append(f"  undone: {'; '.join(finding.undone) or 'nothing'}")
        if finding.acceptable:
            facts.append(f"  acceptable: {finding.acceptable}")
        lines.append(
            f"FAILURE scenario={finding.scenario} k={finding.k} in {finding.operation}\n"
            + "\n".join([*facts, f"  found: {finding.detail}"])
        )
    if result.shrunk:
        lines.append(f"SHRUNK scenario={result.scenario} {result.shrunk}")
    counted = "a failure" if FAMILIES[result.method].mismatch_fails else "not counted"
    for finding in result.mismatches:
        lines.append(
            f"MISMATCH scenario={finding.scenario} k={finding.k} ({counted})\n"
            f"  boundary: {finding.boundary}\n"
            f"  {finding.detail}"
        )
    for finding in result.unfired:
        where = f"{finding.boundary} in {finding.operation}"
        lines.append(f"UNFIRED scenario={finding.scenario} {where}")
    return lines
