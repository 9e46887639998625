"""Shared helpers for the writer's spec tests (``conformance/test_writer_*.py``).

A :class:`World` is one real store on a fresh root driven in lockstep with the reference
model through :mod:`runstore.crashsim.writers` (its ``ModelWriter`` and ``lockstep``):
every writer call is made on both, and the store's result (or refusal code) must equal
the model's. Durable state is always read through a fresh read-only connection on
``store.database_path``, never the writer's own connection.

:class:`Workers` runs writer calls in separate ``spawn``-started processes, each with its
own ``RunStore`` handle, released together by a barrier so that they race for the write
lock.

Stream and warm-up slots have no public registration yet (``register_one_shot`` only
takes one-shot measurements), so :func:`insert_slots` writes their rows through the
store's private connection, mirroring ``runstore.registration``; the model registers the
same records with ``register_slots``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import sqlite3
from collections.abc import Callable, Sequence
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from typing import Any, TypeVar

import pytest
from runstore import (
    ArtifactKind,
    ArtifactRegistration,
    AttemptState,
    ClaimDisposition,
    CommittedEvent,
    Completion,
    ExecutionKind,
    FirstAttempt,
    LeaseRequest,
    Observation,
    ObservationSlot,
    OwnedAttempt,
    RetryAuthorization,
    RunStore,
    RunStoreError,
    SlotRole,
    TerminalAttempt,
    TerminalOutcome,
    canonical,
    sql,
)
from runstore import model as m
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import ModelWriter, Writer, lockstep
from runstore.testing.projection import Projection, model_projection, store_projection

T = TypeVar("T")
Row = tuple[Any, ...]

EXPIRES = 10_000
"""The default lease expiry of the helpers."""


def read(database_path: str, query: str, params: Sequence[object] = ()) -> list[Row]:
    """Rows of ``query`` through a new read-only connection (never the writer's)."""
    connection = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True)
    try:
        return [tuple(row) for row in connection.execute(query, params)]
    finally:
        connection.close()


def insert_slots(store: RunStore, fixture: sc.SlotFixture) -> None:
    """Write a fixture's decision, run, attempt slot, observation slots and memberships
    through the store's private connection, in one immediate transaction.

    There is no public registration for stream and warm-up slots yet, so this mirrors the
    INSERTs of ``runstore.registration`` for them (test-only)."""
    connection = store._require_connection()

    def document(value: Any) -> str:
        return canonical.encode(value.to_json()).decode("utf-8")

    def exists(table: str, record_id: str) -> bool:
        return bool(sql.execute(connection, f"SELECT 1 FROM {table} WHERE id = ?", (record_id,)))

    decision, run, slot = fixture.candidate, fixture.run, fixture.attempt_slot
    with sql.immediate_transaction(connection):
        if not exists("applicability_decisions", decision.id):
            sql.execute(
                connection,
                "INSERT INTO applicability_decisions (id, candidate_id, problem_id, applicable, "
                "record_json) VALUES (?, ?, ?, ?, ?)",
                (
                    decision.id,
                    decision.candidate_id,
                    decision.problem_id,
                    int(decision.applicable),
                    document(decision),
                ),
            )
        if not exists("resolved_runs", run.id):
            sql.execute(
                connection,
                "INSERT INTO resolved_runs (id, logical_spec_id, decision_id, candidate_id, "
                "applicable, record_json) VALUES (?, ?, ?, ?, 1, ?)",
                (run.id, run.logical_spec_id, run.decision_id, run.candidate_id, document(run)),
            )
        sql.execute(
            connection,
            "INSERT INTO attempt_slots (id, run_id, logical_slot, execution_kind, role, "
            "record_json) VALUES (?, ?, ?, ?, ?, ?)",
            (
                slot.id,
                slot.run_id,
                slot.logical_slot,
                slot.execution_kind.value,
                slot.role.value,
                document(slot),
            ),
        )
        for member in fixture.observation_slots:
            sql.execute(
                connection,
                "INSERT INTO observation_slots (id, run_id, logical_slot, kind, "
                "checkpoint_index, record_json) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    member.id,
                    member.run_id,
                    member.logical_slot,
                    member.kind.value,
                    member.checkpoint_index,
                    document(member),
                ),
            )
            sql.execute(
                connection,
                "INSERT INTO attempt_observation_slots (observation_slot_id, attempt_slot_id, "
                "run_id) VALUES (?, ?, ?)",
                (member.id, slot.id, run.id),
            )


