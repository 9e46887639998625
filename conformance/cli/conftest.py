"""The CLI group's world: the installed ``runstore`` console script
(:func:`conformance.cli.world.runstore`) and the demo campaign run once per session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conformance.cli.world import runstore


@pytest.fixture(scope="session")
def demo_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """examples/codecs run to completion by the installed ``runstore`` (the README's first
    command, minus the install): the store and the finished run. Tests only read it."""
    store = tmp_path_factory.mktemp("demo") / "demo-store"
    campaign = Path(__file__).resolve().parents[2] / "examples" / "codecs" / "campaign.toml"
    done = runstore("run", str(campaign), "--store", str(store), "--init", timeout=300)
    return store, done


@pytest.fixture
def demo_workdir(demo_store: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> Path:
    """A working directory laid out as the repository's root after the README's first
    command, where the help's examples run as written: ``.demo-store``, a private copy of
    the finished demo store (a test may change it), and ``examples``, a link to the
    repository's. Relative outputs land in it."""
    store, done = demo_store
    assert done.returncode == 0, done.stderr
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    shutil.copytree(store, workdir / ".demo-store", symlinks=True)
    (workdir / "examples").symlink_to(Path(__file__).resolve().parents[2] / "examples")
    return workdir
