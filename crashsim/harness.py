"""Running a scenario on a store root, in the current process (always a child).

Rules of this file: the functions here are called only in forked children, which leave
with ``os._exit``. The harness marks each step in the trace (``["op", i, name]`` before,
``["end", i]`` after; step 0 is opening the store), checks each step's result against the
model's, and ends the trace with ``["done"]`` or ``["error", text]``. Fixtures are
prepared here too: a store opened, set up and closed by a child, so that the campaign's
parent never holds a connection.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from runstore import RunStore
from runstore.crashsim.scenarios import Scenario, Step
from runstore.crashsim.tracer import Tracer
from runstore.model.state import ModelState
from runstore.testing.lockstep import ModelWriter
from runstore.testing.script import Context

COMPLETED = 0
FAILED = 3


class ModelRun:
    """The model's side of a scenario: the context after setup, the state before each step
    (``states[i]`` before step ``i``, ``states[i + 1]`` after it; step 0 is opening, which
    changes nothing) and each step's result."""

    def __init__(self, scenario: Scenario) -> None:
        writer = ModelWriter(ModelState())
        context: Context = {}
        self.setup_results = [step.action(writer, context) for step in scenario.setup]
        self.context: Context = dict(context)
        self.states = [writer.state, writer.state]
        self.results: list[object] = [None]
        for step in scenario.steps:
            self.results.append(step.action(writer, context))
            self.states.append(writer.state)


def prepare_fixture(scenario: Scenario, run: ModelRun, root: str) -> int:
    """Child body: set up ``root`` (an existing empty directory) and close the store."""
    if not scenario.initialized:
        return COMPLETED
    context: Context = {}
    store = RunStore.open(root)
    for step, expected in zip(scenario.setup, run.setup_results, strict=True):
        actual = step.on_store(store, context)
        if actual != expected:
            raise AssertionError(f"setup {step.name}: store gave {actual!r}, model {expected!r}")
    store.close()
    return COMPLETED


def run_traced(
    scenario: Scenario, run: ModelRun, root: str, trace_path: str, crash_at: int | None
) -> int:
    """Child body: run the scenario on ``root`` under a tracer writing ``trace_path``,
    stopping the process at boundary ``crash_at``. Returns COMPLETED or FAILED."""
    fd = os.open(trace_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    tracer = Tracer(fd, root, crash_at)
    try:
        with tracer:
            _run_steps(scenario.steps, run, root, tracer)
    except Exception as error:
        tracer.mark(["error", f"{type(error).__name__}: {error}"])
        return FAILED
    tracer.mark(["done"])
    return COMPLETED


def _run_steps(steps: Sequence[Step], run: ModelRun, root: str, tracer: Tracer) -> None:
    context = dict(run.context)
    tracer.mark(["op", 0, "open"])
    store = RunStore.open(root)
    tracer.mark(["end", 0])
    for index, step in enumerate(steps, 1):
        tracer.mark(["op", index, step.name])
        actual = step.on_store(store, context)
        tracer.mark(["end", index])
        if actual != run.results[index]:
            raise AssertionError(
                f"{step.name}: store gave {actual!r}, model {run.results[index]!r}"
            )
    store.close()
