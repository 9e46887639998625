"""Recovery's listing of ``artifacts/`` and its quarantine of abandoned stages, the rules
SPEC.md section 14.2 (steps 2 and 5) and 14.5 state about them, one test per rule:

- a stage that vanishes between the listing and its inspection is passed over, and
  nothing is created on its account;
- a quarantine tries the stage's own name, then ``<name>.1`` to ``<name>.99``, and with
  all 100 taken refuses with ``destination_conflict`` and a message saying so;
- ``artifacts/.quarantine/`` is created private (mode 0700 less the umask, like a stage);
- a failing lock, directory creation, sync or rename of these steps is
  ``durability_failed`` (never a raw ``OSError``), leaves the stage whole under one of its
  names, and the next pass finishes the quarantine.

Rules of this file: each test makes its stage by hand in an otherwise empty store (a
stage no lease names is abandoned, section 14.2 step 5), so that nothing but the rule
under test acts; faults are injected through the durability seam's observer
(:func:`runstore.durable.install_observer`), and the numbers are SPEC.md's literals, never
the code's constants. Expected values are SPEC.md's, not the model's.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import RecoveryReport
from runstore import durable
from runstore.errors import DestinationConflictError
from runstore.errors import DurabilityError

from conformance.publication.world import PublicationWorld
from conformance.recovery.world import quarantined
from conformance.recovery.world import recover
from conformance.recovery.world import tree

STAGE = ".staging-" + "ab" * 16
"""A hand-made stage's name (a 32-hex-digit token, as the publisher makes)."""
NAMES_TRIED = 100
"""SPEC.md section 14.2 step 5: the stage's own name and ``<name>.1`` to ``<name>.99``."""


def make_stage(world: PublicationWorld, *, lock: bool = True) -> tuple[Path, object]:
    """A free stage no lease names, holding one payload file (and its ``lock``): returns
    it and its contents."""
    stage = world.artifacts / STAGE
    (stage / "object").mkdir(parents=True)
    (stage / "object" / "partial.bin").write_bytes(b"half")
    if lock:
        (stage / "lock").write_bytes(b"")
    return stage, tree(stage)


@contextmanager
def failing(operation: str, needle: str) -> Iterator[list[str]]:
    """Make the first call of the seam's ``operation`` whose target ends with ``needle``
    fail with ``EIO`` before it runs; yields the targets it failed."""
    failed: list[str] = []

    def observer(phase: str, name: str, target: str) -> None:
        if phase == "before" and name == operation and target.endswith(needle) and not failed:
            failed.append(target)
            raise OSError(errno.EIO, "injected I/O error", target)

    previous = durable.install_observer(observer)
    try:
        yield failed
    finally:
        durable.install_observer(previous)


