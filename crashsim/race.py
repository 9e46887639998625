"""The two-process identical-content race, and its variant that kills the winner between
its rename and the parent sync.

Rules of this file: the calling process (the parent) never opens a store handle: a child
prepares the fixture (two live attempts of one slot, both executing: A first, B an
explicitly authorized retry of another owner), and each publisher is a forked child that
opens its own ``RunStore`` on the one root (no connection ever crosses a fork). Both
publishers call ``publish_artifact`` with the identical payload and the same clock, and
meet at a barrier inside ``populate`` (each reports ready through one pipe and waits for
the parent's go on another), so both stages are registered before either completes its
object and they then race to the rename. In the killing variant both publishers install
a ``runstore.durable`` observer that leaves with ``os._exit`` right after a successful
``rename_noreplace`` (before the stage and ``artifacts/`` are synced): exactly one rename
succeeds, so exactly the winner dies. The killed publisher's publication is then run
again in a fresh child. Stage tokens are deterministic per publisher (:data:`TOKENS`), so
the store's final projection can be compared with the model's, played in either order of
the two stages' leases (the only thing the race leaves open). The parent reads the
results only through read-only projections and the files on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
from collections.abc import Callable
from typing import Final

import attrs
from runstore import RunStore
from runstore import durable
from runstore import model as m
from runstore.audit.projection import Projection
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.crashsim import processes
from runstore.crashsim.scenarios import DATA
from runstore.crashsim.scenarios import EXECUTING
from runstore.crashsim.scenarios import RESERVED
from runstore.crashsim.scenarios import A
from runstore.crashsim.scenarios import B
from runstore.crashsim.scenarios import Step
from runstore.crashsim.scenarios import path
from runstore.crashsim.scenarios import reserve
from runstore.crashsim.verify import sqlite_checks
from runstore.enums import ArtifactKind
from runstore.requests import Next
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.testing import script
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import StageTokens
from runstore.testing.publishing import at
from runstore.testing.script import Context

SETUP: Final[tuple[Step, ...]] = (
    *RESERVED,
    reserve(B, Next(retry=True), "reservation-b", 1_010),
    *path(B, EXECUTING, 1_050),
    *path(A, EXECUTING, 1_100),
)
RACE_AT: Final = 1_150
"""Both racers' clocks start here."""
RERUN_AT: Final = 1_200
"""The killed publisher's second publication's clock starts here."""
TOKENS: Final = {A: 0xA0_0000, B: 0xB0_0000}
"""The first stage token of each publisher (its re-run takes the next one)."""
KILLED: Final = 86
"""The exit status of the publisher killed after its rename."""
BARRIER_TIMEOUT_S: Final = 60.0


@attrs.frozen
class RaceResult:
    """What the race left: each publisher's exit status, the artifact id each reported,
    the projection after the race and at the end (after the killed publisher's re-run, if
    any), the completed objects and stages in ``artifacts/``, and the problems found by
    the integrity and object checks (empty when none)."""

    statuses: dict[str, int]
    artifacts: dict[str, str]
    renamed: dict[str, bool]
    """Per finished publication: whether its own rename placed the object (False: it found
    the address taken and verified it)."""
    after_race: Projection
    final: Projection
    objects: tuple[str, ...]
    stages: tuple[str, ...]
    problems: tuple[str, ...]
    models: tuple[Projection, ...]
    """The model's final projections, one per order of the two stages' leases."""

    @property
    def killed(self) -> str | None:
        return next((h for h, status in self.statuses.items() if status == KILLED), None)


def _setup(root: str) -> int:
    model = ModelWriter(m.ModelState())
    store = RunStore.open(root)
    context: Context = {}
    for step in SETUP:
        script.apply_in_lockstep(step.call, model, store, context)
    store.close()
    return 0


def _guards() -> Context:
    context: Context = {}
    script.play([step.call for step in SETUP], ModelWriter(m.ModelState()), context)
    return context


def _publisher(
    root: str,
    handle: str,
    guards: Context,
    populate: Callable[[str], object],
    start: int,
    kill: bool,
    now: int,
    result_path: str,
) -> int:
    """Publisher child body: publish the dataset as ``handle``; write the artifact id."""
    staging.install_token_source(StageTokens(start))
    store = RunStore.open(root)
    renamed: list[str] = []

    def on_rename(phase: str, operation: str, target: str) -> None:
        if phase == "after" and operation == "rename_noreplace" and staging.STAGE_PREFIX in target:
            if kill:
                os._exit(KILLED)
            renamed.append(target)

    durable.install_observer(on_rename)
    receipt = store.publish_artifact(
        guards[handle], ArtifactKind.DATASET, populate, at(now).fresh()
    )
    store.close()
    with open(result_path, "w", encoding="utf-8") as handle_file:
        json.dump({"artifact": receipt.artifact.id, "renamed": bool(renamed)}, handle_file)
    return 0


