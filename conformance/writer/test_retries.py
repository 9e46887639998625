"""Writer spec tests: each retry authorization, and the rest of ``reserve``'s checks.

The next retry index is the number of attempts the slot has. ``FirstAttempt()`` and
``Next(retry=False)`` permit only index 0; ``Next(retry=True)`` any next index;
``Retry(next_index, max_index)`` refuses ``retry_bound_exceeded`` past its bound, then
``retry_not_authorized`` for another index.
"""

from __future__ import annotations

from typing import Any

import pytest
from runstore import Accepted
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import Next
from runstore import OwnedAttempt
from runstore import Retry
from runstore import RetryAuthorization
from runstore import model as m
from runstore import rules
from runstore import run_attempt_id
from runstore.errors import InvalidRecordError
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World


def with_attempts(world: World, count: int) -> sc.SlotFixture:
    """A registered slot that already has ``count`` attempts (reserved at 1_000 + i)."""
    fixture = world.registered()
    for index in range(count):
        world.start(
            fixture, f"reservation-{index}", authorization=Next(retry=True), now=1_000 + index
        )
    return fixture


# (attempts the slot already has, authorization, the allocated index or the refusal code)
CASES: list[tuple[int, RetryAuthorization, int | str]] = [
    (0, FirstAttempt(), 0),
    (1, FirstAttempt(), "retry_not_authorized"),
    (0, Next(retry=False), 0),
    (1, Next(retry=False), "retry_not_authorized"),
    (0, Next(retry=True), 0),
    (1, Next(retry=True), 1),
    (3, Next(retry=True), 3),
    (0, Retry(next_index=0, max_index=0), 0),
    (1, Retry(next_index=1, max_index=1), 1),
    (1, Retry(next_index=1, max_index=3), 1),
    (2, Retry(next_index=1, max_index=1), "retry_bound_exceeded"),
    (3, Retry(next_index=1, max_index=2), "retry_bound_exceeded"),
    (3, Retry(next_index=3, max_index=3), 3),
    (1, Retry(next_index=0, max_index=2), "retry_not_authorized"),
    (1, Retry(next_index=2, max_index=3), "retry_not_authorized"),
    (0, Retry(next_index=1, max_index=1), "retry_not_authorized"),
]


@pytest.mark.parametrize(
    ("existing", "authorization", "expected"),
    CASES,
    ids=[f"{n}-{a!r}-{e}" for n, a, e in CASES],
)
def test_each_retry_authorization(
    world: World, existing: int, authorization: RetryAuthorization, expected: int | str
) -> None:
    fixture = with_attempts(world, existing)
    request = sc.lease("reservation-new", EXPIRES + 5, sc.OTHER_OWNER)
    if isinstance(expected, str):
        world.refused(
            expected, lambda: world.reserve(fixture.slot_id, authorization, request, 2_000)
        )
        assert world.rows("SELECT count(*) FROM attempts") == [(existing,)]
        world.check()
        return
    guard = world.reserve(fixture.slot_id, authorization, request, 2_000)
    attempt_id = run_attempt_id(fixture.slot_id, expected)
    assert guard == OwnedAttempt(
        attempt_id=attempt_id,
        slot_id=fixture.slot_id,
        retry_index=expected,
        state=AttemptState.RESERVED,
        revision=0,
        owner_token=sc.OTHER_OWNER,
        lease_id="reservation-new",
        claim_lease_id=None,
    )
    assert world.rows(
        "SELECT slot_id, retry_index, state, revision, started_at_ns, updated_at_ns, "
        "finished_at_ns, CAST(record_json AS BLOB) FROM attempts WHERE id = ?",
        (attempt_id,),
    ) == [
        (
            fixture.slot_id,
            expected,
            "reserved",
            0,
            2_000,
            2_000,
            None,
            (
                f'{{"id":"{attempt_id}","retry_index":{expected},"revision":0,'
                f'"slot_id":"{fixture.slot_id}","started_at_ns":"2000","state":"reserved",'
                '"updated_at_ns":"2000"}'
            ).encode(),
        )
    ]
    # The reservation lease has the next fencing token; revision 0 and its event go
    # with it.
    assert world.rows(
        "SELECT fencing_token, owner_token, purpose, acquired_at_ns, expires_at_ns, "
        "released_at_ns FROM leases WHERE id = 'reservation-new'"
    ) == [(existing + 1, sc.OTHER_OWNER, "reservation", 2_000, EXPIRES + 5, None)]
    assert world.rows(
        "SELECT revision, from_state, to_state, at_ns, event_sequence FROM attempt_transitions "
        "WHERE attempt_id = ?",
        (attempt_id,),
    ) == [(0, None, "reserved", 2_000, existing + 1)]
    assert world.rows(
        "SELECT kind, at_ns FROM events WHERE sequence = ? AND attempt_id = ?",
        (existing + 1, attempt_id),
    ) == [("attempt_reserved", 2_000)]
    world.check()


