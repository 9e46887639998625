"""The local executor: run each work order as a subprocess on this machine.

Rules of this file: threads and bookkeeping only; it never touches a run store (no store,
no SQLite) and knows nothing of attempts beyond the :class:`WorkOrder` it is given. Each
order runs on a thread of a pool sized ``jobs`` through
:func:`runstore.runner.scratch_run.run_order` (private scratch directory, a supervisor
process that kills every descendant of the command when it ends or this process dies,
time limit, outputs as bytes), and its result carries this machine's environment
document (:mod:`runstore.runner.environment`). A handle's future is settled once, under
its kill's lock, so a cancel and a finished result never both win. Making an executor
first removes the scratch directories that dead coordinators left
(:func:`scratch_dirs.remove_dead`).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

import attrs
from runstore.runner import scratch_dirs
from runstore.runner.environment import collect
from runstore.runner.executor import Executor
from runstore.runner.executor import WorkHandle
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.scratch_run import Kill
from runstore.runner.scratch_run import run_order
from runstore.runner.scratch_run import unrun

NAME = "local"
"""The executor's name in the environment documents of the results it returns."""


class LocalHandle:
    """One order submitted to a :class:`LocalExecutor` (a :class:`WorkHandle`)."""

    def __init__(self, order: WorkOrder) -> None:
        self.order = order
        self.future: concurrent.futures.Future[WorkResult] = concurrent.futures.Future()
        self.task: concurrent.futures.Future[None] | None = None
        self.kill = Kill()
        self.started = False

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> WorkResult:
        """The result; raises ``concurrent.futures.InvalidStateError`` if not done yet."""
        if not self.future.done():
            raise concurrent.futures.InvalidStateError(f"order {self.order.key} is not done")
        return self.future.result()

    def cancel(self) -> None:
        """Stop the worker if it runs (SIGTERM to its process group now; its supervisor
        sends SIGKILL to every descendant after the grace period); a queued order never
        starts and is CANCELLED at once. Does nothing once the result is settled or after
        a first cancel."""
        with self.kill.lock:
            if self.kill.cancelled or self.future.done():
                return
            self.kill.cancelled = True
            process = self.kill.process
            if not self.started:
                self.future.set_result(unrun(WorkStatus.CANCELLED))
        self.kill.signal(process)
        if process is None and self.task is not None:
            self.task.cancel()  # best effort: drop it from the pool's queue

    def settle(self, result: WorkResult) -> None:
        """Set the result once, as CANCELLED (outputs dropped) if a cancel came first."""
        with self.kill.lock:
            if self.kill.cancelled:
                result = attrs.evolve(result, status=WorkStatus.CANCELLED, outputs=(), detail="")
            if not self.future.done():
                self.future.set_result(result)


class LocalExecutor:
    """Runs at most ``jobs`` orders at once as subprocesses (the rest queue), each in a
    fresh scratch directory under ``scratch_root`` (default: the system temporary
    directory), stopped with SIGTERM to its process group then, ``kill_grace_s`` later,
    SIGKILL to every descendant on time-out, cancel or close; every descendant is killed
    too when the command exits and, within moments, when this process dies. Construction
    removes the scratch directories under ``scratch_root`` whose owner is dead
    (``swept`` holds their paths). Refuses (ValueError) ``jobs < 1`` or a negative grace;
    :meth:`submit` after :meth:`close` raises RuntimeError. An order that cannot start
    (bad placeholder, hostile input path, missing program, non-positive time limit, no
    child subreaper on this system) comes back START_FAILED with a one-line detail, never
    as an exception."""

    def __init__(
        self, jobs: int, *, scratch_root: str | None = None, kill_grace_s: float = 2.0
    ) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        if kill_grace_s < 0:
            raise ValueError(f"kill_grace_s must not be negative, got {kill_grace_s}")
        self.scratch_root, self.kill_grace_s = scratch_root, kill_grace_s
        self.swept = scratch_dirs.remove_dead(scratch_root)
        self._pool = concurrent.futures.ThreadPoolExecutor(jobs, "runstore-local")
        self._lock = threading.Lock()
        self._handles: set[LocalHandle] = set()
        self._closed = False

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def submit(self, order: WorkOrder) -> LocalHandle:
        """Queue ``order`` and return its handle at once."""
        handle = LocalHandle(order)
        with self._lock:
            if self._closed:
                raise RuntimeError("submit on a closed LocalExecutor")
            self._handles.add(handle)
            handle.future.add_done_callback(lambda _: self._forget(handle))
            handle.task = self._pool.submit(self._run, handle)
        return handle

    def wait(self, handles: Collection[WorkHandle], timeout_s: float) -> set[WorkHandle]:
        """The done ones among ``handles`` once one is done or ``timeout_s`` passed.
        Refuses (TypeError) a handle this class did not make."""
        by_future: dict[concurrent.futures.Future[WorkResult], WorkHandle] = {}
        for handle in handles:
            if not isinstance(handle, LocalHandle):
                raise TypeError(f"not a LocalExecutor handle: {handle!r}")
            by_future[handle.future] = handle
        if not by_future:
            time.sleep(timeout_s)
            return set()
        done, _ = concurrent.futures.wait(
            by_future, timeout=timeout_s, return_when=concurrent.futures.FIRST_COMPLETED
        )
        return {by_future[future] for future in done}

    def close(self) -> None:
        """Cancel every running and queued order and wait for the task threads (at most
        about the kill grace period); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handles = list(self._handles)
        for handle in handles:
            handle.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _forget(self, handle: LocalHandle) -> None:
        with self._lock:
            self._handles.discard(handle)

    def _run(self, handle: LocalHandle) -> None:
        """One pool task: run the order and settle its handle, whatever happens; the scratch
        directory is gone before the result is visible. The result carries this process's
        environment document: the local executor's workers run on this machine."""
        with handle.kill.lock:
            if handle.kill.cancelled:
                return  # cancel settled it
            handle.started = True
        try:
            result = run_order(
                handle.order,
                handle.kill,
                scratch_root=self.scratch_root,
                kill_grace_s=self.kill_grace_s,
            )
            packages = handle.order.packages
            handle.settle(
                attrs.evolve(result, environment=collect(packages, executor=NAME, worker=None))
            )
        except BaseException as error:  # a bug here must not leave the handle pending
            with handle.kill.lock:
                if not handle.future.done():
                    handle.future.set_exception(error)


if TYPE_CHECKING:
    _IS_AN_EXECUTOR: type[Executor] = LocalExecutor
