"""The publication group's world: a fresh store and the model, in lockstep, with the
publisher's payloads and clocks (:class:`conformance.publication.world.PublicationWorld`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.publication.world import PublicationWorld
from conformance.publication.world import open_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[PublicationWorld]:
    """A fresh publication world under ``tmp_path``, closed after the test."""
    yield from open_world(tmp_path)