def test_a_retry_bound_below_its_next_index_is_not_a_valid_authorization() -> None:
    with pytest.raises(InvalidRecordError):
        Retry(next_index=2, max_index=1)


def test_a_satisfied_slot_refuses_every_authorization(world: World) -> None:
    fixture = world.registered()
    guard = world.claim(world.start(fixture, "reservation-0"), "claim-0", 1_100).attempt
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_200)
    world.finish(guard, Accepted(), "attempt-0", 1_300)
    for authorization in (
        FirstAttempt(),
        Next(retry=False),
        Next(retry=True),
        Retry(next_index=1, max_index=5),
    ):
        world.refused(
            "slot_satisfied",
            world.reserve,
            fixture.slot_id,
            authorization,
            sc.lease("reservation-1", EXPIRES),
            2_000,
        )
    world.check()


def test_reserve_checks_come_in_the_specified_order(world: World) -> None:
    fixture = with_attempts(world, 1)
    unregistered = sc.slot_fixture(name="never").slot_id
    taken = sc.lease("reservation-0", EXPIRES)
    # unknown_slot before everything but the range check...
    world.refused("out_of_range", lambda: world.reserve(unregistered, FirstAttempt(), taken, -1))
    world.refused("unknown_slot", lambda: world.reserve(unregistered, FirstAttempt(), taken, 0))
    # ...the authorization before a duplicate lease id...
    world.refused(
        "retry_not_authorized", lambda: world.reserve(fixture.slot_id, FirstAttempt(), taken, 0)
    )
    world.refused(
        "duplicate_lease", lambda: world.reserve(fixture.slot_id, Next(retry=True), taken, 0)
    )
    # ...and a duplicate lease id before an expiry not after now (expiry is exclusive).
    expired = sc.lease("reservation-0", 2_000)
    world.refused(
        "duplicate_lease", lambda: world.reserve(fixture.slot_id, Next(retry=True), expired, 2_000)
    )
    fresh = sc.lease("reservation-1", 2_000)
    world.refused(
        "expiry_not_after_now",
        lambda: world.reserve(fixture.slot_id, Next(retry=True), fresh, 2_000),
    )
    guard = world.reserve(fixture.slot_id, Next(retry=True), fresh, 1_999)
    assert guard.retry_index == 1
    world.check()


@pytest.mark.parametrize("authorization", [None, object(), "next", True, 1])
def test_an_unknown_authorization_allocates_no_retry(world: World, authorization: Any) -> None:
    fixture = world.registered()
    world.start(fixture, "reservation-0")
    lease = sc.lease("reservation-1", 10_000)
    world.refused_untouched(
        "invalid_record", lambda: world.store.reserve(fixture.slot_id, authorization, lease, 2)
    )
    state = world.model.state
    assert m.reserve(state, fixture.slot_id, authorization, lease, 2)[0] is state
    assert world.rows("SELECT retry_index FROM attempts") == [(0,)]
    # The shared rule fails closed on its own, behind the argument check.
    refusal = rules.authorization_refusal(authorization, 1)
    assert refusal is not None and refusal.code == "invalid_record"
    world.check()
