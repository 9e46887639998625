"""The model's finalization: claims (contention, supersession, expired claims),
observations and selections, acceptance per slot kind, and the terminal commit.
"""

from __future__ import annotations

from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import ClaimDisposition
from runstore import ExecutionKind
from runstore import LeasePurpose
from runstore import ObservationReceipt
from runstore import SlotRole
from runstore import Superseded
from runstore import run_attempt_id
from runstore.edges import LEGAL_EDGES
from runstore.model import DiskView
from runstore.model import ModelState
from runstore.model import begin_finalization
from runstore.model import recover
from runstore.model import recoverable
from runstore.recovery_report import RecoveryReport
from runstore.testing import scenarios
from runstore.testing.fixtures import artifact
from runstore.testing.fixtures import lease
from runstore.testing.transcript import Transcript

from conformance.model.world import claimed
from conformance.model.world import commit
from conformance.model.world import executing
from conformance.model.world import failed
from conformance.model.world import receipt
from conformance.model.world import refused
from conformance.model.world import reserved
from conformance.model.world import select
from conformance.model.world import world

# --- claims ----------------------------------------------------------------------------


def test_superseded_contender_gets_no_lease_and_commits_superseded() -> None:
    t = Transcript()
    scenarios.two_contenders_one_superseded(t)
    state = t.state
    finalizing = [event for event in state.events if event.kind == "attempt_finalizing"]
    assert [event.payload["claim"] for event in finalizing] == ["claimed", "superseded"]
    assert {row.purpose for row in state.leases.values()} == {
        LeasePurpose.RESERVATION,
        LeasePurpose.FINALIZATION,
    }
    assert "claim-0" not in state.leases
    assert sorted(row.state.value for row in state.attempts.values()) == ["accepted", "superseded"]
    assert not state.claims


def test_an_expired_claim_is_never_stolen_until_recovery_finalizes_its_owner() -> None:
    t, fixture = world()
    holder = claimed(t, executing(t, reserved(t, fixture, expires=50_000)), expires=2_000)
    contender = executing(t, reserved(t, fixture, name="reservation-1", expires=50_000), now=1_300)
    disposition = t.do(
        begin_finalization, guard=contender, lease=lease("claim-1", 50_000), now_ns=2_500
    )
    assert isinstance(disposition, ClaimDisposition) and not disposition.claimed
    found = t.ask(recoverable, t_ns=2_500)
    assert [(item.attempt_id, item.cause) for item in found] == [
        (holder.attempt_id, "claim_expired")
    ]
    report = t.do(recover, t_ns=2_500, disk=DiskView())
    assert isinstance(report, RecoveryReport)
    assert [receipt.state for receipt in report.terminals] == [AttemptState.FAILED]
    assert not t.state.claims
    third = executing(t, reserved(t, fixture, name="reservation-2", expires=50_000), now=2_600)
    assert claimed(t, third, name="claim-2", now=2_700).claim_lease_id == "claim-2"


def test_a_failed_claim_owner_releases_the_claim_by_committing() -> None:
    t, fixture = world()
    first = claimed(t, executing(t, reserved(t, fixture)))
    receipt(commit(t, first, Censored(reason="budget exhausted")))
    row = t.state.attempts[first.attempt_id]
    assert (row.state, row.censor_reason) == (AttemptState.CENSORED, "budget exhausted")
    assert t.state.events[-1].payload == {
        "from": "finalizing",
        "to": "censored",
        "revision": 6,
        "reason": "budget exhausted",
    }
    second = executing(t, reserved(t, fixture, name="reservation-1"), now=1_500)
    assert claimed(t, second, name="claim-1", now=1_600).claim_lease_id == "claim-1"


def test_a_claim_holder_may_fail_or_censor_without_acceptance_checks_but_not_supersede() -> None:
    for outcome in (failed(), Censored(reason="budget")):
        t, fixture = world()
        guard = claimed(t, executing(t, reserved(t, fixture)))
        assert receipt(commit(t, guard, outcome)).state is outcome.state
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    assert refused(commit(t, guard, Superseded())) == "outcome_not_permitted"


