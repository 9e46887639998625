"""The inspection group's world: a real store the runner built once per test module
(:func:`conformance.inspection.corrupt_world.build_store`), read as it is or damaged in a
fresh copy per test; and, for a module that defines its own store as ``root``, a snapshot of
it and its export (written once per module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore.inspection.export import ExportSummary
from runstore.inspection.export import export
from runstore.inspection.snapshot import Snapshot

from conformance.inspection.corrupt_world import build_store
from conformance.inspection.corrupt_world import copy_store


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store, built once for the module; tests only read it."""
    root = tmp_path_factory.mktemp("pristine") / "store"
    root.mkdir()
    build_store(root)
    return root


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of :func:`pristine`, to damage."""
    return copy_store(pristine, tmp_path / "copy")


@pytest.fixture
def snapshot(root: Path) -> Iterator[Snapshot]:
    """A snapshot of the module's ``root`` store, closed after the test."""
    with Snapshot.take(root) as taken:
        yield taken


@pytest.fixture(scope="module")
def exported(root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ExportSummary]:
    """The module's ``root`` store exported once into a fresh directory, with its summary."""
    out = tmp_path_factory.mktemp("out") / "export"
    with Snapshot.take(root) as taken:
        summary = export(taken, str(out))
    return out, summary
