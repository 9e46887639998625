"""Transactional publication (SPEC.md section 11), the paths that fail: one test per item of
the source's list of publication tests that a refusal shows (unsafe entries, stale
revisions, missing claims and dependencies, corruption, expiry after rename, rollback after
a terminal projection update), plus hostile arguments to both entry points.

What each failure must leave is the SPEC's: before the stage's lease commits, nothing (the
database byte for byte as it was, no stage); after it, the registered stage with its lock
released; after the rename, a verified orphan registered by nothing. In every case the
attempt's state, revision, claim and leases are as they were, and no receipt is returned.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Failed
from runstore import Reference
from runstore import RunStoreError
from runstore import durable
from runstore import sql
from runstore.audit.projection import store_projection
from runstore.store.publication import objects
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import FAR
from conformance.publication.world import ClockScript
from conformance.publication.world import Payload
from conformance.publication.world import PublicationWorld
from conformance.publication.world import ScriptedClock
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.publication.world import orphan_verifies
from conformance.publication.world import refusal_code
from conformance.publication.world import refused_untouched
from conformance.publication.world import snapshot_tree
from conformance.publication.world import unchanged_but_staging

S = AttemptState
DATASET = ArtifactKind.DATASET
FAILED = Failed(code="crash", details={"signal": 9})


# --- unsafe entries --------------------------------------------------------------------------

UNSAFE = {
    "symlink": Payload(files=(("a.txt", b"x"),), symlinks=(("link", "a.txt"),)),
    "nested-symlink": Payload(files=(("d/a.txt", b"x"),), symlinks=(("d/link", "/etc/passwd"),)),
    "fifo": Payload(files=(("a.txt", b"x"),), fifos=("pipe",)),
    "empty-directory": Payload(files=(("a.txt", b"x"),), directories=("empty",)),
    "nested-empty-directory": Payload(files=(("d/a.txt", b"x"),), directories=("d/e/f",)),
    "manifest": files(**{"manifest.json": b'{"complete":true}'}),
    "non-nfc-name": files(**{"e\u0301.txt": b"decomposed"}),
    "backslash": files(**{"a\\b.txt": b"x"}),
    "non-nfc-directory": Payload(files=(("e\u0301/a.txt", b"x"),)),
    "non-utf8-name": files(**{"\udcff.bin": b"x"}),
    "control-character": files(**{"a\x01b.txt": b"x"}),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
@pytest.mark.parametrize("entry", ["publish_artifact", "publish_finalization"])
def test_unsafe_entries(world: PublicationWorld, case: str, entry: str) -> None:
    guard = world.executing(sc.slot_fixture())
    if entry == "publish_finalization":
        guard = world.finalizing(guard, 1_200)
    payload = UNSAFE[case]
    before = world.projection()
    with pytest.raises(RunStoreError) as info:
        if entry == "publish_artifact":
            world.publish_artifact(guard, DATASET, payload, at(2_000))
        else:
            world.publish_finalization(guard, FAILED, (), payload, at(2_000))
    assert info.value.code == "unsafe_entry", info.value
    unchanged_but_staging(world, before)
    (stage,) = world.stages()
    assert world.rows(
        "SELECT staging_path, released_at_ns FROM leases WHERE purpose = 'staging'"
    ) == [(f"artifacts/{stage.name}", None)]
    assert world.objects() == [] and world.artifact_rows() == []
    world.check()


def test_unsafe_entries_outcome_json_is_the_runtimes_only_in_a_final_artifact(
    world: PublicationWorld,
) -> None:
    guard = world.executing(sc.slot_fixture())
    caller_outcome = files(**{"outcome.json": b"{}"})
    # An independent artifact may carry a file of that name ...
    world.publish_artifact(guard, DATASET, caller_outcome, at(1_200))
    guard = world.finalizing(guard, 1_300)
    before = world.projection()
    # ... but the final artifact's outcome.json is the runtime's.
    with pytest.raises(RunStoreError) as info:
        world.publish_finalization(guard, FAILED, (), caller_outcome, at(2_000))
    assert info.value.code == "unsafe_entry"
    unchanged_but_staging(world, before)
    world.check()


# --- stale revisions -------------------------------------------------------------------------


def test_stale_revisions_refuse_finalization_before_staging(world: PublicationWorld) -> None:
    executing = world.executing(sc.slot_fixture())
    world.finalizing(executing, 1_200)
    stale = executing  # the guard from before the finalizing transition
    refused_untouched(
        world,
        "stale_revision",
        lambda: world.publish_finalization(stale, FAILED, (), DATA, at(2_000)),
    )
    world.check()


def test_stale_revisions_refuse_the_stage_registration_and_remove_the_stage(
    world: PublicationWorld,
) -> None:
    fixture = world.registered()
    reserved = world.start(fixture, "reservation-0")
    world.walk(reserved, sc.EXECUTION_PATH, 1_100)
    before = world.projection()
    created: list[str] = []

    def observer(phase: str, text: str) -> None:
        if phase == "before" and text.startswith("SELECT") and world.stages():
            created.append(world.stages()[0].name)

    previous = sql.install_observer(observer)
    try:
        with pytest.raises(RunStoreError) as info:
            world.publish_artifact(reserved, DATASET, DATA, at(2_000))
    finally:
        sql.install_observer(previous)
    assert info.value.code == "stale_revision"
    assert created, "the stage existed while its registration was checked"
    assert world.stages() == [] and world.objects() == []
    assert world.projection() == before
    world.check()


# --- missing claims and dependencies ---------------------------------------------------------


def test_missing_claims_refuse_acceptance_before_staging(world: PublicationWorld) -> None:
    fixture = sc.slot_fixture()
    guard = world.finalizing(world.executing(fixture), 1_200)  # finalizing without the claim
    refused_untouched(
        world,
        "claim_required",
        lambda: world.publish_finalization(guard, Accepted(), (), DATA, at(2_000)),
    )
    world.check()


def test_missing_dependencies_are_refused_before_staging(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    dataset = world.publish_artifact(guard, DATASET, DATA, at(1_150)).artifact
    guard = world.finalizing(guard, 1_200)
    missing = f"run-store-v1:dataset-{'0' * 64}"
    for references in (
        [Reference("dataset", missing)],
        [Reference("dataset", dataset.id), Reference("inputs", missing)],
    ):
        refused_untouched(
            world,
            "unknown_artifact",
            lambda refs=references: world.publish_finalization(
                guard, FAILED, refs, DATA, at(2_000)
            ),
        )
    world.check()


# --- corruption ------------------------------------------------------------------------------


def _flip(copy: Path) -> None:
    data = bytearray((copy / "data.bin").read_bytes())
    data[0] ^= 0xFF
    (copy / "data.bin").write_bytes(bytes(data))


CORRUPTIONS: dict[str, Callable[[Path, Path], None]] = {
    "flipped-byte": lambda good, at_: (shutil.copytree(good, at_), _flip(at_)),
    "deleted-file": lambda good, at_: (
        shutil.copytree(good, at_),
        (at_ / "notes/readme.txt").unlink(),
    ),
    "deleted-manifest": lambda good, at_: (
        shutil.copytree(good, at_),
        (at_ / "manifest.json").unlink(),
    ),
    "extra-file": lambda good, at_: (shutil.copytree(good, at_), (at_ / "extra").write_bytes(b"")),
    "empty-directory": lambda good, at_: at_.mkdir(),
    "plain-file": lambda good, at_: at_.write_bytes(b"not a directory"),
    "symlink-to-a-good-copy": lambda good, at_: at_.symlink_to(good),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corruption_at_the_address_is_a_destination_conflict(
    world: PublicationWorld,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    corruption: str,
) -> None:
    # The good object, published in a scratch store (outside the world's root: a store is
    # never opened inside another), gives the address and the bytes.
    scratch_root = tmp_path_factory.mktemp("scratch")
    scratch = PublicationWorld(scratch_root)
    try:
        good = scratch.store.publish_artifact(
            scratch.executing(sc.slot_fixture()), DATASET, DATA, at(2_000).fresh()
        ).artifact
    finally:
        scratch.close()
    kept = tmp_path / "good-copy"
    shutil.copytree(scratch_root / good.path, kept)

    guard = world.executing(sc.slot_fixture())
    world.artifacts.mkdir()
    planted = world.root / good.path
    CORRUPTIONS[corruption](kept, planted)
    entry_before = snapshot_tree(planted)
    before = world.projection()
    code = refusal_code(
        lambda: world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
    )
    assert code == "destination_conflict"
    assert snapshot_tree(planted) == entry_before  # nothing replaced
    assert world.artifact_rows() == []
    assert world.rows("SELECT count(*) FROM leased_artifacts") == [(0,)]
    unchanged_but_staging(world, before)
    # The duplicate stays in its stage, complete and identical to the good object.
    (stage,) = world.stages()
    duplicate = objects.verify(str(stage / "object"), sync=False)
    assert (duplicate.tree_sha256, duplicate.manifest_sha256) == (
        good.content_sha256,
        good.manifest_sha256,
    )


# --- expiry after rename ---------------------------------------------------------------------


def test_expiry_after_rename_of_an_artifact(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())  # the reservation expires at 10_000
    before = world.projection()
    with pytest.raises(RunStoreError) as info:
        world.publish_artifact(guard, DATASET, DATA, ClockScript((2_000, 9_999, 10_000)))
    assert info.value.code == "lease_expired"
    orphan_verifies(world, DATASET)
    unchanged_but_staging(world, before)
    (stage,) = world.stages()
    assert os.listdir(stage) == ["lock"]  # object/ was renamed to its address
    assert world.rows("SELECT count(*) FROM leased_artifacts") == [(0,)]
    world.check()


@pytest.mark.parametrize(
    ("claim_expires", "code"), [(10_000, "lease_expired"), (6_000, "claim_expired")]
)
def test_expiry_after_rename_keeps_the_claim_and_the_finalizing_attempt(
    world: PublicationWorld, claim_expires: int, code: str
) -> None:
    guard, _ = world.ready_to_accept(sc.slot_fixture(), claim_expires=claim_expires)
    before = world.projection()
    commit = min(claim_expires, 10_000)  # the reservation expires at 10_000
    with pytest.raises(RunStoreError) as info:
        world.publish_finalization(
            guard, Accepted(), (), DATA, ClockScript((2_000, 3_000, 4_000, commit))
        )
    assert info.value.code == code
    orphan = orphan_verifies(world, ArtifactKind.ATTEMPT)
    assert (orphan / "outcome.json").is_file()
    unchanged_but_staging(world, before)
    assert world.rows("SELECT state, revision FROM attempts") == [("finalizing", guard.revision)]
    assert world.rows("SELECT attempt_id, lease_id FROM finalization_claims") == [
        (guard.attempt_id, "claim-0")
    ]
    world.check()


# --- late failures ---------------------------------------------------------------------------


# (after a fresh rename only artifacts/ is synced; the stage directory is synced only when
# the address was taken, see test_publication_paths.py)
@pytest.mark.parametrize("step", ["rename", "artifacts-sync"])
def test_late_failures_leave_verifiable_orphans_and_keep_the_claim(
    world: PublicationWorld, step: str
) -> None:
    guard, _ = world.ready_to_accept(sc.slot_fixture())
    before = world.projection()
    renamed: list[str] = []

    def observer(phase: str, operation: str, target: str) -> None:
        if phase != "before":
            return
        if operation == "rename_noreplace":
            renamed.append(target)
            failing = step == "rename"
        elif operation == "fsync_dir" and renamed:
            is_stage = os.path.basename(target).startswith(".staging-")
            failing = step == ("stage-sync" if is_stage else "artifacts-sync")
        else:
            failing = False
        if failing:
            raise OSError(errno.EIO, "injected", target)

    previous = durable.install_observer(observer)
    try:
        code = refusal_code(
            lambda: world.store.publish_finalization(guard, Accepted(), (), DATA, at(2_000).fresh())
        )
    finally:
        durable.install_observer(previous)
    assert code == "durability_failed"
    unchanged_but_staging(world, before)
    assert world.rows("SELECT state, revision FROM attempts") == [("finalizing", guard.revision)]
    assert world.rows("SELECT lease_id FROM finalization_claims") == [("claim-0",)]
    (stage,) = world.stages()
    if step == "rename":  # the completed object is still in its stage
        assert world.objects() == [world.artifacts / f"observation-{_observation_tree(world)}"]
        completed = objects.verify(str(stage / "object"), sync=False)
        assert (stage / "object" / "outcome.json").is_file() and completed.tree_sha256
    else:
        orphan_verifies(world, ArtifactKind.ATTEMPT)
        assert os.listdir(stage) == ["lock"]


def _observation_tree(world: PublicationWorld) -> str:
    ((content,),) = world.rows("SELECT content_sha256 FROM artifacts WHERE kind = 'observation'")
    return str(content)


# --- rollback after a terminal projection update ---------------------------------------------


def test_rollback_after_a_terminal_projection_update(world: PublicationWorld) -> None:
    guard, _ = world.ready_to_accept(sc.slot_fixture(), expires=FAR)
    before_call = world.projection()
    steps: list[str] = []
    at_commit: list[dict[str, Any]] = []

    def observer(phase: str, text: str) -> None:
        if phase != "before":
            return
        if text.startswith("UPDATE attempts SET state"):
            steps.append("projection updated")
        elif text.startswith("UPDATE leases SET released_at_ns") and steps:
            steps.append("failing the lease release")
            raise sqlite3.OperationalError("injected after the terminal projection update")

    def probe(index: int) -> None:
        if index == 3:  # the commit sample, taken under the write lock
            at_commit.append(store_projection(world.database_path))

    clock = ScriptedClock([2_000, 2_100, 2_200, 2_300], probe)
    previous = sql.install_observer(observer)
    try:
        code = refusal_code(
            lambda: world.store.publish_finalization(guard, Accepted(), (), DATA, clock)
        )
    finally:
        sql.install_observer(previous)
    assert code == "database_error"
    assert steps == ["projection updated", "failing the lease release"]
    (before_final,) = at_commit
    assert world.projection() == before_final  # the whole final transaction rolled back
    unchanged_but_staging(world, before_call)
    orphan = orphan_verifies(world, ArtifactKind.ATTEMPT)
    assert world.rows("SELECT state FROM attempts") == [("finalizing",)]
    assert world.rows("SELECT lease_id FROM finalization_claims") == [("claim-0",)]
    assert world.rows("SELECT count(*) FROM events WHERE kind = 'attempt_finished'") == [(0,)]

    # The same publication again (same clock, so the same outcome bytes) adopts the orphan.
    again = world.store.publish_finalization(
        guard, Accepted(), (), DATA, ScriptedClock([2_000, 2_100, 2_200, 2_300])
    )
    assert world.root / again.artifact.path == orphan
    assert again.terminal.state is S.ACCEPTED


# --- hostile arguments -----------------------------------------------------------------------


def _never(path: str) -> None:
    raise AssertionError("populate must not be called")


MISSING = f"run-store-v1:dataset-{'0' * 64}"
ARTIFACT_HOSTILE: dict[str, tuple[int, object]] = {
    "attempt-none": (0, None),
    "attempt-string": (0, "attempt:v1:" + "0" * 64),
    "kind-string": (1, "dataset"),
    "kind-none": (1, None),
    "kind-attempt": (1, ArtifactKind.ATTEMPT),
    "populate-none": (2, None),
    "populate-bytes": (2, b"data"),
    "clock-int": (3, 2_000),
    "clock-none": (3, None),
}
FINALIZATION_HOSTILE: dict[str, tuple[int, object]] = {
    "attempt-none": (0, None),
    "outcome-none": (1, None),
    "outcome-string": (1, "failed"),
    "outcome-state": (1, S.FAILED),
    "references-none": (2, None),
    "references-list-of-lists": (2, [["dataset", MISSING]]),
    "references-plain-pair": (2, [("dataset", MISSING)]),  # a tuple is no Reference
    "references-string": (2, "dataset"),
    "references-short-pair": (2, [("dataset",)]),
    "references-bytes-role": (2, [(b"dataset", MISSING)]),
    "populate-none": (3, None),
    "clock-int": (4, 2_000),
    "clock-none": (4, None),
}


@pytest.mark.parametrize("case", sorted(ARTIFACT_HOSTILE))
def test_hostile_arguments_to_publish_artifact(world: PublicationWorld, case: str) -> None:
    guard = world.executing(sc.slot_fixture())
    arguments: list[Any] = [guard, DATASET, _never, ScriptedClock([])]  # neither is called
    position, value = ARTIFACT_HOSTILE[case]
    arguments[position] = value
    refused_untouched(world, "invalid_record", lambda: world.store.publish_artifact(*arguments))
    world.check()


@pytest.mark.parametrize("case", sorted(FINALIZATION_HOSTILE))
def test_hostile_arguments_to_publish_finalization(world: PublicationWorld, case: str) -> None:
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_200)
    arguments: list[Any] = [guard, FAILED, (), _never, ScriptedClock([])]
    position, value = FINALIZATION_HOSTILE[case]
    arguments[position] = value
    refused_untouched(world, "invalid_record", lambda: world.store.publish_finalization(*arguments))
    world.check()


BAD_SAMPLES: dict[str, tuple[object, str]] = {
    "float": (2_050.5, "invalid_record"),
    "bool": (True, "invalid_record"),
    "none": (None, "invalid_record"),
    "negative": (-1, "out_of_range"),
    "two-to-the-63": (2**63, "out_of_range"),
}
GOOD = [2_000, 2_100, 2_200, 2_300]


def _clock(position: int, bad: object) -> Callable[[], ScriptedClock]:
    readings: list[object] = [*GOOD]
    readings[position] = bad
    return lambda: ScriptedClock(readings[: position + 1])


def _after_a_bad_sample(
    world: PublicationWorld, before: dict[str, Any], code: str, call: Callable[[], object]
) -> None:
    with pytest.raises(RunStoreError) as info:
        call()
    assert info.value.code == code, info.value
    unchanged_but_staging(world, before)
    world.check()


@pytest.mark.parametrize("position", [0, 1, 2], ids=["staging", "verified", "commit"])
@pytest.mark.parametrize("sample", sorted(BAD_SAMPLES))
def test_hostile_clock_samples_to_publish_artifact(
    world: PublicationWorld, sample: str, position: int
) -> None:
    guard = world.executing(sc.slot_fixture())
    bad, code = BAD_SAMPLES[sample]
    clock = _clock(position, bad)

    def call() -> object:
        return world.lockstep(lambda w: w.publish_artifact(guard, DATASET, DATA, clock()))

    if position == 0:
        refused_untouched(world, code, call)
        world.check()
        return
    _after_a_bad_sample(world, world.projection(), code, call)
    orphan_verifies(world, DATASET)  # both later samples follow the rename


@pytest.mark.parametrize("position", [0, 1, 2, 3], ids=["staging", "finish", "verified", "commit"])
@pytest.mark.parametrize("sample", sorted(BAD_SAMPLES))
def test_hostile_clock_samples_to_publish_finalization(
    world: PublicationWorld, sample: str, position: int
) -> None:
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_200)
    bad, code = BAD_SAMPLES[sample]
    clock = _clock(position, bad)

    def call() -> object:
        return world.lockstep(lambda w: w.publish_finalization(guard, FAILED, (), DATA, clock()))

    if position == 0:
        refused_untouched(world, code, call)
        world.check()
        return
    _after_a_bad_sample(world, world.projection(), code, call)
    if position == 1:  # before outcome.json is written: the payload is still in the stage
        (stage,) = world.stages()
        assert sorted(os.listdir(stage / "object")) == ["data.bin", "notes"]
        assert world.objects() == []
    else:
        orphan_verifies(world, ArtifactKind.ATTEMPT)
