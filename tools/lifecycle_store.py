"""The store side of ``tools/bench_lifecycle.py``: an open store on which one-slot lifecycles
run as the coordinator runs them (registration, ``attempt.start``, ``attempt.finish`` of a
no-op worker's result, or ``coordinator.run_campaign`` with an executor done at once).

Rules of this file: the runner's own calls only (no replay, no timing); every result is
distinct per lifecycle and per run, so each observation is a new object.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass

from lifecycle_mix import WalIndex
from runstore import RunStore
from runstore.canonical import JSON
from runstore.canonical import encode
from runstore.enums import AttemptState
from runstore.requests import FirstAttempt
from runstore.runner import attempt
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import register
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkHandle
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

SECOND = 10**9
LEASE_NS = 30 * SECOND
TIMEOUT_NS = 60 * SECOND


def one_slot_campaign(candidate: str) -> Campaign:
    """A one-shot campaign of one candidate (named ``candidate``) on one problem."""
    return campaign_of([candidate])


def campaign_of(names: list[str]) -> Campaign:
    """A one-shot campaign of the candidates ``names`` on one problem: one slot each."""
    return Campaign(
        name="bench",
        path="/campaigns/bench.toml",
        slot_kind=SlotKind.ONE_SHOT,
        timeout_ns=TIMEOUT_NS,
        lease_ns=LEASE_NS,
        candidates=tuple(
            Candidate(
                name=name,
                command=("{python}", "-c", "pass"),
                env=(),
                files=(),
                applies_to=None,
                timeout_ns=None,
            )
            for name in names
        ),
        problems=(Problem(name="p", parameters_json=encode({"size": 1}), files=(), tags=()),),
    )


RUN = secrets.randbits(31)
"""This run's token, in candidate names and results: a reused big store gets new slots
and new observation objects, not the identical-content path."""


def no_op_result(index: int) -> WorkResult:
    """What a worker that only wrote ``result.json`` returns (distinct per ``index`` and
    per run)."""
    document = json.dumps({"metrics": {"lifecycle": index, "run": RUN}}).encode()
    return WorkResult(
        status=WorkStatus.EXITED,
        exit_code=0,
        stdout=b"",
        stderr=b"",
        stdout_truncated=False,
        stderr_truncated=False,
        outputs=(("result.json", document),),
        duration_ns=1_000_000,
    )


@dataclass
class _Done:
    """A work handle that is done from the start."""

    outcome: WorkResult

    def done(self) -> bool:
        return True

    def result(self) -> WorkResult:
        return self.outcome

    def cancel(self) -> None:
        pass

    def __hash__(self) -> int:
        return id(self)


class InstantExecutor:
    """Every order's result is the no-op worker's, at once."""

    def __init__(self, index: int) -> None:
        self.index = index

    def submit(self, order: WorkOrder) -> WorkHandle:
        self.index += 1  # a distinct result.json per slot: a new observation object each
        return _Done(no_op_result(self.index - 1))

    def wait(self, handles: Collection[WorkHandle], timeout_s: float) -> set[WorkHandle]:
        return set(handles)

    def close(self) -> None:
        pass


def _ignore(event: str, fields: dict[str, JSON]) -> None:
    pass


class StoreSide:
    """An open store and the lifecycles run on it (each a new slot)."""

    def __init__(self, root: str, path: str) -> None:
        os.makedirs(root, exist_ok=True)
        self.store = RunStore.open(root)
        self.path = path
        self._names = itertools.count()
        self.held: list[WalIndex] = []

    @property
    def root(self) -> str:
        return self.store.root

    def lifecycle(self) -> None:
        """One slot: a one-slot campaign registered and run (what :meth:`lifecycles`
        does for one slot; the traced mix is this one's)."""
        self.lifecycles(1)

    def lifecycles(self, count: int) -> None:
        """``count`` slots as ``run`` takes them: one campaign of ``count`` new candidates
        registered once (one read of what is registered, then each slot's rows), then each
        slot's attempt started and finished."""
        indices = [next(self._names) for _ in range(count)]
        campaign = campaign_of([f"l{RUN:08x}-{index:07d}" for index in indices])
        if self.path == "run_campaign":
            options = RunOptions(jobs=1)
            executor = InstantExecutor(indices[0])
            summary = run_campaign(
                self.store, campaign, executor, options, _ignore, clock=time.time_ns
            )
            assert summary.accepted == count, summary
            return
        plans, new, _ = register(self.store, campaign)
        assert new == count, new
        for index, plan in zip(indices, plans, strict=True):
            started = attempt.start(self.store, plan, FirstAttempt(), LEASE_NS, time.time_ns)
            assert isinstance(started, attempt.Started), started
            result = no_op_result(index)
            finished = attempt.finish(self.store, started, result, LEASE_NS, time.time_ns)
            assert finished.terminal.state is AttemptState.ACCEPTED, finished

    def close(self) -> None:
        self.store.close()
        for wal in self.held:  # after the store's connection (see lifecycle_mix)
            wal.close()
