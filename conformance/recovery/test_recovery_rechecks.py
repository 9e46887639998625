"""What recovery rechecks under the write lock when an owner acts during the pass (SPEC.md
section 14.2), one test per rule. Recovery's transactions are short and none is open while
it reads, syncs or renames, so an owner whose clock runs behind the recoverer's (its lease
still live by its own clock) can write between them:

- an attempt whose revision changed since the pass found it (its owner moved it to
  finalizing) is skipped, and the next pass judges it afresh (step 4);
- an import whose candidate no longer passes every database check when its transaction
  rechecks it (the owner registered an observation, so the records no longer match the
  document) is refused with ``snapshot_changed``, committing nothing; the next pass
  rejects that candidate and fails the attempt (step 4, import);
- recovery's own failure whose document no longer describes the records when it commits
  is refused with ``snapshot_changed`` too, whichever way the new document's bytes sort
  against the published one's (step 4 d);
- an object registered meanwhile by its owner is left with its owner's row, and the
  objects after it are still registered (step 6).

Rules of this file: the owner acts through its own ``RunStore`` handle from an observer of
one of the two seams (``runstore.durable``'s or ``runstore.sql``'s), at the one instant
named by each test, never while recovery holds the write lock; its clock reads
``EXPIRES - 1`` (recovery's ``EXPIRES``), so its reservation is live by its own clock and
expired by the recoverer's. Expected values are SPEC.md's, not the model's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Censored
from runstore import Observation
from runstore import OwnedAttempt
from runstore import RunStore
from runstore import durable
from runstore import recovery_report as codes
from runstore import sql
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import files
from conformance.publication.world import refusal_code
from conformance.recovery.world import addresses
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import crash_artifact
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crashing_clock
from conformance.recovery.world import events
from conformance.recovery.world import recover
from conformance.recovery.world import registration_of
from conformance.recovery.world import store_path
from conformance.recovery.world import terminal_events

S = AttemptState
BEHIND = EXPIRES - 1
"""The owner's clock during the pass: its reservation (expiring at ``EXPIRES``) is live."""
SCAN = "SELECT id FROM attempts WHERE state NOT IN"
"""The start of the statement that finds the nonterminal attempts (recover_tx)."""


@pytest.fixture
def owner(world: PublicationWorld) -> Iterator[RunStore]:
    """The owner's own handle on the store."""
    handle = RunStore.open(world.root)
    yield handle
    handle.close()


@contextmanager
def on_durable(
    operation: str, match: Callable[[str], bool], act: Callable[[], object]
) -> Iterator[list[str]]:
    """Call ``act`` once, before the first ``operation`` of the durability seam whose
    target ``match`` accepts; yields the list of targets it acted at."""
    done: list[str] = []

    def observer(phase: str, name: str, target: str) -> None:
        if phase == "before" and name == operation and match(target) and not done:
            done.append(target)
            act()

    previous = durable.install_observer(observer)
    try:
        yield done
    finally:
        durable.install_observer(previous)


@contextmanager
def before_the_transaction_after(prefix: str, act: Callable[[], object]) -> Iterator[list[bool]]:
    """Call ``act`` once, before the first ``BEGIN IMMEDIATE`` that follows a statement
    starting with ``prefix`` (so between two of recovery's transactions)."""
    seen: list[bool] = []
    done: list[bool] = []

    def observer(phase: str, statement: str) -> None:
        if phase != "before" or done:
            return
        if statement.startswith(prefix):
            seen.append(True)
        elif seen and statement == "BEGIN IMMEDIATE":
            done.append(True)
            act()

    previous = sql.install_observer(observer)
    try:
        yield done
    finally:
        sql.install_observer(previous)


def publish_observations(
    world: PublicationWorld, guard: OwnedAttempt, count: int
) -> list[tuple[Observation, ArtifactRegistration]]:
    """``count`` observation artifacts the owner published (registered, rooted under its
    reservation), and the observations of its one slot it may register with them, each
    pair in observation id order."""
    fixture = sc.slot_fixture()
    pairs = []
    for n in range(1, count + 1):
        payload = files(**{"r.json": b'{"n":%d}' % n})
        published = world.store.publish_artifact(
            guard, ArtifactKind.OBSERVATION, payload, crashing_clock(1_600 + 10 * n, 99)
        )
        observation = sc.observation(fixture.observation_slots[0], guard, score=n)
        pairs.append((observation, published.artifact))
    return sorted(pairs, key=lambda pair: pair[0].id)


def register(
    store: RunStore, guard: OwnedAttempt, observation: Observation, artifact: ArtifactRegistration
) -> None:
    """The owner registers ``observation`` (not selected) by its clock, ``BEHIND``."""
    store.register_observation(guard, observation, artifact, (), select=False, now_ns=BEHIND)


def test_an_attempt_whose_revision_changed_since_the_pass_found_it_is_skipped(
    world: PublicationWorld, owner: RunStore
) -> None:
    """SPEC.md section 14.2 step 4: each transaction rechecks that the attempt is still
    recoverable *with the same state and revision*. The owner moves its executing attempt
    to finalizing between the pass finding it and the pass moving it: the pass commits
    nothing for it (no second move, no failure), and the next pass fails it, recording
    the state it then finds."""
    guard = world.executing(sc.slot_fixture())
    moved: list[OwnedAttempt] = []

    def advance() -> None:
        moved.append(owner.advance(guard, S.FINALIZING, BEHIND))

    with before_the_transaction_after(SCAN, advance) as done:
        report = recover(world, EXPIRES)
    assert done and moved
    assert report.terminals == ()
    row = attempt_row(world, guard.attempt_id)
    assert (row["state"], row["revision"], row["updated_at_ns"]) == ("finalizing", 5, BEHIND)
    kinds = [kind for _, kind, _, _ in events(world, guard.attempt_id)]
    assert kinds.count("attempt_finalizing") == 1 and "attempt_finished" not in kinds

    (terminal,) = recover(world, EXPIRES).terminals
    assert terminal.attempt_id == guard.attempt_id
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)


