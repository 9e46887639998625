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
from runstore import OwnedAttempt
from runstore import Retry
from runstore import SlotRole
from runstore import Superseded
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
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = claimed(world, fixture, 0, 1_000)
    refused_acceptance(world, guard, 1_500)
    # The attempt can still finish otherwise.
    world.finish(guard, Failed(code="no_result", details={}), "attempt-0", 1_600)
    world.check()


def test_an_invalid_observation_cannot_be_selected_or_accepted(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
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
    fixture = sc.slot_fixture()
    world.register(fixture)
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
    fixture = sc.slot_fixture()
    world.register(fixture)
    guard = claimed(world, fixture, 0, 1_000)
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_400, select=False)
    assert world.rows("SELECT valid, completion FROM observations") == [(1, "reached")]
    assert world.rows(SELECTIONS) == []
    refused_acceptance(world, guard, 1_500)
    world.check()


def test_an_incomplete_observation_is_selectable_but_not_accepted(world: World) -> None:
    fixture = sc.slot_fixture()
    world.register(fixture)
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
    fixture = sc.slot_fixture()
    world.register(fixture)
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
    fixture = sc.slot_fixture()
    world.register(fixture)
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
    fixture = sc.slot_fixture(kind=ExecutionKind.STREAM, checkpoints=3, name="stream")
    world.register(fixture)
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
    fixture = sc.slot_fixture(role=SlotRole.WARMUP, name="warmup")
    world.register(fixture)
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
    fixture = sc.slot_fixture()
    world.register(fixture)
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
    fixture = sc.slot_fixture(kind=ExecutionKind.FRESH_OBSERVATION, name="fresh")
    world.register(fixture)
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
