"""Writer spec tests: observation selection and attempt acceptance.

Acceptance is refused (``acceptance_unsatisfied``) for a missing, invalid, unselected or
incomplete observation; an invalid observation cannot be selected (``invalid_record``);
a successful retry keeps an earlier attempt's selection; a stream retains its selected
checkpoints across attempts; a warm-up is accepted with no membership at all.

Stream, fresh-observation and warm-up slots are registered with the public
``register_slots``, in lockstep with the model.
"""

from __future__ import annotations

import attrs
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Completion
from runstore import ExecutionKind
from runstore import Failed
from runstore import Next
from runstore import ObservationReceipt
from runstore import OwnedAttempt
from runstore import Reference
from runstore import Retry
from runstore import SlotRole
from runstore import Superseded
from runstore import canonical
from runstore.testing import fixtures as sc

from conformance.writer.world import World

S = AttemptState
SELECTIONS = "SELECT slot_id, observation_id, selected_at_ns FROM selected_observations"


def claimed(world: World, fixture: sc.SlotFixture, index: int, now: int) -> OwnedAttempt:
    """Retry ``index`` of the fixture's slot, reserved at ``now``, run to executing and
    holding the slot's claim."""
    guard = world.start(fixture, f"reservation-{index}", authorization=Next(retry=True), now=now)
    guard = world.walk(guard, sc.EXECUTION_PATH, now + 100)
    disposition = world.claim(guard, f"claim-{index}", now + 200)
    assert disposition.claimed
    return disposition.attempt


def refused_acceptance(world: World, guard: OwnedAttempt, now: int) -> None:
    world.refused(
        "acceptance_unsatisfied", lambda: world.finish(guard, Accepted(), "attempt-x", now)
    )
    assert world.rows("SELECT state FROM attempts WHERE id = ?", (guard.attempt_id,)) == [
        ("finalizing",)
    ]


# --- one-shot acceptance ----------------------------------------------------------------------


def test_acceptance_is_refused_without_any_observation(world: World) -> None:
    fixture = world.registered()
    guard = claimed(world, fixture, 0, 1_000)
    refused_acceptance(world, guard, 1_500)
    # The attempt can still finish otherwise.
    world.finish(guard, Failed(code="no_result", details={}), "attempt-0", 1_600)
    world.check()


def test_an_invalid_observation_cannot_be_selected_or_accepted(world: World) -> None:
    fixture = world.registered()
    member = fixture.observation_slots[0]
    guard = claimed(world, fixture, 0, 1_000)
    world.refused(
        "invalid_record",
        lambda: world.publish(guard, member, "result-0", 1_400, valid=False, select=True),
    )
    assert world.rows("SELECT count(*) FROM observations") == [(0,)]
    # Registered without selecting, it is kept (valid = 0) but does not count.
    world.publish(guard, member, "result-0", 1_400, valid=False, select=False)
    assert world.rows("SELECT valid, completion FROM observations") == [(0, "reached")]
    assert world.rows(SELECTIONS) == []
    refused_acceptance(world, guard, 1_500)
    world.check()


def test_a_selection_without_a_valid_observation_of_this_attempt_is_not_enough(
    world: World,
) -> None:
    fixture = world.registered()
    member = fixture.observation_slots[0]
    first = claimed(world, fixture, 0, 1_000)
    world.publish(first, member, "result-0", 1_300)
    world.finish(first, Failed(code="crashed", details={}), "attempt-0", 1_400)
    second = claimed(world, fixture, 1, 2_000)
    refused_acceptance(world, second, 2_300)  # the selection is attempt 0's
    world.publish(second, member, "result-1", 2_400, valid=False, select=False)
    refused_acceptance(world, second, 2_500)  # its own observation is invalid
    world.check()


def test_an_unselected_observation_is_not_accepted(world: World) -> None:
    fixture = world.registered()
    guard = claimed(world, fixture, 0, 1_000)
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_400, select=False)
    assert world.rows("SELECT valid, completion FROM observations") == [(1, "reached")]
    assert world.rows(SELECTIONS) == []
    refused_acceptance(world, guard, 1_500)
    world.check()