def test_a_stage_that_vanishes_before_it_is_inspected_is_passed_over_creating_nothing(
    world: PublicationWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 14.2 step 5: a publisher's cleanup does not wait for recovery; a
    stage removed right after ``artifacts/`` is listed (before recovery looks at the
    entry) is neither quarantined nor an error, and nothing, not even ``.quarantine/``,
    is created on its account: the pass changes nothing."""
    stage, _ = make_stage(world)
    before = world.database_bytes()
    listdir = os.listdir
    removed: list[str] = []

    def listing_then_cleanup(path: str) -> list[str]:
        names = listdir(path)
        if os.fspath(path) == str(world.artifacts) and stage.exists():
            shutil.rmtree(stage)
            removed.append(stage.name)
        return names

    monkeypatch.setattr(os, "listdir", listing_then_cleanup)
    report = recover(world, 5_000)
    monkeypatch.undo()
    assert removed == [STAGE]
    assert report == RecoveryReport()
    assert not report.changed
    assert sorted(p.name for p in world.artifacts.iterdir()) == []
    assert world.database_bytes() == before


def test_a_quarantine_uses_the_names_up_to_dot_99(world: PublicationWorld) -> None:
    """SPEC.md section 14.2 step 5: when the stage's name is taken in the quarantine, the
    first free ``<stage name>.<n>`` for n = 1 to 99 is used; here only ``.99`` is free,
    and nothing that was there is replaced."""
    stage, contents = make_stage(world)
    holding = world.artifacts / ".quarantine"
    holding.mkdir()
    for n in range(NAMES_TRIED - 1):
        (holding / (f"{STAGE}.{n}" if n else STAGE)).mkdir()

    report = recover(world, 5_000)
    assert report == RecoveryReport(quarantined_stages=(f"artifacts/{STAGE}",))
    assert not stage.exists()
    assert tree(holding / f"{STAGE}.99") == contents
    assert len(quarantined(world)) == NAMES_TRIED
    assert all(not any((holding / name).iterdir()) for name in quarantined(world)[:-1])


def test_a_quarantine_with_all_100_names_taken_refuses_saying_so(world: PublicationWorld) -> None:
    """SPEC.md section 14.2 step 5: with the stage's name and ``.1`` to ``.99`` all taken
    the pass refuses with ``destination_conflict``, whose message names
    ``artifacts/.quarantine/<stage name>`` and says that its next 99 names are taken; no
    ``.100`` is tried, and the stage stays whole where it was."""
    stage, contents = make_stage(world)
    holding = world.artifacts / ".quarantine"
    holding.mkdir()
    for n in range(NAMES_TRIED):
        (holding / (f"{STAGE}.{n}" if n else STAGE)).mkdir()

    with pytest.raises(DestinationConflictError) as refused:
        recover(world, 5_000)
    assert refused.value.code == "destination_conflict"
    assert refused.value.message == (
        f"artifacts/.quarantine/{STAGE} and its next 99 names are taken"
    )
    assert tree(stage) == contents
    assert len(quarantined(world)) == NAMES_TRIED
    assert not (holding / f"{STAGE}.100").exists()


def test_the_quarantine_directory_is_created_private(world: PublicationWorld) -> None:
    """SPEC.md section 14.2 step 5: ``artifacts/.quarantine/`` is created, when missing,
    with mode 0700 less the umask, like a stage (section 11): what it keeps is as private
    as the stages it came from."""
    make_stage(world)
    umask = os.umask(0o022)
    os.umask(umask)
    assert recover(world, 5_000).quarantined_stages == (f"artifacts/{STAGE}",)
    mode = (world.artifacts / ".quarantine").stat().st_mode & 0o7777
    assert mode == 0o700 & ~umask


STEPS = {
    "stage lock": ("flock_exclusive", f"{STAGE}/lock"),
    "creating .quarantine": ("create_directory", ".quarantine"),
    "syncing artifacts after creating .quarantine": ("fsync_dir", "artifacts"),
    "the rename": ("rename_noreplace", STAGE),
    "syncing .quarantine after the rename": ("fsync_dir", ".quarantine"),
}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_failing_step_of_the_stage_probe_or_quarantine_is_durability_failed(
    world: PublicationWorld, step: str
) -> None:
    """SPEC.md sections 14.5 and 14.10 (item 1): a lock, sync, rename or directory
    creation that fails ends the pass with ``durability_failed``, never a raw
    ``OSError``; the stage stays whole under one of its names, and the next pass leaves
    it quarantined intact."""
    stage, contents = make_stage(world)
    operation, needle = STEPS[step]
    with failing(operation, needle) as failed, pytest.raises(DurabilityError) as refused:
        recover(world, 5_000)
    assert len(failed) == 1
    assert refused.value.code == "durability_failed"
    moved = world.artifacts / ".quarantine" / STAGE
    assert contents in [tree(path) for path in (stage, moved) if path.is_dir()]

    recover(world, 5_001)
    assert not stage.exists()
    assert tree(moved) == contents
    assert quarantined(world) == [STAGE]
