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
from collections.abc import Mapping
from collections.abc import Sequence

import attrs
from runstore import RunStore
from runstore import model as m
from runstore.audit import audit
from runstore.audit.projection import Projection
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.crashsim import trials
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.exporting import export_directory
from runstore.crashsim.harness import ModelRun
from runstore.crashsim.points import Point
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.timing import Phases
from runstore.crashsim.verify import Acceptable
from runstore.crashsim.verify import Verdict
from runstore.crashsim.verify import verify
from runstore.errors import RunStoreError
from runstore.inspection.export import FILE_NAMES
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.validate import validate_store
from runstore.inspection.validate.artifacts import ARTIFACT_MISSING
from runstore.store.publication import objects
from runstore.store.publication.staging import ARTIFACTS_DIR
from runstore.store.recovery.disk import QUARANTINE_NAME
from runstore.store.store_root import create_root

LOST: str = "lost acknowledged result"
LOST_COMMIT: str = "lost committed result"


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

    def returned(self, run: ModelRun) -> int:
        """How many steps (opening included) returned before the cut."""
        return self.point.op_index if self.point is not None else len(run.results)

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
    scenario: Scenario,
    run: ModelRun,
    cut: CutPoint,
    root: str,
    result_path: str,
    exported: Mapping[str, bytes] | None = None,
    secured: Sequence[str] = (),
) -> int:
    """Child body: verify the power-loss state at ``root`` as a crash at ``cut``; on a
    failure, say whether it lost an acknowledged result (checked on a copy made first).
    Also lost: a stage quarantined by a pass that returned, or ``secured`` (its quarantine
    rename's destination synced), that is not in quarantine; and, at the end of a run that
    exported, an ``exported`` file (name to bytes) that is not in the export directory.
    A scenario that creates its root finds a lost root as its user would, and runs
    ``--init`` again."""
    if scenario.creates_root:
        create_root(root)
    copy = f"{root}-diagnosis"
    shutil.copytree(root, copy, symlinks=True)
    timing = Phases()
    moved = quarantine_problem(root, run.quarantined_before(cut.returned(run)), secured)
    moved = "; ".join(filter(None, [moved, export_problem(root, exported)]))
    resumption = cut.resumption(scenario, run)
    acceptable = cut.acceptable(run)
    verdict = verify(root, acceptable, resumption, run.published, timing, scenario.unsynced)
    if verdict.ok:
        problem = inspection_problem(root, run.published)
        if problem:
            verdict = Verdict(ok=False, matched=verdict.matched, detail=problem)
    detail = verdict.detail
    ok = verdict.ok and not moved
    if moved:
        detail = f"{LOST}: {moved}; {detail}"
    elif not verdict.ok:
        lost = lost_results(copy, cut, run)
        if lost:
            detail = f"{lost}; {detail}"
    status = "ok" if ok else "failure"
    trials.write(
        result_path,
        {"status": status, "matched": verdict.matched, "detail": detail, "phases": {}},
    )
    return 0


def lost_results(root: str, cut: CutPoint, run: ModelRun) -> str:
    """What result the store at ``root`` lost, with its marker (:data:`LOST`, or
    :data:`LOST_COMMIT` for an object a registration committed before the cut names,
    though no step acknowledged it yet: the commit was not covered by the syncs before
    it); empty when none is found."""
    try:
        store = RunStore.open(root)
    except RunStoreError as error:
        return f"{LOST}: the store cannot be opened: {error}"
    try:
        projection = store_projection(store.database_path)
        acknowledged = model_projection(cut.acknowledged(run))
        missing = _missing_objects(store.root, acknowledged, run.published)
        if missing:
            return f"{LOST}: {missing}"
        for label, state in cut.earlier(run):
            if projection == model_projection(state):
                return f"{LOST}: the store went back to {label}"
        missing = _missing_objects(store.root, projection, run.published)
        return f"{LOST_COMMIT}: {missing}" if missing else ""
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


def quarantine_problem(root: str, quarantined: Sequence[str], secured: Sequence[str] = ()) -> str:
    """How a stage is not where recovery left it (empty when each is). A stage a returned
    pass reported quarantined must be under ``artifacts/.quarantine/`` (its name, or a
    ``<name>.<n>``) and gone from ``artifacts/`` (else a later pass would quarantine it
    again); a ``secured`` one (its quarantine rename's destination directory synced) must
    be in quarantine (a stage is moved intact, never lost)."""
    holding = os.path.join(root, ARTIFACTS_DIR, QUARANTINE_NAME)
    names = set(os.listdir(holding)) if os.path.isdir(holding) else set()
    problems = []
    for path in sorted({*quarantined, *secured}):
        name = os.path.basename(path)
        if not any(n == name or n.startswith(f"{name}.") for n in names):
            problems.append(f"the quarantined stage {path} is gone")
        elif path in quarantined and os.path.lexists(os.path.join(root, path)):
            problems.append(f"the quarantined stage {path} is back in {ARTIFACTS_DIR}/")
    return "; ".join(problems)


def exported_files(root: str) -> dict[str, bytes] | None:
    """The files of the export directory beside ``root`` (None when there is none)."""
    directory = export_directory(root)
    if not os.path.isdir(directory):
        return None
    found = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as handle:
            found[name] = handle.read()
    return found


def export_problem(root: str, exported: Mapping[str, bytes] | None) -> str:
    """How the export directory beside ``root`` differs from what a returned export wrote
    (``exported``: exactly its files, SPEC.md section 16.3; empty when it does not, or when
    nothing was exported)."""
    if exported is None:
        return ""
    if sorted(exported) != sorted(FILE_NAMES):
        return f"the export returned with {sorted(exported)} in place of {sorted(FILE_NAMES)}"
    found = exported_files(root)
    if found is None:
        return f"the export directory {export_directory(root)} is gone"
    problems = [
        f"the exported {name} is {'missing' if name not in found else 'changed'}"
        for name, data in exported.items()
        if found.get(name) != data
    ]
    problems += [
        f"the export directory holds {name}" for name in sorted(set(found) - set(exported))
    ]
    return "; ".join(problems)


def inspection_problem(root: str, published: Sequence[str]) -> str:
    """What ``validate`` (SPEC.md section 16.1) or ``audit`` (section 16.2) finds wrong with
    the closed, recovered store at ``root`` (empty when both agree with the model). The
    model's store has one finding only: ``artifact_missing`` for each registration the
    scenario or the continuation made up with no directory behind it (every path but the
    ``published`` ones); and its event log replays to its projection."""
    try:
        report = validate_store(root)
        with Snapshot.take(root) as snapshot:
            audited = audit(snapshot)
    except RunStoreError as error:
        return f"validate or audit refused the recovered store: {error}"
    findings = [
        f"{f.code} {f.subject}: {f.message}"
        for f in report.findings
        if f.code != ARTIFACT_MISSING or f.subject in published
    ]
    if findings:
        return f"validate found {len(findings)}: {'; '.join(findings[:3])}"
    if audited.divergence is not None:
        return f"audit diverged: {audited.divergence.to_json()}"
    return ""
