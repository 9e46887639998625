"""Shared pytest configuration: Hypothesis profiles.

``default`` keeps the test command's stateful and property runs to about two minutes on
two cores; ``nightly`` (``HYPOTHESIS_PROFILE=nightly``) runs far more examples and longer
programs. Deadlines are off: this machine is shared and noisy, and speed is shown by the
benchmarks under tools/, never by timed tests.
"""

from __future__ import annotations

import os
import sqlite3

import pytest
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
