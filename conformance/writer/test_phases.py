"""Writer spec tests: every execution phase and every terminal outcome.

Each legal ``advance`` edge (the evaluating -> executing loop included) and each terminal
outcome is taken on a real store in lockstep with the model; the rows it leaves in
``attempts``, ``attempt_transitions``, ``events``, ``leases`` and ``finalization_claims``
are read back through a fresh connection and checked value by value, and the whole
projection is compared with the model's.
"""

from __future__ import annotations

import sqlite3

import attrs
import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import Next
from runstore import Reference
from runstore import Superseded
from runstore import TerminalOutcome
from runstore import canonical
from runstore.edges import EXECUTION_EDGES
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

S = AttemptState
ATTEMPT_ROW = (
    "SELECT state, revision, started_at_ns, updated_at_ns, finished_at_ns, failure_code, "
    "censor_reason, final_artifact_id, final_artifact_kind FROM attempts WHERE id = ?"
)
TRANSITIONS = (
    "SELECT revision, from_state, to_state, at_ns, event_sequence FROM attempt_transitions "
    "WHERE attempt_id = ? ORDER BY revision"
)
EVENTS = (
    "SELECT sequence, kind, at_ns, CAST(payload_json AS BLOB) FROM events "
    "WHERE attempt_id = ? ORDER BY sequence"
)
LEASES = (
    "SELECT id, purpose, acquired_at_ns, expires_at_ns, released_at_ns FROM leases "
    "WHERE attempt_id = ? ORDER BY fencing_token"
)

PATHS = sc.PHASE_PATHS


def payload(**document: canonical.JSON) -> bytes:
    return canonical.encode(dict(document))


def test_the_execution_edges_are_the_specs() -> None:
    assert {(a.value, b.value) for a, b in EXECUTION_EDGES} == {
        ("reserved", "materializing"),
        ("materializing", "starting"),
        ("starting", "preparing"),
        ("preparing", "executing"),
        ("executing", "checkpointing"),
        ("executing", "validating"),
        ("checkpointing", "validating"),
        ("validating", "evaluating"),
        ("evaluating", "executing"),
    }


@pytest.mark.parametrize(
    ("source", "target"), sorted(EXECUTION_EDGES), ids=lambda state: state.value
)
def test_each_execution_edge_appends_one_transition_and_event(
    world: World, source: AttemptState, target: AttemptState
) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), PATHS[source], 1_100)
    (last_sequence,) = world.rows("SELECT max(sequence) FROM events")[0]
    moved = world.advance(guard, target, 2_000)

    assert moved == attrs.evolve(guard, state=target, revision=guard.revision + 1)
    attempt_id, revision = guard.attempt_id, moved.revision
    assert world.rows(ATTEMPT_ROW, (attempt_id,)) == [
        (target.value, revision, 1_000, 2_000, None, None, None, None, None)
    ]
    assert world.rows(TRANSITIONS, (attempt_id,))[-1] == (
        revision,
        source.value,
        target.value,
        2_000,
        last_sequence + 1,
    )
    assert world.rows(EVENTS, (attempt_id,))[-1] == (
        last_sequence + 1,
        "attempt_transition",
        2_000,
        payload(**{"from": source.value, "to": target.value, "revision": revision}),
    )
    # advance does not renew: the reservation lease is exactly as reserved.
    assert world.rows(LEASES, (attempt_id,)) == [
        ("reservation-0", "reservation", 1_000, EXPIRES, None)
    ]
    world.check()


@pytest.mark.parametrize("source", list(PATHS), ids=lambda state: state.value)
def test_every_other_edge_is_illegal_and_finalizing_has_two_ways_in(
    world: World, source: AttemptState
) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), PATHS[source], 1_100)
    for target in AttemptState:
        if (source, target) not in EXECUTION_EDGES and target is not S.FINALIZING:
            world.refused("illegal_transition", world.advance, guard, target, 2_000)
    disposition = world.claim(guard, "claim-0", 2_000)
    assert disposition.claimed
    finalizing = disposition.attempt
    assert finalizing.state is S.FINALIZING
    assert finalizing.revision == guard.revision + 1
    assert world.rows(TRANSITIONS, (guard.attempt_id,))[-1][1:4] == (
        source.value,
        "finalizing",
        2_000,
    )
    for target in AttemptState:
        world.refused("illegal_transition", world.advance, finalizing, target, 2_100)
    # begin_finalization from finalizing is illegal too.
    world.refused("illegal_transition", lambda: world.claim(finalizing, "claim-1", 2_100))
    world.check()


