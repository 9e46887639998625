"""Shared pieces of the runner's in-process tests: campaigns as values, a scripted executor
and a clock the executor's waits move forward.

The scripted executor stands in for workers: each order's result comes from a function of
the order (and how many orders for that pair were seen), so the coordinator's decisions
can be tested without processes and at any clock.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from collections.abc import Collection
from pathlib import Path

import attrs
from runstore import RunStore
from runstore.canonical import encode
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import InputFile
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.run_options import RunOptions
from runstore.runner.run_options import RunSummary

SECOND = 10**9
START = 1_700_000_000 * SECOND


class Clock:
    """Wall-clock nanoseconds that move only when told (or by 1 µs per reading, so that
    successive samples are ordered)."""

    def __init__(self, now: int = START) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1_000
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


def campaign(
    candidates: tuple[str, ...] = ("a", "b"),
    problems: tuple[str, ...] = ("p", "q"),
    *,
    name: str = "demo",
    lease_ns: int = 30 * SECOND,
    timeout_ns: int = 60 * SECOND,
    command: tuple[str, ...] = ("{python}", "worker.py"),
    applies_to: dict[str, tuple[str, ...]] | None = None,
    files: tuple[InputFile, ...] = (),
    slot_kind: SlotKind = SlotKind.ONE_SHOT,
    checkpoints: int | None = None,
    warmup: bool = False,
) -> Campaign:
    return Campaign(
        name=name,
        path=f"/campaigns/{name}.toml",
        slot_kind=slot_kind,
        checkpoints=checkpoints,
        warmup=warmup,
        timeout_ns=timeout_ns,
        lease_ns=lease_ns,
        candidates=tuple(
            Candidate(
                name=candidate,
                command=(*command, candidate),
                env=(("SEED", "1"),),
                files=files,
                applies_to=(applies_to or {}).get(candidate),
                timeout_ns=None,
            )
            for candidate in candidates
        ),
        problems=tuple(
            Problem(
                name=problem,
                parameters_json=encode({"size": 10, "problem": problem}),
                files=(),
                tags=(),
            )
            for problem in problems
        ),
    )


def input_file(directory: Path, name: str, data: bytes) -> InputFile:
    path = directory / name
    path.write_bytes(data)
    return InputFile(
        name=name, source=str(path), sha256=hashlib.sha256(data).hexdigest(), size=len(data)
    )


def succeeded(metrics: dict[str, object] | None = None, extra: bytes = b"") -> WorkResult:
    document = json.dumps({"metrics": metrics if metrics is not None else {"ratio": 2.5}})
    outputs = [("result.json", document.encode())]
    if extra:
        outputs.append(("extra/data.bin", extra))
    return result(WorkStatus.EXITED, 0, outputs=tuple(outputs))


def result(
    status: WorkStatus,
    exit_code: int | None,
    *,
    outputs: tuple[tuple[str, bytes], ...] = (),
    detail: str = "",
) -> WorkResult:
    return WorkResult(
        status=status,
        exit_code=exit_code,
        stdout=b"out\n",
        stderr=b"err\n",
        stdout_truncated=False,
        stderr_truncated=False,
        outputs=outputs,
        duration_ns=5_000_000,
        detail=detail,
    )


Script = Callable[[WorkOrder, int], WorkResult | None]
"""``script(order, nth)`` -> the result of the ``nth`` (0-based) order for the same pair,
or None for a worker that does not finish until cancelled."""


@attrs.define
class Handle:
    order: WorkOrder
    outcome: WorkResult | None
    cancelled: bool = False

    def done(self) -> bool:
        return self.outcome is not None or self.cancelled

    def result(self) -> WorkResult:
        if self.outcome is not None:
            return self.outcome
        return result(WorkStatus.CANCELLED, None, detail="cancelled by the coordinator")

    def cancel(self) -> None:
        if self.outcome is None:
            self.cancelled = True

    def __hash__(self) -> int:
        return id(self)


class ScriptedExecutor:
    """Finishes each order as ``script`` says; ``wait`` moves ``clock`` by its timeout
    when nothing is done."""

    def __init__(self, script: Script, clock: Clock) -> None:
        self.script, self.clock = script, clock
        self.orders: list[WorkOrder] = []
        self.handles: list[Handle] = []
        self.seen: dict[tuple[str, str], int] = {}
        self.max_running = 0

    def submit(self, order: WorkOrder) -> Handle:
        env = dict(order.env)
        pair = (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"])
        nth = self.seen.get(pair, 0)
        self.seen[pair] = nth + 1
        handle = Handle(order=order, outcome=self.script(order, nth))
        self.orders.append(order)
        self.handles.append(handle)
        running = sum(1 for h in self.handles if not h.done())
        self.max_running = max(self.max_running, running)
        return handle

    def wait(self, handles: Collection[Handle], timeout_s: float) -> set[Handle]:
        done = {handle for handle in handles if handle.done()}
        if not done:
            self.clock.advance(int(timeout_s * SECOND))
        return done

    def close(self) -> None:
        for handle in self.handles:
            handle.cancel()


class Counting(ScriptedExecutor):
    """Keeps the timeout of every wait."""

    def __init__(self, script: Script, clock: Clock) -> None:
        super().__init__(script, clock)
        self.timeouts: list[float] = []

    def wait(self, handles: Collection[Handle], timeout_s: float) -> set[Handle]:
        self.timeouts.append(timeout_s)
        return super().wait(handles, timeout_s)


class Events:
    """A reporter that keeps every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    def __call__(self, event: str, fields: dict[str, object]) -> None:
        self.events.append((event, fields))

    def named(self, event: str) -> list[dict[str, object]]:
        return [fields for name, fields in self.events if name == event]


def run(
    root: str,
    script: Script,
    *,
    clock: Clock | None = None,
    options: RunOptions | None = None,
    stop: threading.Event | None = None,
    executor: type[ScriptedExecutor] = ScriptedExecutor,
    events: Events | None = None,
    **campaign_options: object,
) -> tuple[RunSummary, Events, ScriptedExecutor]:
    """Run ``campaign(**campaign_options)`` in the store at ``root`` (``--jobs 2`` unless
    ``options``) through an ``executor`` following ``script``, on ``clock``, reporting to
    ``events`` (a new :class:`Events` unless given)."""
    clock = clock or Clock()
    scripted = executor(script, clock)
    events = events or Events()
    with RunStore.open(root) as store:
        summary = run_campaign(
            store,
            campaign(**campaign_options),  # type: ignore[arg-type]
            scripted,
            options or RunOptions(jobs=2),
            events,
            stop=stop,
            clock=clock,
        )
    return summary, events, scripted


def always(work: WorkResult) -> Script:
    """A script whose every worker ends with ``work``."""
    return lambda order, nth: work


def resumed(
    root: str, clock: Clock, problems: tuple[str, ...] = ("p",)
) -> tuple[RunSummary, Events, Counting]:
    """``run --resume --retry-failed 1`` of candidate ``a`` on ``problems`` (one slot each),
    every worker succeeding, through a :class:`Counting` executor (its waits' timeouts)."""
    options = RunOptions(jobs=1, resume=True, retry_failed=1)
    summary, events, executor = run(
        root,
        always(succeeded()),
        clock=clock,
        options=options,
        executor=Counting,
        candidates=("a",),
        problems=problems,
    )
    assert isinstance(executor, Counting)
    return summary, events, executor
