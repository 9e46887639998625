"""Writer spec tests: independent connections in separate processes racing.

Two worker processes (``spawn`` start method), each with its own ``RunStore`` handle on
the same root, are released together by a barrier and make their calls at once. Every race
is repeated; each time exactly one winner is allowed where the rules admit only one. The
model is then replayed in the order the store serialized the calls (winner first) and the
whole durable projection must equal it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
from runstore import ClaimDisposition
from runstore import FirstAttempt
from runstore import Next
from runstore import OwnedAttempt
from runstore import Retry
from runstore import run_attempt_id
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import outcome

from conformance.writer.world import EXPIRES
from conformance.writer.world import Workers
from conformance.writer.world import World

ROUNDS = 5
OWNERS = (sc.OWNER, sc.OTHER_OWNER)


@pytest.fixture(scope="module")
def workers() -> Iterator[Workers]:
    workers = Workers(2)
    yield workers
    workers.close()


def replay(world: World, calls: list[tuple[str, tuple[object, ...], object]]) -> None:
    """Apply ``(writer method, arguments, store outcome)`` to the model in order; each
    must give the outcome the store gave (a result, or ``("refused", code)``)."""
    for name, args, stored in calls:
        assert outcome(partial(getattr(world.model, name), *args)) == stored


def test_racing_retry_allocations_get_distinct_indices(world: World, workers: Workers) -> None:
    root = str(world.store.root)
    for round_ in range(ROUNDS):
        fixture = world.registered(name=f"retry-race-{round_}")
        requests = [sc.lease(f"r{round_}-{w}", EXPIRES, OWNERS[w]) for w in range(2)]
        calls = [(fixture.slot_id, Next(retry=True), requests[w], 1_000) for w in range(2)]
        outcomes = workers.run([(root, "reserve", call) for call in calls])
        assert [kind for kind, _ in outcomes] == ["ok", "ok"], outcomes
        guards: list[OwnedAttempt] = [result for _, result in outcomes]
        assert sorted(guard.retry_index for guard in guards) == [0, 1]
        for worker, guard in enumerate(guards):
            assert guard.attempt_id == run_attempt_id(fixture.slot_id, guard.retry_index)
            assert guard.lease_id == requests[worker].lease_id
        order = sorted(range(2), key=lambda w: guards[w].retry_index)
        replay(world, [("reserve", calls[w], outcomes[w]) for w in order])
        world.check()


def test_racing_bounded_retries_admit_exactly_one(world: World, workers: Workers) -> None:
    root = str(world.store.root)
    for round_ in range(ROUNDS):
        fixture = world.registered(name=f"bounded-race-{round_}")
        world.start(fixture, f"r{round_}-first", authorization=FirstAttempt())
        retry = Retry(next_index=1, max_index=1)
        requests = [sc.lease(f"r{round_}-{w}", EXPIRES, OWNERS[w]) for w in range(2)]
        calls = [(fixture.slot_id, retry, requests[w], 1_100) for w in range(2)]
        outcomes = workers.run([(root, "reserve", call) for call in calls])
        winners = [w for w in range(2) if outcomes[w][0] == "ok"]
        assert len(winners) == 1, outcomes
        [winner] = winners
        loser = 1 - winner
        assert outcomes[winner][1].retry_index == 1
        # The loser sees next index 2, past the bound of 1.
        assert outcomes[loser] == ("refused", "retry_bound_exceeded")
        replay(world, [("reserve", calls[w], outcomes[w]) for w in (winner, loser)])
        world.check()
        assert world.rows(
            "SELECT retry_index, l.id FROM attempts AS a JOIN leases AS l ON l.attempt_id = a.id "
            "WHERE a.slot_id = ? ORDER BY retry_index",
            (fixture.slot_id,),
        ) == [(0, f"r{round_}-first"), (1, f"r{round_}-{winner}")]


def test_racing_contenders_for_the_success_claim_have_one_winner(
    world: World, workers: Workers
) -> None:
    root = str(world.store.root)
    for round_ in range(ROUNDS):
        fixture = world.registered(name=f"claim-race-{round_}")
        guards = [
            world.walk(
                world.start(
                    fixture,
                    f"r{round_}-{w}",
                    authorization=Next(retry=True),
                    now=1_000 + w,
                    owner=OWNERS[w],
                ),
                sc.EXECUTION_PATH,
                1_100,
            )
            for w in range(2)
        ]
        calls = [
            (guards[w], sc.lease(f"c{round_}-{w}", EXPIRES, OWNERS[w]), 1_200) for w in range(2)
        ]
        outcomes = workers.run([(root, "begin_finalization", call) for call in calls])
        assert [kind for kind, _ in outcomes] == ["ok", "ok"], outcomes
        dispositions: list[ClaimDisposition] = [result for _, result in outcomes]
        winners = [w for w in range(2) if dispositions[w].claimed]
        assert len(winners) == 1, dispositions
        [winner] = winners
        loser = 1 - winner
        assert dispositions[winner].attempt.claim_lease_id == f"c{round_}-{winner}"
        assert dispositions[loser].attempt.claim_lease_id is None
        assert world.rows(
            "SELECT attempt_id, lease_id FROM finalization_claims WHERE slot_id = ?",
            (fixture.slot_id,),
        ) == [(guards[winner].attempt_id, f"c{round_}-{winner}")]
        assert world.rows("SELECT count(*) FROM leases WHERE id = ?", (f"c{round_}-{loser}",)) == [
            (0,)
        ]
        replay(world, [("begin_finalization", calls[w], outcomes[w]) for w in (winner, loser)])
        world.check()