@pytest.mark.parametrize("source", list(PATHS), ids=lambda state: state.value)
def test_advance_enters_finalizing_from_every_phase_without_contending(
    world: World, source: AttemptState
) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), PATHS[source], 1_100)
    finalizing = world.advance(guard, S.FINALIZING, 2_000)
    assert (finalizing.state, finalizing.revision) == (S.FINALIZING, guard.revision + 1)
    assert finalizing.claim_lease_id is None
    payload = {"from": source.value, "to": "finalizing", "revision": guard.revision + 1}
    assert world.rows(EVENTS, (guard.attempt_id,))[-1][1:] == (
        "attempt_finalizing",
        2_000,
        canonical.encode(payload),
    )
    assert world.rows("SELECT count(*) FROM finalization_claims") == [(0,)]
    assert world.rows(LEASES, (guard.attempt_id,)) == [
        ("reservation-0", "reservation", 1_000, EXPIRES, None)
    ]
    for target in AttemptState:
        world.refused("illegal_transition", world.advance, finalizing, target, 2_100)
    world.refused("illegal_transition", lambda: world.claim(finalizing, "claim-0", 2_100))
    world.refused("claim_required", lambda: world.finish(finalizing, Accepted(), "a", 2_200))
    world.refused(
        "outcome_not_permitted", lambda: world.finish(finalizing, Superseded(), "a", 2_200)
    )
    receipt = world.finish(finalizing, Censored(reason="deadline"), "a", 2_200)
    assert receipt.state is S.CENSORED
    world.check()


def test_the_evaluating_executing_loop_runs_repeatedly(world: World) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    loop = (S.VALIDATING, S.EVALUATING, S.EXECUTING, S.CHECKPOINTING, S.VALIDATING, S.EVALUATING)
    path = (*sc.EXECUTION_PATH, *loop, S.EXECUTING, S.VALIDATING)
    guard = world.walk(guard, path, 1_100)
    assert (guard.state, guard.revision) == (S.VALIDATING, len(path))

    states = [S.RESERVED, *path]
    transitions = world.rows(TRANSITIONS, (guard.attempt_id,))
    assert [row[:3] for row in transitions] == [
        (revision, None if revision == 0 else states[revision - 1].value, state.value)
        for revision, state in enumerate(states)
    ]
    assert [row[3] for row in transitions] == [1_000, *range(1_100, 1_100 + len(path))]
    events = world.rows(EVENTS, (guard.attempt_id,))
    assert [row[1] for row in events] == ["attempt_reserved"] + ["attempt_transition"] * len(path)
    assert [row[0] for row in events] == [row[4] for row in transitions]
    world.check()


OUTCOMES: list[TerminalOutcome] = [
    Accepted(),
    Censored(reason="budget exhausted"),
    Superseded(),
    Failed(code="worker_crashed", details={"exit_status": 3, "signal": None}),
]


CLAIM_HOLDER_OUTCOMES = [o for o in OUTCOMES if not isinstance(o, Superseded)]


@pytest.mark.parametrize("outcome", CLAIM_HOLDER_OUTCOMES, ids=lambda outcome: outcome.state.value)
def test_each_terminal_outcome_of_a_claim_holder(world: World, outcome: TerminalOutcome) -> None:
    """Finished at 1_350 (the immutable finish time: transition, event, projection,
    receipt) and committed at 1_400 (lease checks and release)."""
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200, expires=9_000).attempt
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_300)
    dataset = sc.artifact(ArtifactKind.OBSERVATION, "result-0")
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0")
    world.refused(
        "outcome_not_permitted", lambda: world.finish(guard, Superseded(), "attempt-0", 1_400)
    )
    receipt = world.finish(
        guard, outcome, "attempt-0", 1_400, [Reference("inputs", dataset.id)], finished=1_350
    )

    attempt_id = guard.attempt_id
    (sequence,) = world.rows("SELECT max(sequence) FROM events")[0]
    assert (receipt.attempt_id, receipt.slot_id, receipt.retry_index) == (
        attempt_id,
        fixture.slot_id,
        0,
    )
    assert (receipt.state, receipt.revision, receipt.finished_at_ns) == (outcome.state, 6, 1_350)
    # 5 transitions and the observation's registration came first.
    assert receipt.event_sequence == sequence == 8
    failure = outcome.code if isinstance(outcome, Failed) else None
    reason = outcome.reason if isinstance(outcome, Censored) else None
    assert world.rows(ATTEMPT_ROW, (attempt_id,)) == [
        (outcome.state.value, 6, 1_000, 1_350, 1_350, failure, reason, final.id, "attempt")
    ]
    assert world.rows(TRANSITIONS, (attempt_id,))[-2:] == [
        (5, "executing", "finalizing", 1_200, 6),
        (6, "finalizing", outcome.state.value, 1_350, 8),
    ]
    document: dict[str, canonical.JSON] = {
        "from": "finalizing",
        "to": outcome.state.value,
        "revision": 6,
    }
    if isinstance(outcome, Failed):
        document |= {"failure_code": outcome.code, "details": outcome.details}
    if isinstance(outcome, Censored):
        document["reason"] = outcome.reason
    assert world.rows(EVENTS, (attempt_id,))[-1] == (
        8,
        "attempt_finished",
        1_350,
        canonical.encode(document),
    )
    # Every lease is released at the commit time, the claim row is gone, and the final
    # artifact and the reference are recorded.
    assert world.rows(LEASES, (attempt_id,)) == [
        ("reservation-0", "reservation", 1_000, EXPIRES, 1_400),
        ("claim-0", "finalization", 1_200, 9_000, 1_400),
    ]
    assert world.rows("SELECT * FROM finalization_claims") == []
    assert world.rows("SELECT id, kind FROM artifacts WHERE id = ?", (final.id,)) == [
        (final.id, "attempt")
    ]
    assert world.rows("SELECT attempt_id, role, artifact_id FROM attempt_artifacts") == [
        (attempt_id, "inputs", dataset.id)
    ]
    accepted = world.rows("SELECT id FROM attempts WHERE state = 'accepted'")
    assert accepted == ([(attempt_id,)] if isinstance(outcome, Accepted) else [])
    world.check()


