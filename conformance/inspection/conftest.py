"""The inspection group's world: a real store the runner built once per test module
(:func:`conformance.inspection.corrupt_world.build_store`), read as it is or damaged in a
fresh copy per test."""

from __future__ import annotations

from pathlib import Path

import pytest

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
