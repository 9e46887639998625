"""How a stage is made and removed (SPEC.md section 11, "Files" and ``publish_artifact``
steps 2 and 9), checked from outside through ``RunStore.publish_artifact``, the
durability seam's observer (fault injection) and recorder (the order of persistence
effects), and the files' modes:

- the recovery lock is waited for at most 5 s, then ``busy``;
- ``artifacts/`` is created with mode 0755 less the umask, a stage's ``lock`` with 0600 and
  ``object/`` with 0700, which the published object's root keeps;
- the stage's lock is created new (never opening an entry already there) and held
  exclusively from creation until after the final commit;
- a failure while the stage is made is ``durability_failed`` (any other exception
  propagates unchanged), and in either case nothing of the stage is left behind;
- a stage removed because its registration was refused is removed and then ``artifacts/``
  is synced; after a commit it is removed without that sync, and a failure of that cleanup
  is logged, never raised.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import OwnedAttempt
from runstore import durable
from runstore.store.publication import staging
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import lock_is_free
from conformance.publication.world import refusal_code

DATASET = ArtifactKind.DATASET


@pytest.fixture
def umask_022() -> Iterator[None]:
    """Run with the common umask 022, restoring the previous one."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _observed(observer: Callable[[str, str, str], None], call: Callable[[], object]) -> object:
    previous = durable.install_observer(observer)
    try:
        return call()
    finally:
        durable.install_observer(previous)


def _executing(world: PublicationWorld) -> OwnedAttempt:
    return world.executing(sc.slot_fixture())


# --- the recovery lock ------------------------------------------------------------------------


class _FakeTime:
    """``time`` for the seam's lock polling: ``sleep`` advances ``monotonic`` without
    waiting, so the timeout is measured without a timed test."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_publisher_waits_at_most_5_s_for_the_recovery_lock_then_busy(
    world: PublicationWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 11 step 2: the recovery lock is taken shared, waiting at most 5 s, else
    ``busy`` (and no stage is made)."""
    guard = _executing(world)
    fake = _FakeTime()
    monkeypatch.setattr(durable, "time", fake)
    with staging.RecoveryLock(world.store.root, exclusive=True):  # recovery holds it
        start = fake.now
        code = refusal_code(
            lambda: world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
        )
    assert code == "busy"
    assert 5.0 <= fake.now - start < 5.0 + 0.1
    assert world.stages() == []


# --- modes and the stage's lock ---------------------------------------------------------------


def test_the_stage_and_object_modes(world: PublicationWorld, umask_022: None) -> None:
    """SPEC.md 11 "Files": ``artifacts/`` 0755 less the umask, the stage 0700, its ``lock``
    0600 and ``object/`` 0700; the published object's root keeps 0700."""
    guard = _executing(world)
    seen: dict[str, int] = {}

    def populate(path: str) -> None:
        stage = Path(path).parent
        for name, entry in {
            "artifacts": stage.parent,
            "stage": stage,
            "lock": stage / "lock",
            "object": Path(path),
        }.items():
            seen[name] = stat.S_IMODE(os.lstat(entry).st_mode)
        DATA(path)

    published = world.store.publish_artifact(guard, DATASET, populate, at(2_000).fresh())
    assert seen == {"artifacts": 0o755, "stage": 0o700, "lock": 0o600, "object": 0o700}
    address = world.root / published.artifact.path
    assert stat.S_IMODE(os.lstat(address).st_mode) == 0o700


def test_the_stage_lock_is_held_exclusively_while_populate_runs(world: PublicationWorld) -> None:
    """SPEC.md 11 step 2: the publisher exclusively flocks the stage's ``lock``: not even a
    shared lock can be taken until it is released after the commit."""
    guard = _executing(world)
    held: list[bool] = []

    def populate(path: str) -> None:
        lock = Path(path).parent / "lock"
        held.append(not lock_is_free(lock, exclusive=False))
        DATA(path)

    world.store.publish_artifact(guard, DATASET, populate, at(2_000).fresh())
    assert held == [True]


@pytest.mark.parametrize("planted", ["regular file", "symbolic link"])
def test_the_stage_lock_is_always_created_new(
    world: PublicationWorld, tmp_path: Path, planted: str
) -> None:
    """SPEC.md 11 "Files": an entry already at the stage's ``lock`` name (planted here just
    after the stage directory is made) is never opened or followed: the stage fails with
    ``durability_failed`` and is removed, and the link's target is never created."""
    guard = _executing(world)
    before = world.projection()
    target = tmp_path / "outside-target"

    def observer(phase: str, operation: str, path: str) -> None:
        name = os.path.basename(path)
        if (phase, operation) == ("after", "create_directory") and name.startswith(".staging-"):
            lock = os.path.join(path, "lock")
            if planted == "regular file":
                Path(lock).write_bytes(b"")
            else:
                os.symlink(target, lock)

    code = _observed(
        observer,
        lambda: refusal_code(
            lambda: world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
        ),
    )
    assert code == "durability_failed"
    assert not os.path.lexists(target)
    assert world.stages() == []
    assert world.projection() == before


# --- failures while the stage is made ---------------------------------------------------------


def _is_step(step: str, operation: str, path: str, root: str) -> bool:
    """Whether the seam call ``(operation, path)`` is stage creation's step ``step``."""
    artifacts = os.path.join(root, "artifacts")
    name = os.path.basename(path)
    return {
        "create artifacts/": operation == "create_directory" and path == artifacts,
        "sync the root after it": operation == "fsync_dir" and path == root,
        "create the stage": operation == "create_directory" and name.startswith(".staging-"),
        "lock the stage": operation == "flock_exclusive" and name == "lock",
        "create object/": operation == "create_directory" and name == "object",
        "sync artifacts/": operation == "fsync_dir" and path == artifacts,
    }[step]


