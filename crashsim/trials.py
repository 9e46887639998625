"""What both crash methods share: the fixture and the reference execution, checking one
crashed store against its point's acceptable states, and reading a trial's finding back.

Rules of this file: the functions named ``*_body`` run in forked children and report
through files (a JSON finding per trial, with the trial's :class:`Phases`); the others run
in the campaign's parent, which never opens a connection or reads a live store. A trial
directory is ``<base>/k<k>``: the crashed store in ``store``, the finding in
``result.json``, and a child's traceback next to it in ``k<k>.error``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence

from runstore.crashsim import processes
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.harness import COMPLETED, ModelRun, prepare_fixture, run_traced
from runstore.crashsim.points import CrashResult, Point, brief
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import Entry, describe, read_trace
from runstore.crashsim.verify import Acceptable, verify
from runstore.testing.disk import disk_view


def prepare(scenario: Scenario, run: ModelRun, base: str, phases: Phases) -> tuple[str, str]:
    """Make ``<base>/fixture`` in a child and play the model's steps over it; returns the
    fixture's path and a problem (empty when none)."""
    fixture = os.path.join(base, "fixture")
    os.mkdir(fixture, 0o700)
    error = os.path.join(base, "fixture.error")
    with phases.measure("fixture"):
        status = processes.run(lambda: prepare_fixture(scenario, run, fixture), error)
    if status != COMPLETED:
        return fixture, f"preparing the fixture failed: {read_last_line(error)}"
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
        processes.run(lambda: verify_body(root, final, result_path, resumption, run.published))
    found = load(result_path)
    shutil.rmtree(root, ignore_errors=True)
    if found.get("status") != "ok":
        return trace, f"the completed reference run fails verification: {found.get('detail')}"
    return trace, ""


def check_point_body(
    scenario: Scenario, run: ModelRun, root: str, point: Point, result_path: str, phases: Phases
) -> int:
    """Child body: check the crashed store at ``root`` against ``point``'s acceptable
    states (resuming the crashed step first, for a publication scenario)."""
    choices = point.choices(run.transactions)
    resumption = None
    if scenario.resume:
        resumption = Resumption.of(scenario, run, point.op_index, [d for _, d in choices])
    acceptable = point.acceptable(run.transactions)
    return verify_body(root, acceptable, result_path, resumption, run.published, phases)


def verify_body(
    root: str,
    acceptable: Acceptable,
    result_path: str,
    resumption: Resumption | None = None,
    published: tuple[str, ...] = (),
    phases: Phases | None = None,
) -> int:
    """Child body: :func:`~runstore.crashsim.verify.verify` and write the finding."""
    timing = phases if phases is not None else Phases()
    verdict = verify(root, acceptable, resumption, published, timing)
    status = "ok" if verdict.ok else "failure"
    write(
        result_path,
        {
            "status": status,
            "matched": verdict.matched,
            "detail": verdict.detail,
            "phases": timing.to_json(),
        },
    )
    return 0


def collect(
    scenario: Scenario,
    run: ModelRun,
    trial: str,
    point: Point,
    status: int,
    found: dict[str, object] | None = None,
) -> tuple[CrashResult, Phases]:
    """The finding of the trial in directory ``trial`` (then removed), or ``found`` when
    given; a trial that wrote none is a failure naming its exit status and last error."""
    if found is None:
        found = load(os.path.join(trial, "result.json"))
        shutil.rmtree(trial, ignore_errors=True)
    if not found:
        error = read_last_line(trial + ".error")
        found = {"status": "failure", "detail": f"the trial process ended with {status}: {error}"}
    acceptable = " | ".join(
        f"{label}: {brief(state)}" for label, state in point.acceptable(run.transactions)
    )
    detail = str(found.get("detail", ""))
    if found.get("matched"):
        detail = f"matched {found['matched']}; {detail}"
    phases = found.get("phases")
    result = CrashResult(
        scenario=scenario.name,
        k=point.k,
        status=str(found["status"]),
        boundary=describe(point.entry),
        operation=f"step {point.op_index} ({point.op_name})",
        acceptable=acceptable,
        detail=detail,
    )
    return result, Phases.from_json(phases if isinstance(phases, dict) else {})


def each_point(
    points: Sequence[Point],
    jobs: int,
    body: Callable[[Point], Callable[[], int]],
    trial_of: Callable[[Point], str],
    done: Callable[[Point, int], None],
) -> None:
    """Run ``body(point)`` in a child for each point, at most ``jobs`` at once (its
    traceback in ``trial_of(point) + ".error"``), calling ``done(point, status)`` as each
    ends."""
    pool = processes.Pool(jobs)
    queue = list(reversed(points))
    while queue or len(pool):
        while queue and not pool.full():
            point = queue.pop()
            pool.start(body(point), point, trial_of(point) + ".error")
        tag, status = pool.wait_any()
        assert isinstance(tag, Point)
        done(tag, status)


def keep_bounded(
    pool: processes.Pool,
    waiting: Sequence[object],
    start_waiting: Callable[[], None],
    collect: Callable[[tuple[object, int]], None],
    per_job: int,
) -> None:
    """Collect the checks that ended, start waiting ones, and while at least ``per_job``
    per job still wait, block on checks ending (a stopped child stays stopped meanwhile, so
    the copies waiting on disk stay bounded)."""
    ended = pool.reap(0)
    while ended is not None:
        collect(ended)
        ended = pool.reap(0)
    start_waiting()
    while len(waiting) >= per_job * pool.jobs:
        collect(pool.wait_any())
        start_waiting()


def write(path: str, value: dict[str, object]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)


def load(path: str) -> dict[str, object]:
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (FileNotFoundError, ValueError):
        return {}
    return {str(key): item for key, item in value.items()}


def read_last_line(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip().splitlines()[-1]
    except (FileNotFoundError, IndexError):
        return "(no error recorded)"
