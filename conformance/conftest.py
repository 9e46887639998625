"""Shared pytest configuration: Hypothesis profiles, and fixtures several files share.

``default`` keeps the test command's stateful and property runs to about two minutes on
two cores; ``nightly`` (``HYPOTHESIS_PROFILE=nightly``) runs far more examples and longer
programs. Deadlines are off: this machine is shared and noisy, and speed is shown by the
benchmarks under tools/, never by timed tests.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_world import runstore
from hypothesis import HealthCheck, settings
from schema_rows import Rows, open_store

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly",
    deadline=None,
    max_examples=2000,
    stateful_step_count=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# --- the in-memory schema tests' shared fixtures (conformance/test_schema_*.py) -------------


@pytest.fixture
def conn() -> sqlite3.Connection:
    """A fresh in-memory database holding schema v1 (see schema_rows.open_store)."""
    return open_store()


@pytest.fixture
def rows(conn: sqlite3.Connection) -> Rows:
    """Row builders over :func:`conn`, inserting consistent chains of rows."""
    return Rows(conn)


# --- the demo campaign, run once per session through the console script ------------------


@pytest.fixture(scope="session")
def demo_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """examples/codecs run to completion by the installed ``runstore`` (the README's first
    command, minus the install): the store and the finished run. Tests only read it."""
    store = tmp_path_factory.mktemp("demo") / "demo-store"
    campaign = Path(__file__).resolve().parents[1] / "examples" / "codecs" / "campaign.toml"
    done = runstore("run", str(campaign), "--store", str(store), "--init", timeout=300)
    return store, done


# --- the Dask executor's tests (conformance/test_*dask*.py) --------------------------------


@pytest.fixture(scope="module")
def dask_scheduler() -> Iterator[str]:
    """The address of a LocalCluster (two workers, allowed-failures 0) for one test file.
    Not for the session: an idle cluster's event loop (in this process) and workers take
    about a fifth of a core, and the GIL, from every test that runs after it."""
    from dask_world import local_cluster

    with local_cluster(2) as cluster:
        yield str(cluster.scheduler_address)
