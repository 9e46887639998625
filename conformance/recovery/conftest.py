"""The recovery group's world: the publication group's (a store and the model in lockstep,
with payloads and clocks); :mod:`conformance.recovery.world` adds what a recovery test
builds on it (dead publishers' orphans, stages, a pass compared with the model's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import durable
from runstore import sql

from conformance.publication.world import PublicationWorld
from conformance.publication.world import open_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[PublicationWorld]:
    """A fresh publication world under ``tmp_path``, closed after the test."""
    yield from open_world(tmp_path)


@pytest.fixture
def seen() -> Iterator[list[tuple[str, str]]]:
    """Every durability call (``(operation, target)``, before it runs) and every SQL
    statement (``("sql", text)``) of this process, in order, while the test runs."""
    log: list[tuple[str, str]] = []

    def on_durable(phase: str, operation: str, target: str) -> None:
        if phase == "before":
            log.append((operation, target))

    def on_sql(phase: str, statement: str) -> None:
        if phase == "before":
            log.append(("sql", statement))

    previous = durable.install_observer(on_durable), sql.install_observer(on_sql)
    try:
        yield log
    finally:
        durable.install_observer(previous[0])
        sql.install_observer(previous[1])
