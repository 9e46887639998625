"""A store that looks like a real benchmark campaign, at any size, built in seconds per
10,000 slots: the fixture of ``tools/bench_scale.py`` (and of the fidelity test,
``conformance/inspection/test_scale_store.py``).

Two campaigns: ``scale`` (``candidates`` x ``problems`` pairs, ``repetitions`` measurement
slots each, three declared metrics) and a small ``scale-extra`` (:data:`EXTRA`). Each slot's
fate is fixed by its place in the plan (:func:`fate`): most are accepted at the first
attempt with metrics in ``result.json``; per 100 slots, two fail (``worker_failed``, a
Python traceback on stderr, exit 1), one times out (``time_limit``), two are accepted after
a failed attempt, one after two, one fails twice, and one is registered but never run
(``pending``, as in a campaign stopped part way).

Rules of this file: no byte is decided here. The records are ``runstore.runner.plan``'s for
real :class:`~runstore.runner.campaign.Campaign` values; what a worker left is judged by the
runner's own :func:`~runstore.runner.worker_result.judge` and packed by its
:func:`~runstore.runner.attempt.attempt_files`; the rows, events, leases, outcome documents
and objects are written by ``tools/synth.py``'s writer steps (its ``_World``, ``_Attempt``,
``_accepted_attempt`` and ``_publish_finalization``, which ``conformance/meta/test_synth.py``
pins byte for byte to the runner's attempt path), in one transaction per batch of slots,
unsynced until one ``os.sync()``. ``validate`` and ``audit`` must pass on every store made
here.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import attrs
import synth
from runstore import canonical
from runstore import sql
from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.requests import Failed
from runstore.runner.attempt import attempt_files
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import MetricDeclaration
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.plan import SlotPlan
from runstore.runner.plan import plan
from runstore.runner.worker_result import Failure
from runstore.runner.worker_result import Success
from runstore.runner.worker_result import judge
from runstore.store import store_root
from runstore.testing.fixtures import EXECUTION_PATH

BUILDER_VERSION: Final = "scale-store-2"
"""Names the cache entries of ``bench_scale.py``: change it whenever what is built changes."""

CAMPAIGN: Final = "scale"
EXTRA_CAMPAIGN: Final = "scale-extra"
SECOND: Final = 10**9
TIMEOUT_NS: Final = 60 * SECOND
_BATCH_SLOTS: Final = 2_000
_DISK_THREADS: Final = 2

ACCEPTED: Final = "accepted"
WORKER_FAILED: Final = "worker_failed"
TIME_LIMIT: Final = "time_limit"
PENDING: Final = "pending"
FATES: Final[dict[int, tuple[str, ...]]] = {
    7: (WORKER_FAILED,),
    57: (WORKER_FAILED,),
    19: (TIME_LIMIT,),
    11: (WORKER_FAILED, ACCEPTED),
    41: (TIME_LIMIT, ACCEPTED),
    31: (WORKER_FAILED, WORKER_FAILED, ACCEPTED),
    45: (WORKER_FAILED, WORKER_FAILED),
    53: (),
}
"""Slot ``i``'s attempts by ``i % 100`` (every other slot: one accepted attempt); ``()`` is
a slot never run."""

METRICS: Final = (
    MetricDeclaration(name="time_s", direction="lower", unit="s", threshold="0.05"),
    MetricDeclaration(name="peak_mb", direction="lower", unit="MB"),
    MetricDeclaration(name="ratio", direction="higher"),
)


@attrs.frozen
class Shape:
    """The main campaign's size; the store also holds :data:`EXTRA`."""

    candidates: int
    problems: int
    repetitions: int

    @property
    def slots(self) -> int:
        return self.candidates * self.problems * self.repetitions + EXTRA.pairs()

    def pairs(self) -> int:
        return self.candidates * self.problems * self.repetitions


EXTRA: Final = Shape(candidates=4, problems=5, repetitions=1)
"""The second, small campaign."""


@attrs.frozen
class BuildSummary:
    """What :func:`build` wrote, and how long it took."""

    root: str
    version: str
    slots: int
    attempts: int
    artifacts: int
    events: int
    fates: dict[str, int]
    seconds: float


