"""The worker side of the Dask executor: one Dask task runs one work order, at most once.

Rules of this file: this code runs inside a Dask task on a worker machine (imported there
by name, so the worker must have the same runstore installed). It never touches a store.
It runs the order exactly as the local executor does (:func:`run_order`: a private scratch
directory on the worker, own process group, time limit, outputs as bytes), but only once
it is admitted, and then under a watcher thread (SPEC.md section 15.8).

What it reads is the coordinator's channel, a Dask ``Variable`` holding ``{"beat": n,
"listed": m, "live": [serials], "closed": bool}``: every task has a serial, the channel
lists the tasks with a serial below ``listed``, and ``live`` names those whose attempt
the coordinator still holds (a fetched result, a cancel or the coordinator's close takes a
serial out for good). What it writes is its own start mark, a Dask ``Event`` named after
its Dask key, set before its command starts and cleared only by the coordinator once the
task is out of ``live``.

**Admission** fails closed: the task starts its command only when its start mark was not
set (a set mark means the scheduler runs the task again, after the worker holding its
result was lost: WORKER_LOST), it could set the mark, and then a channel value lists its
serial as live and the coordinator as open (else CANCELLED); a channel it cannot read, or
that does not list it, for ``orphan_after_s`` is START_FAILED. Marking before reading the
channel is what makes a second start impossible: the coordinator clears a mark only after
it has published the serial out of ``live``, so a second run that read ``live`` in time
found the first run's mark still set.

Every result a task returns carries the environment document of its Dask worker process
(:mod:`runstore.runner.environment`: that machine, that interpreter, the worker's address).

An admitted task first removes, once per worker process, the scratch directories that dead
worker processes left on its machine (:func:`sweep_dead_scratch`).

**The watcher** kills the order's process group when its serial leaves ``live``, when
the coordinator closed, or when the beat has not changed (or the channel could not be
read) for ``orphan_after_s``: the coordinator died or lost the scheduler, its lease is lost,
and nothing this task returns can be published.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any
from typing import Final
from typing import Protocol
from typing import TypeGuard

import attrs
from runstore.runner import scratch_dirs
from runstore.runner.environment import collect
from runstore.runner.environment import runstore_version
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.scratch_run import Kill
from runstore.runner.scratch_run import run_order
from runstore.runner.scratch_run import unrun

CANCELLED_DETAIL: Final = "cancelled by the coordinator before it started"
CLOSED_DETAIL: Final = "its coordinator had closed before it started"
RERUN_DETAIL: Final = (
    "the scheduler ran its task again after the Dask worker holding its result was lost; "
    "its command never starts twice"
)


class ClusterSide(Protocol):
    """What a task reads and writes in the cluster (:class:`DaskSide` on a real worker;
    tests pass fakes). Every method raises when the scheduler cannot be reached."""

    def read(self, timeout: float) -> object:
        """The channel's current value, waiting at most ``timeout`` s for a first one."""
        ...

    def marked(self) -> bool:
        """Whether this task's start mark is set."""
        ...

    def mark(self) -> None:
        """Set this task's start mark."""
        ...

    def unmark(self) -> None:
        """Clear this task's start mark (only once its serial can never be live again)."""
        ...


@functools.cache
def sweep_dead_scratch() -> tuple[str, ...]:
    """Once per worker process, before its first command: remove this machine's scratch
    directories whose owner is dead (:func:`scratch_dirs.remove_dead`). Under Dask the
    owner is the Dask worker process; one killed mid-order leaves its order's directory,
    and the worker process that replaces it removes it. Never raises."""
    return scratch_dirs.remove_dead(None)


def start_mark_name(key: str) -> str:
    """The name of the Dask ``Event`` that marks the start of the task with Dask key
    ``key`` (the coordinator clears it, :mod:`runstore.runner.dask_executor`)."""
    return f"{key}-started"


@attrs.frozen(kw_only=True)
class Channel:
    """What a task needs to find and watch its coordinator: the Variable's ``name``, the
    task's own Dask ``key`` and channel ``serial``, how long a silent coordinator is
    tolerated, how often to look, the kill grace period and the coordinator's runstore
    version."""

    name: str
    key: str
    serial: int
    orphan_after_s: float
    poll_s: float
    kill_grace_s: float
    version: str


class DaskSide:
    """The :class:`ClusterSide` of a task running on a Dask worker: the channel Variable
    and the task's start-mark Event, through the worker's client."""

    def __init__(self, channel: Channel) -> None:
        from distributed import Event
        from distributed import Variable
        from distributed import get_client

        client = get_client()
        self._variable: Any = Variable(channel.name, client=client)
        self._mark: Any = Event(start_mark_name(channel.key), client=client)

    def read(self, timeout: float) -> object:
        return self._variable.get(timeout=timeout)

    def marked(self) -> bool:
        return bool(self._mark.is_set())

    def mark(self) -> None:
        self._mark.set()

    def unmark(self) -> None:
        self._mark.clear()


NAME: Final = "dask"
"""The executor's name in the environment documents of the results its tasks return."""


def run_task(order: WorkOrder, channel: Channel) -> WorkResult:
    """The Dask task: :func:`run_watched` through this worker's client. Whatever it
    returns carries this Dask worker process's environment document, naming its address
    (null when the task runs outside a worker)."""
    result = run_watched(order, channel, DaskSide(channel))
    worker = worker_address()
    return attrs.evolve(result, environment=collect(order.packages, executor=NAME, worker=worker))


