"""Shared pieces of the Dask executor's tests: a local cluster per test file.

The cluster is a ``LocalCluster`` of two single-threaded worker processes made with
``distributed.scheduler.allowed-failures`` 0 and ``worker-saturation`` 1.0 (as
``runstore.runner.dask_executor.open_dask`` makes its own), so a test can connect to it
by address exactly as a coordinator connects to a real scheduler; :func:`dask_worker_of`
finds the Dask worker process a command runs under. Tests that need Dask
skip with a reason when the ``dask`` extra is not installed; the test command installs it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def local_cluster(workers: int = 2, *, allowed_failures: int = 0) -> Iterator[Any]:
    """A LocalCluster of ``workers`` single-threaded processes, closed afterwards."""
    dask = pytest.importorskip("dask", reason="the dask extra is not installed")
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    settings = {
        "distributed.scheduler.allowed-failures": allowed_failures,
        "distributed.scheduler.worker-saturation": 1.0,
    }
    with dask.config.set(settings):
        cluster = distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
    try:
        yield cluster
    finally:
        cluster.close()


def parent_of(pid: int) -> int:
    """The parent pid of process ``pid`` (0 once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0


def dask_worker_of(scheduler: str, pid: int, within_s: float = 10.0) -> int:
    """The pid of the Dask worker process of the cluster at ``scheduler`` that process
    ``pid`` (a worker command) runs under: its nearest ancestor among the workers' pids
    (the command's parent is its supervisor, not the Dask worker)."""
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    with distributed.Client(scheduler, timeout=within_s) as client:
        workers = set(client.run(os.getpid).values())
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        ancestor = parent_of(pid)
        while ancestor > 1 and ancestor not in workers:
            ancestor = parent_of(ancestor)
        if ancestor > 1:
            return ancestor
        time.sleep(0.05)
    raise AssertionError(f"process {pid} runs under no Dask worker of {scheduler}")