def campaign(name: str, shape: Shape) -> Campaign:
    """A one-shot campaign of ``shape`` whose workers print a line and write
    ``result.json`` with the :data:`METRICS` (what ``runstore run`` would read from a
    campaign file declaring them)."""
    return Campaign(
        name=name,
        path=f"/campaigns/{name}.toml",
        slot_kind=SlotKind.ONE_SHOT,
        timeout_ns=TIMEOUT_NS,
        lease_ns=synth.LEASE_NS,
        candidates=tuple(
            Candidate(
                name=f"c{index:03d}",
                command=("{python}", "worker.py", f"c{index:03d}"),
                env=(("SEED", "1"),),
                files=(),
                applies_to=None,
                timeout_ns=None,
            )
            for index in range(shape.candidates)
        ),
        problems=tuple(
            Problem(
                name=f"p{index:03d}",
                parameters_json=canonical.encode({"size": 1000 * (index + 1)}),
                files=(),
                tags=(),
            )
            for index in range(shape.problems)
        ),
        repetitions=shape.repetitions,
        metrics=METRICS,
    )


def fate(index: int) -> tuple[str, ...]:
    """The attempts of the ``index``-th slot of a plan, each ``accepted`` or a failure code."""
    return FATES.get(index % 100, (ACCEPTED,))


def _noise(*parts: object) -> float:
    """A reproducible number in [0, 1) for ``parts``."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def worker_outcome(slot: SlotPlan, attempt: int, code: str) -> WorkResult:
    """What the worker of ``slot``'s attempt ``attempt`` left: for ``accepted`` a
    ``result.json`` (a pair's values spread a few percent around its own level, one pair
    in seven noisier), for ``worker_failed`` a traceback and exit 1, for ``time_limit`` a
    process killed at the time limit."""
    candidate, problem = slot.decision.candidate_id, slot.decision.problem_id
    label = f"{candidate} {problem} repetition {slot.repetition} attempt {attempt}"
    stdout = f"running {label}\n".encode()
    if code == TIME_LIMIT:
        stderr = f"{label}: still iterating at step 40000\n".encode()
        return _work(WorkStatus.TIMED_OUT, -9, stdout, stderr, (), TIMEOUT_NS)
    if code == WORKER_FAILED:
        stderr = (
            "Traceback (most recent call last):\n"
            '  File "worker.py", line 41, in <module>\n'
            "    main()\n"
            '  File "worker.py", line 37, in main\n'
            '    raise ValueError(f"{problem}: input too large for {candidate}")\n'
            f"ValueError: {problem}: input too large for {candidate}\n"
        ).encode()
        return _work(WorkStatus.EXITED, 1, stdout, stderr, (), SECOND // 10)
    level = 0.02 + _noise(candidate, problem)
    spread = 0.2 if _noise("noisy", candidate, problem) < 1 / 7 else 0.02
    seconds = level * (1 + spread * (_noise(label) - 0.5))  # all digits: no two alike
    metrics: dict[str, JSON] = {
        "peak_mb": 20 + int(100 * _noise("mb", candidate, problem)),
        "ratio": round(1.5 + 2 * _noise("ratio", candidate, problem), 4),
    }
    document = json.dumps({"metrics": {**metrics, "time_s": seconds}}).encode()
    outputs = (("result.json", document),)
    return _work(WorkStatus.EXITED, 0, stdout, b"", outputs, int(seconds * SECOND))


def _work(
    status: WorkStatus,
    exit_code: int,
    stdout: bytes,
    stderr: bytes,
    outputs: tuple[tuple[str, bytes], ...],
    duration_ns: int,
) -> WorkResult:
    return WorkResult(
        status=status,
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=False,
        stderr_truncated=False,
        outputs=outputs,
        duration_ns=duration_ns,
    )


def _register(world: synth._World, documents: synth.Slot, registered: set[str]) -> None:
    """``register_slots``' rows for one slot: its decision and run the first time their
    pair is seen (``registered`` holds the run ids seen), then the slot's own rows."""
    decision, run, measured, result = documents
    if run["id"] not in registered:
        registered.add(str(run["id"]))
        keys = (decision["id"], decision["candidate_id"], decision["problem_id"], 1)
        world.add("applicability_decisions", *keys, synth._text(decision))
        keys = (run["id"], run["logical_spec_id"], run["decision_id"], run["candidate_id"], 1)
        world.add("resolved_runs", *keys, synth._text(run))
    keys = (measured["id"], run["id"], measured["logical_slot"], measured["execution_kind"])
    world.add("attempt_slots", *keys, measured["role"], synth._text(measured))
    keys = (result["id"], run["id"], result["logical_slot"], result["kind"])
    world.add("observation_slots", *keys, result["checkpoint_index"], synth._text(result))
    world.add("attempt_observation_slots", result["id"], measured["id"], run["id"])


