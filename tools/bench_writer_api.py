"""Benchmark: runstore's writer-API lifecycle against DBOS Transact's one-step workflow on SQLite.

One **lifecycle** is one accepted one-shot slot through the public writer API only, in
process, on the real clock (``time.time_ns``), with no files and no publication:
``reserve``, ``advance`` to materializing, starting, preparing, executing and validating,
``begin_finalization``, ``register_observation`` (selected under the claim) and
``commit_finalization(Accepted)`` referencing the observation's artifact. The artifact
registrations are made up (``runstore.testing.factories``: directories that do not exist)
with the slots before the timer starts; leases are made inside it, from the clock. Each
form has its own fresh store under ``--dir`` (default the system temp dir), whose settings
(WAL, ``synchronous=FULL``) are never touched. The forms, all timed:

- ``calls``: one call per operation, nine write transactions;
- ``calls+register``: ``register_one_shot`` of the slot, then ``calls`` (ten);
- ``runner``: the runner's grouping with ``RunStore.apply_batch`` (SPEC.md section 8):
  reserve and the four advances in one batch; validating, ``begin_finalization`` and
  ``register_observation`` in one; ``commit_finalization`` on its own (three);
- ``batch``: the whole lifecycle in one batch (one transaction).

Every form but ``calls+register`` registers its slots untimed before its timer starts, as
a campaign does (``register_many``, one transaction a round). Every step's result is
checked (a refusal fails the script). One untimed lifecycle per form, traced through
``runstore.sql.install_observer``, gives its transactions and statements.

**DBOS** (PyPI ``dbos``): imported from this interpreter when it can be, else installed
once into a private venv under ``--cache-dir`` (default ``~/.cache/runstore-bench``) with
``python -m venv`` and ``pip install dbos``. A child process configures DBOS as its docs
say for SQLite (``system_database_url`` ``sqlite:///<path>``, a fresh directory under
``--dir``; admin server off; DBOS's own pragmas, which leave SQLite's default journal
mode and ``synchronous``, both read back and printed), launches it, traces 20 untimed
workflows with an SQLAlchemy ``commit`` listener (commits that closed an open SQLite
transaction), then on each request runs the warm-up and times ``N`` sequential
workflows, each a ``@DBOS.workflow()`` calling one ``@DBOS.step()``, wall and CPU time
taken in the child. If DBOS cannot be installed or launched, the reason is printed and
the ratios fall back to the floor.

**The floor**, measured in every run: bare stdlib ``sqlite3`` (WAL, ``synchronous=FULL``),
a floor lifecycle being as many commits as ``calls`` has write transactions, each
``BEGIN IMMEDIATE``, one small ``INSERT``, ``COMMIT``. ``--before DIR`` adds the side
``before:c+r``: ``calls+register`` on the package in ``DIR`` (which has no write batches),
this file run as a child process (``--serve``) with ``DIR`` first on ``PYTHONPATH``.

**Rounds** (``--rounds``, default 5): each side runs ``--warmup`` (20) untimed then
``--lifecycles`` (200) timed lifecycles (workflows for DBOS), the sides' order reversed
every other round. Printed per side: the median rate per second with the min-max over
rounds and its process's CPU time per lifecycle; then each form's ratio to DBOS and to
the floor (median of the per-round ratios, min-max) and whether the issue's target
(>= 2x DBOS, or the floor without DBOS) is met, never asserted (exit 0 unless the script
fails). ``--quick``: 10 lifecycles, 3 warm-up, 2 rounds. The machine is shared: compare
the sides measured together, never the absolute figures.

Rules of this file: the store is driven through its public writer API only; no store,
DBOS or floor setting beyond those stated here is changed; nothing is installed outside
``--cache-dir``.
Run: ``python tools/bench_writer_api.py [--quick] [--rounds N] [--lifecycles N] [--before DIR]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeVar

from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Observation
from runstore import Reference
from runstore import RunStore
from runstore import sql
from runstore.testing import factories
from runstore.testing.fixtures import EXECUTION_PATH as EXECUTION

if TYPE_CHECKING:  # the package before this work has no write batches (see --serve)
    from runstore.batch import Guard

TARGET = 2.0
LEASE_NS = 300 * 10**9
OWNER = "bench-owner"
FORMS = ("calls+register", "calls", "runner", "batch")
TRACED_WORKFLOWS = 20
BEFORE_SIDE = "before:c+r"
UNITS = {"dbos": "one-step workflow", "floor": "floor lifecycle"}
T = TypeVar("T")
now = time.time_ns

# --- runstore ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One lifecycle's made-up arguments, built before the timer starts."""

    name: str
    bundle: factories.OneShot
    observation: Observation
    observation_artifact: ArtifactRegistration
    attempt_artifact: ArtifactRegistration
    references: tuple[Reference, ...]

    @classmethod
    def make(cls, name: str) -> Slot:
        bundle, verified = factories.one_shot(name), now()
        observed = factories.artifact(ArtifactKind.OBSERVATION, name, verified_at_ns=verified)
        return cls(
            name,
            bundle,
            factories.observation(bundle.observation_slot, bundle.attempt_id(0), result={"n": 1}),
            observed,
            factories.artifact(ArtifactKind.ATTEMPT, name, verified_at_ns=verified),
            (Reference("observation", observed.id),),
        )

    def lease(self, purpose: str) -> LeaseRequest:
        lease_id = f"{purpose}-{self.name}"
        return LeaseRequest(lease_id=lease_id, owner_token=OWNER, expires_at_ns=now() + LEASE_NS)


