"""Transactional publication (SPEC.md section 11), the paths that succeed: one test per
item of the source's list of publication tests that a successful publication shows (exact
outcome bytes, current epoch nanoseconds, backward clock adjustments, live-stage renewal,
same-filesystem placement, kernel locks, transaction-free population, all terminal
outcomes, retained dependency roots, concurrent identical content). The failures are in
``test_publication_failures.py``.

Every test runs a real store on a fresh root and reads its files and its database back
(through a fresh read-only connection); where the callback or the clock has no side effect
on the store, the call runs in lockstep with the model and the whole projection is compared.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import Reference
from runstore import RunStore
from runstore import durable
from runstore import sql
from runstore.model import outcome_document as model_builder
from runstore.store.publication import objects
from runstore.store.publication import outcome_document as store_builder
from runstore.store.publication import staging
from runstore.testing import fixtures as sc

from conformance.closed_store import reading
from conformance.publication.world import DATA
from conformance.publication.world import FAR
from conformance.publication.world import ClockScript
from conformance.publication.world import Payload
from conformance.publication.world import PublicationWorld
from conformance.publication.world import ScriptedClock
from conformance.publication.world import at
from conformance.publication.world import check_object
from conformance.publication.world import files
from conformance.publication.world import lock_is_free
from conformance.publication.world import refusal_code
from conformance.publication.world import write_locked
from conformance.writer.world import Workers

S = AttemptState
DATASET = ArtifactKind.DATASET
FAILED = Failed(code="crash", details={})
LOGS = Payload(files=(("logs/stderr.log", b"oops\n"), ("z-late.txt", b"sorts after manifest")))


# --- exact outcome bytes ---------------------------------------------------------------------


def test_exact_outcome_bytes(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    dataset = world.publish_artifact(guard, DATASET, DATA, at(1_200))
    guard = world.finalizing(guard, 1_300)
    outcome = Failed(code="exit_status", details={"status": 3, "note": "é"})
    references = [Reference("dataset", dataset.artifact.id)]
    finalizing_state = world.model.state
    published = world.publish_finalization(guard, outcome, references, LOGS, at(1_400))
    finished = published.terminal.finished_at_ns
    assert finished == 1_401  # the second sample
    columns = ("id", "kind", "path", "content_sha256", "manifest_sha256")
    (registered,) = world.rows(f"SELECT {', '.join(columns)} FROM artifacts WHERE kind = 'dataset'")

    directory = check_object(world, published.artifact)
    assert sorted(os.listdir(directory)) == ["logs", "manifest.json", "outcome.json", "z-late.txt"]
    written = (directory / "outcome.json").read_bytes()
    expected = model_builder.outcome_document(
        finalizing_state, guard.attempt_id, outcome, references, finished
    )
    assert written == expected
    with reading(world.database_path) as connection:
        connection.execute("BEGIN")
        rebuilt = store_builder.outcome_document(
            connection, guard.attempt_id, outcome, references, finished
        )
    assert written == rebuilt
    document = json.loads(written)
    assert document["finished_at_ns"] == str(finished)
    assert document["outcome"] == {"state": "failed", "failure_code": "exit_status"} | {
        "details": {"status": 3, "note": "é"}
    }
    entry = dict(zip(columns, registered, strict=True))
    assert document["dependencies"] == [{"artifact": entry, "role": "dataset"}]
    for private in (b"\n", b"owner-a", b"staging", b"reservation-0"):
        assert private not in written  # canonical, and no tokens, leases or stage paths
    check_object(world, dataset.artifact)  # addressed and registered as it was hashed
    world.check()


# --- current epoch nanoseconds ---------------------------------------------------------------


def test_current_epoch_nanoseconds_sampled_three_and_four_times_in_order(
    world: PublicationWorld,
) -> None:
    """``time.time_ns`` as the clock, wrapped to count its readings and to look at the
    world at each: the SPEC's samples, in its order, recorded in their roles."""
    guard = world.executing(sc.slot_fixture(), expires=FAR)
    database = world.database_path
    readings: list[int] = []
    seen: list[object] = []
    populated: list[str] = []

    def clock() -> int:
        seen.append(probes[len(readings)]())
        readings.append(time.time_ns())
        return readings[-1]

    probes: list[Callable[[], object]] = [
        lambda: ("before staging", world.stages(), world.staging_leases()),
        lambda: ("after the rename", [p.name[:8] for p in world.objects()], world.artifact_rows()),
        lambda: ("under the write lock", write_locked(database)),
    ]
    before = time.time_ns()
    dataset = world.store.publish_artifact(guard, DATASET, DATA, clock).artifact
    after = time.time_ns()
    assert seen == [
        ("before staging", [], []),
        ("after the rename", ["dataset-"], []),
        ("under the write lock", True),
    ]
    _, acquired, expires, released, _ = world.staging_leases()[0]
    assert (acquired, expires) == (readings[0], FAR)
    assert dataset.verified_at_ns == max(readings[1], acquired)
    assert released == max(readings[2], acquired)
    assert all(before <= t <= after for t in (acquired, dataset.verified_at_ns, released))

    guard = world.store.advance(guard, S.FINALIZING, time.time_ns())
    readings.clear()
    seen.clear()

    def populate(path: str) -> None:
        populated.append("called")
        Path(path, "stderr.log").write_bytes(b"")

    probes = [
        lambda: ("before staging", len(world.stages()), len(populated)),
        lambda: ("after populate", len(populated), os.listdir(world.stages()[0] / "object")),
        lambda: ("after the rename", sorted(p.name[:8] for p in world.objects())),
        lambda: ("under the write lock", write_locked(database)),
    ]
    before = time.time_ns()
    published = world.store.publish_finalization(guard, FAILED, (), populate, clock)
    after = time.time_ns()
    assert seen == [
        ("before staging", 0, 0),  # no stage yet, populate not yet called
        ("after populate", 1, ["stderr.log"]),  # before outcome.json is written
        ("after the rename", ["attempt-", "dataset-"]),
        ("under the write lock", True),
    ]
    acquired = world.stage_lease(2)[0]
    assert acquired == readings[0]
    finished = published.terminal.finished_at_ns
    assert finished == max(readings[1], acquired)
    assert published.artifact.verified_at_ns == max(readings[2], acquired)
    (released,) = world.rows(
        "SELECT DISTINCT released_at_ns FROM leases WHERE id != ?", (f"staging-{1:032x}",)
    )
    assert released == (max(readings[3], finished),)
    assert world.rows("SELECT finished_at_ns FROM attempts") == [(finished,)]
    assert world.rows("SELECT at_ns FROM attempt_transitions WHERE to_state = 'failed'") == [
        (finished,)
    ]
    assert world.document(published.artifact)["finished_at_ns"] == str(finished)
    recorded = (acquired, finished, published.artifact.verified_at_ns, released[0])
    assert all(before <= t <= after for t in recorded)


