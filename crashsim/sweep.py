"""The sweep driver: one scenario crashed (faulted, cut, photographed) at its chosen
points by one method, each point checked against the model.

Rules of this file: the skeleton every method shares, and nothing of any method. The
process that calls :func:`run_sweep` (the parent) never opens a connection or reads a live
store: it warms itself (:func:`~runstore.crashsim.harness.warm`), computes the model run
(pure), makes the sweep's temporary directory, forks a child to prepare the fixture and a
child for the reference execution (with the durability seam's persistence effects in its
trace when the method asks), takes the reference's points, checks that its COMMITs line up
with the model's transactions, lets the selector choose, and hands the prepared
:class:`Sweep` to the method, which crashes or faults each chosen point, checks what is
left in trial children (at most ``jobs`` at a time) and returns the
:class:`~runstore.crashsim.results.SweepResult`; the directory is then removed. A method
(:class:`Method`) is a name, whether its reference records persistence effects, and
``run(sweep, chosen)``:

* ``kill`` (:mod:`runstore.crashsim.kill`): one trial child per point kills a fresh
  execution there with ``os._exit`` and checks the copy;
* ``image`` (the default, :mod:`runstore.crashsim.images`): one execution stopped at each
  point while the parent photographs the store root, each distinct photograph checked
  once;
* ``compare`` (:mod:`runstore.crashsim.equivalence`): both of those at the same points,
  and the copies compared instead of checked;
* ``io`` (:mod:`runstore.crashsim.iofaults`): one faulted execution per (boundary, errno);
* ``powerloss`` (:mod:`runstore.crashsim.powerloss`): one execution photographed at every
  boundary and persistence effect, every on-disk state a power cut may leave checked.

Whatever the method, a changed execution path is a ``mismatch``: reported, never counted
as a tested point.

Acceptable states. A step the model performs as one transaction keeps the original rule:
before its COMMIT completed the store may be in the state before or after the step, from
then on only after. A publication commits several transactions (``publish_artifact``: the
stage's lease, then the final one; ``publish_finalization``: a check, the stage's lease,
another check, the final one). The model run records the state after *every* committed
transaction, check transactions included (they commit and change nothing), rather than
only the changed states of ``ModelWriter.trail``: the k-th COMMIT in the trace is then
simply the k-th recorded state, with no guessing which commits changed something (a
check transaction that wrote something would show up as a failure at the crash points
after its COMMIT). With k COMMITs of the step completed at or before the crash point, the
store must be in the state after the k-th transaction; at the boundary just before the
(k+1)-th COMMIT, also in the state after it. The reference trace must commit exactly as
many transactions in each such step as the model run; anything else is a sweep problem.

Recovery (a step named ``recover``) is the exception: the store's pass also runs
read-only transactions whose number depends on what it finds on disk, while the model
records only the transactions that change something (each attempt's move to finalizing
and terminal commit, the staging leases' release, the orphans' registration). A crash
anywhere in a pass may therefore leave any prefix of those changes: every state the
model passes through is acceptable, the exact trace prefix still pins the path taken,
and the recovery that follows every crash must then converge.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Protocol
from typing import TypeVar

import attrs
from runstore.crashsim import processes
from runstore.crashsim import trials
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.harness import COMPLETED
from runstore.crashsim.harness import ModelRun
from runstore.crashsim.harness import prepare_fixture
from runstore.crashsim.harness import run_traced
from runstore.crashsim.harness import warm
from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.points import brief
from runstore.crashsim.points import commit_problem
from runstore.crashsim.points import points_of
from runstore.crashsim.results import Finding
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import Entry
from runstore.crashsim.tracer import describe
from runstore.crashsim.tracer import read_trace
from runstore.testing.disk import disk_view

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

C = TypeVar("C", bound="SupportsRichComparison")
C_contra = TypeVar("C_contra", contravariant=True)

__all__ = ["Method", "Sweep", "prepare", "reference", "run_sweep"]


@attrs.frozen
class Sweep:
    """A prepared sweep, what every method starts from: the scenario and its model run,
    the sweep's directory ``base`` (each trial in a directory of its own under it), the
    closed ``fixture`` there, the ``reference`` trace and its ``points``."""

    scenario: Scenario
    run: ModelRun
    base: str
    fixture: str
    reference: Sequence[Entry]
    points: Sequence[Point]
    jobs: int
    phases: Phases
    method: str
    persistence: bool
    """The reference holds the durability seam's persistence effects (power loss)."""
    started: float

    def trial(self, name: str) -> str:
        """The directory of the trial called ``name`` (``k12``: boundary 12's)."""
        return os.path.join(self.base, name)

    def copy_fixture(self, trial: str, phases: Phases) -> str:
        """Trial child: make ``trial`` and a copy of the fixture in it (names preserved);
        returns the copy's root, ``<trial>/store``."""
        os.mkdir(trial, 0o700)
        root = os.path.join(trial, "store")
        with phases.measure("copy fixture"):
            shutil.copytree(self.fixture, root, symlinks=True)
        return root

    def check_body(self, point: Point, root: str, result_path: str, phases: Phases) -> int:
        """Trial child: check the crashed store at ``root`` as a crash at ``point``
        (:func:`~runstore.crashsim.trials.check_point_body`)."""
        return trials.check_point_body(self.scenario, self.run, root, point, result_path, phases)

    def finding(
        self, point: Point, found: dict[str, object], boundary: str | None = None
    ) -> Finding:
        """The :class:`Finding` a trial wrote (``found``) at ``point``; its acceptable
        states are the trial's when it wrote them, else the point's."""
        acceptable = found.get("acceptable")
        if acceptable is None:
            acceptable = " | ".join(
                f"{label}: {brief(state)}"
                for label, state in point.acceptable(self.run.transactions)
            )
        detail = str(found.get("detail", ""))
        if found.get("matched"):
            detail = f"matched {found['matched']}; {detail}"
        return Finding(
            scenario=self.scenario.name,
            k=point.k,
            status=str(found["status"]),
            boundary=boundary if boundary is not None else describe(point.entry),
            operation=f"step {point.op_index} ({point.op_name})",
            acceptable=str(acceptable),
            detail=detail,
        )

    def collect(
        self, trial: str, point: Point, status: int, boundary: str | None = None
    ) -> Finding:
        """The finding of the trial that ended with ``status`` in directory ``trial`` (then
        removed), its phases added to the sweep's."""
        found = trials.found(trial, status)
        spent = found.get("phases")
        self.phases.add(Phases.from_json(spent if isinstance(spent, dict) else {}))
        return self.finding(point, found, boundary)

    def result(
        self,
        findings: Sequence[Finding],
        problem: str = "",
        *,
        cuts: int = 0,
        sampled: int = 0,
        shrunk: str = "",
    ) -> SweepResult:
        """The sweep's result, timed from its start."""
        return SweepResult(
            self.scenario.name,
            self.method,
            len(self.points),
            tuple(findings),
            time.monotonic() - self.started,
            problem or None,
            self.phases,
            cuts,
            sampled,
            shrunk,
        )


