"""The model's attempts: reservation and retry authorization, the guard check order,
exclusive expiry, clock clamping, and renewal.
"""

from __future__ import annotations

import attrs
import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import LeasePurpose
from runstore import Next
from runstore import Retry
from runstore import run_attempt_id
from runstore.model import advance
from runstore.model import begin_staging
from runstore.model import publish_staged_artifact
from runstore.model import renew
from runstore.testing.fixtures import OTHER_OWNER
from runstore.testing.fixtures import artifact

from conformance.model.world import claimed
from conformance.model.world import executing
from conformance.model.world import owned
from conformance.model.world import refused
from conformance.model.world import reserved
from conformance.model.world import world

# --- reservation and retry authorization -----------------------------------------------


def test_reservation_commits_attempt_lease_event_and_transition() -> None:
    t, fixture = world()
    guard = reserved(t, fixture, authorization=FirstAttempt())
    state = t.state
    assert guard.attempt_id == run_attempt_id(fixture.slot_id, 0)
    assert (guard.state, guard.revision, guard.claim_lease_id) == (AttemptState.RESERVED, 0, None)
    row = state.attempts[guard.attempt_id]
    assert (row.started_at_ns, row.updated_at_ns, row.finished_at_ns) == (1_000, 1_000, None)
    lease_row = state.leases["reservation-0"]
    assert (lease_row.fencing_token, lease_row.purpose, lease_row.acquired_at_ns) == (
        1,
        LeasePurpose.RESERVATION,
        1_000,
    )
    (event,) = state.events
    assert (event.sequence, event.kind, event.at_ns) == (1, "attempt_reserved", 1_000)
    assert event.payload == {
        "from": None,
        "to": "reserved",
        "revision": 0,
        "slot_id": fixture.slot_id,
        "retry_index": 0,
    }
    (transition,) = state.transitions
    assert (
        transition.revision,
        transition.from_state,
        transition.to_state,
        transition.event_sequence,
    ) == (0, None, "reserved", 1)


@pytest.mark.parametrize(
    ("authorization", "existing", "index"),
    [
        (FirstAttempt(), 0, 0),
        (Next(retry=False), 0, 0),
        (Next(retry=True), 0, 0),
        (Next(retry=True), 2, 2),
        (Retry(next_index=0, max_index=0), 0, 0),
        (Retry(next_index=1, max_index=1), 1, 1),
        (Retry(next_index=2, max_index=5), 2, 2),
    ],
)
def test_each_authorization_allocates_the_next_index(
    authorization: object, existing: int, index: int
) -> None:
    t, fixture = world()
    for number in range(existing):
        reserved(t, fixture, name=f"earlier-{number}")
    guard = reserved(t, fixture, authorization=authorization)
    assert guard.retry_index == index
    assert t.state.leases["reservation-0"].fencing_token == existing + 1


def test_an_authorized_retry_may_overlap_an_active_attempt() -> None:
    t, fixture = world()
    first = executing(t, reserved(t, fixture))
    second = reserved(
        t, fixture, name="reservation-1", authorization=Retry(next_index=1, max_index=1)
    )
    assert t.state.attempts[first.attempt_id].state is AttemptState.EXECUTING
    assert second.retry_index == 1


# --- guards, expiry and the clock ------------------------------------------------------


def test_guard_check_order_reports_the_first_failing_check() -> None:
    t, fixture = world()
    guard = reserved(t, fixture, expires=2_000)
    t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=1_001)
    # stale, foreign owner, foreign lease and expired at once: owner comes first
    both = attrs.evolve(guard, owner_token=OTHER_OWNER, lease_id="nope")
    assert (
        refused(t.do(advance, guard=both, phase=AttemptState.STARTING, now_ns=2_000))
        == "owner_mismatch"
    )
    assert (
        refused(
            t.do(
                advance,
                guard=attrs.evolve(guard, lease_id="nope"),
                phase=AttemptState.STARTING,
                now_ns=2_000,
            )
        )
        == "lease_mismatch"
    )
    # expired and stale: expiry first
    assert (
        refused(t.do(advance, guard=guard, phase=AttemptState.STARTING, now_ns=2_000))
        == "lease_expired"
    )
    # stale and illegal: stale first
    assert (
        refused(t.do(advance, guard=guard, phase=AttemptState.ACCEPTED, now_ns=1_500))
        == "stale_revision"
    )


def test_exact_expiry_is_refused_and_one_nanosecond_earlier_is_allowed() -> None:
    t, fixture = world()
    guard = reserved(t, fixture, expires=2_000)
    guard = owned(t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=1_999))
    assert refused(t.do(renew, guard=guard, expires_at_ns=3_000, now_ns=2_000)) == "lease_expired"
    assert (
        refused(t.do(advance, guard=guard, phase=AttemptState.STARTING, now_ns=2_000))
        == "lease_expired"
    )


def test_backward_clock_is_clamped_to_the_preceding_transition() -> None:
    t, fixture = world()
    guard = reserved(t, fixture, expires=3_000)
    guard = owned(t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=2_999))
    guard = owned(t.do(advance, guard=guard, phase=AttemptState.STARTING, now_ns=5))
    times = [row.at_ns for row in t.state.transitions]
    assert times == [1_000, 2_999, 2_999]
    assert [event.at_ns for event in t.state.events] == times
    assert t.state.attempts[guard.attempt_id].updated_at_ns == 2_999


# --- renewal ---------------------------------------------------------------------------


def test_renew_extends_reservation_claim_and_live_stages_without_a_transition() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture))
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-live",
        staging_path="artifacts/.staging-1",
        now_ns=1_150,
    )
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-done",
        staging_path="artifacts/.staging-2",
        now_ns=1_150,
    )
    t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id="stage-done",
        artifact=artifact(ArtifactKind.DATASET, "d"),
        now_ns=1_160,
    )
    guard = claimed(t, guard)
    before = t.state
    assert t.do(renew, guard=guard, expires_at_ns=50_000, now_ns=1_300) == guard
    leases = t.state.leases
    assert {name: leases[name].expires_at_ns for name in leases} == {
        "reservation-0": 50_000,
        "stage-live": 50_000,
        "stage-done": 10_000,
        "claim-0": 50_000,
    }
    assert t.state.events == before.events and t.state.attempts == before.attempts


def test_renew_to_the_same_expiry_is_allowed() -> None:
    t, fixture = world()
    guard = reserved(t, fixture)
    assert t.do(renew, guard=guard, expires_at_ns=10_000, now_ns=1_000) == guard


def test_an_expired_claim_blocks_renewal_even_with_a_live_reservation() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)), expires=1_500)
    assert refused(t.do(renew, guard=guard, expires_at_ns=20_000, now_ns=1_500)) == "claim_expired"