def _slot(
    world: synth._World, slot: SlotPlan, index: int, fates: dict[str, int], registered: set[str]
) -> None:
    """Register ``slot`` and write its attempts as the runner's attempt path does: a
    failure enters finalizing without contending and publishes ``Failed`` with the
    worker's logs; a success publishes its observation, claims, registers it and
    publishes ``Accepted``."""
    assert slot.run is not None and slot.attempt_slot is not None
    (observed,) = slot.observation_slots
    documents = (
        slot.decision.to_json(),
        slot.run.to_json(),
        slot.attempt_slot.to_json(),
        observed.to_json(),
    )
    _register(world, documents, registered)
    attempts = fate(index)
    fates[attempts[-1] if attempts else PENDING] += 1
    for retry, code in enumerate(attempts):
        work = worker_outcome(slot, retry, code)
        verdict = judge(work, slot.timeout_ns)
        if isinstance(verdict, Success):
            (produced,) = verdict.produced
            files = dict(attempt_files(work, include_outputs=False))
            observed_files = dict(produced.files)
            synth._accepted_attempt(world, documents, retry, observed_files, produced.result, files)
            continue
        assert isinstance(verdict, Failure) and verdict.code == code
        attempt = synth._Attempt.reserve(world, documents, retry)
        for phase in (*EXECUTION_PATH, AttemptState.FINALIZING):
            attempt.advance(phase)
        failed = Failed(code=verdict.code, details=verdict.details)
        files = dict(attempt_files(work, include_outputs=True))
        synth._publish_finalization(attempt, failed, files, [], [])


def slot_plans(shape: Shape) -> list[SlotPlan]:
    """Every slot of the store, in the order the runner would start them: the main
    campaign's, then the extra one's."""
    return [*plan(campaign(CAMPAIGN, shape)), *plan(campaign(EXTRA_CAMPAIGN, EXTRA))]


def build(root: str, shape: Shape, *, seed: int = 0) -> BuildSummary:
    """Build a new store at ``root`` (made when missing) holding :func:`slot_plans`'s slots,
    ``seed`` picking the lease and owner tokens. Refuses a root that holds a database
    (FileExistsError). A pipeline as ``synth.synthesize``'s: a thread makes the next batch
    while this one inserts the current one and two more write the previous one's objects."""
    started = time.monotonic()
    plans = slot_plans(shape)
    root = synth._new_store(root)
    world = synth._World(random.Random(seed))
    fates = {name: 0 for name in (ACCEPTED, WORKER_FAILED, TIME_LIMIT, PENDING)}
    registered: set[str] = set()
    attempts = sum(len(fate(index)) for index in range(len(plans)))

    def make(first: int) -> synth._Batch:
        world.batch = synth._Batch()
        for index in range(first, min(first + _BATCH_SLOTS, len(plans))):
            _slot(world, plans[index], index, fates, registered)
        return world.batch

    connection = sql.connect(os.path.join(root, store_root.DATABASE_NAME))
    try:
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute(f"PRAGMA cache_size = -{synth._CACHE_KIB}")
        with ThreadPoolExecutor(1) as maker, ThreadPoolExecutor(_DISK_THREADS) as disk:
            starts: list[int | None] = [*range(_BATCH_SLOTS, len(plans), _BATCH_SLOTS), None]
            made = maker.submit(make, 0)
            writing: list[Future[None]] = []
            for following in starts:
                batch = made.result()
                if following is not None:
                    made = maker.submit(make, following)
                batch.flush(connection)
                for future in writing:
                    future.result()
                parts = [batch.objects[i::_DISK_THREADS] for i in range(_DISK_THREADS)]
                writing = [disk.submit(synth._write_objects, root, part) for part in parts]
            for future in writing:
                future.result()
    finally:
        connection.close()
    os.sync()
    return BuildSummary(
        root=root,
        version=BUILDER_VERSION,
        slots=len(plans),
        attempts=attempts,
        artifacts=world.artifacts,
        events=next(world.sequences) - 1,
        fates=fates,
        seconds=time.monotonic() - started,
    )
