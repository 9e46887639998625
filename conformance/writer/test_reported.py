"""The eight writer defects a new user reported (issue 9), each reproduced as they met it,
outside in, on a fresh store and on the model.

Each test is named after the observation it pins; before the corrections each of them
failed (the first seven as the issue describes; the eighth because ``record_json`` held
only the identity document). The generic, generated versions live elsewhere
(``test_arguments.py`` for argument types, ``test_stateful.py`` for the lockstep of both
ways into finalizing); these keep the reported cases readable.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import CommittedEvent
from runstore import Failed
from runstore import FirstAttempt
from runstore import Next
from runstore import ObservationReceipt
from runstore import Reference
from runstore import RunStoreError
from runstore import canonical
from runstore import model as m
from runstore import rules
from runstore.testing import fixtures as sc

from conformance.writer.world import World

S = AttemptState


def files(world: World) -> dict[str, bytes]:
    """The bytes of the database and its WAL (what "byte-for-byte unchanged" compares)."""
    root = Path(world.store.root)
    return {
        name: (root / name).read_bytes()
        for name in ("run.sqlite3", "run.sqlite3-wal")
        if (root / name).exists()
    }


def refused_untouched(world: World, call: Any, code: str = "invalid_record") -> None:
    """``call`` is refused with ``code`` and the store's files are byte for byte as
    before (no transaction was even opened)."""
    before = files(world)
    with pytest.raises(RunStoreError) as info:
        call()
    assert info.value.code == code, info.value
    assert files(world) == before


# --- 1. retry authorization fails closed ------------------------------------------------------


@pytest.mark.parametrize("authorization", [None, object(), "next", True, 1])
def test_1_an_unknown_authorization_allocates_no_retry(world: World, authorization: Any) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    world.start(fixture, "reservation-0")
    lease = sc.lease("reservation-1", 10_000)
    refused_untouched(world, lambda: world.store.reserve(fixture.slot_id, authorization, lease, 2))
    state = world.model.state
    assert m.reserve(state, fixture.slot_id, authorization, lease, 2)[0] is state
    assert world.rows("SELECT retry_index FROM attempts") == [(0,)]
    # The shared rule fails closed on its own, behind the argument check.
    refusal = rules.authorization_refusal(authorization, 1)
    assert refusal is not None and refusal.code == "invalid_record"
    world.check()


# --- 2. ill-typed arguments stay inside the error hierarchy -----------------------------------


def test_2_ill_typed_arguments_are_typed_refusals(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = world.start(fixture, "reservation-0")
    store = world.store
    refused_untouched(world, lambda: store.advance(guard, "materializing", 1_100))  # type: ignore[arg-type]
    refused_untouched(world, lambda: store.advance(guard, S.MATERIALIZING, 110.5))  # type: ignore[arg-type]
    refused_untouched(world, lambda: store.advance(guard, S.MATERIALIZING, True))
    lease = sc.lease("reservation-1", 10_000)
    refused_untouched(world, lambda: store.reserve(fixture.slot_id, FirstAttempt(), lease, 1.0))  # type: ignore[arg-type]
    claimed = world.claim(world.walk(guard, sc.EXECUTION_PATH, 1_100), "claim-0", 1_200).attempt
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0")
    refused_untouched(
        world,
        lambda: store.commit_finalization(claimed, None, final, (), 1_300, 1_300),  # type: ignore[arg-type]
    )
    refused_untouched(
        world,
        lambda: store.commit_finalization(claimed, Accepted(), final, [["a", final.id]], 1, 2),  # type: ignore[list-item]
    )
    # Out of range stays out_of_range (checked after the types), also untouched.
    refused_untouched(world, lambda: store.advance(claimed, S.FAILED, 2**63), "out_of_range")
    world.check()


# --- 3. a raising subscriber cannot cost a committed result -----------------------------------


def test_3_reserve_returns_its_guard_although_a_subscriber_raises(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)

    def broken(event: CommittedEvent) -> None:
        raise ValueError("a consumer bug")

    world.store.subscribe(broken)
    guard = world.start(fixture, "reservation-0")
    assert (guard.retry_index, guard.state) == (0, S.RESERVED)
    assert world.store.subscriber_failures == 1
    # Repeating the call is what a user did when the guard was lost: now it is not needed,
    # and the slot still has exactly one attempt.
    assert world.rows("SELECT retry_index, state FROM attempts") == [(0, "reserved")]
    world.check()


# --- 4. failure finalizes without contending for the claim -------------------------------------


def test_4_a_failing_attempt_leaves_the_claim_to_a_successful_retry(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    a = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    c = world.walk(
        world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010),
        sc.EXECUTION_PATH,
        1_150,
    )
    a = world.advance(a, S.FINALIZING, 1_200)  # A enters finalizing first, without a claim
    c = world.claim(c, "claim-1", 1_250).attempt
    assert c.claim_lease_id == "claim-1"
    world.finish(a, Failed(code="worker_exit", details={}), "attempt-0", 1_300)
    world.publish(c, fixture.observation_slots[0], "result-1", 1_350)
    assert world.finish(c, Accepted(), "attempt-1", 1_400).state is S.ACCEPTED
    assert world.rows("SELECT count(*) FROM attempts WHERE state = 'accepted'") == [(1,)]
    world.check()


# --- 5. references are history -------------------------------------------------------------


def test_5_references_cannot_be_rewritten_and_final_artifacts_are_one_per_attempt(
    world: World,
) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200).attempt
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_300)
    result = sc.artifact(ArtifactKind.OBSERVATION, "result-0").id
    failed = Failed(code="oom", details={})
    world.finish(guard, failed, "attempt-0", 1_400, [Reference("inputs", result)])
    other = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=2_000)
    other = world.advance(other, S.FINALIZING, 2_100)
    world.refused(
        "registration_conflict",
        lambda: world.finish(other, Failed(code="oom", details={}), "attempt-0", 2_200),
    )
    connection = sqlite3.connect(world.database_path)
    try:
        connection.execute("PRAGMA recursive_triggers = ON")
        for statement in (
            "DELETE FROM attempt_artifacts",
            "UPDATE attempt_artifacts SET role = 'changed'",
            f"INSERT INTO attempt_artifacts VALUES ('{guard.attempt_id}', 'late', '{result}')",
            "UPDATE observations SET artifact_id = NULL",
        ):
            with pytest.raises(sqlite3.IntegrityError):
                connection.execute(statement)
    finally:
        connection.close()
    world.check()


# --- 6. the finish time is apart from the commit time ---------------------------------------


def test_6_the_finish_time_is_immutable_and_leases_release_at_commit(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.advance(guard, S.FINALIZING, 1_200)
    receipt = world.finish(guard, Failed(code="oom", details={}), "a", 1_900, finished=1_500)
    assert receipt.finished_at_ns == 1_500
    assert world.rows("SELECT updated_at_ns, finished_at_ns FROM attempts") == [(1_500, 1_500)]
    assert world.rows("SELECT max(at_ns) FROM events") == [(1_500,)]
    assert world.rows("SELECT released_at_ns FROM leases") == [(1_900,)]
    world.check()


def test_6_a_finish_time_before_the_last_transition_is_clamped_and_leases_checked_at_commit(
    world: World,
) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = world.walk(
        world.start(fixture, "reservation-0", expires=2_000), sc.EXECUTION_PATH, 1_100
    )
    guard = world.advance(guard, S.FINALIZING, 1_200)
    # The reservation expires at 2000: a commit at 2000 is refused although it finished
    # at 1900; a finish time behind the last transition is clamped to it.
    outcome = Failed(code="oom", details={})
    world.refused("lease_expired", lambda: world.finish(guard, outcome, "a", 2_000, finished=1_900))
    receipt = world.finish(guard, outcome, "a", 1_999, finished=900)
    assert receipt.finished_at_ns == 1_200
    world.check()


# --- 7. the observation transaction --------------------------------------------------------


def test_7_an_observation_has_references_an_event_and_says_whether_it_selected(
    world: World,
) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200).attempt
    first = sc.observation(member, guard, score=1)
    own = sc.artifact(ArtifactKind.OBSERVATION, "result-a")
    receipt = world.observe(guard, first, own, True, 1_300, [Reference("metrics", own.id)])
    assert isinstance(receipt, ObservationReceipt)
    assert (receipt.selected, receipt.selection) == (True, first.id)
    assert world.rows("SELECT observation_id, role, artifact_id FROM observation_artifacts") == [
        (first.id, "metrics", own.id)
    ]
    payload = world.rows(
        "SELECT kind, CAST(payload_json AS BLOB) FROM events WHERE sequence = ?",
        (receipt.event_sequence,),
    )
    assert payload == [
        (
            "observation_registered",
            canonical.encode(
                {
                    "artifact_id": own.id,
                    "observation_id": first.id,
                    "references": [{"artifact_id": own.id, "role": "metrics"}],
                    "registered": True,
                    "selected": True,
                    "slot_id": member.id,
                }
            ),
        )
    ]
    second = sc.observation(member, guard, score=2)
    kept = world.observe(guard, second, sc.artifact(ArtifactKind.OBSERVATION, "b"), True, 1_400)
    assert (kept.selected, kept.selection) == (False, first.id)
    world.check()


# --- 8. the complete attempt record --------------------------------------------------------


def test_8_record_json_is_the_complete_attempt_record(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.advance(guard, S.FINALIZING, 1_200)
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0")
    world.finish(guard, Failed(code="oom", details={"rss": 9}), "attempt-0", 1_300)
    (record,) = world.rows("SELECT record_json FROM attempts")[0]
    assert record == (
        '{"details":{"rss":9},"failure_code":"oom","final_artifact_id":"' + final.id + '",'
        '"finished_at_ns":"1300","id":"' + guard.attempt_id + '","retry_index":0,"revision":6,'
        '"slot_id":"' + fixture.slot_id + '","started_at_ns":"1000","state":"failed",'
        '"updated_at_ns":"1300"}'
    )
    world.check()
