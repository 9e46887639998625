"""``runstore recover`` through the console script: its ``--json`` document and its text,
compared with the report an in-process pass gives on an identical copy of the store.

The store holds one of everything a pass reports: two attempts whose publishers died
(terminals, their stages quarantined), a verified independent orphan (imported), a
corrupted orphan (rejected) and a stage held by a live lock (busy). The CLI prints a
summary of the report (terminals as attempt and state, imported artifacts by id); these
tests pin that form, so it stays what ``recover --json`` has always printed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import RecoveryReport
from runstore.store import RunStore
from runstore.testing import fixtures as sc

from conformance.cli.world import runstore
from conformance.publication.world import DATA
from conformance.publication.world import files
from conformance.publication.world import open_world
from conformance.recovery.world import crash_artifact
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crash_populate


@contextmanager
def holding(lock: Path) -> Iterator[None]:
    """A live publisher's hold on a stage: an exclusive flock on its lock file."""
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def leftovers(root: Path) -> Path:
    """A closed store under ``root`` with something for every list of the report; returns
    the held stage's path relative to the root."""
    world_iterator = open_world(root)
    world = next(world_iterator)
    try:
        guard, outcome = world.terminal_scenario("censored")
        crash_finalization(world, guard, outcome)
        other = world.executing(sc.slot_fixture(name="other"), "reservation-9")
        crash_artifact(world, other, ArtifactKind.DATASET, DATA, start=3_000)
        broken = crash_artifact(world, other, ArtifactKind.SOURCE, files(a=b"a"), start=3_100)
        (broken / "a").chmod(0o644)
        (broken / "a").write_bytes(b"b")
        kept = world.executing(sc.slot_fixture(name="kept"), "reservation-8")
        held = crash_populate(world, kept, start=4_000)
        return held.relative_to(world.root)
    finally:
        next(world_iterator, None)  # closes the world


def summary(report: RecoveryReport) -> dict[str, object]:
    """What ``recover --json`` prints for ``report`` (SPEC.md section 15.7)."""
    return {
        "busy_stages": list(report.busy_stages),
        "imported_artifacts": [artifact.id for artifact in report.imported_artifacts],
        "quarantined_stages": list(report.quarantined_stages),
        "rejected_artifacts": [
            {"code": item.code, "message": item.message, "path": item.path}
            for item in report.rejected_artifacts
        ],
        "terminals": [{"attempt": t.attempt_id, "state": t.state.value} for t in report.terminals],
    }


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Path, Path, RecoveryReport]]:
    """Two identical stores, their held stages locked: the CLI's and a twin; and the report
    of an in-process pass over the twin (the CLI's store is left unrecovered)."""
    (tmp_path / "store").mkdir()
    held = leftovers(tmp_path / "store")
    cli, twin = tmp_path / "store", tmp_path / "twin"
    shutil.copytree(cli, twin, symlinks=True)
    with ExitStack() as stack:
        for root in (cli, twin):
            stack.enter_context(holding(root / held / "lock"))
        with RunStore.open(str(twin)) as store:
            report = store.recover(time.time_ns)
        yield cli, twin, report


def test_recover_json_prints_the_report_summary(
    stores: tuple[Path, Path, RecoveryReport],
) -> None:
    cli, _, report = stores
    shown = runstore("recover", "--store", str(cli), "--json")
    assert shown.returncode == 0, shown.stderr
    expected = summary(report)
    assert all(expected.values()), expected  # the store has something for every list
    assert shown.stdout == json.dumps(expected, sort_keys=True, ensure_ascii=False) + "\n"
    # the censored orphan imported, the other attempt failed; the held stage's is deferred
    assert sorted(t.state.value for t in report.terminals) == ["censored", "failed"]


def test_recover_text_counts_each_list_and_names_each_rejection(
    stores: tuple[Path, Path, RecoveryReport],
) -> None:
    cli, _, report = stores
    shown = runstore("recover", "--store", str(cli))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    for key, value in summary(report).items():
        assert isinstance(value, list)
        assert [line.split() for line in lines if line.split()[:1] == [key]] == [
            [key, str(len(value))]
        ]
    rejections = [line for line in lines if line.startswith("rejected ")]
    assert rejections == [
        f"rejected {item.path}: {item.code}: {item.message}" for item in report.rejected_artifacts
    ]
