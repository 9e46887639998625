"""Running power-loss sweeps: which scenarios, which cuts, how many states, and the
summary.

Rules of this file: the choice of cuts and states lives here. The exhaustive run takes
every cut of every scenario (every boundary of opening for the opening sweeps, every
step boundary otherwise, and the end) with every state the model allows at it, up to
:data:`EXHAUSTIVE_LIMIT` per cut (a cut with more is sampled with the seed and counted in
``sampled=``). The default run (the test command's) takes the scenarios of
:data:`DEFAULT`, each at a seeded choice of cuts that always includes the boundaries right
after each filesystem operation and each COMMIT of the steps, and the end, with at most
:data:`SAMPLE_LIMIT` states per cut.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.powerloss import PowerLoss
from runstore.crashsim.results import SuiteResult
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import INIT_REGISTER
from runstore.crashsim.scenarios import OPENING_SCENARIOS
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.suite import run_sweeps

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


def chooser(scenario: Scenario, exhaustive: bool, seed: int) -> Selector[int]:
    """The cuts of ``scenario``'s sweep (the end is always one)."""
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
    report: Callable[[SweepResult], None] | None = None,
    lanes: int | None = None,
) -> SuiteResult:
    """Run the power-loss sweeps of ``names`` (the default run's when None; every scenario
    when ``exhaustive``)."""
    scenarios = catalog if catalog is not None else SCENARIOS
    if names is None:
        names = list(SCENARIOS) if exhaustive else list(DEFAULT)
    method = PowerLoss(limit=EXHAUSTIVE_LIMIT if exhaustive else SAMPLE_LIMIT, seed=seed)
    return run_sweeps(
        [scenarios[name] for name in names],
        method,
        lambda scenario: chooser(scenario, exhaustive, seed),
        jobs=jobs,
        directory=directory,
        report=report,
        lanes=lanes,
    )