def test_an_incomplete_observation_is_selectable_but_not_accepted(world: World) -> None:
    fixture = world.registered()
    member = fixture.observation_slots[0]
    guard = claimed(world, fixture, 0, 1_000)
    observation = world.publish(guard, member, "result-0", 1_400, completion=Completion.NOT_REACHED)
    assert world.rows(SELECTIONS) == [(member.id, observation.id, 1_400)]
    refused_acceptance(world, guard, 1_500)
    # A complete observation of its own, registered later, satisfies acceptance although
    # the selection stays the first one.
    world.publish(guard, member, "result-0b", 1_600, score=2)
    assert world.rows(SELECTIONS) == [(member.id, observation.id, 1_400)]
    assert world.finish(guard, Accepted(), "attempt-0", 1_700).state is S.ACCEPTED
    world.check()


def test_selecting_needs_the_claim(world: World) -> None:
    fixture = world.registered()
    member = fixture.observation_slots[0]
    holder = claimed(world, fixture, 0, 1_000)
    reserved = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
    world.refused("claim_required", lambda: world.publish(reserved, member, "result-1", 1_400))
    loser = world.claim(reserved, "claim-1", 1_500).attempt
    world.refused("claim_required", lambda: world.publish(loser, member, "result-1", 1_600))
    world.publish(loser, member, "result-1", 1_600, select=False)
    world.publish(holder, member, "result-0", 1_700)
    world.check()


def test_a_successful_retry_preserves_an_earlier_selection(world: World) -> None:
    fixture = world.registered()
    member = fixture.observation_slots[0]
    first = claimed(world, fixture, 0, 1_000)
    chosen = world.publish(first, member, "result-0", 1_300, score=7)
    world.finish(first, Failed(code="evaluator_crashed", details={"exit": 3}), "a0", 1_400)
    retry = Retry(next_index=1, max_index=2)
    second = world.start(fixture, "reservation-1", authorization=retry, now=2_000)
    second = world.walk(second, sc.EXECUTION_PATH, 2_100)
    second = world.claim(second, "claim-1", 2_200).attempt
    own = world.publish(second, member, "result-1", 2_300, score=9)  # asks to select
    assert world.rows(SELECTIONS) == [(member.id, chosen.id, 1_300)]
    assert sorted(world.rows("SELECT id, attempt_id, valid FROM observations")) == sorted(
        [(chosen.id, first.attempt_id, 1), (own.id, second.attempt_id, 1)]
    )
    receipt = world.finish(second, Accepted(), "attempt-1", 2_400)
    assert (receipt.retry_index, receipt.state) == (1, S.ACCEPTED)
    assert world.rows(SELECTIONS) == [(member.id, chosen.id, 1_300)]
    assert world.rows("SELECT retry_index, state FROM attempts ORDER BY retry_index") == [
        (0, "failed"),
        (1, "accepted"),
    ]
    world.check()


# --- streams and warm-ups -------------------------------------------------------------------


def test_a_stream_retains_selected_checkpoints_across_attempts(world: World) -> None:
    fixture = world.registered(kind=ExecutionKind.STREAM, checkpoints=3, name="stream")
    zero, one, two = fixture.observation_slots
    first = claimed(world, fixture, 0, 1_000)
    kept = world.publish(first, zero, "checkpoint-0", 1_300, completion=Completion.NOT_REACHED)
    refused_acceptance(world, first, 1_400)  # checkpoints 1 and 2 have no selection
    world.finish(first, Failed(code="worker_lost", details={}), "attempt-0", 1_500)

    second = claimed(world, fixture, 1, 2_000)
    # Re-selecting checkpoint 0 leaves the retained selection in place.
    world.publish(second, zero, "checkpoint-0b", 2_300, score=5)
    world.publish(second, one, "checkpoint-1", 2_310, completion=Completion.NOT_REACHED)
    refused_acceptance(world, second, 2_400)  # checkpoint 2 still unselected
    world.publish(second, two, "checkpoint-2", 2_500, valid=False, select=False)
    refused_acceptance(world, second, 2_600)  # an invalid checkpoint is no selection
    third = world.publish(second, two, "checkpoint-2b", 2_700, score=2)
    assert world.finish(second, Accepted(), "attempt-1", 2_800).state is S.ACCEPTED
    selections = world.rows(SELECTIONS)
    assert sorted(selections) == sorted(
        [
            (zero.id, kept.id, 1_300),
            (one.id, sc.observation(one, second, completion=Completion.NOT_REACHED).id, 2_310),
            (two.id, third.id, 2_700),
        ]
    )
    assert world.rows("SELECT attempt_id FROM observations WHERE id = ?", (kept.id,)) == [
        (first.attempt_id,)
    ]
    world.check()