# --- backward clock adjustments --------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "recorded"),
    [((5_000, 4_000, 3_000, 2_000), 5_000), ((100, 90, 80, 70), 1_300)],
    ids=["after-the-stage", "before-the-finalizing-transition"],
)
def test_backward_clock_adjustments_are_clamped(
    world: PublicationWorld, script: tuple[int, ...], recorded: int
) -> None:
    guard = world.executing(sc.slot_fixture())  # last transition at 1_103
    ahead = world.publish_artifact(guard, DATASET, DATA, ClockScript((2_000, 1_500, 1_000)))
    assert ahead.artifact.verified_at_ns == 2_000
    first_stage = f"staging-{1:032x}"
    assert world.lease(first_stage)[0::2] == (2_000, 2_000)
    behind = world.publish_artifact(guard, DATASET, files(b=b"b"), ClockScript((500, 400, 300)))
    assert behind.artifact.verified_at_ns == 1_103  # clamped to the preceding transition
    assert world.stage_lease(2)[0::2] == (1_103, 1_103)

    guard = world.finalizing(guard, 1_300)
    published = world.publish_finalization(
        guard, Censored(reason="budget"), (), LOGS, ClockScript(script)
    )
    assert world.stage_lease(3)[0] == recorded
    assert published.terminal.finished_at_ns == recorded
    assert published.artifact.verified_at_ns == recorded
    assert world.rows("SELECT updated_at_ns, finished_at_ns FROM attempts") == [(recorded,) * 2]
    released = world.rows(
        "SELECT DISTINCT released_at_ns FROM leases WHERE id NOT IN (?, ?)",
        (first_stage, f"staging-{2:032x}"),
    )
    assert released == [(recorded,)]
    document = world.document(published.artifact)
    assert document["finished_at_ns"] == str(recorded)
    world.check()


