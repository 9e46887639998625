"""``RunStore.recover`` on real stores (SPEC.md section 14), outside in: one test per item of
the source's list of recovery tests that a completed pass shows (expiration at the exact
boundary, live-owner preservation, expired claims, active process locks, process death
before and after publication, unregistered and complete staging directories, independent
orphans), plus the order of a pass (stages before attempts). The outcomes themselves are
``test_recovery_outcomes.py``'s.

The leftovers are made on purpose through ``world.store`` (see :mod:`recovery_world`), and
the expected values are SPEC.md section 14's, not the model's. Scenario times: reservations
at 1000 expire at ``EXPIRES`` (10000); attempts reach executing at 1103; publishers that die
read their clock from 2000, so a document they wrote finished at 2001.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import RecoveryReport
from runstore import Reference
from runstore import TerminalAttempt
from runstore import canonical
from runstore import sql
from runstore.store.publication import objects
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import files
from conformance.publication.world import snapshot_tree
from conformance.recovery.world import DEAD_TOKENS
from conformance.recovery.world import INTERRUPTED
from conformance.recovery.world import addresses
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import claims
from conformance.recovery.world import crash_artifact
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crash_populate
from conformance.recovery.world import die_publishing
from conformance.recovery.world import events
from conformance.recovery.world import leases
from conformance.recovery.world import receipt_of
from conformance.recovery.world import recover
from conformance.recovery.world import references
from conformance.recovery.world import registration_of
from conformance.recovery.world import store_path
from conformance.recovery.world import tree

S = AttemptState
ATTEMPT = ArtifactKind.ATTEMPT


# --- the exact boundary and live owners ------------------------------------------------------


def test_expiration_at_the_exact_boundary(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    before = world.database_bytes()
    # Expiry is exclusive: at expiry - 1 the owner still holds the reservation.
    assert recover(world, EXPIRES - 1) == RecoveryReport()
    assert world.database_bytes() == before
    assert attempt_row(world, guard.attempt_id)["state"] == "executing"

    report = recover(world, EXPIRES)
    terminal = receipt_of(world, guard.attempt_id, report)
    assert terminal == TerminalAttempt(
        attempt_id=guard.attempt_id,
        slot_id=guard.slot_id,
        retry_index=0,
        state=S.FAILED,
        revision=6,
        finished_at_ns=EXPIRES,
        event_sequence=terminal.event_sequence,
    )
    assert report == RecoveryReport(terminals=(terminal,))
    # Moved to finalizing at t (no claim key), then failed at t.
    history = [
        (kind, at_ns, payload) for _, kind, at_ns, payload in events(world, guard.attempt_id)
    ]
    assert history[-2:] == [
        ("attempt_finalizing", EXPIRES, {"from": "executing", "revision": 5, "to": "finalizing"}),
        (
            "attempt_finished",
            EXPIRES,
            {
                "details": {"cause": "reservation_expired", "interrupted_state": "executing"},
                "failure_code": INTERRUPTED,
                "from": "finalizing",
                "revision": 6,
                "to": "failed",
            },
        ),
    ]
    assert leases(world, guard.attempt_id) == {"reservation-0": EXPIRES}
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.EXECUTING, EXPIRES)


def test_live_owner_preservation(world: PublicationWorld) -> None:
    expired = world.executing(sc.slot_fixture(name="expired"), "reservation-0")
    live = world.executing(sc.slot_fixture(name="live"), "reservation-1", expires=50_000)
    live = world.finalizing(live, 1_500)
    orphan = crash_finalization(world, live, Censored(reason="budget"))
    (stage,) = world.stages()
    kept = (
        attempt_row(world, live.attempt_id),
        events(world, live.attempt_id),
        leases(world, live.attempt_id),
        snapshot_tree(stage),
        snapshot_tree(orphan),
    )

    report = recover(world, EXPIRES)
    # Only the expired attempt is touched; the live one, its free stage with a live lease
    # and its orphan are its owner's: neither changed nor listed.
    assert [t.attempt_id for t in report.terminals] == [expired.attempt_id]
    assert report == RecoveryReport(terminals=report.terminals)
    assert kept == (
        attempt_row(world, live.attempt_id),
        events(world, live.attempt_id),
        leases(world, live.attempt_id),
        snapshot_tree(stage),
        snapshot_tree(orphan),
    )
    assert world.rows("SELECT count(*) FROM artifacts WHERE path = ?", (store_path(orphan),)) == [
        (0,)
    ]

    # Once that owner's lease expires, the same orphan is its outcome.
    later = recover(world, 50_000)
    assert later.quarantined_stages == (store_path(stage),)
    (terminal,) = later.terminals
    assert (terminal.attempt_id, terminal.state, terminal.finished_at_ns) == (
        live.attempt_id,
        S.CENSORED,
        2_001,
    )


def test_expired_claims(world: PublicationWorld) -> None:
    guard, published = world.ready_to_accept(sc.slot_fixture(), expires=20_000, claim_expires=5_000)
    staging_before = {k: v for k, v in leases(world, guard.attempt_id).items() if "staging" in k}
    assert recover(world, 4_999) == RecoveryReport()

    report = recover(world, 5_000)
    terminal = receipt_of(world, guard.attempt_id, report)
    assert (terminal.state, terminal.revision, terminal.finished_at_ns) == (S.FAILED, 6, 5_000)
    # Already finalizing (claimed): no second finalizing event, cause claim_expired.
    assert [kind for _, kind, _, _ in events(world, guard.attempt_id)][-2:] == [
        "observation_registered",
        "attempt_finished",
    ]
    check_interrupted(world, guard.attempt_id, "claim_expired", S.FINALIZING, 5_000)
    assert claims(world) == []
    assert leases(world, guard.attempt_id) == {
        "reservation-0": 5_000,
        "claim-0": 5_000,
        **staging_before,
    }
    assert references(world, guard.attempt_id) == [("leased_root", published.artifact.id)]


# --- stages ------------------------------------------------------------------------------------

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_active_process_locks(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")
    held = crash_populate(world, guard, start=2_000)
    orphan = crash_finalization(world, guard, outcome, start=2_100)
    (other,) = [stage for stage in world.stages() if stage != held]
    contents = tree(held), tree(other), tree(orphan)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(held / "lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        before = world.database_bytes()
        # Far past expiry, the held stage defers its attempt: nothing of it is touched,
        # neither its other (free, expired) stage nor its orphan, which is not listed.
        report = recover(world, 20_000)
        assert report == RecoveryReport(busy_stages=(store_path(held),))
        assert not report.changed
        assert world.database_bytes() == before
        assert world.stages() == sorted([held, other])
        assert (tree(held), tree(other), tree(orphan)) == contents
        assert attempt_row(world, guard.attempt_id)["state"] == "finalizing"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)

    # Released: both stages are quarantined intact and the orphan is the outcome.
    report = recover(world, 20_000)
    assert report.quarantined_stages == tuple(sorted([store_path(held), store_path(other)]))
    assert report.busy_stages == () and report.rejected_artifacts == ()
    assert world.stages() == []
    holding = world.artifacts / ".quarantine"
    assert (tree(holding / held.name), tree(holding / other.name)) == contents[:2]
    terminal = receipt_of(world, guard.attempt_id, report)
    assert (terminal.state, terminal.finished_at_ns) == (S.CENSORED, 2_101)
    assert attempt_row(world, guard.attempt_id)["final_artifact_id"] == (
        f"run-store-v1:{orphan.name}"
    )
    assert set(leases(world, guard.attempt_id).values()) == {20_000}


def test_stages_are_settled_after_attempts(world: PublicationWorld) -> None:
    """SPEC.md section 14, "Order of a pass": stages are judged after the attempts'
    commits, so the stage of an attempt the pass fails is quarantined by the same pass
    (its lease released by the terminal commit) and a second pass has nothing left."""
    guard = world.executing(sc.slot_fixture())
    stage = crash_populate(world, guard)
    lease_id = "staging-00000000000000000000000000000001"
    seen: list[tuple[bool, bool, object]] = []

    def observer(phase: str, statement: str) -> None:
        if phase == "before" and statement.startswith("UPDATE attempts") and not seen:
            moved = world.artifacts / ".quarantine" / stage.name
            seen.append((stage.exists(), moved.exists(), leases(world, guard.attempt_id)))

    previous = sql.install_observer(observer)
    try:
        report = recover(world, EXPIRES)
    finally:
        sql.install_observer(previous)
    assert report.quarantined_stages == (store_path(stage),)
    assert seen == [(True, False, {"reservation-0": None, lease_id: None})]
    assert not stage.exists()
    assert recover(world, EXPIRES + 1).changed is False


def test_process_death_before_publication(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")
    die_publishing(world, guard, outcome, crash_at=0)
    (stage,) = world.stages()
    lease_id = f"staging-{DEAD_TOKENS:032x}"
    assert stage.name == f".staging-{DEAD_TOKENS:032x}"
    assert leases(world, guard.attempt_id)[lease_id] is None
    contents = tree(stage)
    assert "object/data.bin" in contents

    report = recover(world, EXPIRES)
    assert report.quarantined_stages == (store_path(stage),)
    assert (report.imported_artifacts, report.rejected_artifacts, report.busy_stages) == (
        (),
        (),
        (),
    )
    # Moved intact, its lease released at its judging time.
    assert not stage.exists()
    assert tree(world.artifacts / ".quarantine" / stage.name) == contents
    assert leases(world, guard.attempt_id) == {"reservation-0": EXPIRES, lease_id: EXPIRES}
    receipt_of(world, guard.attempt_id, report)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)


def test_process_death_after_publication(world: PublicationWorld) -> None:
    guard, published = world.ready_to_accept(sc.slot_fixture())
    dependency = [Reference("input", published.artifact.id)]
    die_publishing(world, guard, Accepted(), dependency, crash_at=3)
    (orphan,) = addresses(world, ATTEMPT)
    (stage,) = world.stages()
    document = canonical.decode_object((orphan / "outcome.json").read_bytes())
    assert document["finished_at_ns"] == "2001"

    report = recover(world, EXPIRES)
    terminal = receipt_of(world, guard.attempt_id, report)
    assert report == RecoveryReport(terminals=(terminal,), quarantined_stages=(store_path(stage),))
    # The orphan's outcome, finish time and object; the claim deleted, leases released.
    assert (terminal.state, terminal.finished_at_ns, terminal.revision) == (S.ACCEPTED, 2_001, 6)
    row = attempt_row(world, guard.attempt_id)
    assert row == {
        "state": "accepted",
        "revision": 6,
        "updated_at_ns": 2_001,
        "finished_at_ns": 2_001,
        "failure_code": None,
        "censor_reason": None,
        "final_artifact_id": f"run-store-v1:{orphan.name}",
    }
    (*_, (_, kind, at_ns, payload)) = events(world, guard.attempt_id)
    assert (kind, at_ns, payload) == (
        "attempt_finished",
        2_001,
        {"from": "finalizing", "revision": 6, "to": "accepted"},
    )
    assert claims(world) == []
    released = leases(world, guard.attempt_id)
    assert released["reservation-0"] == released["claim-0"] == EXPIRES
    assert released[f"staging-{DEAD_TOKENS:032x}"] == EXPIRES
    assert references(world, guard.attempt_id) == [r.pair for r in dependency]
    expected = registration_of(orphan, ATTEMPT, EXPIRES)
    assert world.rows(
        "SELECT id, content_sha256, manifest_sha256, verified_at_ns FROM artifacts WHERE id = ?",
        (expected.id,),
    ) == [(expected.id, expected.content_sha256, expected.manifest_sha256, EXPIRES)]


@pytest.mark.parametrize("lock", ["with-lock-file", "without-lock-file"])
def test_unregistered_staging_directory(world: PublicationWorld, lock: str) -> None:
    stage = world.artifacts / ".staging-x"
    (stage / "object").mkdir(parents=True)
    (stage / "object" / "a.bin").write_bytes(b"a")
    if lock == "with-lock-file":
        (stage / "lock").write_bytes(b"")
    contents = tree(stage)
    before = world.database_bytes()

    report = recover(world, 5_000)
    assert report == RecoveryReport(quarantined_stages=("artifacts/.staging-x",))
    assert report.changed
    assert not stage.exists()
    assert tree(world.artifacts / ".quarantine" / ".staging-x") == contents
    assert world.database_bytes() == before


def test_complete_staging_directory_is_never_publication(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome)
    (stage,) = world.stages()
    # The publisher died after completing object/ and before renaming it.
    os.rename(orphan, stage / "object")

    report = recover(world, EXPIRES)
    assert report.quarantined_stages == (store_path(stage),)
    assert report.rejected_artifacts == () and report.imported_artifacts == ()
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)
    assert attempt_row(world, guard.attempt_id)["final_artifact_id"] != (
        f"run-store-v1:{orphan.name}"
    )
    kept = world.artifacts / ".quarantine" / stage.name / "object"
    assert objects.verify(str(kept), sync=False).tree_sha256 == orphan.name.split("-", 1)[1]
    assert not orphan.exists()


def test_independent_orphans(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    result = files(**{"result.json": b'{"score":1}'})
    observation = crash_artifact(world, guard, ArtifactKind.OBSERVATION, result, start=2_000)
    dataset = crash_artifact(world, guard, ArtifactKind.DATASET, DATA, start=2_100, crash_at=3)
    row = attempt_row(world, guard.attempt_id)

    # The owner is live: its stages are left; the orphans become artifact rows only.
    report = recover(world, 5_000)
    expected = (
        registration_of(observation, ArtifactKind.OBSERVATION, 5_000),
        registration_of(dataset, ArtifactKind.DATASET, 5_000),
    )
    assert report == RecoveryReport(imported_artifacts=expected)
    assert sorted(world.artifact_rows()) == sorted(
        (a.id, a.kind.value, a.path, a.content_sha256, a.manifest_sha256) for a in expected
    )
    for table in (
        "observations",
        "selected_observations",
        "observation_artifacts",
        "leased_artifacts",
        "attempt_artifacts",
    ):
        assert world.rows(f"SELECT count(*) FROM {table}") == [(0,)], table
    assert attempt_row(world, guard.attempt_id) == row
    assert len(world.stages()) == 2