def test_a_superseded_contender_commits_superseded_and_nothing_else(world: World) -> None:
    fixture = world.registered()
    winner = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    loser = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
    winner = world.claim(winner, "claim-0", 1_200).attempt
    disposition = world.claim(loser, "claim-1", 1_300)
    assert not disposition.claimed
    loser = disposition.attempt
    assert world.rows("SELECT id FROM leases WHERE id = 'claim-1'") == []
    world.refused("claim_required", lambda: world.finish(loser, Accepted(), "attempt-1", 1_400))
    for outcome in OUTCOMES:
        if not isinstance(outcome, Accepted | Superseded):
            world.refused(
                "outcome_not_permitted", lambda o=outcome: world.finish(loser, o, "a-1", 1_400)
            )
    receipt = world.finish(loser, Superseded(), "attempt-1", 1_400)
    assert (receipt.state, receipt.revision) == (S.SUPERSEDED, 2)
    assert world.rows(LEASES, (loser.attempt_id,)) == [
        ("reservation-1", "reservation", 1_010, EXPIRES, 1_400)
    ]
    # The winner's claim is untouched by the loser's commit.
    assert world.rows("SELECT attempt_id, lease_id FROM finalization_claims") == [
        (winner.attempt_id, "claim-0")
    ]
    world.check()


def test_a_failing_attempt_does_not_cost_a_concurrent_success(world: World) -> None:
    """Issue 9, observation 4: a failing attempt A and a successful retry C overlap. A
    enters finalizing without contending and commits Failed; C takes the claim and is
    accepted; the slot is satisfied."""
    fixture = world.registered()
    failing = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    retry = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
    retry = world.walk(retry, sc.EXECUTION_PATH, 1_150)
    failing = world.advance(failing, S.FINALIZING, 1_200)
    retry = world.claim(retry, "claim-1", 1_250).attempt
    failure = Failed(code="worker_exit", details={"exit_status": 1})
    assert world.finish(failing, failure, "attempt-0", 1_300).state is S.FAILED
    world.publish(retry, fixture.observation_slots[0], "result-1", 1_350)
    assert world.finish(retry, Accepted(), "attempt-1", 1_400).state is S.ACCEPTED
    assert world.rows("SELECT retry_index, state FROM attempts ORDER BY retry_index") == [
        (0, "failed"),
        (1, "accepted"),
    ]
    world.refused(
        "slot_satisfied",
        lambda: world.start(fixture, "reservation-2", authorization=Next(retry=True), now=1_500),
    )
    world.check()


def test_references_cannot_be_rewritten_and_final_artifacts_are_one_per_attempt(
    world: World,
) -> None:
    fixture = world.registered()
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


def test_the_finish_time_is_immutable_and_leases_release_at_commit(world: World) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.advance(guard, S.FINALIZING, 1_200)
    receipt = world.finish(guard, Failed(code="oom", details={}), "a", 1_900, finished=1_500)
    assert receipt.finished_at_ns == 1_500
    assert world.rows("SELECT updated_at_ns, finished_at_ns FROM attempts") == [(1_500, 1_500)]
    assert world.rows("SELECT max(at_ns) FROM events") == [(1_500,)]
    assert world.rows("SELECT released_at_ns FROM leases") == [(1_900,)]
    world.check()


def test_a_finish_time_before_the_last_transition_is_clamped_and_leases_checked_at_commit(
    world: World,
) -> None:
    fixture = world.registered()
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


def test_a_commit_time_before_the_finish_time_is_clamped_up_to_it(world: World) -> None:
    """commit_time_not_clamped_to_finish: the commit time is clamped up to the finish
    time, so the leases are released at the finish time, never before it."""
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.advance(guard, S.FINALIZING, 1_200)
    receipt = world.finish(guard, Failed(code="oom", details={}), "a", 1_300, finished=1_600)
    assert receipt.finished_at_ns == 1_600
    assert world.rows("SELECT updated_at_ns, finished_at_ns FROM attempts") == [(1_600, 1_600)]
    assert world.rows("SELECT released_at_ns FROM leases") == [(1_600,)]
    world.check()


def test_record_json_is_the_complete_attempt_record(world: World) -> None:
    fixture = world.registered()
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
