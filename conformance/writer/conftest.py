"""The writer group's world: a fresh store and the model, in lockstep
(:class:`conformance.writer.world.World`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.writer.world import World


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """A fresh store under ``tmp_path`` and an empty model, closed after the test."""
    world = World(tmp_path)
    yield world
    world.close()
