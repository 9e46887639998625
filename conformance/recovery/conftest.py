"""The recovery group's world: the publication group's (a store and the model in lockstep,
with payloads and clocks); :mod:`conformance.recovery.world` adds what a recovery test
builds on it (dead publishers' orphans, stages, a pass compared with the model's)."""

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
