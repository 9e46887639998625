"""Shared helpers for the writer's spec tests (``conformance/test_writer_*.py``).

A :class:`World` is one real store on a fresh root driven in lockstep with the reference
model through :mod:`runstore.testing.lockstep` (its ``ModelWriter`` and ``lockstep``):
every writer call is made on both, and the store's result (or refusal code) must equal
the model's. Durable state is always read through a fresh read-only connection on
``store.database_path``, never the writer's own connection.

:class:`Workers` runs writer calls in separate ``spawn``-started processes, each with its
own ``RunStore`` handle, released together by a barrier so that they race for the write
lock.

Every slot is registered through the public writer in lockstep: one-shot measurements with
``register_one_shot``, every other kind with ``register_slots``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
from collections.abc import Callable
from collections.abc import Sequence
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any
from typing import TypeVar

import pytest
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import ClaimDisposition
from runstore import CommittedEvent
from runstore import Completion
from runstore import ExecutionKind
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Observation
from runstore import ObservationReceipt
from runstore import ObservationSlot
from runstore import OwnedAttempt
from runstore import Reference
from runstore import RetryAuthorization
from runstore import RunStore
from runstore import RunStoreError
from runstore import SlotRole
from runstore import TerminalAttempt
from runstore import TerminalOutcome
from runstore import model as m
from runstore.audit.projection import Projection
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.testing import fixtures as sc
from runstore.testing.disk import disk_view
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import Writer
from runstore.testing.lockstep import lockstep

from conformance.closed_store import rows as read

T = TypeVar("T")
Row = tuple[Any, ...]

EXPIRES = 10_000
"""The default lease expiry of the helpers."""


class World:
    """A store on ``root`` and the model, driven in lockstep; ``delivered`` collects the
    events this handle's subscriber received."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.store = RunStore.open(root)
        self.model = ModelWriter(
            m.ModelState(), disk=lambda state: disk_view(self.store.root, state)
        )
        self.delivered: list[CommittedEvent] = []
        self.store.subscribe(self.delivered.append)

    @property
    def database_path(self) -> str:
        return self.store.database_path

    def close(self) -> None:
        self.store.close()

    # --- lockstep ------------------------------------------------------------------------

    def lockstep(self, call: Callable[[Writer], T], store: Writer | None = None) -> T:
        """:func:`~runstore.testing.lockstep.lockstep` of ``call`` on the model and on
        ``store`` (default: this world's): the results (or refusal codes) must agree. A
        store refusal is re-raised after the comparison."""
        return lockstep(self.model, self.store if store is None else store, call)

    def registered(self, *kind: Any, **options: Any) -> sc.SlotFixture:
        """A new slot fixture (``sc.slot_fixture(*kind, **options)``), registered in
        lockstep (:meth:`register`)."""
        fixture = sc.slot_fixture(*kind, **options)
        self.register(fixture)
        return fixture

    def register(self, fixture: sc.SlotFixture) -> str:
        """Register a fixture in lockstep: a one-shot measurement with
        ``register_one_shot``, any other slot with ``register_slots``."""
        slot = fixture.attempt_slot
        if (slot.execution_kind, slot.role) == (ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT):
            args = (fixture.decision, fixture.run, slot, fixture.observation_slots[0])
            return self.lockstep(lambda w: w.register_one_shot(*args))
        return self.lockstep(lambda w: w.register_slots(*fixture.arguments()))

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
        references: Sequence[Reference] = (),
    ) -> ObservationReceipt:
        return self.lockstep(
            lambda w: w.register_observation(
                guard, observation, artifact, references, select=select, now_ns=now
            )
        )

    def conclude(
        self,
        guard: OwnedAttempt,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[Reference],
        now: int,
        finished: int | None = None,
    ) -> TerminalAttempt:
        """``commit_finalization`` committed at ``now``, finished at ``finished`` (default
        ``now``)."""
        at = now if finished is None else finished
        return self.lockstep(
            lambda w: w.commit_finalization(guard, outcome, artifact, references, at, now)
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
        references: Sequence[Reference] = (),
        finished: int | None = None,
    ) -> TerminalAttempt:
        """``commit_finalization`` with the attempt artifact ``label``, committed at ``now``
        and finished at ``finished`` (default ``now``)."""
        return self.conclude(
            guard, outcome, sc.artifact(ArtifactKind.ATTEMPT, label), references, now, finished
        )

    # --- durable state ------------------------------------------------------------------

    def rows(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        return read(self.database_path, query, params)

    def projection(self) -> Projection:
        return store_projection(self.database_path)

    def check(self) -> None:
        """The whole durable projection equals the model's."""
        assert self.projection() == model_projection(self.model.state)

    def untouched(self) -> tuple[object, ...]:
        """What a call refused before any transaction leaves as it was: the database and
        its WAL byte for byte, the root's entries (no ``artifacts/``, stage or lock file
        appears) and the events delivered."""
        root = Path(self.database_path).parent
        files = {
            name: (root / name).read_bytes() if (root / name).exists() else None
            for name in ("run.sqlite3", "run.sqlite3-wal")
        }
        return files, sorted(p.name for p in root.iterdir()), len(self.delivered)

    def refused_untouched(self, code: str, call: Callable[[], object]) -> RunStoreError:
        """``call()`` must be refused with ``code`` and leave :meth:`untouched` as it was
        (no transaction was even opened)."""
        before = self.untouched()
        with pytest.raises(RunStoreError) as info:
            call()
        assert info.value.code == code, info.value
        assert self.untouched() == before
        return info.value

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
