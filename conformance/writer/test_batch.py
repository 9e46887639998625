"""Write batches (SPEC.md section 8, "Write batches"): several writer operations in one
transaction, each with its own checks and savepoint, results known only after the one
commit, the same rows and events as the operations committed one after another."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import ExecutionKind
from runstore import FirstAttempt
from runstore import OwnedAttempt
from runstore import Pending
from runstore import RunStoreError
from runstore import SlotRole
from runstore import WriteBatch
from runstore import run_attempt_id
from runstore import sql
from runstore.batch import MAX_STEPS
from runstore.errors import BusyError
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import Writer
from runstore.testing.lockstep import outcome

from conformance.writer.world import World

ONE_SHOT = (ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT)


def outcomes(pendings: list[Pending[Any]]) -> list[tuple[str, object]]:
    return [outcome(p.result) for p in pendings]


def in_lockstep(world: World, build: Any) -> list[tuple[str, object]]:
    """``build(batch)`` recorded and applied on the model, then (a fresh batch) on the
    store: each step's result or refusal code must agree, and so must the projections."""

    def call(writer: Writer) -> list[tuple[str, object]]:
        batch = WriteBatch()
        pendings = build(batch)
        writer.apply_batch(batch)
        return outcomes(pendings)

    result = world.lockstep(call)
    world.check()
    return result


def test_a_reservation_and_its_execution_path_commit_together(world: World) -> None:
    fixture = world.registered(*ONE_SHOT, name="a")

    def build(batch: WriteBatch) -> list[Pending[Any]]:
        pendings: list[Pending[Any]] = [
            batch.reserve(fixture.slot_id, FirstAttempt(), sc.lease("l1", 10_000), 1_000)
        ]
        for offset, phase in enumerate(sc.EXECUTION_PATH, start=1):
            pendings.append(batch.advance(pendings[-1], phase, 1_000 + offset))
        return pendings

    results = in_lockstep(world, build)
    assert [kind for kind, _ in results] == ["ok"] * (1 + len(sc.EXECUTION_PATH))
    last = results[-1][1]
    assert isinstance(last, OwnedAttempt) and last.state is AttemptState.EXECUTING
    # one commit: every event of the batch is delivered, in sequence order
    assert [e.kind for e in world.delivered][-1 - len(sc.EXECUTION_PATH) :] == [
        "attempt_reserved",
        *["attempt_transition"] * len(sc.EXECUTION_PATH),
    ]
    sequences = [e.sequence for e in world.delivered]
    assert sequences == sorted(sequences)


def test_a_refused_step_rolls_back_only_itself_and_its_dependents_are_refused(
    world: World,
) -> None:
    a = world.registered(*ONE_SHOT, name="a")
    b = world.registered(*ONE_SHOT, name="b")

    def build(batch: WriteBatch) -> list[Pending[Any]]:
        first = batch.reserve(a.slot_id, FirstAttempt(), sc.lease("l1", 10_000), 1_000)
        taken = batch.reserve(a.slot_id, FirstAttempt(), sc.lease("l2", 10_000), 1_001)
        moved = batch.advance(taken, AttemptState.MATERIALIZING, 1_002)
        other = batch.reserve(b.slot_id, FirstAttempt(), sc.lease("l3", 10_000), 1_003)
        return [first, taken, moved, other, batch.advance(first, AttemptState.MATERIALIZING, 9)]

    results = in_lockstep(world, build)
    assert results[0][0] == "ok" and results[3][0] == "ok"
    assert results[1] == ("refused", "retry_not_authorized")
    assert results[2] == ("refused", "batch_dependency_refused")
    assert results[4][0] == "ok"  # the clock behind the reservation is clamped, as alone
    states = world.rows("SELECT state FROM attempts ORDER BY state")
    assert states == [("materializing",), ("reserved",)]


