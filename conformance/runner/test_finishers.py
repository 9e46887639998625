"""Finisher threads (SPEC.md section 15.4, "Finishing runs beside the loop"): each task
runs on a thread with a store handle of its own, an error reaches the coordinator through
the task's future, and closing waits for every task and closes every handle on its
thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.errors import StoreClosedError
from runstore.runner.finishers import Finishers


def test_tasks_run_on_their_threads_with_their_own_handles(tmp_path: Path) -> None:
    RunStore.open(tmp_path).close()
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2, timeout=30)

    def task(store: RunStore) -> str:
        barrier.wait()  # both threads busy at once: two tasks run beside each other
        with lock:
            seen.append((threading.current_thread().name, id(store)))
        return store.root

    with Finishers(str(tmp_path), 2) as finishers:
        futures = [finishers.submit(task) for _ in range(2)]
        assert [f.result(timeout=30) for f in futures] == [str(tmp_path)] * 2
    assert len({name for name, _ in seen}) == 2
    assert len({handle for _, handle in seen}) == 2


def test_an_error_reaches_the_caller_and_close_waits_for_every_task(tmp_path: Path) -> None:
    RunStore.open(tmp_path).close()
    ended: list[str] = []
    kept: list[RunStore] = []

    def slow(store: RunStore) -> None:
        kept.append(store)
        time.sleep(0.2)
        ended.append("slow")

    def broken(store: RunStore) -> None:
        raise StoreClosedError("a bug in a finisher")

    finishers = Finishers(str(tmp_path), 2)
    first = finishers.submit(slow)
    second = finishers.submit(broken)
    with pytest.raises(StoreClosedError, match="a bug"):
        second.result(timeout=30)
    finishers.close()
    assert first.done() and ended == ["slow"]
    with pytest.raises(StoreClosedError):  # closed on its own thread when the pool closed
        kept[0].registered_for([])
