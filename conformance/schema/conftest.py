"""The schema group's world: a fresh in-memory database holding schema v1, and row
builders over it (:mod:`conformance.schema.rows`)."""

from __future__ import annotations

import sqlite3

import pytest

from conformance.schema.rows import Rows
from conformance.schema.rows import open_store


@pytest.fixture
def conn() -> sqlite3.Connection:
    """A fresh in-memory database holding schema v1 (see rows.open_store)."""
    return open_store()


@pytest.fixture
def rows(conn: sqlite3.Connection) -> Rows:
    """Row builders over :func:`conn`, inserting consistent chains of rows."""
    return Rows(conn)