def test_a_batch_leaves_the_rows_of_its_steps_committed_one_by_one(tmp_path: Path) -> None:
    """The same steps, batched on one store and made one call each on another: the two
    durable projections are equal (the model checks both in the lockstep tests too)."""
    projections = []
    for batched in (True, False):
        (tmp_path / str(batched)).mkdir()
        world = World(tmp_path / str(batched))
        try:
            fixture = world.registered(*ONE_SHOT, name="a")
            lease = sc.lease("l1", 10_000)
            if batched:
                batch = WriteBatch()
                guard = batch.reserve(fixture.slot_id, FirstAttempt(), lease, 1_000)
                for offset, phase in enumerate([*sc.EXECUTION_PATH, AttemptState.VALIDATING]):
                    guard = batch.advance(guard, phase, 1_001 + offset)
                claim = batch.begin_finalization(guard, sc.lease("c1", 10_000), 1_010)
                batch.register_observation(
                    claim.then(lambda d: d.attempt),
                    sc.observation(fixture.observation_slots[0], _attempt_of(world, fixture)),
                    sc.artifact(ArtifactKind.OBSERVATION, "obs"),
                    [],
                    select=claim.then(lambda d: d.claimed),
                    now_ns=1_011,
                )
                world.store.apply_batch(batch)
            else:
                guard_ = world.start(fixture, "l1")
                guard_ = world.walk(guard_, [*sc.EXECUTION_PATH, AttemptState.VALIDATING], 1_001)
                disposition = world.claim(guard_, "c1", 1_010)
                world.publish(disposition.attempt, fixture.observation_slots[0], "obs", 1_011)
            projections.append(world.projection())
        finally:
            world.close()
    assert projections[0] == projections[1]


def _attempt_of(world: World, fixture: sc.SlotFixture) -> OwnedAttempt:
    """The guard-shaped attempt the observation names (its id is the slot's first
    attempt's, known before the reservation commits)."""
    return OwnedAttempt(
        attempt_id=run_attempt_id(fixture.slot_id, 0),
        slot_id=fixture.slot_id,
        retry_index=0,
        state=AttemptState.RESERVED,
        revision=0,
        owner_token=sc.OWNER,
        lease_id="l1",
    )


def test_results_are_unknown_until_the_batch_commits(world: World) -> None:
    fixture = world.registered(*ONE_SHOT, name="a")
    batch = WriteBatch()
    pending = batch.reserve(fixture.slot_id, FirstAttempt(), sc.lease("l1", 10_000), 1_000)
    assert not pending.done
    with pytest.raises(RunStoreError) as info:
        pending.result()
    assert info.value.code == "invalid_record"
    world.store.apply_batch(batch)
    assert pending.done and pending.result().state is AttemptState.RESERVED
    with pytest.raises(RunStoreError) as again:
        world.store.apply_batch(batch)
    assert again.value.code == "invalid_record"
    with pytest.raises(RunStoreError) as more:
        batch.advance(pending, AttemptState.MATERIALIZING, 1_001)
    assert more.value.code == "invalid_record"


def test_a_busy_batch_commits_nothing_settles_nothing_and_can_be_applied_again(
    world: World,
) -> None:
    fixture = world.registered(*ONE_SHOT, name="a")
    batch = WriteBatch()
    pending = batch.reserve(fixture.slot_id, FirstAttempt(), sc.lease("l1", 10_000), 1_000)
    delivered = len(world.delivered)
    blocker = sqlite3.connect(world.database_path, timeout=0)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        connection = world.store._connection  # a 10 ms busy timeout, not 5 s, for this test
        assert connection is not None
        connection.set_authorizer(None)
        connection.execute("PRAGMA busy_timeout = 10")
        sql.lock_down(connection)
        with pytest.raises(BusyError):
            world.store.apply_batch(batch)
        assert not pending.done and len(world.delivered) == delivered
        assert world.rows("SELECT count(*) FROM attempts") == [(0,)]
    finally:
        blocker.rollback()
        blocker.close()
    world.store.apply_batch(batch)
    assert pending.result().state is AttemptState.RESERVED


