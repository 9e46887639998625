"""The runner group's world: campaigns as values, a scripted executor and a controlled
clock (:mod:`conformance.runner.world`), real executors (:mod:`.executor_world`), and a
Dask local cluster per test file (:mod:`.dask_world`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def dask_scheduler() -> Iterator[str]:
    """The address of a LocalCluster (two workers, allowed-failures 0) for one test file.
    Not for the session: an idle cluster's event loop (in this process) and workers take
    about a fifth of a core, and the GIL, from every test that runs after it."""
    from conformance.runner.dask_world import local_cluster

    with local_cluster(2) as cluster:
        yield str(cluster.scheduler_address)


@pytest.fixture
def root(tmp_path: Path) -> str:
    """An empty directory for a store."""
    path = tmp_path / "store"
    path.mkdir()
    return str(path)
