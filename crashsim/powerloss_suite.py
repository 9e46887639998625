"""Running power-loss campaigns: which scenarios, which cuts, how many states, and the
summary.

Rules of this file: the choice of cuts and states lives here. The exhaustive run takes
every cut of every scenario (every boundary of opening for the opening campaigns, every
step boundary otherwise, and the end) with every state the model allows at it, up to
:data:`EXHAUSTIVE_LIMIT` per cut (a cut with more is sampled with the seed and counted in
``sampled=``). The default run (the test command's) takes the scenarios of
:data:`DEFAULT`, each at a seeded choice of cuts that always includes the boundaries right
after each filesystem operation and each COMMIT of the steps, and the end, with at most
:data:`SAMPLE_LIMIT` states per cut.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Final

import attrs
from runstore.crashsim.points import Point
from runstore.crashsim.powerloss import Chooser, PowerLossResult, run_powerloss
from runstore.crashsim.scenarios import INIT_REGISTER, OPENING_SCENARIOS, SCENARIOS, Scenario
from runstore.crashsim.suite import default_directory, default_jobs

DEFAULT: Final = (
    "init",
    INIT_REGISTER,
    "publish_artifact",
    "publish_finalization_accepted",
    "recover_stage_quarantine",
)
"""The scenarios of the default (test command) run, sampled: creating a store, its first
registration, a publication of each kind and a recovery that quarantines."""
EXHAUSTIVE_LIMIT: Final = 4096
SAMPLE_LIMIT: Final = 6
SAMPLE_CUTS: Final = 10


@attrs.frozen
class PowerLossSuite:
    campaigns: tuple[PowerLossResult, ...]
    seconds: float

    @property
    def failures(self) -> int:
        return sum(len(c.failures) + (1 if c.problem else 0) for c in self.campaigns)

    @property
    def mismatches(self) -> int:
        return sum(len(c.mismatches) for c in self.campaigns)

    def summary(self) -> str:
        cuts = sum(c.cuts for c in self.campaigns)
        states = sum(c.states for c in self.campaigns)
        sampled = sum(c.sampled for c in self.campaigns)
        return (
            f"faults=powerloss scenarios={len(self.campaigns)} cuts={cuts} states={states} "
            f"sampled={sampled} failures={self.failures} seconds={self.seconds:.1f}"
        )


def chooser(scenario: Scenario, exhaustive: bool, seed: int) -> Chooser:
    """The cuts of ``scenario``'s campaign (the end is always one)."""
    opening = scenario.name in OPENING_SCENARIOS

    def choose(points: Sequence[Point]) -> list[int]:
        eligible = [p for p in points if opening or p.op_index > 0]
        if exhaustive:
            return [p.k for p in eligible]
        landmarks = [p.k for p in eligible if _after_landmark(p)]
        rng = random.Random(f"{seed}:{scenario.name}")
        sample = rng.sample(eligible, min(SAMPLE_CUTS, len(eligible)))
        return sorted({*landmarks, *(p.k for p in sample)})

    return choose


def _after_landmark(point: Point) -> bool:
    """Right after a filesystem operation or a COMMIT (not of opening's probes)."""
    if point.entry[2] != "after" or point.op_index == 0:
        return False
    return point.entry[3] == "fs" or point.entry[4] == "COMMIT"


def run_powerloss_suite(
    names: Sequence[str] | None = None,
    *,
    exhaustive: bool = False,
    seed: int = 0,
    jobs: int | None = None,
    directory: str | None = None,
    catalog: dict[str, Scenario] | None = None,
    report: Callable[[PowerLossResult], None] | None = None,
) -> PowerLossSuite:
    """Run the power-loss campaigns of ``names`` (the default run's when None; every
    scenario when ``exhaustive``)."""
    started = time.monotonic()
    scenarios = catalog if catalog is not None else SCENARIOS
    if names is None:
        names = list(SCENARIOS) if exhaustive else list(DEFAULT)
    results = []
    for name in names:
        scenario = scenarios[name]
        result = run_powerloss(
            scenario,
            chooser(scenario, exhaustive, seed),
            limit=EXHAUSTIVE_LIMIT if exhaustive else SAMPLE_LIMIT,
            seed=seed,
            jobs=jobs or default_jobs(),
            directory=directory or default_directory(),
        )
        if report is not None:
            report(result)
        results.append(result)
    return PowerLossSuite(tuple(results), time.monotonic() - started)


def failure_lines(result: PowerLossResult) -> list[str]:
    """The report lines of a campaign's problem, failures (the first shrunk) and
    mismatches."""
    lines = []
    if result.problem:
        lines.append(f"FAILURE scenario={result.scenario}: {result.problem}")
    for state in result.failures:
        lines.append(
            f"FAILURE scenario={result.scenario} power cut at {state.where}\n"
            f"  undone: {'; '.join(state.undone) or 'nothing'}\n"
            f"  found: {state.detail}"
        )
    if result.shrunk:
        lines.append(f"SHRUNK scenario={result.scenario} {result.shrunk}")
    for mismatch in result.mismatches:
        lines.append(f"MISMATCH scenario={result.scenario} (not counted) {mismatch}")
    return lines