def calls(store: RunStore, slot: Slot, *, register: bool = False) -> None:
    """One call per operation (``register``: ``register_one_shot`` first)."""
    if register:
        store.register_one_shot(*slot.bundle.arguments())
    guard = store.reserve(slot.bundle.slot_id, FirstAttempt(), slot.lease("reservation"), now())
    for phase in (*EXECUTION, AttemptState.VALIDATING):
        guard = store.advance(guard, phase, now())
    claim = store.begin_finalization(guard, slot.lease("claim"), now())
    receipt = store.register_observation(
        claim.attempt,
        slot.observation,
        slot.observation_artifact,
        [],
        select=claim.claimed,
        now_ns=now(),
    )
    final = store.commit_finalization(
        receipt.attempt, Accepted(), slot.attempt_artifact, slot.references, now(), now()
    )
    assert final.state is AttemptState.ACCEPTED, final


def batched(store: RunStore, slot: Slot, *, whole: bool) -> None:
    """The runner's grouping in three transactions or, ``whole``, the lifecycle in one."""
    from runstore import WriteBatch

    batch = WriteBatch()
    moved = batch.reserve(slot.bundle.slot_id, FirstAttempt(), slot.lease("reservation"), now())
    for phase in EXECUTION:
        moved = batch.advance(moved, phase, now())
    guard: Guard = moved
    if not whole:
        store.apply_batch(batch)
        batch, guard = WriteBatch(), moved.result()
    validating = batch.advance(guard, AttemptState.VALIDATING, now())
    disposition = batch.begin_finalization(validating, slot.lease("claim"), now())
    receipt = batch.register_observation(
        disposition.then(lambda d: d.attempt),
        slot.observation,
        slot.observation_artifact,
        [],
        select=disposition.then(lambda d: d.claimed),
        now_ns=now(),
    )
    artifact, references = slot.attempt_artifact, slot.references
    if whole:
        owner = receipt.then(lambda r: r.attempt)
        final = batch.commit_finalization(owner, Accepted(), artifact, references, now(), now())
        store.apply_batch(batch)
        state = final.result().state
    else:  # as the runner: its publication's final transaction is a call of its own
        store.apply_batch(batch)
        owned = receipt.result().attempt
        state = store.commit_finalization(
            owned, Accepted(), artifact, references, now(), now()
        ).state
    assert state is AttemptState.ACCEPTED, state