def test_an_import_whose_candidate_no_longer_passes_is_snapshot_changed(
    world: PublicationWorld, owner: RunStore
) -> None:
    """SPEC.md section 14.2 step 4, import: the import's transaction rechecks that the
    candidate still passes every database check. The owner registers an observation
    while recovery syncs the one passing candidate, so the records no longer match its
    document: the import is refused with ``snapshot_changed`` and commits nothing; the
    next pass rejects the candidate (``evidence_mismatch``) and fails the attempt."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_500)
    ((observation, artifact),) = publish_observations(world, guard, 1)
    orphan = crash_finalization(world, guard, Censored(reason="budget"))

    def observe() -> None:
        register(owner, guard, observation, artifact)

    inside = f"{orphan}/"
    with on_durable("fsync_file", lambda target: target.startswith(inside), observe) as done:
        assert refusal_code(lambda: recover(world, EXPIRES)) == "snapshot_changed"
    assert done
    assert attempt_row(world, guard.attempt_id)["state"] == "finalizing"
    assert terminal_events(world, guard.attempt_id) == []
    assert world.rows("SELECT count(*) FROM artifacts WHERE path = ?", (store_path(orphan),)) == [
        (0,)
    ]

    report = recover(world, EXPIRES)
    assert [(r.path, r.code) for r in report.rejected_artifacts] == [
        (store_path(orphan), codes.EVIDENCE_MISMATCH)
    ]
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)


@pytest.mark.parametrize("direction", ["sorting-after", "sorting-before"])
def test_a_recovery_failure_whose_records_changed_before_its_commit_is_snapshot_changed(
    world: PublicationWorld, owner: RunStore, direction: str
) -> None:
    """SPEC.md section 14.2 step 4 (d): the failure's transaction rechecks that its
    document still describes the records (``snapshot_changed`` otherwise). The owner
    registers an observation while recovery publishes the failure: its first observation
    (the new document's bytes sort after the published one's: an entry where the list
    ended) or one after an earlier one (they sort before: a comma where the list ended).
    Nothing is committed; the next pass rejects the stale document and commits a failure
    whose document lists the observations."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_500)
    pairs = publish_observations(world, guard, 2)
    if direction == "sorting-before":
        register(world.store, guard, *pairs[0])
        late = pairs[1]
    else:
        late = pairs[0]

    def observe() -> None:
        register(owner, guard, *late)

    def into_place(target: str) -> bool:
        return f"{world.artifacts}/attempt-" in target

    with on_durable("rename_noreplace", into_place, observe) as done:
        assert refusal_code(lambda: recover(world, EXPIRES)) == "snapshot_changed"
    assert done
    assert attempt_row(world, guard.attempt_id)["state"] == "finalizing"
    (stale,) = addresses(world, ArtifactKind.ATTEMPT)

    report = recover(world, EXPIRES)
    assert [(r.path, r.code) for r in report.rejected_artifacts] == [
        (store_path(stale), codes.EVIDENCE_MISMATCH)
    ]
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)
    final = attempt_row(world, guard.attempt_id)["final_artifact_id"].removeprefix("run-store-v1:")
    registered = pairs if direction == "sorting-before" else [late]
    assert produced(world.artifacts / final) == [observation.id for observation, _ in registered]


def produced(final: Path) -> list[object]:
    """The observation ids the snapshot of the final artifact's document lists."""
    snapshot = json.loads((final / "outcome.json").read_bytes())["snapshot"]
    return [entry["observation"]["id"] for entry in snapshot["produced_observations"]]


def test_an_object_its_owner_registered_meanwhile_is_left_and_the_next_still_registered(
    world: PublicationWorld, owner: RunStore
) -> None:
    """SPEC.md section 14.2 step 6: the verified independent orphans are registered in
    one transaction; one that got its row meanwhile (its owner registered it, here as an
    observation's directory, after recovery verified it) keeps its owner's row and is not
    listed, and the orphans after it in name order are registered and listed all the
    same."""
    guard = world.executing(sc.slot_fixture())
    orphans = sorted(
        crash_artifact(world, guard, ArtifactKind.OBSERVATION, files(r=data), start=start)
        for data, start in ((b"one", 2_000), (b"two", 2_100))
    )
    first = registration_of(orphans[0], ArtifactKind.OBSERVATION, 4_000)
    observation = sc.observation(sc.slot_fixture().observation_slots[0], guard)
    synced: list[str] = []

    def observe() -> None:
        owner.register_observation(guard, observation, first, (), select=False, now_ns=4_000)

    def after_both(target: str) -> bool:
        synced.append(target)
        return target == str(world.artifacts) and all(str(p) in synced for p in orphans)

    with on_durable("fsync_dir", after_both, observe) as done:
        report = recover(world, 5_000)
    assert done
    second = registration_of(orphans[1], ArtifactKind.OBSERVATION, 5_000)
    assert report.imported_artifacts == (second,)
    rows = world.rows("SELECT path, verified_at_ns FROM artifacts WHERE kind = 'observation'")
    assert sorted(rows) == sorted([(first.path, 4_000), (second.path, 5_000)])
