"""``RunStore.recover``'s outcomes on real stores (SPEC.md section 14), outside in: the
source's "all terminal outcomes" (each imported from a dead publisher's orphan with its own
state, finish time and object) and "preserved observations", the recovered failure's exact
outcome document, and a second pass that adds nothing.

The leftovers are made on purpose through ``world.store`` (see :mod:`recovery_world`), and
the expected values are SPEC.md section 14's, not the model's. Scenario times: reservations
at 1000 expire at ``EXPIRES`` (10000); attempts reach executing at 1103; publishers that die
read their clock from 2000, so a document they wrote finished at 2001.
"""

from __future__ import annotations

import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import RecoveryReport
from runstore import canonical
from runstore.store.publication import objects
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.publication.world import snapshot_tree
from conformance.recovery.world import INTERRUPTED
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import claims
from conformance.recovery.world import crash_artifact
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import entry
from conformance.recovery.world import events
from conformance.recovery.world import interrupted
from conformance.recovery.world import leases
from conformance.recovery.world import receipt_of
from conformance.recovery.world import recover
from conformance.recovery.world import references
from conformance.recovery.world import store_path

S = AttemptState


# --- every terminal outcome imported ---------------------------------------------------------

EXPECTED_ROWS = {
    "accepted": (None, None, {}),
    "censored": (None, "budget", {"reason": "budget"}),
    "failed": (
        "exit_status",
        None,
        {"failure_code": "exit_status", "details": {"status": 3}},
    ),
    "superseded": (None, None, {}),
}


# Every outcome dying after the rename (sample 3); one also dying inside the final
# transaction (sample 4), which leaves the same orphan.
@pytest.mark.parametrize(
    ("name", "crash_at"), [(name, 3) for name in sorted(EXPECTED_ROWS)] + [("accepted", 4)]
)
def test_all_terminal_outcomes_are_imported(
    world: PublicationWorld, name: str, crash_at: int
) -> None:
    guard, outcome = world.terminal_scenario(name)
    orphan = crash_finalization(world, guard, outcome, crash_at=crash_at)

    report = recover(world, EXPIRES)
    terminal = receipt_of(world, guard.attempt_id, report)
    assert (terminal.state.value, terminal.revision, terminal.finished_at_ns) == (
        name,
        guard.revision + 1,
        2_001,
    )
    failure_code, reason, extra = EXPECTED_ROWS[name]
    row = attempt_row(world, guard.attempt_id)
    assert (row["state"], row["failure_code"], row["censor_reason"]) == (name, failure_code, reason)
    assert row["final_artifact_id"] == f"run-store-v1:{orphan.name}"
    (*_, (_, kind, at_ns, payload)) = events(world, guard.attempt_id)
    assert (kind, at_ns) == ("attempt_finished", 2_001)
    assert payload == {"from": "finalizing", "revision": guard.revision + 1, "to": name, **extra}
    assert all(released is not None for released in leases(world, guard.attempt_id).values())
    assert report.rejected_artifacts == ()
    if name == "superseded":
        # The winner (attempt 0, holding the claim) expired too: it fails, interrupted.
        (winner,) = [t for t in report.terminals if t.attempt_id != guard.attempt_id]
        assert (winner.retry_index, winner.state) == (0, S.FAILED)
        assert claims(world) == []


def test_preserved_observations(world: PublicationWorld) -> None:
    guard, published = world.ready_to_accept(sc.slot_fixture())
    tables = ("observations", "selected_observations")
    before = {table: world.rows(f"SELECT * FROM {table}") for table in tables}
    assert all(before.values())

    report = recover(world, EXPIRES)
    receipt_of(world, guard.attempt_id, report)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)
    assert {table: world.rows(f"SELECT * FROM {table}") for table in tables} == before
    directory = world.root / published.artifact.path
    assert objects.verify(str(directory), sync=False).tree_sha256 == (
        published.artifact.content_sha256
    )
    # The failure's evidence lists the observation it produced, and (failed) no selection.
    final = attempt_row(world, guard.attempt_id)["final_artifact_id"].removeprefix("run-store-v1:")
    snapshot = canonical.decode_object((world.artifacts / final / "outcome.json").read_bytes())[
        "snapshot"
    ]
    assert isinstance(snapshot, dict) and "selected_observations" not in snapshot
    (produced,) = snapshot["produced_observations"]  # type: ignore[misc]
    assert produced["artifact"] == entry(published.artifact)


def test_the_recovered_failure_outcome_document(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    dataset = world.publish_artifact(guard, ArtifactKind.DATASET, DATA, at(1_200)).artifact
    source = world.publish_artifact(
        guard, ArtifactKind.SOURCE, files(**{"main.py": b"print(1)\n"}), at(1_300)
    ).artifact

    report = recover(world, EXPIRES)
    receipt_of(world, guard.attempt_id, report)
    final = attempt_row(world, guard.attempt_id)["final_artifact_id"].removeprefix("run-store-v1:")
    data = (world.artifacts / final / "outcome.json").read_bytes()
    document = canonical.decode_object(data)
    assert canonical.encode(document) == data
    expected_outcome = interrupted("reservation_expired", S.EXECUTING)
    assert (expected_outcome.code, expected_outcome.details) == (
        INTERRUPTED,
        {"cause": "reservation_expired", "interrupted_state": "executing"},
    )
    assert document["outcome"] == {
        "details": {"cause": "reservation_expired", "interrupted_state": "executing"},
        "failure_code": INTERRUPTED,
        "state": "failed",
    }
    roots = sorted([dataset, source], key=lambda a: a.id)
    assert document["dependencies"] == [
        {"artifact": entry(a), "role": "leased_root"} for a in roots
    ]
    assert document["attempt"] == {
        "finalizing_revision": 5,
        "id": guard.attempt_id,
        "retry_index": 0,
        "slot_id": guard.slot_id,
    }
    assert (document["started_at_ns"], document["finished_at_ns"]) == ("1000", str(EXPIRES))
    assert document["run_store_version"] == 1
    assert references(world, guard.attempt_id) == [("leased_root", a.id) for a in roots]


def test_a_second_pass_adds_nothing(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")
    crash_finalization(world, guard, outcome)
    other = world.executing(sc.slot_fixture(name="other"), "reservation-9")
    dataset = crash_artifact(world, other, ArtifactKind.DATASET, DATA, start=3_000)
    broken = crash_artifact(world, other, ArtifactKind.SOURCE, files(a=b"a"), start=3_100)
    (broken / "a").chmod(0o644)
    (broken / "a").write_bytes(b"b")
    first = recover(world, EXPIRES)
    assert first.changed
    assert len(first.terminals) == 2 and len(first.quarantined_stages) == 3
    assert [a.path for a in first.imported_artifacts] == [store_path(dataset)]
    assert [(r.path, r.code) for r in first.rejected_artifacts] == [(store_path(broken), "corrupt")]
    before, disk = world.database_bytes(), snapshot_tree(world.artifacts)

    second = recover(world, EXPIRES + 1_000)
    assert second == RecoveryReport(rejected_artifacts=first.rejected_artifacts)
    assert not second.changed
    assert world.database_bytes() == before
    assert snapshot_tree(world.artifacts) == disk