LIFECYCLES: dict[str, Callable[[RunStore, Slot], None]] = {
    "calls+register": lambda store, slot: calls(store, slot, register=True),
    "calls": calls,
    "runner": lambda store, slot: batched(store, slot, whole=False),
    "batch": lambda store, slot: batched(store, slot, whole=True),
}


def timed(items: list[T], one: Callable[[T], None], warmup: int) -> tuple[int, int]:
    """``one`` of each item, the first ``warmup`` untimed: (wall ns, CPU ns) of the rest."""
    for item in items[:warmup]:
        one(item)
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    for item in items[warmup:]:
        one(item)
    return time.perf_counter_ns() - start, time.process_time_ns() - cpu


class Form:
    """One form on its own store; slot names are numbered across rounds."""

    def __init__(self, name: str, root: str) -> None:
        os.mkdir(root)
        self.name, self.store, self.lifecycle = name, RunStore.open(root), LIFECYCLES[name]
        self._numbers = itertools.count()

    def prepare(self, count: int) -> list[Slot]:
        slots = [Slot.make(f"{self.name}-{next(self._numbers)}") for _ in range(count)]
        if self.name != "calls+register":  # the campaign's registration, untimed
            items = [(s.bundle.decision, s.bundle.run, s.bundle.attempt_slot,
                      (s.bundle.observation_slot,)) for s in slots]  # fmt: skip
            self.store.register_many(items)
        return slots

    def trace(self) -> tuple[int, int]:
        """One untimed lifecycle: its (write transactions, statements)."""
        seen: list[str] = []
        (slot,) = self.prepare(1)

        def observe(phase: str, text: str) -> None:
            if phase == "after":
                seen.append(text)

        previous = sql.install_observer(observe)
        try:
            self.lifecycle(self.store, slot)
        finally:
            sql.install_observer(previous)
        return sum(s.startswith("COMMIT") for s in seen), len(seen)

    def run(self, count: int, warmup: int) -> tuple[int, int]:
        return timed(self.prepare(warmup + count), lambda s: self.lifecycle(self.store, s), warmup)

    def close(self) -> None:
        self.store.close()


class Floor:
    """Bare stdlib sqlite3, WAL + synchronous=FULL: ``commits`` small commits a lifecycle."""

    def __init__(self, root: str, commits: int) -> None:
        os.mkdir(root)
        self.commits = commits
        self.db = sqlite3.connect(os.path.join(root, "floor.sqlite3"), isolation_level=None)
        assert self.db.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        self.db.execute("PRAGMA synchronous=FULL")
        assert self.db.execute("PRAGMA synchronous").fetchone() == (2,)
        self.db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)")

    def _one(self) -> None:
        for _ in range(self.commits):
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT INTO t (v) VALUES (?)", (b"x" * 64,))
            self.db.execute("COMMIT")

    def run(self, count: int, warmup: int) -> tuple[int, int]:
        return timed(list(range(warmup + count)), lambda _: self._one(), warmup)

    def close(self) -> None:
        self.db.close()


# --- DBOS -------------------------------------------------------------------------------

CHILD = r"""
import importlib.metadata, json, os, sqlite3, sys, time
import sqlalchemy
from dbos import DBOS
path, traced = os.path.join(sys.argv[2], "dbos.sqlite"), int(sys.argv[1])
DBOS(config={"name": "bench-writer-api", "system_database_url": "sqlite:///" + path,
             "run_admin_server": False, "log_level": "WARNING"})
@DBOS.step()
def one_step(i):
    return i
@DBOS.workflow()
def workflow(i):
    return one_step(i)
DBOS.launch()
def run(n):
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    for i in range(n):
        assert workflow(i) == i
    return time.perf_counter_ns() - start, time.process_time_ns() - cpu
commits = [0]
def on_commit(conn):
    commits[0] += bool(conn.connection.dbapi_connection.in_transaction)
run(5)
sqlalchemy.event.listen(sqlalchemy.engine.Engine, "commit", on_commit)
run(traced)
sqlalchemy.event.remove(sqlalchemy.engine.Engine, "commit", on_commit)
check = sqlite3.connect(path)
pragmas = [check.execute("PRAGMA " + p).fetchone()[0] for p in ("journal_mode", "synchronous")]
check.close()
print("RESULT " + json.dumps({"version": importlib.metadata.version("dbos"), "commits":
      commits[0] / traced, "journal_mode": pragmas[0], "synchronous": pragmas[1]}), flush=True)
for line in sys.stdin:
    count, warmup = json.loads(line)
    run(warmup)
    print("RESULT " + json.dumps(run(count)), flush=True)
DBOS.destroy()
"""