# --- live-stage renewal ----------------------------------------------------------------------


def test_live_stage_renewal_extends_the_stage_with_the_reservation(
    world: PublicationWorld,
) -> None:
    guard = world.executing(sc.slot_fixture())  # the reservation expires at 10_000
    store = world.store
    during: list[object] = []

    def populate(path: str) -> None:
        (stage,) = world.staging_leases()
        during.append(stage[2:4])
        assert store.renew(guard, 20_000, 3_000) == guard  # no transaction is open here
        (stage,) = world.staging_leases()
        during.append(stage[2:4])
        DATA(path)

    published = store.publish_artifact(
        guard, DATASET, populate, ScriptedClock([2_000, 12_000, 12_001])
    )
    assert during == [(10_000, None), (20_000, None)]
    assert world.staging_leases()[0][1:4] == (2_000, 20_000, 12_001)
    assert world.lease("reservation-0")[1:3] == (20_000, None)
    assert world.rows("SELECT lease_id, artifact_id FROM leased_artifacts") == [
        ("reservation-0", published.artifact.id)
    ]
    assert published.artifact.verified_at_ns == 12_000


def test_live_stage_renewal_is_required_past_the_original_expiry(
    world: PublicationWorld,
) -> None:
    guard = world.executing(sc.slot_fixture())
    code = refusal_code(
        lambda: world.publish_artifact(guard, DATASET, DATA, ClockScript((2_000, 12_000, 12_001)))
    )
    assert code == "lease_expired"
    assert world.staging_leases()[0][1:4] == (2_000, 10_000, None)
    assert world.artifact_rows() == []
    world.check()


# --- same-filesystem placement ---------------------------------------------------------------


