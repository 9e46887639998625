"""Shared pieces of the Dask executor's tests: a local cluster per test file.

The cluster is a ``LocalCluster`` of two single-threaded worker processes made with
``distributed.scheduler.allowed-failures`` 0 and ``worker-saturation`` 1.0 (as
``runstore.runner.dask_executor.open_dask`` makes its own), so a test can connect to it
by address exactly as a coordinator connects to a real scheduler. Tests that need Dask
skip with a reason when the ``dask`` extra is not installed; the test command installs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