def dbos_python(cache: str) -> str:
    """An interpreter that imports dbos: this one, or the private venv (made once)."""
    venv = os.path.join(cache, "dbos-venv")
    python = os.path.join(venv, "bin", "python")
    for found in [p for p in (sys.executable, python) if os.path.exists(p)]:
        if subprocess.run([found, "-c", "import dbos"], capture_output=True).returncode == 0:
            return found
    print(f"installing dbos into {venv} ...", flush=True)
    for step in ([sys.executable, "-m", "venv", "--clear", venv],
                 [python, "-m", "pip", "install", "-q", "dbos"]):  # fmt: skip
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            why = done.stderr[-600:].strip()
            raise RuntimeError(f"{' '.join(step)} exited {done.returncode}: {why}")
    return python


class Child:
    """A timed side in a child process (DBOS, or the package before this work): started
    once; it prints ``RESULT <json>`` once set up, then answers each ``[count, warmup]``
    line with ``RESULT [wall ns, CPU ns]`` of ``count`` timed lifecycles after ``warmup``."""

    def __init__(self, argv: list[str], directory: str, env: dict[str, str] | None = None):
        os.mkdir(directory)
        self.log = open(os.path.join(directory, "child.log"), "w+")  # noqa: SIM115
        self.child = subprocess.Popen(
            [*argv, directory],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
        )
        self.info: dict[str, Any] = self._answer()

    def _answer(self) -> Any:
        assert self.child.stdout is not None
        for line in self.child.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        self.log.seek(0)
        raise RuntimeError(f"the child exited {self.child.wait()}: {self.log.read()[-900:]}")

    def run(self, count: int, warmup: int) -> tuple[int, int]:
        assert self.child.stdin is not None
        self.child.stdin.write(json.dumps([count, warmup]) + "\n")
        self.child.stdin.flush()
        wall, cpu = self._answer()
        return int(wall), int(cpu)

    def close(self) -> None:
        if self.child.stdin is not None:
            self.child.stdin.close()
        self.child.wait(timeout=60)
        self.log.close()


# --- rounds and report ------------------------------------------------------------------


@dataclass
class Side:
    name: str
    runner: Form | Floor | Child
    walls: list[int] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)

    def rates(self, count: int) -> list[float]:
        return [count / (wall / 1e9) for wall in self.walls]


def spread(values: list[float], unit: str = "") -> str:
    return f"{statistics.median(values):8.2f}{unit} ({min(values):.2f}-{max(values):.2f})"


def report(sides: list[Side], count: int, baseline: str) -> None:
    print(f"{'side':<16}{'per s, median (min-max)':>30}{'CPU ms each':>13}  each is")
    for side in sides:
        cpu = statistics.median(side.cpus) / 1e6 / count
        unit = UNITS.get(side.name, "lifecycle")
        print(f"{side.name:<16}{spread(side.rates(count)):>30}{cpu:>13.2f}  {unit}")
    by = {side.name: side for side in sides}
    bases = list(dict.fromkeys((baseline, "floor")))
    heads = "".join(f"{'form / ' + b:>28}" for b in bases)
    print(f"{'ratios':<16}{heads}  target >= {TARGET}x {baseline}")
    for form in [f for f in (*FORMS, BEFORE_SIDE) if f in by]:
        cells, medians = "", []
        for base in bases:
            ratios = [b / a for a, b in zip(by[form].walls, by[base].walls, strict=True)]
            cells += f"{spread(ratios, 'x'):>28}"
            medians.append(statistics.median(ratios))
        print(f"{form:<16}{cells}  {'met' if medians[0] >= TARGET else 'NOT met'}")
    if BEFORE_SIDE in by:
        ratios = [b / a for a, b in zip(by[FORMS[0]].walls, by[BEFORE_SIDE].walls, strict=True)]
        print(f"{FORMS[0]} now / before: {spread(ratios, 'x').strip()}")
    print("(median of the per-round ratios, min-max over rounds)")