def test_same_filesystem_placement(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    seen: dict[str, object] = {}

    def populate(path: str) -> None:
        stage = os.path.dirname(path)
        seen["path"] = path
        seen["stage mode"] = stat.S_IMODE(os.stat(stage).st_mode)
        seen["stage entries"] = sorted(os.listdir(stage))
        seen["object entries"] = os.listdir(path)
        seen["device"], seen["inode"] = os.stat(path).st_dev, os.stat(path).st_ino
        DATA(path)

    previous = staging.install_token_source(None)  # production tokens
    try:
        published = world.store.publish_artifact(guard, DATASET, populate, at(2_000).fresh())
    finally:
        staging.install_token_source(previous)
    pattern = re.escape(str(world.artifacts)) + r"/\.staging-[0-9a-f]{32}/object"
    assert re.fullmatch(pattern, str(seen["path"])), seen["path"]
    assert seen["stage mode"] == 0o700
    assert seen["stage entries"] == ["lock", "object"]
    assert seen["object entries"] == []
    final = os.stat(world.root / published.artifact.path)
    assert (final.st_dev, final.st_ino) == (seen["device"], seen["inode"])  # renamed, not copied
    assert not os.path.exists(os.path.dirname(str(seen["path"])))
    assert world.stages() == []
    ((stage_path,),) = world.rows("SELECT staging_path FROM leases WHERE purpose = 'staging'")
    assert str(world.root / stage_path) == os.path.dirname(str(seen["path"]))


@pytest.mark.parametrize("entry", ["symlink", "file"])
def test_same_filesystem_placement_needs_a_real_artifacts_directory(
    world: PublicationWorld, entry: str
) -> None:
    guard = world.executing(sc.slot_fixture())
    elsewhere = world.root / "elsewhere"
    elsewhere.mkdir()
    if entry == "symlink":
        world.artifacts.symlink_to(elsewhere)
    else:
        world.artifacts.write_bytes(b"")
    before = world.database_bytes()
    code = refusal_code(
        lambda: world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
    )
    assert code == "unsafe_path"
    assert list(elsewhere.iterdir()) == []
    assert world.database_bytes() == before


# --- kernel locks ----------------------------------------------------------------------------


def test_kernel_locks_hold_the_stage_and_share_recovery_only_while_staging(
    world: PublicationWorld,
) -> None:
    guard = world.executing(sc.slot_fixture())
    recovery = world.root / staging.RECOVERY_LOCK_NAME
    seen: dict[str, object] = {}
    operations: list[tuple[str, str]] = []

    def recovery_locks() -> tuple[bool, bool]:
        """Whether an exclusive, and a shared, recovery lock could be taken now."""
        return lock_is_free(recovery), lock_is_free(recovery, exclusive=False)

    def durable_observer(phase: str, operation: str, target: str) -> None:
        if phase == "before" and not world.stages():
            operations.append((operation, target))
        if phase == "before" and operation == "create_directory" and ".staging-" in target:
            if target.endswith("/object"):
                seen["stage lock at object/"] = lock_is_free(Path(target).parent / "lock")
            else:  # the stage directory itself
                seen["recovery at creation"] = recovery_locks()

    def sql_observer(phase: str, text: str) -> None:
        if phase != "before" or not world.stages():
            return
        lock = world.stages()[0] / "lock"
        if text.startswith("INSERT INTO leases"):
            seen["recovery at registration"] = recovery_locks()
        elif text.startswith("UPDATE leases SET released_at_ns"):
            seen["stage lock at commit"] = lock_is_free(lock)

    def populate(path: str) -> None:
        seen["stage lock in populate"] = lock_is_free(Path(path).parent / "lock")
        seen["recovery in populate"] = lock_is_free(recovery)
        DATA(path)

    previous_durable = durable.install_observer(durable_observer)
    previous_sql = sql.install_observer(sql_observer)
    try:
        world.store.publish_artifact(guard, DATASET, populate, at(2_000).fresh())
    finally:
        sql.install_observer(previous_sql)
        durable.install_observer(previous_durable)
    assert seen == {
        "recovery at creation": (False, True),  # held shared: recovery is excluded
        "stage lock at object/": False,
        "recovery at registration": (False, True),
        "stage lock in populate": False,
        "recovery in populate": True,  # not held while the caller populates
        "stage lock at commit": False,
    }
    # The recovery lock file was created durably (file, then root) before its first use.
    assert operations[:3] == [
        ("fsync_file", str(recovery)),
        ("fsync_dir", str(world.root)),
        ("flock_shared", str(recovery)),
    ]

    # A failing callback: its exception propagates unchanged, the stage stays, unlocked.
    class Boom(Exception):
        pass

    def failing(path: str) -> None:
        raise Boom

    with pytest.raises(Boom):
        world.store.publish_artifact(guard, DATASET, failing, at(3_000).fresh())
    (stage,) = world.stages()
    assert lock_is_free(stage / "lock")
    assert world.stage_lease(2)[2] is None


def test_kernel_locks_exclusive_recovery_makes_publishers_busy(
    world: PublicationWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publisher waits at most ``staging.RECOVERY_LOCK_TIMEOUT_S`` (5 s; shortened here)
    for the shared recovery lock, then is ``busy`` and creates nothing."""
    monkeypatch.setattr(staging, "RECOVERY_LOCK_TIMEOUT_S", 0.2)
    guard = world.executing(sc.slot_fixture())
    before = world.database_bytes()
    fd = os.open(world.root / staging.RECOVERY_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code = refusal_code(
            lambda: world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
        )
    finally:
        os.close(fd)
    assert code == "busy"
    assert world.stages() == []
    assert world.database_bytes() == before


# --- transaction-free population -------------------------------------------------------------


def test_transaction_free_population(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    other = sc.slot_fixture(name="other")
    registered: list[str] = []

    def populate(path: str) -> None:
        registered.append(str(write_locked(world.database_path)))  # no one holds it
        with RunStore.open(world.root) as second:
            slot = other.attempt_slot
            registered.append(
                second.register_one_shot(
                    other.decision, other.run, slot, other.observation_slots[0]
                )
            )
        DATA(path)

    world.store.publish_artifact(guard, DATASET, populate, at(2_000).fresh())
    assert registered == ["False", other.slot_id]
    assert (other.slot_id,) in world.rows("SELECT id FROM attempt_slots")


# --- all terminal outcomes -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["accepted", "censored", "superseded", "failed"])
def test_all_terminal_outcomes(world: PublicationWorld, name: str) -> None:
    guard, outcome = world.terminal_scenario(name)
    state = outcome.state
    delivered = len(world.delivered)
    published = world.publish_finalization(guard, outcome, (), LOGS, at(2_000))
    terminal = published.terminal
    assert (terminal.attempt_id, terminal.state) == (guard.attempt_id, state)
    assert terminal.revision == guard.revision + 1
    assert world.rows(
        "SELECT state, revision, final_artifact_id FROM attempts WHERE id = ?", (guard.attempt_id,)
    ) == [(state.value, terminal.revision, published.artifact.id)]
    document = world.document(published.artifact)
    assert document["outcome"]["state"] == state.value
    assert document["attempt"]["id"] == guard.attempt_id
    selected = document["snapshot"].get("selected_observations")
    if state in (S.ACCEPTED, S.CENSORED):
        assert len(selected) == (1 if state is S.ACCEPTED else 0)
    else:
        assert selected is None
    events = world.rows(
        "SELECT kind, attempt_id, at_ns FROM events WHERE sequence = ?", (terminal.event_sequence,)
    )
    assert events == [("attempt_finished", guard.attempt_id, terminal.finished_at_ns)]
    assert [e.sequence for e in world.delivered[delivered:]] == [terminal.event_sequence]
    assert world.rows(
        "SELECT count(*) FROM finalization_claims WHERE attempt_id = ?", (guard.attempt_id,)
    ) == [(0,)]
    assert world.rows(
        "SELECT count(*) FROM leases WHERE attempt_id = ? AND released_at_ns IS NULL",
        (guard.attempt_id,),
    ) == [(0,)]
    assert world.stages() == []
    world.check()


# --- retained dependency roots ---------------------------------------------------------------


def test_retained_dependency_roots(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    dataset = world.publish_artifact(guard, DATASET, DATA, at(1_200)).artifact
    source = world.publish_artifact(guard, ArtifactKind.SOURCE, files(src=b"x"), at(1_250)).artifact
    rooted = [("reservation-0", dataset.id), ("reservation-0", source.id)]
    assert sorted(world.rows("SELECT lease_id, artifact_id FROM leased_artifacts")) == sorted(
        rooted
    )
    guard = world.finalizing(guard, 1_300)
    pairs = [("inputs", source.id), ("inputs", dataset.id), ("dataset", dataset.id)]
    references = [Reference(role, artifact) for role, artifact in pairs]
    published = world.publish_finalization(guard, FAILED, references, LOGS, at(1_400))
    assert sorted(
        world.rows("SELECT attempt_id, role, artifact_id FROM attempt_artifacts")
    ) == sorted((guard.attempt_id, role, artifact) for role, artifact in pairs)
    # The roots survive the release of the lease they were taken under.
    assert sorted(world.rows("SELECT lease_id, artifact_id FROM leased_artifacts")) == sorted(
        rooted
    )
    assert published.terminal.finished_at_ns == 1_401
    assert world.lease("reservation-0")[2] == 1_403  # released at the commit sample
    document = world.document(published.artifact)
    dependencies = [
        (d["role"], d["artifact"]["id"], d["artifact"]["path"]) for d in document["dependencies"]
    ]
    assert dependencies == sorted(
        (role, artifact, f"artifacts/{artifact.split(':')[1]}") for role, artifact in pairs
    )
    for artifact in (dataset, source):
        assert (
            objects.verify(str(world.root / artifact.path), sync=False).tree_sha256
            == artifact.content_sha256
        )
    world.check()


# --- concurrent identical content ------------------------------------------------------------


def test_concurrent_identical_content_interleaved(world: PublicationWorld) -> None:
    first = world.executing(sc.slot_fixture(name="first"), "reservation-a")
    second = world.executing(sc.slot_fixture(name="second"), "reservation-b")
    inner: list[object] = []
    trace: list[tuple[str, str, str]] = []

    def populate(path: str) -> None:
        DATA(path)
        # The other publisher renames and commits the same bytes while this one populates.
        with RunStore.open(world.root) as other:
            inner.append(other.publish_artifact(second, DATASET, DATA, at(2_050).fresh()))

    previous = durable.install_observer(lambda *call: trace.append(call))
    try:
        outer = world.store.publish_artifact(first, DATASET, populate, at(2_000).fresh())
    finally:
        durable.install_observer(previous)
    (winner,) = inner
    renames = [
        (phase, target[-64:])
        for phase, op, target in trace
        if op == "rename_noreplace" and "/artifacts/.staging-" in target  # not open's probes
    ]
    content = outer.artifact.content_sha256
    # The inner publisher renamed; the outer one found the address taken (no "after") ...
    assert renames == [("before", content), ("after", content), ("before", content)]
    # ... and then synced the files of the existing object itself.
    address = str(world.root / outer.artifact.path)
    last_rename = max(i for i, call in enumerate(trace) if call[1] == "rename_noreplace")
    # The duplicate stays in the outer stage until cleanup: both parents are synced, the
    # stage first; the inner publisher renamed and synced artifacts/ only.
    parents = [
        t
        for phase, op, t in trace[last_rename:]
        if phase == "before" and op == "fsync_dir" and address not in t
    ]
    assert parents[:2] == [str(outer_stage(trace)), str(world.artifacts)]
    staged = [
        i
        for i, (_, op, t) in enumerate(trace)
        if op == "rename_noreplace" and "/artifacts/.staging-" in t
    ]
    cleanup = next(i for i, call in enumerate(trace) if i > staged[0] and call[1] == "remove_tree")
    inner_syncs = [
        t for phase, op, t in trace[staged[0] : cleanup] if phase == "before" and op == "fsync_dir"
    ]
    assert inner_syncs == [str(world.artifacts)]
    synced = {t for _, op, t in trace[last_rename:] if op == "fsync_file" and address in t}
    names = ("data.bin", "manifest.json", "notes/readme.txt")
    assert synced == {f"{address}/{name}" for name in names}
    assert outer.artifact.id == winner.artifact.id  # type: ignore[attr-defined]
    assert len(world.objects()) == 1 and world.stages() == []
    assert world.rows("SELECT id, verified_at_ns FROM artifacts") == [
        (outer.artifact.id, 2_051)  # the first registration's time is kept
    ]
    assert sorted(world.rows("SELECT lease_id, artifact_id FROM leased_artifacts")) == [
        ("reservation-a", outer.artifact.id),
        ("reservation-b", outer.artifact.id),
    ]
    verified = objects.verify(str(world.root / outer.artifact.path), sync=False)
    assert verified.tree_sha256 == outer.artifact.content_sha256
    assert world.rows(
        "SELECT count(*) FROM leases WHERE purpose = 'staging' AND released_at_ns IS NULL"
    ) == [(0,)]


def outer_stage(trace: list[tuple[str, str, str]]) -> str:
    """The stage of the publisher whose rename found the address taken (its last one)."""
    source = [t for phase, op, t in trace if op == "rename_noreplace" and phase == "before"][-1]
    return os.path.dirname(source.split(" -> ")[0])


def test_a_fresh_publication_syncs_the_destination_parent_once_and_not_its_cleanup(
    world: PublicationWorld,
) -> None:
    """After the rename, only artifacts/ is synced (SPEC.md section 11, step 6); the
    cleanup after the commit removes the stage without a sync (step 9)."""
    guard = world.executing(sc.slot_fixture())
    trace: list[tuple[str, str, str]] = []
    previous = durable.install_observer(lambda *call: trace.append(call))
    try:
        world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
    finally:
        durable.install_observer(previous)
    before = [(op, t) for phase, op, t in trace if phase == "before"]
    rename = next(i for i, (op, _) in enumerate(before) if op == "rename_noreplace")
    after_rename = before[rename + 1 :]
    (removal,) = [i for i, (op, _) in enumerate(after_rename) if op == "remove_tree"]
    assert after_rename[:removal] == [("fsync_dir", str(world.artifacts))]
    assert after_rename[removal + 1 :] == []
    assert world.stages() == []


def test_concurrent_identical_content_from_two_processes(world: PublicationWorld) -> None:
    guards = [
        world.executing(sc.slot_fixture(name=name), f"reservation-{name}", expires=FAR)
        for name in ("left", "right")
    ]
    root = str(world.root)
    workers = Workers(2)
    try:
        outcomes = workers.run(
            [(root, "publish_artifact", (guard, DATASET, DATA, time.time_ns)) for guard in guards]
        )
    finally:
        workers.close()
    assert [status for status, _ in outcomes] == ["ok", "ok"], outcomes
    ids = {result.artifact.id for _, result in outcomes}
    assert len(ids) == 1
    (artifact_id,) = ids
    assert len(world.objects()) == 1 and world.stages() == []
    assert world.rows("SELECT id FROM artifacts") == [(artifact_id,)]
    assert sorted(
        world.rows("SELECT lease_id FROM leased_artifacts WHERE artifact_id = ?", (artifact_id,))
    ) == [
        ("reservation-left",),
        ("reservation-right",),
    ]
    (path,) = world.objects()
    assert objects.verify(str(path), sync=False).tree_sha256 == artifact_id.rsplit("-", 1)[-1]
