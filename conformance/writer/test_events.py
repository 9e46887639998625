"""Writer spec tests: exact canonical event bytes, delivery to subscribers only after
commit, and reopening without replay.

The payload bytes are pinned literally (SPEC.md section 7), one named case per event: the
reservation of retries 0..3, an execution transition, the finalizing decision with
``claim`` claimed and superseded and without a claim (entered through ``advance``), an
observation's registration, and ``attempt_finished`` for each outcome (failed with its
code and object diagnostic, censored with its reason, superseded, accepted).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from runstore import Accepted
from runstore import AttemptState
from runstore import Censored
from runstore import CommittedEvent
from runstore import Failed
from runstore import FirstAttempt
from runstore import Next
from runstore import Retry
from runstore import RunStore
from runstore import Superseded
from runstore import sql
from runstore.canonical import JSON
from runstore.errors import DatabaseError
from runstore.testing import fixtures as sc

from conformance.closed_store import rows as read
from conformance.writer.world import World

SLOT = "attempt-slot:v1:e03f68e943d9b0a003f4d4dacdd8bc41c65477982bb7a06e67a4eeeaa9b353dc"
A0 = "attempt:v1:0232f8bfc11d6c5c5735b44aa1119381226475fd32bc85934530bb15863980a5"
A1 = "attempt:v1:a3d2615c27fdabea54f4fe8d340889c7fdf51779ff5dbdae9ad736c51c5782f1"
A2 = "attempt:v1:6a755d0cbcdca0de55cfa96fa46d730e886e8d440dd1ad2e3aa73f59b878b2b6"
A3 = "attempt:v1:a906ba067f125d13023e09184dd232a2f90a0a7a8e612c0e90519fd636ed81a7"

# (case, sequence, kind, attempt_id, at_ns, payload_json bytes)
PINNED: list[tuple[str, int, str, str, int, bytes]] = [
    (
        "attempt_reserved retry 0",
        1,
        "attempt_reserved",
        A0,
        1_000,
        b'{"from":null,"retry_index":0,"revision":0,"slot_id":"attempt-slot:v1:'
        b'e03f68e943d9b0a003f4d4dacdd8bc41c65477982bb7a06e67a4eeeaa9b353dc","to":"reserved"}',
    ),
    (
        "attempt_reserved retry 1",
        2,
        "attempt_reserved",
        A1,
        1_010,
        b'{"from":null,"retry_index":1,"revision":0,"slot_id":"attempt-slot:v1:'
        b'e03f68e943d9b0a003f4d4dacdd8bc41c65477982bb7a06e67a4eeeaa9b353dc","to":"reserved"}',
    ),
    (
        "attempt_transition reserved -> materializing",
        3,
        "attempt_transition",
        A0,
        1_100,
        b'{"from":"reserved","revision":1,"to":"materializing"}',
    ),
    (
        "attempt_finalizing claimed",
        4,
        "attempt_finalizing",
        A0,
        1_200,
        b'{"claim":"claimed","from":"materializing","revision":2,"to":"finalizing"}',
    ),
    (
        "attempt_finalizing superseded",
        5,
        "attempt_finalizing",
        A1,
        1_300,
        b'{"claim":"superseded","from":"reserved","revision":1,"to":"finalizing"}',
    ),
    (
        "attempt_finished superseded",
        6,
        "attempt_finished",
        A1,
        1_400,
        b'{"from":"finalizing","revision":2,"to":"superseded"}',
    ),
    (
        "attempt_finished failed with failure_code and details",
        7,
        "attempt_finished",
        A0,
        1_500,
        b'{"details":{"exit_status":3,"message":"out of memory","signal":null},'
        b'"failure_code":"worker_crashed","from":"finalizing","revision":3,"to":"failed"}',
    ),
    (
        "attempt_reserved retry 2",
        8,
        "attempt_reserved",
        A2,
        2_000,
        b'{"from":null,"retry_index":2,"revision":0,"slot_id":"attempt-slot:v1:'
        b'e03f68e943d9b0a003f4d4dacdd8bc41c65477982bb7a06e67a4eeeaa9b353dc","to":"reserved"}',
    ),
    (
        "attempt_reserved retry 3",
        9,
        "attempt_reserved",
        A3,
        2_010,
        b'{"from":null,"retry_index":3,"revision":0,"slot_id":"attempt-slot:v1:'
        b'e03f68e943d9b0a003f4d4dacdd8bc41c65477982bb7a06e67a4eeeaa9b353dc","to":"reserved"}',
    ),
    (
        "attempt_finalizing claimed from reserved",
        10,
        "attempt_finalizing",
        A2,
        2_100,
        b'{"claim":"claimed","from":"reserved","revision":1,"to":"finalizing"}',
    ),
    (
        "attempt_finalizing without contending (advance)",
        11,
        "attempt_finalizing",
        A3,
        2_150,
        b'{"from":"reserved","revision":1,"to":"finalizing"}',
    ),
    (
        "observation_registered and selected",
        12,
        "observation_registered",
        A2,
        2_200,
        b'{"artifact_id":"run-store-v1:observation-'
        b'1a57a3ff80e77edfddefc0f7e273cef993eb378387bd7ba5a45b8ac1d9a2fb40",'
        b'"observation_id":"observation:v1:'
        b'0888e2278fe5a110fa9f030b241410d23782f810e93c3cbe1dffb515068f6cf9",'
        b'"references":[],"registered":true,"selected":true,'
        b'"slot_id":"observation-slot:v1:'
        b'e0f31bbab8c606554b700194191ae39d2737214df5485a7e241dc9d71d244285"}',
    ),
    (
        "attempt_finished censored with reason",
        13,
        "attempt_finished",
        A3,
        2_300,
        b'{"from":"finalizing","reason":"budget exhausted after 5 \xc2\xb5s \\"hard\\"",'
        b'"revision":2,"to":"censored"}',
    ),
    (
        "attempt_finished accepted",
        14,
        "attempt_finished",
        A2,
        2_400,
        b'{"from":"finalizing","revision":2,"to":"accepted"}',
    ),
]


def test_each_event_kind_has_its_pinned_canonical_bytes(world: World) -> None:
    fixture = sc.slot_fixture()
    assert fixture.slot_id == SLOT
    world.register(fixture)
    a0 = world.start(fixture, "reservation-0", authorization=FirstAttempt(), now=1_000)
    a1 = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
    a0 = world.advance(a0, AttemptState.MATERIALIZING, 1_100)
    a0 = world.claim(a0, "claim-0", 1_200).attempt
    a1 = world.claim(a1, "claim-1", 1_300).attempt
    world.finish(a1, Superseded(), "attempt-1", 1_400)
    details: dict[str, JSON] = {"exit_status": 3, "message": "out of memory", "signal": None}
    world.finish(a0, Failed(code="worker_crashed", details=details), "attempt-0", 1_500)
    retry = Retry(next_index=2, max_index=3)
    a2 = world.start(fixture, "reservation-2", authorization=retry, now=2_000)
    a3 = world.start(fixture, "reservation-3", authorization=Next(retry=True), now=2_010)
    a2 = world.claim(a2, "claim-2", 2_100).attempt
    a3 = world.advance(a3, AttemptState.FINALIZING, 2_150)
    world.publish(a2, fixture.observation_slots[0], "result-2", 2_200)
    world.finish(a3, Censored(reason='budget exhausted after 5 \u00b5s "hard"'), "a3", 2_300)
    world.finish(a2, Accepted(), "attempt-2", 2_400)

    stored = world.rows(
        "SELECT sequence, kind, attempt_id, at_ns, CAST(payload_json AS BLOB) FROM events "
        "ORDER BY sequence"
    )
    expected = {case: rest for case, *rest in PINNED}
    assert {case: list(row) for (case, *_), row in zip(PINNED, stored, strict=True)} == expected
    # payload_json is stored as TEXT holding exactly those UTF-8 bytes.
    assert world.rows("SELECT DISTINCT typeof(payload_json) FROM events") == [("text",)]
    # Subscribers received the same events, with the same bytes, in sequence order.
    assert [(e.sequence, e.kind, e.attempt_id, e.at_ns, e.payload) for e in world.delivered] == [
        tuple(rest) for _, *rest in PINNED
    ]
    world.check()


def test_subscribers_run_after_commit_and_see_committed_rows(world: World) -> None:
    fixture = world.registered()
    seen: list[tuple[int, bool, list[tuple[object, ...]]]] = []
    connection = world.store._require_connection()

    def subscriber(event: CommittedEvent) -> None:
        visible = read(
            world.database_path,
            "SELECT kind, CAST(payload_json AS BLOB) FROM events WHERE sequence = ?",
            (event.sequence,),
        )
        seen.append((event.sequence, connection.in_transaction, visible))

    world.store.subscribe(subscriber)
    guard = world.start(fixture, "reservation-0")
    guard = world.advance(guard, AttemptState.MATERIALIZING, 1_100)
    guard = world.claim(guard, "claim-0", 1_200).attempt
    world.renew(guard, 12_000, 1_250)  # no event
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_300)
    world.finish(guard, Accepted(), "attempt-0", 1_400)
    assert [sequence for sequence, _, _ in seen] == [1, 2, 3, 4, 5]
    for sequence, in_transaction, visible in seen:
        assert not in_transaction
        event = world.delivered[sequence - 1]
        assert visible == [(event.kind, event.payload)]


def test_refused_and_rolled_back_calls_deliver_nothing(world: World) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    moved = world.advance(guard, AttemptState.MATERIALIZING, 1_100)
    assert len(world.delivered) == 2
    world.refused("stale_revision", lambda: world.advance(guard, AttemptState.STARTING, 1_200))
    world.refused("illegal_transition", lambda: world.advance(moved, AttemptState.EXECUTING, 1_200))
    world.refused("out_of_range", lambda: world.advance(moved, AttemptState.STARTING, -1))
    assert len(world.delivered) == 2

    # A failure at COMMIT itself rolls the call back and delivers nothing either.
    def fail_commit(phase: str, statement: str) -> None:
        if phase == "before" and statement == "COMMIT":
            raise sqlite3.OperationalError("injected: COMMIT failed")

    before = world.projection()
    previous = sql.install_observer(fail_commit)
    try:
        with pytest.raises(DatabaseError):
            world.store.advance(moved, AttemptState.STARTING, 1_300)
    finally:
        sql.install_observer(previous)
    assert world.projection() == before
    assert len(world.delivered) == 2
    world.check()
    # The same call succeeds once COMMIT works, and only then is its event delivered.
    world.advance(moved, AttemptState.STARTING, 1_300)
    assert [event.sequence for event in world.delivered] == [1, 2, 3]
    world.check()


def test_a_subscriber_hears_only_its_own_handles_commits(world: World) -> None:
    fixture = world.registered()
    other: list[CommittedEvent] = []
    with RunStore.open(world.store.root) as second:
        second.subscribe(other.append)
        guard = world.start(fixture, "reservation-0")
        guard = world.advance(guard, AttemptState.MATERIALIZING, 1_100)
        assert other == []
        moved = second.advance(guard, AttemptState.STARTING, 1_200)
        assert [event.sequence for event in other] == [3]
        assert [event.sequence for event in world.delivered] == [1, 2]
        assert moved.revision == 2


def test_reopening_shows_committed_state_without_replaying_events(tmp_path: Path) -> None:
    world = World(tmp_path)
    fixture = world.registered()
    first = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    first = world.claim(first, "claim-0", 1_200).attempt
    world.publish(first, fixture.observation_slots[0], "result-0", 1_300)
    world.finish(first, Failed(code="oom", details={}), "attempt-0", 1_400)
    second = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=2_000)
    second = world.advance(second, AttemptState.MATERIALIZING, 2_100)
    world.renew(second, 20_000, 2_200)
    world.check()
    before = world.projection()
    world.close()

    delivered: list[CommittedEvent] = []
    reopened = RunStore.open(tmp_path)
    try:
        reopened.subscribe(delivered.append)
        assert world.projection() == before
        assert delivered == []
        # A second handle opened alongside changes nothing either.
        RunStore.open(tmp_path).close()
        assert world.projection() == before
        # The guard issued before the reopen still owns the attempt; the event log goes on.
        moved = reopened.advance(second, AttemptState.STARTING, 2_300)
        assert moved.revision == 2
        assert [(e.sequence, e.kind, e.attempt_id) for e in delivered] == [
            (max(row[0] for row in before["events"]) + 1, "attempt_transition", second.attempt_id)
        ]
    finally:
        reopened.close()


def test_a_raising_subscriber_never_costs_a_committed_result(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 9, observation 3: a subscriber that raises used to make ``reserve`` raise
    although attempt 0 had committed (the caller lost its guard). Now the call returns its
    value, the failure is logged and counted, and later subscribers still get the event."""
    fixture = world.registered()
    later: list[int] = []

    def broken(event: CommittedEvent) -> None:
        raise RuntimeError(f"subscriber bug at {event.sequence}")

    world.store.subscribe(broken)
    world.store.subscribe(lambda event: later.append(event.sequence))
    with caplog.at_level("ERROR", logger="runstore.subscribers"):
        guard = world.start(fixture, "reservation-0")
    assert (guard.retry_index, guard.revision) == (0, 0)
    assert world.store.subscriber_failures == 1
    assert later == [1]
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [RuntimeError]
    assert "raised on committed event 1" in caplog.text
    moved = world.advance(guard, AttemptState.MATERIALIZING, 1_100)
    assert moved.revision == 1 and later == [1, 2]
    assert world.store.subscriber_failures == 2
    world.check()


def test_reserve_returns_its_guard_although_a_subscriber_raises(world: World) -> None:
    fixture = world.registered()

    def broken(event: CommittedEvent) -> None:
        raise ValueError("a consumer bug")

    world.store.subscribe(broken)
    guard = world.start(fixture, "reservation-0")
    assert (guard.retry_index, guard.state) == (0, AttemptState.RESERVED)
    assert world.store.subscriber_failures == 1
    # Repeating the call is what a user did when the guard was lost: now it is not needed,
    # and the slot still has exactly one attempt.
    assert world.rows("SELECT retry_index, state FROM attempts") == [(0, "reserved")]
    world.check()