def test_a_warmup_is_accepted_with_no_membership(world: World) -> None:
    fixture = sc.slot_fixture(role=SlotRole.WARMUP, name="warmup")
    assert fixture.observation_slots == ()
    world.register(fixture)
    assert world.rows(
        "SELECT count(*) FROM attempt_observation_slots WHERE attempt_slot_id = ?",
        (fixture.slot_id,),
    ) == [(0,)]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    disposition = world.claim(guard, "claim-0", 1_200)
    assert disposition.claimed  # a warm-up contends for the claim like any slot
    receipt = world.finish(disposition.attempt, Accepted(), "attempt-0", 1_300)
    assert receipt.state is S.ACCEPTED
    world.refused(
        "slot_satisfied",
        lambda: world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_400),
    )
    world.check()


def test_a_warmup_without_the_claim_cannot_be_accepted(world: World) -> None:
    fixture = world.registered(role=SlotRole.WARMUP, name="warmup")
    first = world.start(fixture, "reservation-0")
    second = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
    world.claim(first, "claim-0", 1_100)
    loser = world.claim(second, "claim-1", 1_200).attempt
    world.refused("claim_required", lambda: world.finish(loser, Accepted(), "attempt-1", 1_300))
    assert world.rows("SELECT count(*) FROM artifacts WHERE kind = ?", (ArtifactKind.ATTEMPT,)) == [
        (0,)
    ]
    world.check()


def test_a_contender_after_acceptance_is_superseded(world: World) -> None:
    fixture = world.registered()
    winner = claimed(world, fixture, 0, 1_000)
    late = world.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
    world.publish(winner, fixture.observation_slots[0], "result-0", 1_300)
    world.finish(winner, Accepted(), "attempt-0", 1_400)
    assert world.rows("SELECT * FROM finalization_claims") == []
    # No claim row remains, but the slot is satisfied: the late attempt is superseded.
    disposition = world.claim(late, "claim-1", 1_500)
    assert not disposition.claimed
    assert world.rows("SELECT count(*) FROM leases WHERE id = 'claim-1'") == [(0,)]
    world.finish(disposition.attempt, Superseded(), "attempt-1", 1_600)
    world.check()


def test_observation_registration_checks_its_slot_attempt_and_artifact(world: World) -> None:
    fixture = sc.slot_fixture()
    other = sc.slot_fixture(name="other")
    world.register(fixture)
    world.register(other)
    member = fixture.observation_slots[0]
    guard = claimed(world, fixture, 0, 1_000)
    published = sc.artifact(ArtifactKind.OBSERVATION, "result-0")
    unknown = sc.slot_fixture(name="never").observation_slots[0]
    world.refused(
        "unknown_slot",
        world.observe,
        guard,
        sc.observation(unknown, guard),
        published,
        False,
        1_300,
    )
    world.refused(
        "observation_slot_mismatch",
        world.observe,
        guard,
        sc.observation(other.observation_slots[0], guard),
        published,
        False,
        1_300,
    )
    wrong_kind = sc.artifact(ArtifactKind.DATASET, "result-0")
    world.refused(
        "invalid_record",
        world.observe,
        guard,
        sc.observation(member, guard),
        wrong_kind,
        True,
        1_300,
    )
    observation = world.publish(guard, member, "result-0", 1_300, select=False)
    # Identical re-registration reuses the row (and may select it now).
    world.publish(guard, member, "result-0", 1_400)
    assert world.rows("SELECT id, registered_at_ns FROM observations") == [(observation.id, 1_300)]
    assert world.rows(SELECTIONS) == [(member.id, observation.id, 1_400)]
    # The same observation under another artifact, or the artifact with other digests,
    # is a conflict.
    elsewhere = sc.artifact(ArtifactKind.OBSERVATION, "result-elsewhere")
    world.refused(
        "registration_conflict", world.observe, guard, observation, elsewhere, False, 1_500
    )
    altered = attrs.evolve(published, manifest_sha256=sc.digest("other manifest"))
    world.refused("registration_conflict", world.observe, guard, observation, altered, False, 1_500)
    world.check()


