"""The worker side of the Dask executor: one Dask task runs one work order.

Rules of this file: this code runs inside a Dask task on a worker machine (imported there
by name, so the worker must have the same runstore installed). It never touches a store.
It runs the order exactly as the local executor does (:func:`run_order`: a private scratch
directory on the worker, own process group, time limit, outputs as bytes) while a watcher
thread reads the coordinator's channel, a Dask ``Variable`` holding ``{"beat": n,
"cancelled": [keys], "closed": bool}`` (SPEC.md section 15, "The Dask executor"). The
watcher kills the order's process group when its key is cancelled, when the coordinator
closed, or when the beat has not changed for ``orphan_after_s`` (the coordinator died or
lost the scheduler: its lease is lost, so nothing this task returns can be published).
"""

from __future__ import annotations

import functools
import importlib.metadata
import threading
import time
from collections.abc import Callable
from typing import Final

import attrs
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.scratch_run import Kill
from runstore.runner.scratch_run import run_order
from runstore.runner.scratch_run import unrun

ReadChannel = Callable[[float], object]
"""Reads the channel's current value, waiting at most the given seconds; raises when it
cannot (scheduler unreachable, no value yet)."""


@functools.cache
def runstore_version() -> str:
    """This machine's installed runstore distribution version ("unknown" when runstore
    runs from a source tree that was never installed), read once per process: every task
    checks it."""
    try:
        return importlib.metadata.version("runstore")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@attrs.frozen(kw_only=True)
class Channel:
    """What a task needs to watch its coordinator: the Variable's ``name``, the task's own
    ``key``, how long a silent coordinator is tolerated, how often to look, the kill grace
    period and the coordinator's runstore version."""

    name: str
    key: str
    orphan_after_s: float
    poll_s: float
    kill_grace_s: float
    version: str


CANCELLED_DETAIL: Final = "cancelled by the coordinator before it started"


def run_task(order: WorkOrder, channel: Channel) -> WorkResult:
    """The Dask task: refuse a version mismatch, refuse to start an order already
    cancelled, else run it under the watcher."""
    from distributed import Variable
    from distributed import get_client

    variable = Variable(channel.name, client=get_client())
    return run_watched(order, channel, lambda timeout: variable.get(timeout=timeout))


def run_watched(order: WorkOrder, channel: Channel, read: ReadChannel) -> WorkResult:
    """:func:`run_task` with the channel reader given (tests pass a fake one)."""
    here = runstore_version()
    if here != channel.version:
        detail = f"the worker runs runstore {here}, the coordinator {channel.version}"
        return unrun(WorkStatus.START_FAILED, detail)
    if _verdict(_read(read, channel.poll_s), channel.key) is not None:
        return unrun(WorkStatus.CANCELLED, CANCELLED_DETAIL)
    kill, finished = Kill(), threading.Event()
    watcher = threading.Thread(
        target=watch, args=(channel, read, kill, finished), name="runstore-watch", daemon=True
    )
    watcher.start()
    try:
        return run_order(order, kill, scratch_root=None, kill_grace_s=channel.kill_grace_s)
    finally:
        finished.set()
        watcher.join()


def watch(channel: Channel, read: ReadChannel, kill: Kill, finished: threading.Event) -> str:
    """Until ``finished``: every ``poll_s``, read the channel and cancel ``kill`` when the
    task is cancelled, the coordinator closed or the beat stayed unchanged (or unreadable)
    for ``orphan_after_s``. Returns why it stopped ("finished", "cancelled", "closed",
    "orphaned")."""
    beat: object = None
    heard = time.monotonic()
    while not finished.wait(channel.poll_s):
        state = _read(read, channel.poll_s)
        verdict = _verdict(state, channel.key)
        if verdict is not None:
            kill.cancel()
            return verdict
        if isinstance(state, dict) and state.get("beat") != beat:
            beat, heard = state.get("beat"), time.monotonic()
        elif time.monotonic() - heard > channel.orphan_after_s:
            kill.cancel()
            return "orphaned"
    return "finished"


def _read(read: ReadChannel, timeout: float) -> object:
    """The channel's value, or None when it cannot be read now: no news is treated as
    silence, which the orphan rule bounds."""
    try:
        return read(timeout)
    except Exception:  # any failure to read is silence, never a reason to keep running
        return None


def _verdict(state: object, key: str) -> str | None:
    """ "closed" or "cancelled" when the channel says this task must stop, else None."""
    if not isinstance(state, dict):
        return None
    if state.get("closed") is True:
        return "closed"
    cancelled = state.get("cancelled")
    if isinstance(cancelled, list | tuple) and key in cancelled:
        return "cancelled"
    return None
