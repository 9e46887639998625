"""Running several campaigns: the representative subset or every boundary, and the summary.

Rules of this file: the choice of crash points lives here. The exhaustive suite crashes
at every boundary of every scenario. The representative subset crashes every boundary of
the crash-tested steps of the scenarios in :data:`~runstore.crashsim.scenarios.FULL_IN_SUBSET`
(all of ``init``, which is nothing but opening: creating a store), and for the others a
seeded sample of them that always includes the boundaries around each COMMIT. Opening an
existing store (the fixture) is the same path in every other scenario, several hundred
boundaries each: the subset crashes a seeded sample of 8 of them per scenario (about 200 across the
subset, different in each), and only the exhaustive suite crashes all of them.
For the publication scenarios (``resume`` set) and the recovery scenarios (a ``recover``
step) the sample also always includes the
*landmarks* of the steps: both boundaries of every filesystem operation (each syscall of
a compound step has its own pair: creating, locking, each fsync, the rename and each
parent sync after it, the cleanup) and of every SQL write (the stage's lease, the
registration and the terminal projection's rows), so outcome construction, the rename and
the terminal commit are crashed at every default run.
The work directory defaults to ``/dev/shm`` where it exists: the campaigns simulate
process death, not power loss, so the page cache is part of what survives and a tmpfs
gives the same answers without waiting for the disk.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence

import attrs
from runstore.crashsim.campaign import CampaignResult, Point, Selector, run_campaign
from runstore.crashsim.scenarios import FULL_IN_SUBSET, RECOVER_STEP, SCENARIOS, Scenario

SAMPLE_OPEN = 8
SAMPLE_STEPS = 24


@attrs.frozen
class SuiteResult:
    campaigns: tuple[CampaignResult, ...]
    seconds: float

    @property
    def failures(self) -> int:
        return sum(len(c.failures) + (1 if c.problem else 0) for c in self.campaigns)

    @property
    def mismatches(self) -> int:
        return sum(len(c.mismatches) for c in self.campaigns)

    def summary(self) -> str:
        boundaries = sum(c.boundaries for c in self.campaigns)
        crashes = sum(c.crashes for c in self.campaigns)
        return (
            f"scenarios={len(self.campaigns)} boundaries={boundaries} crashes={crashes} "
            f"failures={self.failures} seconds={self.seconds:.1f}"
        )


WRITES = ("INSERT", "UPDATE", "DELETE")


def landmark(point: Point) -> bool:
    """A boundary of a step's filesystem operation or SQL write (not a read)."""
    kind, text = point.entry[3], str(point.entry[4])
    return point.op_index > 0 and (kind == "fs" or text.startswith(WRITES))


def sampler(seed: int, name: str, landmarks: bool = False, every_step: bool = False) -> Selector:
    """The subset's seeded choice of crash points for scenario ``name`` (with every
    :func:`landmark` when ``landmarks``, every step boundary when ``every_step``)."""

    def select(points: Sequence[Point]) -> list[int]:
        rng = random.Random(f"{seed}:{name}")
        opening = [p.k for p in points if p.op_index == 0]
        steps = [p.k for p in points if p.op_index > 0]
        around_commits = [
            p.k for p in points if p.op_index > 0 and p.entry[3:] == ["sql", "COMMIT"]
        ]
        chosen = set(rng.sample(opening, min(SAMPLE_OPEN, len(opening))))
        chosen |= set(steps if every_step else rng.sample(steps, min(SAMPLE_STEPS, len(steps))))
        chosen |= set(around_commits)
        if not steps:  # a scenario that is all opening (initialization)
            chosen |= set(rng.sample(opening, min(SAMPLE_OPEN + SAMPLE_STEPS, len(opening))))
        if landmarks:
            chosen |= {p.k for p in points if landmark(p)}
        return sorted(chosen)

    return select


def _landmarked(scenario: Scenario) -> bool:
    """Publications and recovery passes: multi-step filesystem work worth every landmark."""
    return scenario.resume or any(step.name == RECOVER_STEP for step in scenario.steps)


def default_directory() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def default_jobs() -> int:
    return (os.cpu_count() or 1) + 1


def run_suite(
    scenarios: Sequence[Scenario] | None = None,
    *,
    exhaustive: bool = False,
    seed: int = 0,
    full: Sequence[str] = FULL_IN_SUBSET,
    jobs: int | None = None,
    directory: str | None = None,
    report: Callable[[CampaignResult], None] | None = None,
) -> SuiteResult:
    """Run each scenario's campaign (the whole catalog when None): at every boundary when
    ``exhaustive`` or the scenario is all opening (``init``); at every step boundary and a
    seeded sample of opening's when it is in ``full``; else at the seeded sample."""
    started = time.monotonic()
    chosen = list(SCENARIOS.values()) if scenarios is None else list(scenarios)
    results = []
    for scenario in chosen:
        select = (
            None
            if exhaustive or (scenario.name in full and not scenario.steps)
            else sampler(
                seed,
                scenario.name,
                landmarks=_landmarked(scenario),
                every_step=scenario.name in full,
            )
        )
        result = run_campaign(
            scenario,
            select,
            jobs=jobs or default_jobs(),
            directory=directory or default_directory(),
        )
        if report is not None:
            report(result)
        results.append(result)
    return SuiteResult(tuple(results), time.monotonic() - started)


def failure_lines(result: CampaignResult) -> list[str]:
    """The report lines of a campaign's problem, failures and mismatches."""
    lines = []
    if result.problem:
        lines.append(f"FAILURE scenario={result.scenario}: {result.problem}")
    for crash in result.failures:
        lines.append(
            f"FAILURE scenario={crash.scenario} k={crash.k} in {crash.operation}\n"
            f"  boundary: {crash.boundary}\n"
            f"  acceptable: {crash.acceptable}\n"
            f"  found: {crash.detail}"
        )
    for crash in result.mismatches:
        lines.append(
            f"MISMATCH scenario={crash.scenario} k={crash.k} (not counted)\n"
            f"  boundary: {crash.boundary}\n"
            f"  {crash.detail}"
        )
    return lines
