"""One I/O fault trial: run a scenario on a copy of its fixture with one durability call
(or every write SQLite issues during one statement) failing, judge what the store did, and
check what it left.

Rules of this file: the functions named ``*_body`` run in forked children (the trial child
copies the fixture and forks the *faulted run*, a grandchild, then judges and verifies in
its own process, which never held the faulted run's connection); everything reports
through files, as in :mod:`runstore.crashsim.trials`. A fault is injected through the
tracer's ``fault`` hook only: a filesystem fault raises ``OSError`` from the seam's
"before" observer, so the operation fails without running; a SQLite fault arms
:func:`runstore.testing.sqlite_kernel.failing_writes` at the statement's "before" boundary
and disarms it at the very next boundary of either seam (the statement's "after", or the
ROLLBACK that follows its failure) and, whatever happens, when the step ends. The rules a
trial's finding follows are :mod:`runstore.crashsim.iofaults`'s.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final
from typing import Literal

import attrs
from runstore import RunStore
from runstore.crashsim import processes
from runstore.crashsim import trials
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.exporting import export_directory
from runstore.crashsim.harness import ModelRun
from runstore.crashsim.harness import open_store
from runstore.crashsim.harness import remove_missing_root
from runstore.crashsim.harness import run_step
from runstore.crashsim.points import Point
from runstore.crashsim.points import brief
from runstore.crashsim.points import off_reference
from runstore.crashsim.powerloss_check import inspection_problem
from runstore.crashsim.scenarios import FIXTURE
from runstore.crashsim.scenarios import MEMBER
from runstore.crashsim.scenarios import RECOVER_STEP
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.sweep import Sweep
from runstore.crashsim.timing import Phases
from runstore.crashsim.tracer import Entry
from runstore.crashsim.tracer import Phase
from runstore.crashsim.tracer import Tracer
from runstore.crashsim.tracer import describe
from runstore.crashsim.tracer import read_trace
from runstore.crashsim.verify import Acceptable
from runstore.crashsim.verify import verify
from runstore.errors import RunStoreError
from runstore.inspection.atomic_file import TEMP_SUFFIX
from runstore.store.publication import staging
from runstore.store.store_root import create_root
from runstore.testing import sqlite_kernel
from runstore.testing.lockstep import StageTokens

ERRNOS: Final = ("EIO", "ENOSPC")
"""The failures injected at every point, by errno name."""
HANG_SECONDS: Final = 120
"""A faulted run still going after this long is killed (SIGALRM) and reported as hung."""
UNCHECKED: Final = "(not checked)"
"""The acceptable states reported for a trial whose store was not verified."""
CLEANUP_PREFIX: Final = "remove_tree $ROOT/artifacts/.staging-"
"""The one durability call a step may fail and still return: removing a stage after the
step's commit (see :mod:`runstore.crashsim.iofaults`)."""

Target = Literal["fs", "sqlite"]
Tamper = Callable[[], None]
"""Run in the faulted run before the scenario (the method's teeth install a faulty
wrapper with it); never in the trial or verify process."""


@attrs.frozen(order=True)
class Fault:
    """Fail the operation at reference boundary ``k`` (a "before" boundary) with
    ``errno_name``: the filesystem call itself (``fs``), or every write SQLite issues while
    the statement runs (``sqlite``)."""

    k: int
    target: Target
    errno_name: str

    @property
    def code(self) -> int:
        return int(getattr(errno, self.errno_name))

    @property
    def name(self) -> str:
        return f"k{self.k}-{self.target}-{self.errno_name}"

    def describe(self, entry: Entry) -> str:
        """``k=12 before fs: fsync_dir $ROOT/artifacts [EIO]``."""
        how = self.errno_name if self.target == "fs" else f"SQLite writes fail: {self.errno_name}"
        return f"{describe(entry)} [{how}]"


class Injector:
    """The tracer's fault hook for one :class:`Fault`; ``fired`` counts the failed calls."""

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.fired = 0
        self._armed: contextlib.ExitStack | None = None
        self._injection: sqlite_kernel.Injection | None = None

    def __call__(self, k: int, phase: Phase, kind: str, text: str) -> None:
        self.disarm()
        if k != self.fault.k or phase != "before":
            return
        code = self.fault.code
        if self.fault.target == "fs":
            self.fired += 1
            raise OSError(code, f"{os.strerror(code)} (injected)")
        stack = contextlib.ExitStack()
        self._injection = stack.enter_context(sqlite_kernel.failing_writes(code))
        self._armed = stack

    def disarm(self) -> None:
        """Undo a SQLite injection (idempotent), counting what it failed."""
        stack, self._armed = self._armed, None
        if stack is not None:
            stack.close()
            assert self._injection is not None
            self.fired += self._injection.fired


