"""Choosing and opening the executor a run uses: local processes or a Dask cluster.

Rules of this file: no store. It turns the run command's executor options into an open
executor and the number of workers the coordinator keeps busy, and refuses a combination
that makes no sense before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from runstore.errors import ExecutorUnavailableError
from runstore.runner.coordinator import MAX_JOBS
from runstore.runner.executor import Executor

KINDS: Final = ("local", "dask")


@contextmanager
def open_executor(
    kind: str,
    *,
    jobs: int | None,
    scheduler: str | None,
    workers: int | None,
    lease_ns: int,
) -> Iterator[tuple[Executor, int]]:
    """The executor ``kind`` names, open for the ``with`` block, and how many orders to run
    at once: ``jobs`` if given, else the machine's cores (local), ``workers`` (a new
    LocalCluster of that many single-threaded workers, default the machine's cores) or the
    scheduler's worker threads now (``scheduler``), at most :data:`MAX_JOBS`. Refuses
    (:class:`ExecutorUnavailableError`) ``scheduler`` or ``workers`` with the local
    executor, both together, or an unknown kind."""
    cores = os.cpu_count() or 1
    if kind == "local":
        if scheduler is not None or workers is not None:
            raise ExecutorUnavailableError("--scheduler and --workers need --executor dask")
        from runstore.runner.local import LocalExecutor

        with LocalExecutor(jobs or cores) as local:
            yield local, jobs or cores
        return
    if kind != "dask":
        raise ExecutorUnavailableError(f"unknown executor {kind!r}; one of {', '.join(KINDS)}")
    if scheduler is not None and workers is not None:
        raise ExecutorUnavailableError(
            "--workers sizes a new local cluster; a scheduler's cluster is sized by its owner"
        )
    from runstore.runner.dask_executor import open_dask

    size = None if scheduler is not None else (workers or jobs or cores)
    with open_dask(scheduler, size, orphan_after_s=lease_ns / 1e9) as dask:
        yield dask, min(MAX_JOBS, jobs or size or max(1, dask.threads))
