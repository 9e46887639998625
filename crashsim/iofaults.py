"""The I/O fault sweeps: every durability call, and every SQLite write that commits,
made to fail with ``EIO`` and then ``ENOSPC``; what the store does about it is checked
against the model.

Rules of this file: the choice of injection points, the I/O fault method
(:class:`IoFaults`, run by :func:`runstore.crashsim.sweep.run_sweep`) and the suite of its
sweeps live here; the trial itself (the faulted run, the judgement, the verification) is
:mod:`runstore.crashsim.iofault_trials`. The sweep's parent, as with every method, never
opens a connection: the driver prepares the fixture and the reference execution in
children, and the method runs one trial child per injection point, at most ``jobs`` at
once.

**Injection points.** Each "before" boundary of the reference trace where an operation can
fail, in opening only for the opening sweeps (``init``, ``reopen``) and in the steps
only for every other one, as :mod:`runstore.crashsim.suite` crashes them (opening an
existing store is the same path whatever it holds), crossed with :data:`ERRNOS`:

* every filesystem operation of the durability seam (``fs``): the tracer's fault hook
  raises ``OSError(errno)`` from the seam's "before" observer, so the call fails unrun
  (each probe's calls included, and the database file's own fsync);
* every statement that makes SQLite write (``sqlite``): a ``COMMIT`` that ends a
  transaction which wrote (read-only transactions write nothing and cannot fail this
  way), a ``PRAGMA journal_mode = WAL`` and a ``PRAGMA wal_checkpoint``, and a DDL
  statement run outside a transaction (the WAL probe's table): every ``write`` SQLite
  issues while the statement runs fails with the errno (``SQLITE_FULL`` for ``ENOSPC``,
  ``SQLITE_IOERR_WRITE`` for ``EIO``). A statement that turns out to write nothing (a
  journal-mode switch on a database already in WAL) leaves the injection *unfired*: it is
  reported as such, never counted as a tested state.

**What each trial requires** (one faulted run per point, in a fresh process, the trace
equal to the reference's up to the fault, else a ``mismatch``):

1. The step holding the fault (or opening) raises a :class:`~runstore.errors.RunStoreError`
   (its ``code`` is reported). A raw ``OSError``, ``sqlite3.Error`` or any other exception
   escaping is a failure.
2. It may return normally instead only when what it returns is durable. A swallowed SQLite
   write failure is visible to the check (failed writes never reach the file), so the
   reopened store must then be in the model's state after the step. A swallowed
   filesystem failure is not (these sweeps simulate process death, and a failed fsync's
   loss shows only at a power cut), so returning after one is a failure ("returned a
   receipt for something not durable") with one exception, the only call the store
   legitimately swallows: **removing a stage after the step's commit**
   (``remove_tree $ROOT/artifacts/.staging-*`` once a COMMIT of the step completed).
   SPEC.md section 11 step 9: "Best effort, after the commit: remove the stage ... A
   failure here is logged, never raised: a leftover released stage cannot revoke the
   committed result" (``staging.remove_stage``, called with ``sync=False`` by both
   publications); section 14, an interrupted failure's step (e): "the stage is removed,
   best effort" (``recovery._fail``). Its receipt must still match the model's, the
   failure must have been logged (section 11: "A failure here is logged, never raised"),
   and the reopened store must be in the state after the step. Every other call the store
   makes on a failure path (a stage removed after a refused registration,
   ``create_stage``'s own cleanup) runs while an error is already being raised, so no
   receipt depends on it. Probe directories are never removed silently: a failure there
   refuses opening (``capability_probe_failed``), and the next opening clears the
   leftover.
3. A store handle that was open stays usable or refuses cleanly: after the failed step the
   same handle serves one read (``slot_progress``), an identical re-registration of the
   fixture's slot (a write transaction that changes nothing) when the slot was registered
   before the step, and ``close()``, each returning or raising a typed error.
4. In the trial process (the faulted run has ended), the store is reopened and checked as
   after a crash (:func:`runstore.crashsim.verify.verify`): SQLite's integrity, every
   object, the projection against the acceptable model states (every earlier step's
   effects included), recovery in lockstep with the model, and the user's continuation
   (after resuming the step, for a publication scenario). For a step that raised, the
   acceptable state is the point's (:meth:`~runstore.crashsim.points.Point.choices`) with
   exactly the transactions the step committed before the failed call: a failed COMMIT
   committed nothing (SPEC.md section 8: "Any error rolls every write of the call back");
   a recovery pass keeps every prefix its point allows. Then ``validate`` and ``audit``
   must agree with the model (:func:`~runstore.crashsim.powerloss_check.inspection_problem`).
   An export that failed leaves no
   temporary in its directory; a scenario that creates its root runs ``--init`` again
   first when the root is missing, as its user would.

**Selection.** The exhaustive sweep runs every injection point. The subset runs every
point of ``init`` and, for every other scenario, a seeded sample that always holds each
``sqlite`` point (with one errno), one point of each distinct filesystem operation kind,
and with both errnos every sync, rename and directory creation (:data:`ALWAYS_FAULTED`)
of a recovery pass, of an export and of opening creating its root, filled up to
:data:`SAMPLE` points. ``points`` counts the (boundary, errno) pairs
chosen; ``states`` the trials whose fault fired and were checked; ``unfired`` those whose
fault found nothing to fail; ``failures`` the failed trials, prefix mismatches (a changed
path cannot count as tested) and fixture or reference problems.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.crashsim import trials
from runstore.crashsim.exporting import EXPORT
from runstore.crashsim.iofault_trials import ERRNOS
from runstore.crashsim.iofault_trials import Fault
from runstore.crashsim.iofault_trials import Tamper
from runstore.crashsim.iofault_trials import trial_body
from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.results import Finding
from runstore.crashsim.results import SuiteResult
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import OPENING_SCENARIOS
from runstore.crashsim.scenarios import RECOVER_STEP
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.suite import run_sweeps
from runstore.crashsim.sweep import Sweep
from runstore.testing import sqlite_kernel

__all__ = [
    "ERRNOS",
    "IO_FAULTS",
    "Fault",
    "FaultPick",
    "IoFaults",
    "among",
    "every_fault",
    "faults_of",
    "run_io_faults",
    "subset",
]

SAMPLE: Final = 8
"""The subset's points per scenario (more when its SQLite points and operation kinds need
more)."""
FaultPick = Callable[[Sequence[Fault], Sequence[Point]], Sequence[Fault]]
"""Chooses a sweep's faults from every injection point and the reference points."""