def fault_run_body(
    scenario: Scenario,
    run: ModelRun,
    point: Point,
    fault: Fault,
    root: str,
    trace_path: str,
    finding_path: str,
    tamper: Tamper | None,
) -> int:
    """Faulted-run body: open the store and run the steps up to ``point``'s, with
    ``fault`` injected, then use the open handle once more and close it; writes the finding
    (what the step did, how many calls failed, what the handle did after)."""
    signal.alarm(HANG_SECONDS)
    staging.install_token_source(StageTokens(run.step_tokens))
    if tamper is not None:
        tamper()
    injector = Injector(fault)
    logged = _LogRecorder()
    logging.getLogger("runstore").addHandler(logged)
    remove_missing_root(scenario, root)
    fd = os.open(trace_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    with Tracer(fd, root, fault=injector) as tracer:
        try:
            finding = _faulted_steps(scenario, run, point.op_index, tracer, injector, root)
        finally:
            injector.disarm()
    trials.write(finding_path, {**finding, "logged": logged.lines})
    return 0


class _LogRecorder(logging.Handler):
    """Keeps the store's warnings (a swallowed failure must be logged)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}"[:300])


def _faulted_steps(
    scenario: Scenario,
    run: ModelRun,
    op_index: int,
    tracer: Tracer,
    injector: Injector,
    root: str,
) -> dict[str, object]:
    context = dict(run.context)
    store: RunStore | None = None
    finding: dict[str, object] = {}
    for index in range(op_index + 1):
        tracer.mark(["op", index, run.names[index]])
        result: object = None
        try:
            if index == 0:
                store = open_store(scenario, root)
            else:
                assert store is not None
                result = run_step(scenario, index, store, context)
        except RunStoreError as error:
            finding = {"outcome": "raised", "code": error.code, "error": _text(error)}
        except Exception as error:  # the finding: an untyped error escaped
            finding = {"outcome": "untyped", "error": _text(error)}
        else:
            same = result == run.results[index]
            finding = {"outcome": "returned", "as_model": same, "result": repr(result)[:300]}
        finally:
            injector.disarm()
        if finding["outcome"] == "returned":
            tracer.mark(["end", index])
        if index < op_index and not finding.get("as_model"):
            return {**finding, "outcome": "diverged", "step": index}
    finding["fired"] = injector.fired
    registered = FIXTURE.slot_id in run.states[op_index].attempt_slots
    finding["handle"] = _follow_up(store, registered)
    return finding


def _follow_up(store: RunStore | None, registered: bool) -> list[str]:
    """One read on the handle the faulted step used, an identical re-registration of the
    fixture's slot when it was registered before the step (a write transaction that
    changes nothing), then ``close``: each must succeed or raise a typed error. Opening
    that failed left no handle."""
    if store is None:
        return ["no handle"]
    found = []
    calls: list[tuple[str, Callable[[], object]]] = [
        ("slot_progress", lambda: store.slot_progress([FIXTURE.slot_id])),
    ]
    if registered:
        again = (FIXTURE.decision, FIXTURE.run, FIXTURE.attempt_slot, MEMBER)
        calls.append(("register_one_shot again", lambda: store.register_one_shot(*again)))
    calls.append(("close", store.close))
    for name, call in calls:
        try:
            call()
        except RunStoreError as error:
            found.append(f"{name}: refused {error.code}")
        except Exception as error:  # the finding: an unusable handle
            found.append(f"{name}: untyped {_text(error)}")
        else:
            found.append(f"{name}: ok")
    return found


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:400]


# --- the trial child ----------------------------------------------------------------------


def trial_body(sweep: Sweep, trial: str, point: Point, fault: Fault, tamper: Tamper | None) -> int:
    """Trial child body: copy the fixture, run the faulted run in a grandchild, check its
    trace is the reference up to the fault, judge the finding, then reopen, recover and
    continue (:func:`~runstore.crashsim.verify.verify`); writes ``result.json``."""
    scenario, run = sweep.scenario, sweep.run
    phases = Phases()
    root = sweep.copy_fixture(trial, phases)
    trace_path, finding_path = (os.path.join(trial, name) for name in ("trace", "finding.json"))
    error_path = os.path.join(trial, "fault.error")
    with phases.measure("faulted run"):
        status = processes.run(
            lambda: fault_run_body(
                scenario, run, point, fault, root, trace_path, finding_path, tamper
            ),
            error_path,
        )
    result_path = os.path.join(trial, "result.json")

    def unchecked(outcome: str, detail: str) -> int:
        trials.write(result_path, {"status": outcome, "detail": detail, "acceptable": UNCHECKED})
        return 0

    mismatch = prefix_problem(sweep.reference, read_trace(trace_path), point.k)
    if mismatch:
        return unchecked("mismatch", mismatch)
    found = trials.load(finding_path)
    if status != 0 or not found:
        why = "hung (killed by SIGALRM)" if status == -signal.SIGALRM else f"status {status}"
        return unchecked(
            "failure", f"the faulted run ended with {why}: {trials.read_last_line(error_path)}"
        )
    verdict, detail, choices = judge(found, run, point, fault)
    if verdict != "verify":
        return unchecked(verdict, detail)
    leftover = temporaries(export_directory(root))
    if leftover:
        return unchecked("failure", f"{detail}; the export left temporaries: {leftover}")
    if scenario.creates_root:
        create_root(root)  # the user finds no root and runs --init again
    states = run.transactions[point.op_index]
    acceptable = [(label, states[done]) for label, done in choices]
    resumption = None
    if scenario.resume:
        resumption = Resumption.of(scenario, run, point.op_index, [d for _, d in choices])
    checked = verify(root, acceptable, resumption, run.published, phases)
    if checked.ok:
        with phases.measure("validate and audit"):
            problem = inspection_problem(root, run.published)
        if problem:
            checked = attrs.evolve(checked, ok=False, detail=problem)
    if checked.matched:
        detail = f"{detail}; matched {checked.matched}"
    trials.write(
        result_path,
        {
            "status": "ok" if checked.ok else "failure",
            "detail": f"{detail}; {checked.detail}",
            "acceptable": _acceptable_text(acceptable),
            "phases": phases.to_json(),
        },
    )
    return 0


def temporaries(directory: str) -> list[str]:
    """The temporaries an interrupted export left in ``directory`` (none is allowed: a
    failed export discards them, SPEC.md section 16.3)."""
    if not os.path.isdir(directory):
        return []
    return sorted(name for name in os.listdir(directory) if name.endswith(TEMP_SUFFIX))


def prefix_problem(reference: Sequence[Entry], trace: Sequence[Entry], k: int) -> str:
    """Why the faulted run's trace is not the reference up to boundary ``k`` (empty when
    it is; what follows the fault may differ)."""
    for index, entry in enumerate(trace):
        difference = off_reference(reference, index, entry)
        if difference:
            return difference
        if entry[:2] == ["b", k]:
            return ""
    last = trace[-1] if trace else "nothing"
    return f"the faulted run never reached boundary {k} (its trace ends with {last})"


def judge(
    found: dict[str, object], run: ModelRun, point: Point, fault: Fault
) -> tuple[str, str, list[tuple[str, int]]]:
    """The verdict on the faulted run's ``found``: "failure", "unfired", or "verify" with
    the acceptable states to check the store against (as ``(label, transactions done)``
    of the step, see :meth:`Point.choices`); and a detail naming what the step did (its
    typed error's code)."""
    outcome, fired = found.get("outcome"), found.get("fired", 0)
    listed = found.get("handle")
    handle = [str(line) for line in listed] if isinstance(listed, list) else []
    did = _did(found)
    if outcome == "diverged":
        return "failure", f"step {found.get('step')} before the fault: {did}", []
    if outcome == "untyped":
        return "failure", f"an untyped error escaped the step: {found.get('error')}", []
    broken = [line for line in handle if ": untyped " in line]
    if broken:
        return "failure", f"{did}; then the open handle failed untyped: {broken}", []
    did = f"{did}; handle: {', '.join(handle)}"
    if not fired:
        if outcome == "returned" and found.get("as_model"):
            return "unfired", f"no call failed inside the statement ({did})", []
        return "failure", f"{did} though no call failed", []
    if outcome == "raised":
        return "verify", did, _rolled_back(run, point)
    if not found.get("as_model"):
        return "failure", f"{did}, a receipt that differs from the model's", []
    text = str(point.entry[4])
    cleanup = fault.target == "fs" and text.startswith(CLEANUP_PREFIX) and point.commits > 0
    if fault.target == "fs" and not cleanup:
        return (
            "failure",
            f"returned a receipt for something not durable: the failed {text.split()[0]} "
            f"was swallowed ({did})",
            [],
        )
    if cleanup and not found.get("logged"):
        return "failure", f"{did}, swallowing the failed cleanup without logging it", []
    return "verify", did, [("after", len(run.transactions[point.op_index]) - 1)]


def _rolled_back(run: ModelRun, point: Point) -> list[tuple[str, int]]:
    """The acceptable states of a step that raised at ``point``: exactly the transactions
    it committed before the failed call (SPEC.md section 8: "Any error rolls every write of
    the call back"; section 11: before the final commit, the attempt is as it was). A
    recovery pass keeps every acceptable prefix (section 14: "transactions already
    committed remain committed"; its read-only transactions are not the model's)."""
    choices = point.choices(run.transactions)
    if point.op_name.startswith(RECOVER_STEP):
        return choices
    done = min(point.commits, len(run.transactions[point.op_index]) - 1)
    return [(label, count) for label, count in choices if count == done]


def _did(found: dict[str, object]) -> str:
    outcome = found.get("outcome")
    if outcome in ("raised", "diverged") and "code" in found:
        return f"raised {found['code']} ({found.get('error')})"
    if outcome in ("returned", "diverged"):
        return f"returned {str(found.get('result'))[:120]}"
    return f"{outcome}: {found.get('error')}"


def _acceptable_text(acceptable: Acceptable) -> str:
    return " | ".join(f"{label}: {brief(state)}" for label, state in acceptable)