def test_a_rolled_back_batch_delivers_no_event(world: World, monkeypatch: Any) -> None:
    """An error that is no refusal (here an SQLite error in the third step) voids the
    whole transaction: nothing committed, nothing delivered, nothing settled."""
    from runstore.store import batch_apply

    fixture = world.registered(*ONE_SHOT, name="a")
    real = batch_apply.OPERATIONS["advance"]
    calls = []

    def failing(connection: sqlite3.Connection, *args: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return real(connection, *args)

    monkeypatch.setitem(batch_apply.OPERATIONS, "advance", failing)
    batch = WriteBatch()
    guard = batch.reserve(fixture.slot_id, FirstAttempt(), sc.lease("l1", 10_000), 1_000)
    first = batch.advance(guard, AttemptState.MATERIALIZING, 1_001)
    batch.advance(first, AttemptState.STARTING, 1_002)
    delivered = len(world.delivered)
    with pytest.raises(RunStoreError) as info:
        world.store.apply_batch(batch)
    assert info.value.code == "database_error"
    assert len(world.delivered) == delivered and not guard.done
    assert world.rows("SELECT count(*) FROM attempts") == [(0,)]
    assert world.rows("SELECT count(*) FROM leases") == [(0,)]


@pytest.mark.parametrize(
    ("record", "code"),
    [
        (lambda b, slot: b.reserve(slot, FirstAttempt(), "lease", 1), "invalid_record"),
        (lambda b, slot: b.reserve(slot, FirstAttempt(), sc.lease("l", 9), True), "invalid_record"),
        (lambda b, slot: b.advance("guard", AttemptState.MATERIALIZING, 1), "invalid_record"),
        (lambda b, slot: b.renew(None, 5, 1), "invalid_record"),
        (
            lambda b, slot: b.commit_finalization(None, Accepted(), None, [], 1, 1),
            "invalid_record",
        ),
        (
            lambda b, slot: b.advance(
                WriteBatch().reserve(slot, FirstAttempt(), sc.lease("l", 9), 1),
                AttemptState.MATERIALIZING,
                1,
            ),
            "invalid_record",
        ),
    ],
)
def test_ill_typed_and_out_of_range_steps_are_refused_when_recorded(
    world: World, record: Any, code: str
) -> None:
    fixture = world.registered(*ONE_SHOT, name="a")
    batch = WriteBatch()
    with pytest.raises(RunStoreError) as info:
        record(batch, fixture.slot_id)
    assert info.value.code == code
    assert len(batch) == 0


def test_a_step_whose_resolved_arguments_are_ill_typed_is_refused_alone(world: World) -> None:
    """A pending argument is checked when it resolves: a derived value of the wrong type
    refuses its step only."""
    fixture = world.registered(*ONE_SHOT, name="a")

    def build(batch: WriteBatch) -> list[Pending[Any]]:
        guard = batch.reserve(fixture.slot_id, FirstAttempt(), sc.lease("l1", 10_000), 1_000)
        wrong = batch.advance(guard.then(lambda g: g.attempt_id), AttemptState.MATERIALIZING, 1)
        right = batch.advance(guard, AttemptState.MATERIALIZING, 1_001)
        return [guard, wrong, right]

    results = in_lockstep(world, build)
    assert [r[0] for r in results] == ["ok", "refused", "ok"]
    assert results[1] == ("refused", "invalid_record")


def test_hostile_batches_are_refused_before_any_transaction(world: World) -> None:
    for hostile in (None, [], "batch", object()):
        world.refused_untouched(
            "invalid_record", lambda h=hostile: world.lockstep(lambda w: w.apply_batch(h))
        )
    world.store.close()
    with pytest.raises(RunStoreError) as info:
        world.store.apply_batch(WriteBatch())
    assert info.value.code == "store_closed"


def test_a_batch_holds_at_most_max_steps(world: World) -> None:
    fixture = world.registered(*ONE_SHOT, name="a")
    batch = WriteBatch()
    lease = sc.lease("l1", 10_000)
    guard = _attempt_of(world, fixture)
    for _ in range(MAX_STEPS):
        batch.renew(guard, 5_000, 1)
    with pytest.raises(RunStoreError) as info:
        batch.reserve(fixture.slot_id, FirstAttempt(), lease, 1)
    assert info.value.code == "invalid_record"
    assert len(batch) == MAX_STEPS


def test_an_empty_batch_commits_nothing_and_settles(world: World) -> None:
    before = world.untouched()
    batch = WriteBatch()
    world.store.apply_batch(batch)
    assert batch.settled
    assert world.untouched()[1:] == before[1:]


def test_model_and_store_agree_on_a_batch_across_two_slots(tmp_path: Path) -> None:
    """Group commit across slots: two attempts' reservations and execution paths, one
    commit; each attempt's rows are what it gets alone."""
    world = World(tmp_path)
    try:
        slots = [world.registered(*ONE_SHOT, name=n) for n in ("a", "b", "c")]

        def build(batch: WriteBatch) -> list[Pending[Any]]:
            pendings: list[Pending[Any]] = []
            for number, fixture in enumerate(slots):
                lease = sc.lease(f"l{number}", 10_000)
                guard = batch.reserve(fixture.slot_id, FirstAttempt(), lease, 1_000 + number)
                pendings.append(guard)
                for offset, phase in enumerate(sc.EXECUTION_PATH):
                    guard = batch.advance(guard, phase, 1_010 + offset)
                    pendings.append(guard)
            return pendings

        results = in_lockstep(world, build)
        assert all(kind == "ok" for kind, _ in results)
        assert world.rows("SELECT count(*) FROM attempts WHERE state = 'executing'") == [(3,)]
    finally:
        world.close()


def test_out_of_range_arguments_refuse_their_step_alone_when_applied(world: World) -> None:
    fixture = world.registered(*ONE_SHOT, name="a")

    def build(batch: WriteBatch) -> list[Pending[Any]]:
        lease = sc.lease("l1", 10_000)
        return [
            batch.reserve(fixture.slot_id, FirstAttempt(), lease, -1),
            batch.reserve(fixture.slot_id, FirstAttempt(), lease, 2**63),
            batch.reserve(fixture.slot_id, FirstAttempt(), lease, 1_000),
        ]

    results = in_lockstep(world, build)
    assert results[:2] == [("refused", "out_of_range")] * 2 and results[2][0] == "ok"


def test_a_scripted_batch_plays_in_lockstep_and_keeps_each_handles_guard(world: World) -> None:
    """The crash scenarios' form (runstore.testing.script): a batch is one call whose
    result is each step's outcome, and the context keeps each handle's last guard."""
    from runstore.testing import script

    fixture = world.registered(*ONE_SHOT, name="a")
    lease = sc.lease("l1", 10_000)
    calls = [
        script.reserve("x", fixture.slot_id, FirstAttempt(), lease, 1_000),
        *(script.advance("x", phase, 1_001 + n) for n, phase in enumerate(sc.EXECUTION_PATH)),
        script.begin_finalization("x", sc.lease("c1", 10_000), 1_010),
        script.reserve("y", fixture.slot_id, FirstAttempt(), sc.lease("l2", 10_000), 1_011),
    ]
    context: script.Context = {}
    result = script.apply_in_lockstep(script.batch(calls), world.model, world.store, context)
    assert isinstance(result, tuple)
    assert [kind for kind, _ in result] == ["ok"] * (len(calls) - 1) + ["refused"]
    assert result[-1] == ("refused", "retry_not_authorized")
    assert context["x"].state is AttemptState.FINALIZING and "y" not in context
    world.check()
    with pytest.raises(ValueError, match="not a batch step"):
        script.batch([script.recover(5)])