STEPS = [
    "create artifacts/",
    "sync the root after it",
    "create the stage",
    "lock the stage",
    "create object/",
    "sync artifacts/",
]


class _Interrupted(BaseException):
    """Not an ``OSError`` (nor an ``Exception``): as a signal handler or a crash hook
    might raise."""


@pytest.mark.parametrize("failure", ["OSError", "other exception"])
@pytest.mark.parametrize("step", STEPS)
def test_a_failure_while_the_stage_is_made_leaves_nothing_behind(
    world: PublicationWorld, step: str, failure: str
) -> None:
    """SPEC.md 11 "Failures": a failure before the stage's lease commits leaves nothing
    behind. A failed durability step is ``durability_failed`` (SPEC.md 9); any other
    exception propagates unchanged."""
    guard = _executing(world)
    root = world.store.root
    if step != "create artifacts/" and step != "sync the root after it":
        world.publish_artifact(guard, DATASET, DATA, at(1_500))  # artifacts/ exists now
    before = world.projection()
    objects_before = world.objects()
    seen: list[str] = []

    def observer(phase: str, operation: str, path: str) -> None:
        if phase != "before":
            return
        if step == "sync the root after it" and operation == "create_directory":
            seen.append(path)  # the root is synced after artifacts/ is created, not before
        if not _is_step(step, operation, path, root):
            return
        if step == "sync the root after it" and not seen:
            return
        if failure == "OSError":
            raise OSError(errno.EIO, "injected", path)
        raise _Interrupted(path)

    def call() -> object:
        return world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())

    if failure == "OSError":
        assert _observed(observer, lambda: refusal_code(call)) == "durability_failed"
    else:
        with pytest.raises(_Interrupted):
            _observed(observer, call)
    assert world.stages() == []
    assert world.objects() == objects_before
    assert world.projection() == before


# --- removing a stage -------------------------------------------------------------------------


def _stage_removed(effects: list[tuple[str, tuple[str, ...]]]) -> int:
    """The index of the effect that removed the stage directory itself."""
    (index,) = [
        i
        for i, (effect, paths) in enumerate(effects)
        if effect == "rmdir" and os.path.basename(paths[0]).startswith(".staging-")
    ]
    return index


def _recorded(call: Callable[[], object]) -> list[tuple[str, tuple[str, ...]]]:
    effects: list[tuple[str, tuple[str, ...]]] = []
    previous = durable.install_recorder(lambda effect, paths: effects.append((effect, paths)))
    try:
        call()
    finally:
        durable.install_recorder(previous)
    return effects


def test_a_stage_whose_registration_is_refused_is_removed_then_artifacts_synced_once(
    world: PublicationWorld,
) -> None:
    """SPEC.md 11 step 9 (last sentence): a stage removed because its registration failed
    is removed, then ``artifacts/`` is synced (once, as its own step)."""
    stale = _executing(world)
    world.finalizing(stale, 1_200)
    artifacts = str(world.artifacts)

    def call() -> None:
        code = refusal_code(
            lambda: world.store.publish_artifact(stale, DATASET, DATA, at(2_000).fresh())
        )
        assert code == "stale_revision"

    effects = _recorded(call)
    stage_removed = _stage_removed(effects)
    assert effects[stage_removed + 1 :] == [("fsync_dir", (artifacts,))]
    assert world.stages() == []


def test_the_cleanup_after_a_commit_does_not_sync_artifacts(world: PublicationWorld) -> None:
    """SPEC.md 11 step 9: after the commit the stage is removed and ``artifacts/`` is not
    synced after this removal."""
    guard = _executing(world)
    effects = _recorded(lambda: world.publish_artifact(guard, DATASET, DATA, at(2_000)))
    stage_removed = _stage_removed(effects)
    assert effects[stage_removed + 1 :] == []
    assert world.stages() == []


def test_a_failed_cleanup_after_a_commit_is_logged_never_raised(
    world: PublicationWorld, caplog: pytest.LogCaptureFixture
) -> None:
    """SPEC.md 11 step 9: a failure to remove the stage after the commit is logged, never
    raised; the publication's receipt is returned and the leftover stage's lock is free."""
    guard = _executing(world)

    def observer(phase: str, operation: str, path: str) -> None:
        if (phase, operation) == ("before", "remove_tree"):
            raise OSError(errno.EIO, "injected", path)

    with caplog.at_level(logging.WARNING, logger="runstore.store.publication.staging"):
        published = _observed(
            observer,
            lambda: world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh()),
        )
    assert published.artifact.kind is DATASET  # type: ignore[attr-defined]
    (stage,) = world.stages()
    assert lock_is_free(stage / "lock")
    assert [r.getMessage() for r in caplog.records] == [
        f"could not remove the stage {stage}: [Errno 5] injected: '{stage}'"
    ]


def test_remove_stage_reports_whether_the_stage_is_gone(tmp_path: Path) -> None:
    """``staging.remove_stage`` (SPEC.md 11 step 9, best effort): True when the tree is
    gone; False, logged and not raised, when it could not be removed; the lock is released
    either way."""
    kept = staging.create_stage(str(tmp_path))

    def observer(phase: str, operation: str, path: str) -> None:
        if (phase, operation, path) == ("before", "remove_tree", kept.path):
            raise OSError(errno.EIO, "injected", path)

    assert _observed(observer, lambda: staging.remove_stage(kept)) is False
    assert os.path.isdir(kept.path) and kept.lock_fd is None
    assert lock_is_free(os.path.join(kept.path, "lock"))
    gone = staging.create_stage(str(tmp_path))
    assert staging.remove_stage(gone) is True
    assert not os.path.lexists(gone.path) and gone.lock_fd is None
