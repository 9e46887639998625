"""Running a scenario on a store root, in the current process (always a child).

Rules of this file: the functions here are called only in forked children, which leave
with ``os._exit``. The harness marks each step in the trace (``["op", i, name]`` before,
``["end", i]`` after; step 0 is opening the store, with ``--init`` creating the root first
for a scenario that creates its root; an exporting scenario's last step is the export,
which closes the store), checks each step's result against the model's, and ends the
trace with ``["done"]`` or ``["error", text]``. Fixtures are
prepared here too: a store opened, set up and closed by a child, so that the sweep's
parent never holds a connection. Stage tokens are deterministic on both sides: the model
run draws them from one :class:`~runstore.testing.lockstep.StageTokens` counter starting
at :data:`FIRST_TOKEN` through setup and steps, and every child installs the matching
counter (:data:`FIRST_TOKEN` for the fixture, ``ModelRun.step_tokens`` for the steps), so
stage names, lease ids and traces agree across the fixture, the reference and each trial.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from collections.abc import Container
from typing import Final
from typing import TypeVar

import attrs
from runstore import RunStore
from runstore import model as m
from runstore.batch import WriteBatch
from runstore.crashsim.exporting import EXPORT
from runstore.crashsim.exporting import export_closed
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.tracer import Tracer
from runstore.model.state import ModelState
from runstore.receipts import PublishedArtifact
from runstore.receipts import PublishedFinalization
from runstore.recovery_report import RecoveryReport
from runstore.store import schema_check
from runstore.store.publication import staging
from runstore.store.store_root import create_root
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import StageTokens
from runstore.testing.script import Context

COMPLETED = 0
FAILED = 3
FIRST_TOKEN: Final = 1
"""The first stage token of every scenario (setup's publications draw from it first)."""

T = TypeVar("T")


class CountingTokens:
    """Stage tokens from ``start`` on, counting how many were drawn."""

    def __init__(self, start: int) -> None:
        self.drawn = 0
        self._tokens = StageTokens(start)

    def __call__(self) -> str:
        self.drawn += 1
        return self._tokens()


class RecordingWriter(ModelWriter):
    """A :class:`ModelWriter` that records the state after every applied model operation,
    changed or not (``ModelWriter.trail`` keeps only the changed ones). Each applied
    operation is one committed store transaction, so ``commits`` holds the model state
    after each of the store's COMMITs, check transactions included."""

    def __init__(self, state: m.ModelState, tokens: CountingTokens) -> None:
        super().__init__(state, tokens=tokens)
        self.commits: list[m.ModelState] = []

    def apply(self, step: tuple[m.ModelState, T | m.Refusal]) -> T:
        result = super().apply(step)
        self.commits.append(self.state)
        return result

    def apply_batch(self, batch: WriteBatch) -> None:
        """A write batch is one transaction, committed whatever its steps gave: one state
        after it, none between its steps."""
        before = len(self.commits)
        super().apply_batch(batch)
        del self.commits[before:]
        self.commits.append(self.state)


class ModelRun:
    """The model's side of a scenario: the context after setup and before each step, the
    state before each step (``states[i]`` before step ``i``, ``states[i + 1]`` after it;
    step 0 is opening, which changes nothing), each step's result, and per step the states
    after each of its committed transactions (``transactions[i]``: the state before step
    ``i``, then the state after each of its commits; opening counts as one transaction
    that changes nothing)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        tokens = CountingTokens(FIRST_TOKEN)
        self._writer = RecordingWriter(ModelState(), tokens)
        context: Context = {}
        self.setup_results = [step.action(self._writer, context) for step in scenario.setup]
        self.step_tokens = FIRST_TOKEN + tokens.drawn
        """The first stage token of the crash-tested steps."""
        self.context: Context = dict(context)
        self.contexts: list[Context] = [dict(context), dict(context)]
        """``contexts[i]``: the guards before step ``i``."""
        state = self._writer.state
        self.states = [state, state]
        self.transactions: list[list[m.ModelState]] = [[state, state]]
        self.results: list[object] = [None]
        self.names = ["open", *(step.name for step in scenario.steps)]
        if scenario.exports:
            self.names.append(EXPORT)
        self.published: tuple[str, ...] = ()
        """The store paths of the objects the scenario's publications produce: once
        registered, each must exist on disk."""

    def play(self, disk: Callable[[m.ModelState], m.DiskView]) -> None:
        """Play the crash-tested steps on the model (after setup), recovery seeing the disk
        through ``disk`` (the fixture's, read once it is prepared; a later pass does not
        see the stages an earlier pass of the steps quarantined)."""
        writer, context = self._writer, dict(self.context)
        quarantined: set[str] = set()

        def seen(state: m.ModelState) -> m.DiskView:
            view = disk(state)
            stages = {p: held for p, held in view.stages.items() if p not in quarantined}
            return attrs.evolve(view, stages=stages)

        writer.disk = seen
        published = {
            result.artifact.path
            for result in self.setup_results
            if isinstance(result, PublishedArtifact | PublishedFinalization)
        }
        for step in self.scenario.steps:
            writer.commits = [writer.state]
            before = writer.state
            result = step.action(writer, context)
            self.results.append(result)
            if isinstance(result, PublishedArtifact | PublishedFinalization):
                published.add(result.artifact.path)
            if isinstance(result, RecoveryReport):
                quarantined.update(result.quarantined_stages)
                # every object a pass registers is on disk: once acknowledged, it must stay
                published.update(_artifact_paths(writer.state) - _artifact_paths(before))
            self.states.append(writer.state)
            self.transactions.append(writer.commits)
            self.contexts.append(dict(context))
        if self.scenario.exports:  # a read: one transaction that changes nothing
            self.results.append(None)
            self.states.append(writer.state)
            self.transactions.append([writer.state, writer.state])
            self.contexts.append(dict(context))
        self.published = tuple(sorted(published))

    def quarantined_before(self, step: int) -> tuple[str, ...]:
        """The stages the recovery passes among the steps before ``step`` reported
        quarantined (their store paths, as the model's reports give them)."""
        found: set[str] = set()
        for result in self.results[1:step]:
            if isinstance(result, RecoveryReport):
                found.update(result.quarantined_stages)
        return tuple(sorted(found))


def _artifact_paths(state: m.ModelState) -> set[str]:
    return {artifact.path for artifact in state.artifacts.values()}


def prepare_fixture(scenario: Scenario, run: ModelRun, root: str) -> int:
    """Child body: set up ``root`` (an existing empty directory) and close the store."""
    if not scenario.initialized:
        return COMPLETED
    staging.install_token_source(StageTokens(FIRST_TOKEN))
    context: Context = {}
    store = RunStore.open(root)
    for step, expected in zip(scenario.setup, run.setup_results, strict=True):
        actual = step.on_store(store, context)
        if actual != expected:
            raise AssertionError(f"setup {step.name}: store gave {actual!r}, model {expected!r}")
    store.close()
    return COMPLETED


def warm() -> None:
    """Prepare the sweep's parent before it forks: compute what every child would
    otherwise compute again on its first store open (the schema's expected fingerprint,
    cached per process). Two executions still differ in the WAL's salts, which SQLite
    draws anew in every process (see :mod:`runstore.crashsim.equivalence`)."""
    schema_check.expected_fingerprint()


def remove_missing_root(scenario: Scenario, root: str) -> None:
    """For a scenario that creates its root: remove the (empty) fixture copy at ``root``,
    so that opening finds no root, as before ``--init``. Idempotent."""
    if scenario.creates_root and os.path.isdir(root):
        os.rmdir(root)


def open_store(scenario: Scenario, root: str) -> RunStore:
    """Open the store at ``root`` as the scenario's user does: with ``--init`` (the root
    created when missing, its parent synced) when the scenario creates its root."""
    if scenario.creates_root:
        create_root(root)
    return RunStore.open(root)


def run_traced(
    scenario: Scenario,
    run: ModelRun,
    root: str,
    trace_path: str,
    crash_at: int | None,
    pause: Callable[[int], None] | None = None,
    pause_at: Container[int] = (),
    persistence: bool = False,
) -> int:
    """Child body: run the scenario on ``root`` under a tracer writing ``trace_path``,
    stopping the process at boundary ``crash_at`` (pausing through ``pause`` at each of
    ``pause_at``; with ``persistence``, the trace also holds the seam's persistence
    effects). Returns COMPLETED or FAILED."""
    staging.install_token_source(StageTokens(run.step_tokens))
    remove_missing_root(scenario, root)
    fd = os.open(trace_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    tracer = Tracer(fd, root, crash_at, pause, pause_at, persistence)
    try:
        with tracer:
            _run_steps(run, root, tracer)
    except Exception as error:
        tracer.mark(["error", f"{type(error).__name__}: {error}"])
        return FAILED
    tracer.mark(["done"])
    return COMPLETED


def _run_steps(run: ModelRun, root: str, tracer: Tracer) -> None:
    context = dict(run.context)
    tracer.mark(["op", 0, "open"])
    store = open_store(run.scenario, root)
    tracer.mark(["end", 0])
    for index in range(1, len(run.names)):
        tracer.mark(["op", index, run.names[index]])
        actual = run_step(run.scenario, index, store, context)
        tracer.mark(["end", index])
        if actual != run.results[index]:
            raise AssertionError(
                f"{run.names[index]}: store gave {actual!r}, model {run.results[index]!r}"
            )
    store.close()


def run_step(scenario: Scenario, index: int, store: RunStore, context: Context) -> object:
    """Step ``index`` (1, 2, ...) of ``scenario`` on the open ``store``: one of its steps,
    or after them the export of an exporting scenario (which closes the store)."""
    if index > len(scenario.steps):
        export_closed(store)
        return None
    return scenario.steps[index - 1].on_store(store, context)