_WRITES: Final = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "PRAGMA user_version =")
_SQLITE_ALONE: Final = ("PRAGMA journal_mode = WAL", "PRAGMA wal_checkpoint")


def sqlite_points(points: Sequence[Point]) -> list[int]:
    """The boundaries before a statement that makes SQLite write: a COMMIT ending a
    transaction that wrote, a switch to WAL, a checkpoint, DDL outside a transaction."""
    chosen, writing, open_transaction = [], False, False
    for point in points:
        if point.entry[2:4] != ["before", "sql"]:
            continue
        text = str(point.entry[4])
        if text.startswith("BEGIN"):
            writing, open_transaction = False, True
        elif text in ("COMMIT", "ROLLBACK"):
            if text == "COMMIT" and writing:
                chosen.append(point.k)
            open_transaction = False
        elif text.startswith(_WRITES):
            writing = True
            if not open_transaction and text.startswith("CREATE"):
                chosen.append(point.k)
        elif text.startswith(_SQLITE_ALONE):
            chosen.append(point.k)
    return chosen


def faults_of(name: str, points: Sequence[Point]) -> list[Fault]:
    """Every injection point of scenario ``name``'s sweep, by boundary then errno."""
    opening = name in OPENING_SCENARIOS

    def in_scope(point: Point) -> bool:
        return point.op_index == 0 if opening else point.op_index > 0

    fs = [p.k for p in points if p.entry[2:4] == ["before", "fs"] and in_scope(p)]
    sqlite = [k for k in sqlite_points(points) if in_scope(points[k])]
    faults = [Fault(k, "fs", name) for k in fs for name in ERRNOS]
    faults += [Fault(k, "sqlite", name) for k in sqlite for name in ERRNOS]
    return sorted(faults)


def operation_kind(point: Point) -> str:
    """A filesystem point's operation (``fsync_dir``, ``rename_noreplace``, ...)."""
    return str(point.entry[4]).split()[0]


ALWAYS_FAULTED: Final = ("fsync_dir", "fsync_file", "rename_noreplace", "create_directory", "mkdir")
"""The operations the subset fails at every point (each errno) in a recovery pass, an
export, and where opening creates the root: each sync, rename and directory creation."""