def serve(directory: str) -> None:
    """``--serve DIR``: a :class:`Child` timing ``calls+register`` on a store under ``DIR``
    with whichever ``runstore`` this interpreter imports."""
    import runstore

    form = Form(FORMS[0], os.path.join(directory, "store"))
    print("RESULT " + json.dumps({"package": os.path.dirname(runstore.__file__)}), flush=True)
    for line in sys.stdin:
        print("RESULT " + json.dumps(form.run(*json.loads(line))), flush=True)
    form.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--lifecycles", type=int, default=None, help="timed per side (200)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed first (20)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (5; 2 quick)")
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    default_cache = os.path.join(os.path.expanduser("~"), ".cache", "runstore-bench")
    parser.add_argument("--cache-dir", default=default_cache, help="where DBOS's venv goes")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument("--before", default=None, help="add calls+register on this package")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.serve is not None:
        return serve(options.serve)
    sizes = (10, 3, 2) if options.quick else (200, 20, 5)
    given = (options.lifecycles, options.warmup, options.rounds)
    count, warmup, rounds = (d if g is None else g for g, d in zip(given, sizes, strict=True))
    if count < 1 or warmup < 0 or rounds < 1:
        parser.error("lifecycles and rounds must be positive, warm-up not negative")

    work = tempfile.mkdtemp(prefix="bench-writer-api-", dir=options.dir)
    print(f"bench_writer_api: {work}, {os.cpu_count()} CPUs, SQLite {sqlite3.sqlite_version}")
    print(f"{rounds} rounds of {count} timed after {warmup} untimed, per side")
    sides: list[Side] = []
    calls_commits = 0
    try:
        for name in FORMS:
            form = Form(name, os.path.join(work, name))
            sides.append(Side(name, form))
            commits, statements = form.trace()
            calls_commits = commits if name == "calls" else calls_commits
            print(f"  {name}: {commits} write transactions, {statements} statements a lifecycle")
        baseline = "floor"
        try:
            python = dbos_python(options.cache_dir)
            dbos = Child([python, "-c", CHILD, str(TRACED_WORKFLOWS)], os.path.join(work, "dbos"))
            print(
                "  DBOS {version} on SQLite: journal_mode={journal_mode} synchronous={synchronous}"
                " (SQLite's defaults), {commits:.2f} write commits a workflow".format(**dbos.info)
            )
            sides.append(Side("dbos", dbos))
            baseline = "dbos"
        except (OSError, RuntimeError, subprocess.SubprocessError) as failure:
            print(f"  DBOS not measured, ratios against the floor instead: {failure}")
        sides.append(Side("floor", Floor(os.path.join(work, "floor"), calls_commits)))
        if options.before is not None:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(options.before)}
            command = [sys.executable, os.path.abspath(__file__), "--serve"]
            before = Child(command, os.path.join(work, "before"), env)
            sides.insert(1, Side(BEFORE_SIDE, before))
            print(f"  {BEFORE_SIDE}: calls+register on {before.info['package']}")
        print(f"  floor: {calls_commits} commits (WAL, synchronous=FULL) a lifecycle")
        for number in range(rounds):
            order = sides if number % 2 == 0 else sides[::-1]
            for side in order:
                wall, cpu = side.runner.run(count, warmup)
                side.walls.append(wall)
                side.cpus.append(cpu)
            print(f"  round {number + 1}: order {' '.join(s.name for s in order)}", flush=True)
        report(sides, count, baseline)
    finally:
        for side in sides:
            side.runner.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