class World:
    """A store on ``root`` and the model, driven in lockstep; ``delivered`` collects the
    events this handle's subscriber received."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.store = RunStore.open(root)
        self.model = ModelWriter(m.ModelState())
        self.delivered: list[CommittedEvent] = []
        self.store.subscribe(self.delivered.append)

    @property
    def database_path(self) -> str:
        return self.store.database_path

    def close(self) -> None:
        self.store.close()

    # --- lockstep ------------------------------------------------------------------------

    def lockstep(self, call: Callable[[Writer], T], store: Writer | None = None) -> T:
        """:func:`~runstore.crashsim.writers.lockstep` of ``call`` on the model and on
        ``store`` (default: this world's): the results (or refusal codes) must agree. A
        store refusal is re-raised after the comparison."""
        return lockstep(self.model, self.store if store is None else store, call)

    def register(self, fixture: sc.SlotFixture) -> str:
        """Register a fixture: one-shot measurements publicly, other slots through
        :func:`insert_slots`."""
        slot = fixture.attempt_slot
        if (slot.execution_kind, slot.role) == (ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT):
            args = (fixture.candidate, fixture.run, slot, fixture.observation_slots[0])
            return self.lockstep(lambda w: w.register_one_shot(*args))
        result = self.model.register_slots(*fixture.arguments())
        assert result == slot.id, result
        insert_slots(self.store, fixture)
        return slot.id

    def reserve(
        self, slot_id: str, authorization: RetryAuthorization, lease: LeaseRequest, now: int
    ) -> OwnedAttempt:
        return self.lockstep(lambda w: w.reserve(slot_id, authorization, lease, now))

    def advance(self, guard: OwnedAttempt, phase: AttemptState, now: int) -> OwnedAttempt:
        return self.lockstep(lambda w: w.advance(guard, phase, now))

    def renew(self, guard: OwnedAttempt, expires: int, now: int) -> OwnedAttempt:
        return self.lockstep(lambda w: w.renew(guard, expires, now))

    def finalize(self, guard: OwnedAttempt, lease: LeaseRequest, now: int) -> ClaimDisposition:
        return self.lockstep(lambda w: w.begin_finalization(guard, lease, now))

    def observe(
        self,
        guard: OwnedAttempt,
        observation: Observation,
        artifact: ArtifactRegistration,
        select: bool,
        now: int,
    ) -> OwnedAttempt:
        return self.lockstep(
            lambda w: w.register_observation(guard, observation, artifact, select, now)
        )

    def conclude(
        self,
        guard: OwnedAttempt,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[tuple[str, str]],
        now: int,
    ) -> TerminalAttempt:
        return self.lockstep(
            lambda w: w.commit_finalization(guard, outcome, artifact, references, now)
        )

    # --- shortcuts ----------------------------------------------------------------------

    def start(
        self,
        fixture: sc.SlotFixture,
        lease_id: str,
        *,
        authorization: RetryAuthorization | None = None,
        now: int = 1_000,
        expires: int = EXPIRES,
        owner: str = sc.OWNER,
    ) -> OwnedAttempt:
        """Reserve the fixture's slot under a new lease ``lease_id``."""
        return self.reserve(
            fixture.slot_id,
            authorization or FirstAttempt(),
            sc.lease(lease_id, expires, owner),
            now,
        )

    def walk(self, guard: OwnedAttempt, path: Sequence[AttemptState], now: int) -> OwnedAttempt:
        """Advance along ``path``, one nanosecond apart from ``now``."""
        for offset, phase in enumerate(path):
            guard = self.advance(guard, phase, now + offset)
        return guard

    def claim(
        self, guard: OwnedAttempt, lease_id: str, now: int, expires: int = EXPIRES
    ) -> ClaimDisposition:
        """``begin_finalization`` with a lease ``lease_id`` of the guard's owner."""
        return self.finalize(guard, sc.lease(lease_id, expires, guard.owner_token), now)

    def publish(
        self,
        guard: OwnedAttempt,
        slot: ObservationSlot,
        label: str,
        now: int,
        *,
        select: bool = True,
        valid: bool = True,
        completion: Completion = Completion.REACHED,
        score: int = 1,
    ) -> Observation:
        """Register (and by default select) an observation of ``guard``'s attempt for
        ``slot``, published as observation artifact ``label``; returns the observation."""
        observation = sc.observation(slot, guard, valid=valid, completion=completion, score=score)
        self.observe(guard, observation, sc.artifact(ArtifactKind.OBSERVATION, label), select, now)
        return observation

    def finish(
        self,
        guard: OwnedAttempt,
        outcome: TerminalOutcome,
        label: str,
        now: int,
        references: Sequence[tuple[str, str]] = (),
    ) -> TerminalAttempt:
        """``commit_finalization`` with the attempt artifact ``label``."""
        return self.conclude(
            guard, outcome, sc.artifact(ArtifactKind.ATTEMPT, label), references, now
        )

    # --- durable state ------------------------------------------------------------------

    def rows(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        return read(self.database_path, query, params)

    def projection(self) -> Projection:
        return store_projection(self.database_path)

    def check(self) -> None:
        """The whole durable projection equals the model's."""
        assert self.projection() == model_projection(self.model.state)

    def refused(self, code: str, call: Callable[..., object], *args: Any) -> RunStoreError:
        """``call(*args)`` must be refused with ``code``, change no durable row and deliver
        no event."""
        before, delivered = self.projection(), len(self.delivered)
        with pytest.raises(RunStoreError) as info:
            call(*args)
        assert info.value.code == code, info.value
        assert self.projection() == before
        assert len(self.delivered) == delivered
        return info.value


# --- separate processes ---------------------------------------------------------------------

Task = tuple[str, str, tuple[Any, ...]]
"""``(root, method name, arguments)``: one ``RunStore`` call for a worker process."""
Outcome = tuple[str, Any]
"""``("ok", result)``, ``("refused", code)``, or ``("error", repr)`` for anything else."""


def _worker_main(
    index: int,
    barrier: multiprocessing.synchronize.Barrier,
    tasks: Queue[Task | None],
    results: Queue[tuple[int, Outcome]],
) -> None:
    """A worker process: for each task, open (or reuse) its own handle on the root, wait
    for every worker at the barrier, then make the call."""
    stores: dict[str, RunStore] = {}
    try:
        while (task := tasks.get()) is not None:
            root, method, args = task
            if root not in stores:
                stores[root] = RunStore.open(root)
            call = getattr(stores[root], method)
            barrier.wait(timeout=60)
            outcome: Outcome
            try:
                outcome = ("ok", call(*args))
            except RunStoreError as error:
                outcome = ("refused", error.code)
            except Exception as error:  # reported, so the parent never waits in vain
                outcome = ("error", repr(error))
            results.put((index, outcome))
    finally:
        for store in stores.values():
            store.close()


class Workers:
    """``count`` worker processes started with the ``spawn`` method. :meth:`run` gives
    every worker one task; they start their calls together (a barrier) and race."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._barrier = context.Barrier(count)
        self._results: Queue[tuple[int, Outcome]] = context.Queue()
        self._tasks: list[Queue[Task | None]] = []
        self._processes: list[SpawnProcess] = []
        for index in range(count):
            queue: Queue[Task | None] = context.Queue()
            process = context.Process(
                target=_worker_main,
                args=(index, self._barrier, queue, self._results),
                daemon=True,
            )
            process.start()
            self._tasks.append(queue)
            self._processes.append(process)

    def run(self, tasks: Sequence[Task]) -> list[Outcome]:
        """One task per worker, raced; the outcomes in task order."""
        assert len(tasks) == len(self._tasks)
        for queue, task in zip(self._tasks, tasks, strict=True):
            queue.put(task)
        outcomes: dict[int, Outcome] = {}
        for _ in tasks:
            index, outcome = self._results.get(timeout=60)
            outcomes[index] = outcome
        return [outcomes[index] for index in range(len(tasks))]

    def close(self) -> None:
        for queue in self._tasks:
            queue.put(None)
        for process in self._processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()