def test_a_fresh_observation_slot_needs_its_own_complete_result(world: World) -> None:
    fixture = world.registered(kind=ExecutionKind.FRESH_OBSERVATION, name="fresh")
    member = fixture.observation_slots[0]
    first = claimed(world, fixture, 0, 1_000)
    world.publish(first, member, "fresh-0", 1_300, completion=Completion.NOT_REACHED)
    refused_acceptance(world, first, 1_400)
    world.finish(first, Censored(reason="deadline"), "attempt-0", 1_500)
    second = claimed(world, fixture, 1, 2_000)
    refused_acceptance(world, second, 2_300)  # the retained selection is not its own
    world.publish(second, member, "fresh-1", 2_400)
    assert world.finish(second, Accepted(), "attempt-1", 2_500).state is S.ACCEPTED
    world.check()


def test_a_failing_attempt_leaves_the_claim_to_a_successful_retry(world: World) -> None:
    fixture = world.registered()
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


def test_an_observation_has_references_an_event_and_says_whether_it_selected(
    world: World,
) -> None:
    fixture = world.registered()
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


def test_re_registering_an_observation_with_other_references_is_a_conflict(
    world: World,
) -> None:
    """observation_references_conflict_unchecked: the same observation and artifact with
    other references is refused, and the kept references and events are unchanged."""
    fixture = world.registered()
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    metric = sc.artifact(ArtifactKind.OBSERVATION, "metric-0")
    world.observe(guard, sc.observation(member, guard), metric, False, 1_200)
    observation = sc.observation(member, guard, score=2)
    artifact = sc.artifact(ArtifactKind.OBSERVATION, "observation-0")
    world.observe(guard, observation, artifact, False, 1_300, [Reference("metrics", metric.id)])
    world.refused(
        "registration_conflict",
        lambda: world.store.register_observation(
            guard,
            observation,
            artifact,
            [Reference("inputs", metric.id)],
            select=False,
            now_ns=1_400,
        ),
    )
    assert world.rows(
        "SELECT role, artifact_id FROM observation_artifacts WHERE observation_id = ?",
        (observation.id,),
    ) == [("metrics", metric.id)]
    world.check()


def test_an_observation_referencing_an_unknown_artifact_is_refused(world: World) -> None:
    """observation_reference_existence_unchecked: a reference to an artifact that is
    neither registered nor the observation's own is unknown_artifact, and nothing is
    written."""
    fixture = world.registered()
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    unknown = sc.artifact(ArtifactKind.OBSERVATION, "never-registered")
    error = world.refused(
        "unknown_artifact",
        lambda: world.store.register_observation(
            guard,
            sc.observation(member, guard),
            sc.artifact(ArtifactKind.OBSERVATION, "observation-0"),
            [Reference("inputs", unknown.id)],
            select=False,
            now_ns=1_200,
        ),
    )
    assert unknown.id in str(error)
    assert world.rows("SELECT count(*) FROM observations") == [(0,)]
    world.check()


def test_re_selecting_an_already_selected_observation_writes_nothing(world: World) -> None:
    """observation_reregistration_writes_event: an identical re-registration asking to
    select an observation whose slot already has a selection selects nothing new, so it
    writes nothing and has no event."""
    fixture = world.registered()
    member = fixture.observation_slots[0]
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200).attempt
    observation = world.publish(guard, member, "observation-0", 1_300)
    events = world.rows("SELECT count(*) FROM events")
    delivered = len(world.delivered)
    artifact = sc.artifact(ArtifactKind.OBSERVATION, "observation-0")
    receipt = world.observe(guard, observation, artifact, True, 1_400)
    assert (receipt.selected, receipt.selection, receipt.event_sequence) == (
        False,
        observation.id,
        None,
    )
    assert world.rows("SELECT count(*) FROM events") == events
    assert len(world.delivered) == delivered
    world.check()
