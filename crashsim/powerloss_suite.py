"""Running power-loss sweeps: which scenarios, which cuts, how many states, and the
summary.

Rules of this file: the choice of cuts and states lives here. The exhaustive run takes
every cut of every scenario (every boundary of opening for the opening sweeps, every
step boundary otherwise, and the end) with every state the model allows at it, up to
:data:`EXHAUSTIVE_LIMIT` per cut (a cut with more is sampled with the seed and counted in
``sampled=``). The default run (the test command's) takes the scenarios of
:data:`DEFAULT`, each at a seeded choice of cuts that always includes the boundaries right
after each filesystem operation and each COMMIT of the steps (every sync and rename of a
recovery pass among them) and right after opening creates the root, and the end, with at
most :data:`SAMPLE_LIMIT` states per cut (:data:`RECOVERY_CAP` for a recovery
scenario).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from runstore.crashsim.exporting import EXPORT
from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.powerloss import PowerLoss
from runstore.crashsim.results import SuiteResult
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import INIT_REGISTER
from runstore.crashsim.scenarios import INIT_ROOT
from runstore.crashsim.scenarios import OPENING_SCENARIOS
from runstore.crashsim.scenarios import RECOVERIES
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.suite import run_sweeps

RECOVERY: Final = tuple(scenario.name for scenario in RECOVERIES)
DEFAULT: Final = (
    "init",
    INIT_REGISTER,
    "publish_artifact",
    "publish_finalization_accepted",
    *RECOVERY,
    INIT_ROOT,
    EXPORT,
)
"""The scenarios of the default (test command) run, sampled: creating a store, its first
registration, a publication of each kind, every recovery scenario, ``--init`` creating a
root and an export creating its directory."""
EXHAUSTIVE_LIMIT: Final = 4096
SAMPLE_LIMIT: Final = 6
RECOVERY_CAP: Final = 3
"""States per cut of a recovery scenario in the default run: the page cache's state,
everything undone and one item undone alone (a pass has many cuts, each with a dead
process's unsynced files to undo; the exhaustive run takes them all)."""
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
    """Right after a filesystem operation or a COMMIT of a step, or after opening creates
    the root (the operation names the root itself, ``mkdir $ROOT``)."""
    if point.entry[2] != "after":
        return False
    if point.op_index == 0:
        return point.entry[3] == "fs" and str(point.entry[4]).endswith(" $ROOT")
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
    caps = {} if exhaustive else dict.fromkeys(RECOVERY, RECOVERY_CAP)
    method = PowerLoss(limit=EXHAUSTIVE_LIMIT if exhaustive else SAMPLE_LIMIT, seed=seed, caps=caps)
    return run_sweeps(
        [scenarios[name] for name in names],
        method,
        lambda scenario: chooser(scenario, exhaustive, seed),
        jobs=jobs,
        directory=directory,
        report=report,
        lanes=lanes,
    )