def always_faulted(point: Point) -> bool:
    """Whether the subset fails ``point`` with each errno (see :data:`ALWAYS_FAULTED`)."""
    if point.entry[2:4] != ["before", "fs"] or operation_kind(point) not in ALWAYS_FAULTED:
        return False
    if point.op_name.startswith(RECOVER_STEP) or point.op_name == EXPORT:
        return True
    return str(point.entry[4]) == "mkdir $ROOT"


def among(name: str, pick: FaultPick) -> Selector[Fault]:
    """The selector of scenario ``name``'s faults that ``pick`` chooses among every
    injection point (:func:`faults_of`)."""

    def select(points: Sequence[Point]) -> Sequence[Fault]:
        return pick(faults_of(name, points), points)

    return select


def every_fault(name: str) -> Selector[Fault]:
    """Every injection point of scenario ``name``'s sweep (the exhaustive choice)."""
    return among(name, lambda faults, points: faults)


def subset(seed: int, name: str) -> Selector[Fault]:
    """The subset's choice for scenario ``name``: every point of ``init``; else a seeded
    sample with each SQLite point and each filesystem operation kind."""
    if name == "init":
        return every_fault(name)

    def pick(faults: Sequence[Fault], points: Sequence[Point]) -> list[Fault]:
        rng = random.Random(f"{seed}:io:{name}")
        groups: dict[tuple[str, int], list[Fault]] = {}
        for fault in faults:
            groups.setdefault((fault.target, fault.k), []).append(fault)
        chosen = {rng.choice(group) for (target, _), group in groups.items() if target == "sqlite"}
        kinds: dict[str, list[Fault]] = {}
        for fault in faults:
            if fault.target == "fs":
                kinds.setdefault(operation_kind(points[fault.k]), []).append(fault)
        chosen |= {rng.choice(kinds[kind]) for kind in sorted(kinds)}
        chosen |= {f for f in faults if f.target == "fs" and always_faulted(points[f.k])}
        rest = sorted(set(faults) - chosen)
        chosen |= set(rng.sample(rest, min(max(SAMPLE - len(chosen), 0), len(rest))))
        return sorted(chosen)

    return among(name, pick)


@attrs.frozen
class IoFaults:
    """The I/O fault method: one trial per chosen fault (see the module docstring).
    ``tamper`` runs in each faulted run before the scenario (the method's teeth)."""

    name = "io"
    persistence = False
    tamper: Tamper | None = None

    def run(self, sweep: Sweep, chosen: Sequence[Fault]) -> SweepResult:
        problem = ""
        unavailable = sqlite_kernel.available()
        if unavailable and any(fault.target == "sqlite" for fault in chosen):
            problem = f"SQLite's writes cannot be made to fail here: {unavailable}"
            chosen = [fault for fault in chosen if fault.target == "fs"]
        findings: list[Finding] = []

        def trial_of(fault: Fault) -> str:
            return sweep.trial(fault.name)

        def body(fault: Fault) -> Callable[[], int]:
            point = sweep.points[fault.k]
            return functools.partial(trial_body, sweep, trial_of(fault), point, fault, self.tamper)

        def done(fault: Fault, status: int) -> None:
            point = sweep.points[fault.k]
            boundary = fault.describe(point.entry)
            findings.append(sweep.collect(trial_of(fault), point, status, boundary))

        checks = trials.Checks(sweep.jobs, body, trial_of, done)
        for fault in chosen:
            checks.add(fault)
        checks.drain()
        return sweep.result(sorted(findings, key=lambda f: (f.k, f.boundary)), problem)


IO_FAULTS: Final = IoFaults()


def run_io_faults(
    names: Sequence[str] | None = None,
    *,
    exhaustive: bool = False,
    seed: int = 0,
    jobs: int | None = None,
    directory: str | None = None,
    report: Callable[[SweepResult], None] | None = None,
    lanes: int | None = None,
) -> SuiteResult:
    """Run the I/O fault sweep of each named scenario (the whole catalog when None): every
    injection point when ``exhaustive``, else the seeded :func:`subset`. ``report`` is
    called with each sweep in order as it ends; ``jobs`` and ``lanes`` as for
    :func:`~runstore.crashsim.suite.run_sweeps`."""
    chosen = [SCENARIOS[name] for name in (names if names is not None else list(SCENARIOS))]

    def select(name: str) -> Selector[Fault]:
        return every_fault(name) if exhaustive else subset(seed, name)

    return run_sweeps(
        chosen,
        IO_FAULTS,
        lambda scenario: select(scenario.name),
        jobs=jobs,
        directory=directory,
        report=report,
        lanes=lanes,
    )
