"""The model's refusals: every refusal code it declares, one case per (code, situation).

Refusal cases live in one table (:data:`REFUSAL_CASES`); each runs through a
:class:`~runstore.testing.transcript.Transcript`, which also asserts that a refusal hands
back the very same state object. Meta-tests check that the table produces exactly the
model's declared codes, and that the model (with the shared rules it calls) can refuse with
no other.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from runstore import Accepted
from runstore import ApplicabilityDecision
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import ClaimDisposition
from runstore import Completion
from runstore import ExecutionKind
from runstore import Failed
from runstore import FirstAttempt
from runstore import Next
from runstore import OwnedAttempt
from runstore import Reference
from runstore import Retry
from runstore import SlotRole
from runstore import Superseded
from runstore import errors
from runstore import run_attempt_id
from runstore.model import MODEL_REFUSAL_CODES
from runstore.model import DiskView
from runstore.model import Refusal
from runstore.model import advance
from runstore.model import begin_finalization
from runstore.model import begin_staging
from runstore.model import commit_finalization
from runstore.model import content
from runstore.model import publish_finalization_commit
from runstore.model import publish_staged_artifact
from runstore.model import recover
from runstore.model import register_observation
from runstore.model import register_one_shot
from runstore.model import register_slots
from runstore.model import renew
from runstore.model import reserve
from runstore.testing import fixtures
from runstore.testing import scenarios
from runstore.testing.fixtures import OTHER_OWNER
from runstore.testing.fixtures import artifact
from runstore.testing.fixtures import lease
from runstore.testing.fixtures import observation
from runstore.testing.transcript import Transcript

from conformance.model.world import ATTEMPT_ARTIFACT
from conformance.model.world import accepted_world
from conformance.model.world import claimed
from conformance.model.world import commit
from conformance.model.world import executing
from conformance.model.world import failed
from conformance.model.world import owned
from conformance.model.world import receipt
from conformance.model.world import reserved
from conformance.model.world import select
from conformance.model.world import world

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "model"
SHARED_RULES = [ROOT / "impl" / name for name in ("rules.py", "shapes.py", "edges.py")]

# --- refusal cases: one function per (code, situation) --------------------------------

RefusalCase = Callable[[], object]
REFUSAL_CASES: list[tuple[str, str, RefusalCase]] = []


def case(code: str) -> Callable[[RefusalCase], RefusalCase]:
    def register(function: RefusalCase) -> RefusalCase:
        REFUSAL_CASES.append((code, function.__name__, function))
        return function

    return register


@case("out_of_range")
def reserve_with_negative_clock() -> object:
    t, fixture = world()
    return scenarios.reserve_in(t, fixture, FirstAttempt(), "r", expires=10, now=-1)


@case("out_of_range")
def advance_past_max_clock() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=2**63)


@case("out_of_range")
def renew_past_max_expiry() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(renew, guard=guard, expires_at_ns=2**63, now_ns=1_000)


@case("out_of_range")
def recover_with_negative_clock() -> object:
    t, _ = world()
    return t.do(recover, t_ns=-1, disk=DiskView())


@case("invalid_record")
def register_excluded_decision() -> object:
    fixture = fixtures.slot_fixture()
    excluded = ApplicabilityDecision(
        candidate_id="c", problem_id="p", applicable=False, evidence={}
    )
    return Transcript().do(
        register_slots,
        decision=excluded,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=fixture.observation_slots,
    )


@case("invalid_record")
def register_run_of_another_decision() -> object:
    fixture = fixtures.slot_fixture()
    other = ApplicabilityDecision(
        candidate_id="candidate-1", problem_id="p2", applicable=True, evidence={}
    )
    return Transcript().do(
        register_slots,
        decision=other,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=fixture.observation_slots,
    )


@case("invalid_record")
def register_one_shot_with_stream_slot() -> object:
    fixture = fixtures.slot_fixture(ExecutionKind.STREAM)
    return Transcript().do(
        register_one_shot,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slot=fixture.observation_slots[0],
    )


@case("invalid_record")
def register_one_shot_without_result_slot() -> object:
    fixture = fixtures.slot_fixture()
    return Transcript().do(
        register_slots,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=(),
    )


@case("invalid_record")
def register_observation_of_wrong_kind() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(
        register_observation,
        guard=guard,
        observation=observation(fixture.observation_slots[0], guard),
        artifact=artifact(ArtifactKind.DATASET, "x"),
        references=(),
        select=False,
        now_ns=1_000,
    )


@case("invalid_record")
def select_invalid_observation() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    return select(t, fixture, guard, "bad", valid=False)


@case("invalid_record")
def commit_with_observation_artifact() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    return t.do(
        commit_finalization,
        guard=guard,
        outcome=failed(),
        artifact=artifact(ArtifactKind.OBSERVATION, "x"),
        references=(),
        finished_at_ns=1_400,
        now_ns=1_400,
    )


@case("invalid_record")
def commit_with_a_tuple_for_a_reference() -> object:
    """A plain ``(role, artifact_id)`` pair is not a ``Reference`` (a role a ``Reference``
    refuses, such as ``final``, never reaches the model)."""
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    pair = ("dataset", ATTEMPT_ARTIFACT.id)
    return commit(t, guard, failed(), references=(pair,))  # type: ignore[arg-type]


@case("invalid_record")
def commit_with_repeated_reference() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    ref = Reference("dataset", ATTEMPT_ARTIFACT.id)
    return commit(t, guard, failed(), references=(ref, ref))


@case("invalid_record")
def stage_at_unsafe_path() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(begin_staging, guard=guard, lease_id="s", staging_path="../outside", now_ns=1_000)


@case("invalid_record")
def recover_with_a_mapping_for_a_disk_view() -> object:
    t, fixture = world()
    reserved(t, fixture, expires=2_000)
    return t.do(recover, t_ns=2_000, disk={"stages": {}, "objects": {}, "corrupt": frozenset()})


@case("registration_conflict")
def register_logical_slot_twice() -> object:
    t, fixture = world()
    other = attrs.evolve(fixture.attempt_slot, role=SlotRole.WARMUP)
    return t.do(
        register_slots,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=other,
        observation_slots=(),
    )


@case("registration_conflict")
def register_slot_with_other_members() -> object:
    t, fixture = world(ExecutionKind.STREAM, checkpoints=2)
    return t.do(
        register_slots,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=fixture.observation_slots[:1],
    )


@case("registration_conflict")
def register_artifact_with_other_manifest() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    first = artifact(ArtifactKind.OBSERVATION, "x")
    member = fixture.observation_slots[0]
    t.do(
        register_observation,
        guard=guard,
        observation=observation(member, guard),
        artifact=first,
        references=(),
        select=False,
        now_ns=1_000,
    )
    changed = attrs.evolve(first, manifest_sha256=fixtures.digest("other"))
    return t.do(
        register_observation,
        guard=guard,
        observation=observation(member, guard, score=2),
        artifact=changed,
        references=(),
        select=False,
        now_ns=1_000,
    )


@case("registration_conflict")
def register_observation_with_other_artifact() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    member = fixture.observation_slots[0]
    scenarios.observe(t, guard, member, "x", now=1_000, select=False)
    return scenarios.observe(t, guard, member, "y", now=1_000, select=False)


@case("unknown_slot")
def reserve_unregistered_slot() -> object:
    t = Transcript()
    return t.do(
        reserve,
        slot_id=fixtures.slot_fixture().slot_id,
        authorization=FirstAttempt(),
        lease=lease("r", 10),
        now_ns=0,
    )


@case("unknown_slot")
def advance_unregistered_attempt() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    ghost = attrs.evolve(guard, attempt_id=run_attempt_id(fixture.slot_id, 7), retry_index=7)
    return t.do(advance, guard=ghost, phase=AttemptState.MATERIALIZING, now_ns=1_000)


@case("unknown_slot")
def observe_unregistered_slot() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    stranger = fixtures.slot_fixture(name="elsewhere").observation_slots[0]
    return scenarios.observe(t, guard, stranger, "x", now=1_000, select=False)


@case("slot_satisfied")
def reserve_satisfied_slot() -> object:
    t, fixture, _ = accepted_world()
    return scenarios.reserve_in(t, fixture, Next(retry=True), "r9", expires=10_000, now=2_000)


@case("retry_not_authorized")
def first_attempt_twice() -> object:
    t, fixture = world()
    reserved(t, fixture)
    return scenarios.reserve_in(t, fixture, FirstAttempt(), "r1", expires=10_000, now=1_000)


@case("retry_not_authorized")
def next_without_retry_after_an_attempt() -> object:
    t, fixture = world()
    reserved(t, fixture)
    return scenarios.reserve_in(t, fixture, Next(retry=False), "r1", expires=10_000, now=1_000)


@case("retry_not_authorized")
def retry_naming_a_later_index() -> object:
    t, fixture = world()
    reserved(t, fixture)
    return scenarios.reserve_in(
        t, fixture, Retry(next_index=2, max_index=3), "r1", expires=10_000, now=1_000
    )


@case("retry_bound_exceeded")
def retry_past_its_bound() -> object:
    t, fixture = world()
    reserved(t, fixture)
    reserved(t, fixture, name="reservation-1")
    return scenarios.reserve_in(
        t, fixture, Retry(next_index=1, max_index=1), "r2", expires=10_000, now=1_000
    )


@case("duplicate_lease")
def reserve_with_used_lease_id() -> object:
    t, fixture = world()
    reserved(t, fixture)
    return scenarios.reserve_in(
        t, fixture, Next(retry=True), "reservation-0", expires=10_000, now=1_000
    )


@case("duplicate_lease")
def claim_with_used_lease_id() -> object:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture))
    return t.do(begin_finalization, guard=guard, lease=lease("reservation-0", 10_000), now_ns=1_200)


@case("duplicate_lease")
def stage_with_used_lease_id() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(
        begin_staging,
        guard=guard,
        lease_id="reservation-0",
        staging_path="artifacts/.staging-0",
        now_ns=1_000,
    )


@case("owner_mismatch")
def advance_with_foreign_owner() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(
        advance,
        guard=attrs.evolve(guard, owner_token=OTHER_OWNER),
        phase=AttemptState.MATERIALIZING,
        now_ns=1_000,
    )


@case("owner_mismatch")
def claim_lease_for_another_owner() -> object:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture))
    return t.do(
        begin_finalization, guard=guard, lease=lease("claim-0", 10_000, OTHER_OWNER), now_ns=1_200
    )


@case("lease_mismatch")
def advance_with_another_lease_id() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    reserved(t, fixture, name="reservation-1")
    return t.do(
        advance,
        guard=attrs.evolve(guard, lease_id="reservation-1"),
        phase=AttemptState.MATERIALIZING,
        now_ns=1_000,
    )


@case("lease_mismatch")
def advance_with_invented_claim_lease() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(
        advance,
        guard=attrs.evolve(guard, claim_lease_id="claim-x"),
        phase=AttemptState.MATERIALIZING,
        now_ns=1_000,
    )


@case("lease_mismatch")
def publish_from_unknown_stage() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id="nope",
        artifact=artifact(ArtifactKind.DATASET, "d"),
        now_ns=1_000,
    )


@case("lease_released")
def publish_from_released_stage() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-0",
        staging_path="artifacts/.staging-0",
        now_ns=1_000,
    )
    t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id="stage-0",
        artifact=artifact(ArtifactKind.DATASET, "d"),
        now_ns=1_001,
    )
    return t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id="stage-0",
        artifact=artifact(ArtifactKind.DATASET, "d"),
        now_ns=1_002,
    )


@case("lease_expired")
def advance_at_exact_expiry() -> object:
    t, fixture = world()
    guard = reserved(t, fixture, expires=2_000)
    return t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=2_000)


@case("stale_revision")
def advance_with_old_guard() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=1_001)
    return t.do(advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=1_002)


@case("illegal_transition")
def advance_skipping_phases() -> object:
    t, fixture = world()
    return t.do(advance, guard=reserved(t, fixture), phase=AttemptState.EXECUTING, now_ns=1_000)


@case("illegal_transition")
def advance_into_finalizing_twice() -> object:
    t, fixture = world()
    guard = finalizing(t, reserved(t, fixture))
    return t.do(advance, guard=guard, phase=AttemptState.FINALIZING, now_ns=1_100)


def finalizing(t: Transcript, guard: OwnedAttempt) -> OwnedAttempt:
    """``guard`` advanced into finalizing without contending for the claim."""
    moved = t.do(advance, guard=guard, phase=AttemptState.FINALIZING, now_ns=1_050)
    assert isinstance(moved, OwnedAttempt) and moved.claim_lease_id is None, moved
    return moved


@case("claim_required")
def accept_after_finalizing_without_contention() -> object:
    t, fixture = world()
    guard = finalizing(t, executing(t, reserved(t, fixture)))
    return commit(t, guard, Accepted())


@case("outcome_not_permitted")
def supersede_without_contention() -> object:
    t, fixture = world()
    return commit(t, finalizing(t, executing(t, reserved(t, fixture))), Superseded())


@case("outcome_not_permitted")
def supersede_the_claim_holder() -> object:
    t, fixture = world()
    return commit(t, claimed(t, executing(t, reserved(t, fixture))), Superseded())


@case("outcome_not_permitted")
def fail_after_a_superseded_decision() -> object:
    t, fixture = world()
    claimed(t, executing(t, reserved(t, fixture)))
    loser = executing(t, reserved(t, fixture, name="reservation-1"), now=1_110)
    disposition = t.do(
        begin_finalization, guard=loser, lease=lease("claim-1", 10_000), now_ns=1_210
    )
    assert isinstance(disposition, ClaimDisposition) and not disposition.claimed
    return commit(t, disposition.attempt, failed())


@case("unknown_artifact")
def observe_with_an_unknown_reference() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(
        register_observation,
        guard=guard,
        observation=observation(fixture.observation_slots[0], guard),
        artifact=artifact(ArtifactKind.OBSERVATION, "x"),
        references=(Reference("metrics", artifact(ArtifactKind.METRICS, "m").id),),
        select=False,
        now_ns=1_000,
    )


@case("registration_conflict")
def observe_again_with_other_references() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    own = artifact(ArtifactKind.OBSERVATION, "x")
    arguments = {
        "guard": guard,
        "observation": observation(fixture.observation_slots[0], guard),
        "artifact": own,
        "select": False,
        "now_ns": 1_000,
    }
    t.do(register_observation, references=(), **arguments)
    return t.do(register_observation, references=(Reference("result", own.id),), **arguments)


@case("invalid_record")
def observe_with_a_tuple_for_a_reference() -> object:
    """A plain pair, even one whose role no ``Reference`` takes, is ill typed."""
    t, fixture = world()
    guard = reserved(t, fixture)
    own = artifact(ArtifactKind.OBSERVATION, "x")
    return t.do(
        register_observation,
        guard=guard,
        observation=observation(fixture.observation_slots[0], guard),
        artifact=own,
        references=(("", own.id),),
        select=False,
        now_ns=1_000,
    )


@case("illegal_transition")
def advance_into_terminal() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    return t.do(advance, guard=guard, phase=AttemptState.ACCEPTED, now_ns=1_300)


@case("illegal_transition")
def begin_finalization_twice() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    return t.do(begin_finalization, guard=guard, lease=lease("claim-1", 10_000), now_ns=1_300)


@case("illegal_transition")
def commit_before_finalizing() -> object:
    t, fixture = world()
    return commit(t, executing(t, reserved(t, fixture)), failed())


@case("attempt_terminal")
def advance_after_commit() -> object:
    t, _, guard = accepted_world()
    return t.do(advance, guard=guard, phase=AttemptState.EXECUTING, now_ns=2_000)


@case("claim_required")
def select_without_claim() -> object:
    t, fixture = world()
    return select(t, fixture, executing(t, reserved(t, fixture)), "result-0")


@case("claim_required")
def accept_after_superseded_decision() -> object:
    t, fixture = world()
    winner = executing(t, reserved(t, fixture))
    loser = executing(t, reserved(t, fixture, name="reservation-1"), now=1_110)
    claimed(t, winner)
    disposition = t.do(
        begin_finalization, guard=loser, lease=lease("claim-1", 10_000), now_ns=1_210
    )
    assert isinstance(disposition, ClaimDisposition) and not disposition.claimed
    return commit(t, disposition.attempt, Accepted())


@case("claim_expired")
def commit_after_claim_expiry() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)), expires=1_500)
    return commit(t, guard, failed(), now=1_500)


@case("acceptance_unsatisfied")
def accept_without_selection() -> object:
    t, fixture = world()
    return commit(t, claimed(t, executing(t, reserved(t, fixture))), Accepted())


@case("acceptance_unsatisfied")
def accept_with_only_incomplete_own_result() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    select(t, fixture, guard, "result-0", completion=Completion.NOT_REACHED)
    return commit(t, guard, Accepted())


@case("acceptance_unsatisfied")
def accept_on_earlier_selection_without_own_result() -> object:
    t, fixture = world()
    first = claimed(t, executing(t, reserved(t, fixture)))
    select(t, fixture, first, "result-0")
    receipt(commit(t, first, failed()))
    second = claimed(
        t,
        executing(t, reserved(t, fixture, name="reservation-1"), now=1_500),
        name="claim-1",
        now=1_600,
    )
    return commit(t, second, Accepted(), now=1_700, label="attempt-1")


@case("acceptance_unsatisfied")
def accept_stream_with_missing_checkpoint() -> object:
    t, fixture = world(ExecutionKind.STREAM, checkpoints=2)
    guard = claimed(t, executing(t, reserved(t, fixture)))
    select(t, fixture, guard, "checkpoint-0", completion=Completion.NOT_REACHED)
    return commit(t, guard, Accepted())


@case("unknown_artifact")
def commit_referencing_unknown_artifact() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    return commit(
        t,
        guard,
        failed(),
        references=(Reference("dataset", artifact(ArtifactKind.DATASET, "nowhere").id),),
    )


@case("observation_slot_mismatch")
def observe_for_another_attempt() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    other = reserved(t, fixture, name="reservation-1")
    return t.do(
        register_observation,
        guard=guard,
        observation=observation(fixture.observation_slots[0], other),
        artifact=artifact(ArtifactKind.OBSERVATION, "x"),
        references=(),
        select=False,
        now_ns=1_000,
    )


@case("observation_slot_mismatch")
def observe_slot_of_another_attempt_slot() -> object:
    t, fixture = world()
    other = fixtures.slot_fixture(name="second")
    t.do(
        register_slots,
        decision=other.decision,
        run=other.run,
        attempt_slot=other.attempt_slot,
        observation_slots=other.observation_slots,
    )
    guard = reserved(t, fixture)
    return scenarios.observe(t, guard, other.observation_slots[0], "x", now=1_000, select=False)


@case("observation_slot_mismatch")
def register_slot_owned_elsewhere() -> object:
    fixture = fixtures.slot_fixture()
    other = fixtures.slot_fixture(name="second")
    return Transcript().do(
        register_slots,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=other.observation_slots,
    )


@case("expiry_not_after_now")
def reserve_expiring_now() -> object:
    t, fixture = world()
    return scenarios.reserve_in(t, fixture, FirstAttempt(), "r", expires=1_000, now=1_000)


@case("expiry_not_after_now")
def renew_to_clamped_now() -> object:
    t, fixture = world()
    guard = owned(
        t.do(advance, guard=reserved(t, fixture), phase=AttemptState.MATERIALIZING, now_ns=1_500)
    )
    return t.do(renew, guard=guard, expires_at_ns=1_500, now_ns=100)


@case("expiry_not_after_now")
def claim_expiring_at_clamped_now() -> object:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture), now=1_500)
    return t.do(begin_finalization, guard=guard, lease=lease("claim-0", 1_503), now_ns=10)


@case("renewal_shortens")
def renew_earlier_than_current() -> object:
    t, fixture = world()
    return t.do(renew, guard=reserved(t, fixture), expires_at_ns=9_999, now_ns=1_000)


@case("renewal_shortens")
def renew_earlier_than_claim() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)), expires=20_000)
    return t.do(renew, guard=guard, expires_at_ns=15_000, now_ns=1_300)


@case("snapshot_changed")
def publish_a_finalization_whose_snapshot_is_stale() -> object:
    t, fixture = world()
    guard = owned(
        t.do(
            advance,
            guard=executing(t, reserved(t, fixture)),
            phase=AttemptState.FINALIZING,
            now_ns=1_200,
        )
    )
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-0",
        staging_path="artifacts/.staging-0",
        now_ns=1_200,
    )
    return t.do(
        publish_finalization_commit,
        guard=guard,
        staging_lease_id="stage-0",
        outcome=Failed(code="crashed", details={}),
        artifact=artifact(ArtifactKind.ATTEMPT, "final"),
        references=(),
        snapshot={"decision": {}},
        finished_at_ns=1_300,
        now_ns=1_300,
    )


@case("unsafe_entry")
def publish_a_tree_holding_a_symbolic_link() -> object:
    return content.refusal({"data.bin": content.File(b"1"), "link": content.Symlink("data.bin")})


@case("unsafe_entry")
def publish_a_caller_written_manifest() -> object:
    return content.refusal({"manifest.json": content.File(b"{}")})


@case("artifact_corrupt")
def read_a_manifest_that_is_not_an_object() -> object:
    return content.manifest_refusal(b"[]")


@pytest.mark.parametrize(
    ("code", "function"),
    [(c, f) for c, _, f in REFUSAL_CASES],
    ids=[n for _, n, _ in REFUSAL_CASES],
)
def test_refusal_case(code: str, function: RefusalCase) -> None:
    result = function()
    assert isinstance(result, Refusal), result
    assert result.code == code, result


def test_refusal_cases_produce_exactly_the_declared_codes() -> None:
    produced = set()
    for _, _, function in REFUSAL_CASES:
        result = function()
        assert isinstance(result, Refusal)
        produced.add(result.code)
    assert produced == MODEL_REFUSAL_CODES


def test_declared_codes_are_error_codes_and_cover_every_refusal_in_the_source() -> None:
    declared = {
        cls.code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.RunStoreError)
    }
    assert declared >= MODEL_REFUSAL_CODES
    # Every error class a model module, or a shared rule it calls, imports is one it can
    # refuse with.
    used = set()
    for path in [*MODEL_DIR.glob("*.py"), *SHARED_RULES]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "runstore.errors":
                used.update(
                    getattr(errors, alias.name).code
                    for alias in node.names
                    if alias.name != "RunStoreError"
                )
    assert used == MODEL_REFUSAL_CODES
