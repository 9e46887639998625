"""Finishing attempts on threads of their own, so that several slots' publications sync at
once (SPEC.md section 15.4, "Finishing runs beside the loop").

Rules of this file: a :class:`Finishers` owns a pool of threads, each with its own store
handle (opened on the thread's first task, closed when the pool closes), and runs one
function per finished worker on it. It decides nothing: the coordinator submits the work,
collects each outcome on its own thread, and reports. A finishing attempt's writes are
the same calls, with the same checks, that the loop's thread made before; the handles only
let one slot's syncs wait beside another's (SQLite serializes the write transactions).
:meth:`close` waits for every task: nothing is left writing after a run returns or raises.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any
from typing import Generic
from typing import TypeVar

import attrs
from runstore.store import RunStore

T = TypeVar("T")


class Finishers:
    """Up to ``count`` finishing tasks at once, on threads with store handles on ``root``.
    Each thread opens its handle on its first task and closes it when it stops (an SQLite
    connection is used on the thread that made it only)."""

    def __init__(self, root: str, count: int) -> None:
        self.root = root
        self._tasks: queue.SimpleQueue[_Task[Any] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"runstore-finish-{n}", daemon=True)
            for n in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, task: Callable[[RunStore], T]) -> concurrent.futures.Future[T]:
        """Run ``task(store)`` on a finisher thread with that thread's own handle."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._tasks.put(_Task(task, future))
        return future

    def _serve(self) -> None:
        store: RunStore | None = None
        try:
            while (task := self._tasks.get()) is not None:
                if not task.future.set_running_or_notify_cancel():
                    continue
                try:
                    if store is None:
                        store = RunStore.open(self.root)
                    task.future.set_result(task.call(store))
                except BaseException as error:  # the coordinator raises it
                    task.future.set_exception(error)
        finally:
            if store is not None:
                store.close()

    def close(self) -> None:
        """Wait for every submitted task to end; each thread closes its handle."""
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> Finishers:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@attrs.frozen
class _Task(Generic[T]):
    call: Callable[[RunStore], T]
    future: concurrent.futures.Future[T]