class Method(Protocol[C_contra]):
    """How a sweep crashes, faults or cuts its chosen points (boundary numbers, or the
    faults to inject) and checks each."""

    @property
    def name(self) -> str:
        """The method's name (``image``, ``kill``, ``compare``, ``io``, ``powerloss``): its
        family in :data:`runstore.crashsim.results.FAMILIES`."""
        ...

    @property
    def persistence(self) -> bool:
        """Whether the reference must record the seam's persistence effects."""
        ...

    def run(self, sweep: Sweep, chosen: Sequence[C_contra]) -> SweepResult:
        """Crash (fault, cut) each of ``chosen``, check each in a trial child and return
        the findings through :meth:`Sweep.result`."""
        ...


def run_sweep(
    scenario: Scenario,
    select: Selector[C],
    *,
    method: Method[C],
    jobs: int = 2,
    directory: str | None = None,
) -> SweepResult:
    """Sweep ``scenario`` by ``method`` at the points ``select`` chooses, in a temporary
    directory under ``directory`` (the system default when None)."""
    started = time.monotonic()
    warm()
    run = ModelRun(scenario)
    phases = Phases()
    base = tempfile.mkdtemp(prefix=f"runstore-sweep-{method.name}-{scenario.name}-", dir=directory)

    def stopped(boundaries: int, problem: str) -> SweepResult:
        seconds = time.monotonic() - started
        return SweepResult(scenario.name, method.name, boundaries, (), seconds, problem, phases)

    try:
        fixture, problem = prepare(scenario, run, base, phases)
        if problem:
            return stopped(0, problem)
        trace, problem = reference(scenario, run, base, fixture, phases, method.persistence)
        points = points_of(trace)
        problem = problem or commit_problem(points, run)
        if problem:
            return stopped(len(points), problem)
        sweep = Sweep(
            scenario,
            run,
            base,
            fixture,
            trace,
            points,
            jobs,
            phases,
            method.name,
            method.persistence,
            started,
        )
        return method.run(sweep, sorted(set(select(points))))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def prepare(scenario: Scenario, run: ModelRun, base: str, phases: Phases) -> tuple[str, str]:
    """Make ``<base>/fixture`` in a child and play the model's steps over it; returns the
    fixture's path and a problem (empty when none)."""
    fixture = os.path.join(base, "fixture")
    os.mkdir(fixture, 0o700)
    error = os.path.join(base, "fixture.error")
    with phases.measure("fixture"):
        status = processes.run(lambda: prepare_fixture(scenario, run, fixture), error)
    if status != COMPLETED:
        return fixture, f"preparing the fixture failed: {trials.read_last_line(error)}"
    run.play(lambda state: disk_view(fixture, state))
    return fixture, ""


def reference(
    scenario: Scenario,
    run: ModelRun,
    base: str,
    fixture: str,
    phases: Phases,
    persistence: bool = False,
) -> tuple[list[Entry], str]:
    """Record the reference execution on a copy of ``fixture`` and check its final state
    (with ``persistence``, the trace also holds the seam's persistence effects); returns
    its trace and a problem (empty when none)."""
    root = os.path.join(base, "reference")
    shutil.copytree(fixture, root, symlinks=True)
    trace_path = os.path.join(base, "reference.trace")
    with phases.measure("reference run"):
        status = processes.run(
            lambda: run_traced(scenario, run, root, trace_path, None, persistence=persistence)
        )
    trace = read_trace(trace_path)
    if status != COMPLETED or not trace or trace[-1] != ["done"]:
        last = trace[-1] if trace else "nothing"
        return trace, f"the reference execution did not complete (status {status}, {last})"
    result_path = os.path.join(base, "reference.json")
    final = [("after", run.states[-1])]
    final_step = len(run.transactions) - 1
    done = len(run.transactions[final_step]) - 1
    resumption = Resumption.of(scenario, run, final_step, [done]) if scenario.resume else None
    with phases.measure("reference check"):
        processes.run(
            lambda: trials.verify_body(root, final, result_path, resumption, run.published)
        )
    found = trials.load(result_path)
    shutil.rmtree(root, ignore_errors=True)
    if found.get("status") != "ok":
        return trace, f"the completed reference run fails verification: {found.get('detail')}"
    return trace, ""