# --- observations and acceptance -------------------------------------------------------


def test_selection_is_preserved_on_retry() -> None:
    t = Transcript()
    scenarios.failure_then_authorized_retry_accepted(t)
    state = t.state
    (selection,) = state.selections.values()
    selected = state.observations[selection.observation_id].observation
    assert selected.attempt_id == run_attempt_id(selected_slot_attempt(state, selection.slot_id), 0)
    assert selected.result == {"score": 7}
    assert len(state.observations) == 2
    assert sorted(row.state.value for row in state.attempts.values()) == ["accepted", "failed"]


def selected_slot_attempt(state: ModelState, observation_slot_id: str) -> str:
    return state.observation_slots[observation_slot_id].attempt_slot_id


def test_reregistering_an_observation_is_a_no_op() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    select(t, fixture, guard, "result-0")
    before = t.state
    again = select(t, fixture, guard, "result-0", now=1_350)
    assert isinstance(again, ObservationReceipt)
    assert (again.attempt, again.selected, again.event_sequence) == (guard, False, None)
    assert t.state is before


def test_stream_accepts_with_retained_checkpoints() -> None:
    t = Transcript()
    scenarios.stream_checkpoints_accepted(t)
    state = t.state
    assert len(state.selections) == 2
    owners = {
        state.observations[s.observation_id].observation.attempt_id
        for s in state.selections.values()
    }
    assert len(owners) == 2
    assert sorted(row.state.value for row in state.attempts.values()) == ["accepted", "failed"]


def test_warmup_is_accepted_without_observations() -> None:
    t, fixture = world(role=SlotRole.WARMUP)
    assert fixture.observation_slots == ()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    assert receipt(commit(t, guard, Accepted())).state is AttemptState.ACCEPTED


def test_fresh_observation_slot_accepts_like_one_shot() -> None:
    t, fixture = world(ExecutionKind.FRESH_OBSERVATION)
    guard = claimed(t, executing(t, reserved(t, fixture)))
    assert refused(commit(t, guard, Accepted())) == "acceptance_unsatisfied"
    select(t, fixture, guard, "result-0")
    assert receipt(commit(t, guard, Accepted())).state is AttemptState.ACCEPTED


def test_happy_path_commits_terminal_projection_and_releases_everything() -> None:
    t = Transcript()
    scenarios.happy_path_accepted(t)
    state = t.state
    (row,) = state.attempts.values()
    assert (row.state, row.revision, row.finished_at_ns) == (AttemptState.ACCEPTED, 8, 1_800)
    assert row.final_artifact_id == artifact(ArtifactKind.ATTEMPT, "attempt-0").id
    assert all(lease_row.released_at_ns is not None for lease_row in state.leases.values())
    assert not state.claims
    assert [event.sequence for event in state.events] == list(range(1, len(state.events) + 1))
    assert [tr.revision for tr in state.transitions] == list(range(9))
    for previous, current in zip(state.transitions, state.transitions[1:], strict=False):
        assert (previous.to_state, previous.at_ns <= current.at_ns) == (current.from_state, True)
        assert (current.from_state, current.to_state) in LEGAL_EDGES
    assert state.attempt_artifacts == {
        (row.id, "dataset", artifact(ArtifactKind.DATASET, "dataset").id)
    }
    assert state.leased_artifacts == {
        ("reservation-0", artifact(ArtifactKind.DATASET, "dataset").id)
    }


def test_failed_payload_and_columns() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    done = receipt(commit(t, guard, failed("oom")))
    assert done.event_sequence == len(t.state.events)
    row = t.state.attempts[guard.attempt_id]
    assert (row.failure_code, row.censor_reason) == ("oom", None)
    assert t.state.events[-1].payload == {
        "from": "finalizing",
        "to": "failed",
        "revision": 6,
        "failure_code": "oom",
        "details": {"exit_status": 1},
    }