class _Barrier:
    """Each publisher's ``populate`` writes the payload, reports ready and waits for go."""

    def __init__(self) -> None:
        self.ready_r, self.ready_w = os.pipe()
        self.go_r, self.go_w = os.pipe()

    def populate(self, path: str) -> None:
        DATA(path)
        os.close(self.ready_r)
        os.close(self.go_w)
        os.write(self.ready_w, b"r")
        if os.read(self.go_r, 1) != b"g":
            raise RuntimeError("the race's parent went away before the go")

    def release(self, count: int) -> None:
        """In the parent, after forking: wait until ``count`` publishers are ready, then
        let them all go."""
        os.close(self.ready_w)
        os.close(self.go_r)
        ready = b""
        while len(ready) < count:
            readable, _, _ = select.select([self.ready_r], [], [], BARRIER_TIMEOUT_S)
            chunk = os.read(self.ready_r, count) if readable else b""
            if not chunk:
                break  # a publisher died before the barrier; let the rest go anyway
            ready += chunk
        with contextlib.suppress(BrokenPipeError):  # every publisher is gone: see statuses
            os.write(self.go_w, b"g" * count)
        os.close(self.go_w)
        os.close(self.ready_r)


def run_race(directory: str, *, kill_winner: bool) -> RaceResult:
    """Race A and B on a fresh store under ``directory`` (an empty directory); with
    ``kill_winner`` the winner dies after its rename and is then run again."""
    root = os.path.join(directory, "store")
    os.mkdir(root, 0o700)
    if processes.run(lambda: _setup(root), os.path.join(directory, "setup.error")) != 0:
        raise RuntimeError(f"the race's setup failed: {_read(directory, 'setup.error')}")
    guards = _guards()
    barrier = _Barrier()
    pids = {}
    for handle in (A, B):
        result = os.path.join(directory, f"{handle}.json")
        body = _body(root, handle, guards, barrier.populate, TOKENS[handle], kill_winner, result)
        pids[handle] = processes.fork(body, os.path.join(directory, f"{handle}.error"))
    barrier.release(len(pids))
    statuses = {handle: processes.wait(pid) for handle, pid in pids.items()}
    after_race = store_projection(os.path.join(root, "run.sqlite3"))
    killed = next((h for h, status in statuses.items() if status == KILLED), None)
    if killed is not None:
        result = os.path.join(directory, f"{killed}.rerun.json")
        body = _body(root, killed, guards, DATA, TOKENS[killed] + 1, False, result, RERUN_AT)
        rerun = processes.run(body, os.path.join(directory, f"{killed}.rerun.error"))
        if rerun != 0:
            statuses = {**statuses, f"{killed} again": rerun}
    return _inspect(directory, root, statuses, after_race, killed)


def _body(
    root: str,
    handle: str,
    guards: Context,
    populate: Callable[[str], object],
    start: int,
    kill: bool,
    result: str,
    now: int = RACE_AT,
) -> Callable[[], int]:
    return lambda: _publisher(root, handle, guards, populate, start, kill, now, result)


def _inspect(
    directory: str,
    root: str,
    statuses: dict[str, int],
    after_race: Projection,
    killed: str | None,
) -> RaceResult:
    database = os.path.join(root, "run.sqlite3")
    problems = [
        f"{name}: {_read(directory, name)}"
        for name in sorted(os.listdir(directory))
        if name.endswith(".error")
    ]
    problem = sqlite_checks(database)
    if problem is not None:
        problems.append(problem)
    artifacts = os.path.join(root, staging.ARTIFACTS_DIR)
    names = sorted(os.listdir(artifacts))
    completed = tuple(name for name in names if not name.startswith("."))
    for name in completed:
        tree = objects.verify(os.path.join(artifacts, name), sync=False).tree_sha256
        if name != f"{ArtifactKind.DATASET.value}-{tree}":
            problems.append(f"artifacts/{name} verifies with tree hash {tree}")
    reported, renamed = {}, {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                found = json.load(handle)
            reported[name.removesuffix(".json")] = str(found["artifact"])
            renamed[name.removesuffix(".json")] = bool(found["renamed"])
    return RaceResult(
        statuses=statuses,
        artifacts=reported,
        renamed=renamed,
        after_race=after_race,
        final=store_projection(database),
        objects=completed,
        stages=tuple(name for name in names if name.startswith(staging.STAGE_PREFIX)),
        problems=tuple(problems),
        models=tuple(model_finals(killed, order) for order in ((A, B), (B, A))),
    )


def model_finals(killed: str | None, order: tuple[str, str]) -> Projection:
    """The model's final projection when the stages' leases were taken in ``order``: each
    publisher publishes (the killed one only registers its stage), then the killed one
    publishes again."""
    writer = ModelWriter(m.ModelState())
    context: Context = {}
    script.play([step.call for step in SETUP], writer, context)
    for handle in order:
        writer.tokens = StageTokens(TOKENS[handle])
        if handle == killed:
            token = writer.tokens()
            writer.apply(
                m.begin_staging(
                    writer.state,
                    context[handle],
                    staging.lease_id_for(token),
                    staging.store_path_for(token),
                    RACE_AT,
                )
            )
        else:
            writer.publish_artifact(
                context[handle], ArtifactKind.DATASET, DATA, at(RACE_AT).fresh()
            )
    if killed is not None:
        writer.tokens = StageTokens(TOKENS[killed] + 1)
        writer.publish_artifact(context[killed], ArtifactKind.DATASET, DATA, at(RERUN_AT).fresh())
    return model_projection(writer.state)


def _read(directory: str, name: str) -> str:
    try:
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return "(no error recorded)"
