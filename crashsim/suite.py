"""Running several sweeps: the one suite loop every method shares, and for process death
the representative subset or every boundary.

Rules of this file: the suite loop (:func:`run_sweeps`, which the I/O fault, power-loss
and comparison suites use too) and the choice of crash points live here. Opening is
crashed by the opening sweeps only
(:data:`~runstore.crashsim.scenarios.OPENING_SCENARIOS`: creating a store, ``init``,
creating its missing root first, ``init_root``, and opening an existing one,
``reopen``); every other sweep crashes its steps and never its opening, which is the same
path whatever the store holds. The exhaustive suite crashes
every boundary of the opening sweeps and every step boundary of the others. The
representative subset crashes every boundary of ``init`` and ``init_root``, a seeded
sample of ``reopen``'s
(:data:`SAMPLE_OPENING`, with every filesystem boundary of its probes), every step
boundary of the scenarios in :data:`~runstore.crashsim.scenarios.FULL_IN_SUBSET`, and for
the others a seeded sample of step boundaries that always includes the boundaries around
each COMMIT.
For the publication scenarios (``resume`` set) and the recovery scenarios (a ``recover``
step) the sample also always includes the
*landmarks* of the steps: both boundaries of every filesystem operation (each syscall of
a compound step has its own pair: creating, locking, each fsync, the rename and each
parent sync after it, the cleanup) and of every SQL write (the stage's lease, the
registration and the terminal projection's rows), so outcome construction, the rename and
the terminal commit are crashed at every default run.
The work directory defaults to ``/dev/shm`` where it exists: the sweeps simulate
process death, not power loss, so the page cache is part of what survives and a tmpfs
gives the same answers without waiting for the disk. ``jobs`` (trials at once per sweep)
and ``lanes`` (sweeps at once, :mod:`runstore.crashsim.lanes`) default to the core count.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Final
from typing import Literal
from typing import TypeVar

from runstore.crashsim.harness import warm
from runstore.crashsim.images import IMAGE
from runstore.crashsim.kill import KILL
from runstore.crashsim.lanes import side_by_side
from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.points import every_boundary
from runstore.crashsim.results import SuiteResult
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import FULL_IN_SUBSET
from runstore.crashsim.scenarios import OPENING_SCENARIOS
from runstore.crashsim.scenarios import RECOVER_STEP
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.sweep import Method
from runstore.crashsim.sweep import run_sweep

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

C = TypeVar("C", bound="SupportsRichComparison")

SAMPLE_OPENING = 48
SAMPLE_STEPS = 24
CrashMethod = Literal["image", "kill"]
METHODS: Final[dict[CrashMethod, Method[int]]] = {"image": IMAGE, "kill": KILL}
"""The two methods that simulate process death, by the name ``--method`` takes."""


WRITES = ("INSERT", "UPDATE", "DELETE")


def landmark(point: Point) -> bool:
    """A boundary of a step's filesystem operation or SQL write (not a read)."""
    kind, text = point.entry[3], str(point.entry[4])
    return point.op_index > 0 and (kind == "fs" or text.startswith(WRITES))


def sampler(
    seed: int, name: str, landmarks: bool = False, every_step: bool = False
) -> Selector[int]:
    """The subset's seeded choice of crash points for scenario ``name``: for an opening
    sweep (no steps), :data:`SAMPLE_OPENING` boundaries and every filesystem boundary;
    else step boundaries only, with every :func:`landmark` when ``landmarks`` and every
    step boundary when ``every_step``."""

    def select(points: Sequence[Point]) -> list[int]:
        rng = random.Random(f"{seed}:{name}")
        steps = [p.k for p in points if p.op_index > 0]
        if not steps:
            chosen = set(rng.sample(range(len(points)), min(SAMPLE_OPENING, len(points))))
            return sorted(chosen | {p.k for p in points if p.entry[3] == "fs"})
        around_commits = [
            p.k for p in points if p.op_index > 0 and p.entry[3:] == ["sql", "COMMIT"]
        ]
        chosen = set(steps if every_step else rng.sample(steps, min(SAMPLE_STEPS, len(steps))))
        chosen |= set(around_commits)
        if landmarks:
            chosen |= {p.k for p in points if landmark(p)}
        return sorted(chosen)

    return select


def steps_only(points: Sequence[Point]) -> list[int]:
    """Every step boundary (none of opening's)."""
    return [p.k for p in points if p.op_index > 0]


def _landmarked(scenario: Scenario) -> bool:
    """Publications and recovery passes: multi-step filesystem work worth every landmark."""
    return scenario.resume or any(step.name == RECOVER_STEP for step in scenario.steps)


def default_directory() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def default_jobs() -> int:
    return os.cpu_count() or 1


def selector(scenario: Scenario, exhaustive: bool, seed: int, full: Sequence[str]) -> Selector[int]:
    """The crash points of ``scenario``'s sweep."""
    opening = scenario.name in OPENING_SCENARIOS
    if exhaustive:
        return every_boundary if opening else steps_only
    if opening and scenario.name in full:
        return every_boundary
    return sampler(
        seed, scenario.name, landmarks=_landmarked(scenario), every_step=scenario.name in full
    )


def run_suite(
    scenarios: Sequence[Scenario] | None = None,
    *,
    exhaustive: bool = False,
    seed: int = 0,
    full: Sequence[str] = FULL_IN_SUBSET,
    jobs: int | None = None,
    directory: str | None = None,
    method: CrashMethod = "image",
    report: Callable[[SweepResult], None] | None = None,
    lanes: int | None = None,
) -> SuiteResult:
    """Run each scenario's sweep (the whole catalog when None) at the points
    :func:`selector` chooses, by ``method`` (``jobs``, ``lanes``: see :func:`run_sweeps`)."""
    return run_sweeps(
        list(SCENARIOS.values()) if scenarios is None else scenarios,
        METHODS[method],
        lambda scenario: selector(scenario, exhaustive, seed, full),
        jobs=jobs,
        directory=directory,
        report=report,
        lanes=lanes,
    )


def run_sweeps(
    scenarios: Sequence[Scenario],
    method: Method[C],
    select: Callable[[Scenario], Selector[C]],
    *,
    jobs: int | None = None,
    directory: str | None = None,
    report: Callable[[SweepResult], None] | None = None,
    lanes: int | None = None,
) -> SuiteResult:
    """Sweep each of ``scenarios`` by ``method`` at the points ``select(scenario)``
    chooses, at most ``lanes`` sweeps at once (:mod:`runstore.crashsim.lanes`), each with
    at most ``jobs`` trials at once (both default to the core count; ``directory`` to
    :func:`default_directory`); ``report`` is called with each sweep in the order given."""
    started = time.monotonic()
    per_sweep = jobs or default_jobs()
    where = directory or default_directory()

    def sweep(scenario: Scenario) -> SweepResult:
        return run_sweep(scenario, select(scenario), method=method, jobs=per_sweep, directory=where)

    warm()  # once, before the sweep processes fork
    results = side_by_side(
        scenarios,
        sweep,
        method.name,
        lanes=lanes or default_jobs(),
        directory=where,
        report=report,
    )
    return SuiteResult(method.name, tuple(results), time.monotonic() - started)
