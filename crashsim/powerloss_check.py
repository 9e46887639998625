"""Checking one power-loss state: what a process-death sweep requires, and if that
fails, whether an acknowledged result was lost.

Rules of this file: the ``*_body`` functions run in forked children and report through a
JSON file, like :mod:`runstore.crashsim.trials`. A *cut* is either a boundary of the
reference trace (a :class:`~runstore.crashsim.points.Point`) or the end of the run (after
the last step returned and the store was closed). The acknowledged results at a cut are
those of every step that returned before it: the model state before the cut's step (at the
end, the final state). Those are lost when the recovered store is back at an earlier model
state, or when an artifact of the acknowledged state is missing or does not verify.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

import attrs
from runstore import RunStore
from runstore import model as m
from runstore.audit.projection import Projection
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.crashsim import trials
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.harness import ModelRun
from runstore.crashsim.points import Point
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.verify import Acceptable
from runstore.crashsim.verify import verify
from runstore.errors import RunStoreError
from runstore.store.publication import objects

LOST: str = "lost acknowledged result"


@attrs.frozen
class CutPoint:
    """Where the power is cut: at ``point`` (a boundary), or at the end when None."""

    point: Point | None

    @property
    def k(self) -> int:
        return self.point.k if self.point is not None else -1

    def step(self, run: ModelRun) -> int:
        return self.point.op_index if self.point is not None else len(run.transactions) - 1

    def acceptable(self, run: ModelRun) -> Acceptable:
        if self.point is None:
            return [("after", run.states[-1])]
        return self.point.acceptable(run.transactions)

    def resumption(self, scenario: Scenario, run: ModelRun) -> Resumption | None:
        if not scenario.resume:
            return None
        if self.point is None:
            final = len(run.transactions) - 1
            return Resumption.of(scenario, run, final, [len(run.transactions[final]) - 1])
        choices = self.point.choices(run.transactions)
        return Resumption.of(scenario, run, self.point.op_index, [d for _, d in choices])

    def acknowledged(self, run: ModelRun) -> m.ModelState:
        """The state holding every result acknowledged before the cut."""
        return run.states[-1] if self.point is None else run.states[self.point.op_index]

    def earlier(self, run: ModelRun) -> list[tuple[str, m.ModelState]]:
        """The model states strictly before the acknowledged one, latest first, named."""
        states: list[tuple[str, m.ModelState]] = [("the empty store", m.ModelState())]
        last = len(run.transactions) if self.point is None else self.point.op_index
        for index in range(last):
            name = run.names[index]
            count = len(run.transactions[index]) - 1
            for done, state in enumerate(run.transactions[index][:-1]):
                label = f"{done} of {count} commits of" if done else "before"
                states.append((f"{label} step {index} ({name})", state))
        acknowledged = model_projection(self.acknowledged(run))
        seen: list[Projection] = [acknowledged]
        named = []
        for label, state in reversed(states):
            projection = model_projection(state)
            if projection not in seen:
                seen.append(projection)
                named.append((label, state))
        return named


def check_state_body(
    scenario: Scenario, run: ModelRun, cut: CutPoint, root: str, result_path: str
) -> int:
    """Child body: verify the power-loss state at ``root`` as a crash at ``cut``; on a
    failure, say whether it lost an acknowledged result (checked on a copy made first)."""
    copy = f"{root}-diagnosis"
    shutil.copytree(root, copy, symlinks=True)
    timing = Phases()
    verdict = verify(
        root, cut.acceptable(run), cut.resumption(scenario, run), run.published, timing
    )
    detail = verdict.detail
    if not verdict.ok:
        lost = lost_results(copy, cut, run)
        if lost:
            detail = f"{LOST}: {lost}; {detail}"
    status = "ok" if verdict.ok else "failure"
    trials.write(
        result_path,
        {"status": status, "matched": verdict.matched, "detail": detail, "phases": {}},
    )
    return 0


def lost_results(root: str, cut: CutPoint, run: ModelRun) -> str:
    """What acknowledged result the store at ``root`` lost (empty when none is found)."""
    try:
        store = RunStore.open(root)
    except RunStoreError as error:
        return f"the store cannot be opened: {error}"
    try:
        projection = store_projection(store.database_path)
        acknowledged = model_projection(cut.acknowledged(run))
        missing = _missing_objects(store.root, acknowledged, run.published)
        if missing:
            return missing
        for label, state in cut.earlier(run):
            if projection == model_projection(state):
                return f"the store went back to {label}"
        return ""
    finally:
        store.close()


def _missing_objects(root: str, acknowledged: Projection, published: Sequence[str]) -> str:
    """The acknowledged artifacts whose objects the scenario made (``published``: the
    others are registrations of objects no step ever wrote) that are gone or broken."""
    problems: list[str] = []
    for row in acknowledged["artifacts"]:
        path = str(row[2])
        if path not in published:
            continue
        try:
            completed = objects.verify(os.path.join(root, path), sync=False)
        except RunStoreError as error:
            problems.append(f"the artifact {path} is gone or broken ({error})")
            continue
        if (completed.tree_sha256, completed.manifest_sha256) != (row[3], row[4]):
            problems.append(f"the artifact {path} verifies with other digests")
    return "; ".join(problems)