def worker_address() -> str | None:
    """The address of the Dask worker running the calling task, or None outside one."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:  # outside a worker (a test calling the task directly): no address
        return None


def run_watched(order: WorkOrder, channel: Channel, side: ClusterSide) -> WorkResult:
    """Refuse a version mismatch and anything :func:`admit` refuses, else run ``order``
    under :func:`watch`. Never raises for what the cluster does: a failure to reach it
    is a refusal before the start and silence after it."""
    here = runstore_version()
    if here != channel.version:
        detail = f"the worker runs runstore {here}, the coordinator {channel.version}"
        return unrun(WorkStatus.START_FAILED, detail)
    admitted = admit(channel, side)
    if isinstance(admitted, WorkResult):
        return admitted
    sweep_dead_scratch()
    kill, finished = Kill(), threading.Event()
    watcher = threading.Thread(
        target=watch,
        args=(channel, side, kill, finished, admitted),
        name="runstore-watch",
        daemon=True,
    )
    watcher.start()
    try:
        return run_order(order, kill, scratch_root=None, kill_grace_s=channel.kill_grace_s)
    finally:
        finished.set()
        watcher.join()


def admit(channel: Channel, side: ClusterSide) -> WorkResult | dict[str, object]:
    """The refusal of a task that may not start its command, else the channel value that
    admitted it (its serial live, the coordinator open). In this order: a start mark
    already set is WORKER_LOST; one that cannot be read or set is START_FAILED; then,
    waiting at most ``orphan_after_s`` for a value that lists the serial, CANCELLED when
    it is not live or the coordinator closed (the mark is then cleared: nothing can start
    under it again), START_FAILED when none came."""
    try:
        if side.marked():
            return unrun(WorkStatus.WORKER_LOST, RERUN_DETAIL)
        side.mark()
    except Exception as error:  # no mark, no start
        return unrun(WorkStatus.START_FAILED, f"cannot mark its start: {_one_line(error)}")
    state = _listing(channel, side)
    if state is None:
        detail = (
            f"no word of it from its coordinator for {channel.orphan_after_s:g} s "
            "(the channel unreadable or not listing it)"
        )
        return unrun(WorkStatus.START_FAILED, detail)
    verdict = _verdict(state, channel.serial)
    if verdict is None:
        return state
    with contextlib.suppress(Exception):  # the coordinator clears it too, in any case
        side.unmark()
    return unrun(WorkStatus.CANCELLED, CLOSED_DETAIL if verdict == "closed" else CANCELLED_DETAIL)


def _listing(channel: Channel, side: ClusterSide) -> dict[str, object] | None:
    """The first channel value that lists ``channel.serial``, read within
    ``orphan_after_s`` (quickly at first: the coordinator publishes as it submits), or None."""
    deadline = time.monotonic() + channel.orphan_after_s
    pause = 0.01
    while True:
        state = _read(side, channel.poll_s)
        if _lists(state, channel.serial):
            return state
        if time.monotonic() >= deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, channel.poll_s)


def watch(
    channel: Channel,
    side: ClusterSide,
    kill: Kill,
    finished: threading.Event,
    admitted: dict[str, object] | None = None,
) -> str:
    """Until ``finished``: every ``poll_s``, read the channel and cancel ``kill`` when the
    task's serial left ``live``, the coordinator closed, or the beat stayed unchanged (or
    unreadable) for ``orphan_after_s`` since ``admitted`` (the value :func:`admit`
    read) or the last change. Returns why it stopped ("finished", "cancelled", "closed",
    "orphaned")."""
    beat = None if admitted is None else admitted.get("beat")
    heard = time.monotonic()
    while not finished.wait(channel.poll_s):
        state = _read(side, channel.poll_s)
        verdict = None
        if _lists(state, channel.serial):
            verdict = _verdict(state, channel.serial)
        if verdict is not None:
            kill.cancel()
            return verdict
        if isinstance(state, dict) and state.get("beat") != beat:
            beat, heard = state.get("beat"), time.monotonic()
        elif time.monotonic() - heard > channel.orphan_after_s:
            kill.cancel()
            return "orphaned"
    return "finished"


def _read(side: ClusterSide, timeout: float) -> object:
    """The channel's value, or None when it cannot be read now: no news is treated as
    silence, which the orphan rule bounds (and which never admits a start)."""
    try:
        return side.read(timeout)
    except Exception:  # any failure to read is silence, never a reason to keep running
        return None


def _lists(state: object, serial: int) -> TypeGuard[dict[str, object]]:
    """Whether ``state`` is a channel value that says whether ``serial`` is live."""
    if not isinstance(state, dict):
        return False
    listed = state.get("listed")
    # msgpack brings the coordinator's list back as a tuple
    return type(listed) is int and serial < listed and isinstance(state.get("live"), list | tuple)


def _verdict(state: dict[str, object], serial: int) -> str | None:
    """For a value that lists ``serial``: "closed" or "cancelled" when the task must stop
    (its serial is out of ``live`` for good), else None."""
    if state.get("closed") is not False:
        return "closed"
    live = state["live"]
    return None if isinstance(live, list | tuple) and serial in live else "cancelled"


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}"[:300]
