"""The model's own tests: its edges, its check order, every refusal code it declares,
and the behaviours the spec names (retries, expiry, clock clamping, claims, selection,
acceptance, recovery).

Refusal cases live in one table (:data:`REFUSAL_CASES`); each runs through a
:class:`Transcript`, which also asserts that a refusal hands back the very same state
object. A meta-test checks that the table produces exactly the model's declared codes.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from runstore import (
    Accepted,
    ApplicabilityDecision,
    ArtifactKind,
    AttemptState,
    Censored,
    ClaimDisposition,
    Completion,
    ExecutionKind,
    Failed,
    FirstAttempt,
    LeasePurpose,
    Next,
    OwnedAttempt,
    Retry,
    RetryAuthorization,
    SlotRole,
    Superseded,
    TerminalAttempt,
    TerminalOutcome,
    edges,
    errors,
    rules,
    run_attempt_id,
)
from runstore.edges import LEGAL_EDGES
from runstore.model import (
    MODEL_REFUSAL_CODES,
    ModelState,
    Refusal,
    advance,
    begin_finalization,
    begin_staging,
    commit_finalization,
    publish_staged_artifact,
    recover,
    recoverable,
    register_observation,
    register_one_shot,
    register_slots,
    renew,
    reserve,
)
from runstore.testing import fixtures, scenarios
from runstore.testing.fixtures import OTHER_OWNER, OWNER, SlotFixture, artifact, lease, observation
from runstore.testing.trace import Transcript

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "model"
SHARED_RULES = [ROOT / "impl" / name for name in ("rules.py", "shapes.py", "edges.py")]
ATTEMPT_ARTIFACT = artifact(ArtifactKind.ATTEMPT, "attempt")


# --- helpers ---------------------------------------------------------------------------


def world(
    kind: ExecutionKind = ExecutionKind.ONE_SHOT,
    role: SlotRole = SlotRole.MEASUREMENT,
    checkpoints: int = 2,
) -> tuple[Transcript, SlotFixture]:
    """A transcript with one registered slot."""
    t = Transcript()
    fixture = fixtures.slot_fixture(kind, role, checkpoints)
    scenarios.register(t, fixture)
    assert fixture.slot_id in t.state.attempt_slots
    return t, fixture


owned = scenarios.owned


def refused(result: object) -> str:
    assert isinstance(result, Refusal), result
    return result.code


def receipt(result: object) -> TerminalAttempt:
    assert isinstance(result, TerminalAttempt), result
    return result


def reserved(
    t: Transcript,
    fixture: SlotFixture,
    *,
    name: str = "reservation-0",
    expires: int = 10_000,
    now: int = 1_000,
    owner: str = OWNER,
    authorization: RetryAuthorization | None = None,
) -> OwnedAttempt:
    authorization = authorization or Next(retry=True)
    return owned(
        scenarios.reserve_in(t, fixture, authorization, name, expires=expires, now=now, owner=owner)
    )


def executing(t: Transcript, guard: OwnedAttempt, now: int = 1_100) -> OwnedAttempt:
    return scenarios.run_to(t, guard, fixtures.EXECUTION_PATH, now)


def claimed(
    t: Transcript,
    guard: OwnedAttempt,
    *,
    name: str = "claim-0",
    expires: int = 10_000,
    now: int = 1_200,
) -> OwnedAttempt:
    return scenarios.claimed(scenarios.finalize(t, guard, name, expires=expires, now=now))


def select(
    t: Transcript,
    fixture: SlotFixture,
    guard: OwnedAttempt,
    label: str,
    now: int = 1_300,
    completion: Completion = Completion.REACHED,
    valid: bool = True,
) -> object:
    slot = fixture.observation_slots[0]
    return scenarios.observe(t, guard, slot, label, now=now, completion=completion, valid=valid)


def commit(
    t: Transcript,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    now: int = 1_400,
    label: str = "attempt",
    references: tuple[tuple[str, str], ...] = (),
) -> object:
    return scenarios.conclude(t, guard, outcome, label, now=now, references=references)


def accepted_world() -> tuple[Transcript, SlotFixture, OwnedAttempt]:
    """A one-shot slot whose first attempt is accepted; returns its last live guard."""
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    select(t, fixture, guard, "result-0")
    receipt(commit(t, guard, Accepted()))
    return t, fixture, guard


def failed(code: str = "worker_crashed") -> Failed:
    return Failed(code=code, details={"exit_status": 1})


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
    return t.do(recover, t_ns=-1, artifacts={})


@case("invalid_record")
def register_excluded_decision() -> object:
    fixture = fixtures.slot_fixture()
    excluded = ApplicabilityDecision(
        candidate_id="c", problem_id="p", applicable=False, evidence={}
    )
    return Transcript().do(
        register_slots,
        candidate=excluded,
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
        candidate=other,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=fixture.observation_slots,
    )


@case("invalid_record")
def register_one_shot_with_stream_slot() -> object:
    fixture = fixtures.slot_fixture(ExecutionKind.STREAM)
    return Transcript().do(
        register_one_shot,
        candidate=fixture.candidate,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slot=fixture.observation_slots[0],
    )


@case("invalid_record")
def register_one_shot_without_result_slot() -> object:
    fixture = fixtures.slot_fixture()
    return Transcript().do(
        register_slots,
        candidate=fixture.candidate,
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
        now_ns=1_400,
    )


@case("invalid_record")
def commit_with_final_role_reference() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    return commit(t, guard, failed(), references=(("final", ATTEMPT_ARTIFACT.id),))


@case("invalid_record")
def commit_with_repeated_reference() -> object:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    ref = ("dataset", ATTEMPT_ARTIFACT.id)
    return commit(t, guard, failed(), references=(ref, ref))


@case("invalid_record")
def stage_at_unsafe_path() -> object:
    t, fixture = world()
    guard = reserved(t, fixture)
    return t.do(begin_staging, guard=guard, lease_id="s", staging_path="../outside", now_ns=1_000)


@case("invalid_record")
def recover_with_observation_artifact() -> object:
    t, fixture = world()
    guard = reserved(t, fixture, expires=2_000)
    return t.do(
        recover, t_ns=2_000, artifacts={guard.attempt_id: artifact(ArtifactKind.OBSERVATION, "x")}
    )


@case("registration_conflict")
def register_logical_slot_twice() -> object:
    t, fixture = world()
    other = attrs.evolve(fixture.attempt_slot, role=SlotRole.WARMUP)
    return t.do(
        register_slots,
        candidate=fixture.candidate,
        run=fixture.run,
        attempt_slot=other,
        observation_slots=(),
    )


@case("registration_conflict")
def register_slot_with_other_members() -> object:
    t, fixture = world(ExecutionKind.STREAM, checkpoints=2)
    return t.do(
        register_slots,
        candidate=fixture.candidate,
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
        select=False,
        now_ns=1_000,
    )
    changed = attrs.evolve(first, manifest_sha256=fixtures.digest("other"))
    return t.do(
        register_observation,
        guard=guard,
        observation=observation(member, guard, score=2),
        artifact=changed,
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
def advance_into_finalizing() -> object:
    t, fixture = world()
    return t.do(advance, guard=reserved(t, fixture), phase=AttemptState.FINALIZING, now_ns=1_000)


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
        t, guard, failed(), references=(("dataset", artifact(ArtifactKind.DATASET, "nowhere").id),)
    )


@case("unknown_artifact")
def recover_without_outcome_artifact() -> object:
    t, fixture = world()
    reserved(t, fixture, expires=2_000)
    return t.do(recover, t_ns=2_000, artifacts={})


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
        select=False,
        now_ns=1_000,
    )


@case("observation_slot_mismatch")
def observe_slot_of_another_attempt_slot() -> object:
    t, fixture = world()
    other = fixtures.slot_fixture(name="second")
    t.do(
        register_slots,
        candidate=other.candidate,
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
        candidate=fixture.candidate,
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


# --- edges -----------------------------------------------------------------------------


def test_legal_edges_are_the_contract_edges() -> None:
    phases = [
        "reserved",
        "materializing",
        "starting",
        "preparing",
        "executing",
        "checkpointing",
        "validating",
        "evaluating",
    ]
    expected = {
        ("reserved", "materializing"),
        ("materializing", "starting"),
        ("starting", "preparing"),
        ("preparing", "executing"),
        ("executing", "checkpointing"),
        ("checkpointing", "validating"),
        ("validating", "evaluating"),
        ("executing", "validating"),
        ("evaluating", "executing"),
        *((phase, "finalizing") for phase in phases),
        *(("finalizing", end) for end in ("accepted", "censored", "superseded", "failed")),
    }
    assert expected == LEGAL_EDGES
    assert set(AttemptState) == set(edges.ALL_STATES)
    assert set(edges.TERMINAL_ORDER) == {"accepted", "censored", "superseded", "failed"}


def test_advance_takes_every_execution_edge_and_nothing_else() -> None:
    for source in AttemptState:
        for target in AttemptState:
            legal = (source.value, target.value) in edges.EXECUTION_EDGES
            assert legal == (
                (source.value, target.value) in LEGAL_EDGES
                and target.value not in ("finalizing", *edges.TERMINAL_ORDER)
            )


def test_refusals_in_rules_are_typed_errors() -> None:
    assert type(rules.lease_refusal("a lease", 10, False, 10)) is errors.LeaseExpiredError
    assert type(rules.lease_refusal("a lease", 10, True, 0)) is errors.LeaseReleasedError
    assert rules.lease_refusal("a lease", 10, False, 9) is None
    assert type(rules.renewal_refusal(5, 10, 1)) is errors.RenewalShortensError
    assert type(rules.renewal_refusal(1, 10, 1)) is errors.ExpiryNotAfterNowError
    assert rules.retry_refusal(1, False, 0, 0) is errors.RetryBoundExceededError
    assert rules.retry_refusal(1, True, None, None) is errors.RetryNotAuthorizedError
    assert type(rules.expiry_refusal(5, 5)) is errors.ExpiryNotAfterNowError


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
    receipts = t.do(
        recover,
        t_ns=2_500,
        artifacts={holder.attempt_id: artifact(ArtifactKind.ATTEMPT, "recovered")},
    )
    assert isinstance(receipts, tuple) and receipts[0].state is AttemptState.FAILED
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


def test_a_claim_holder_may_commit_superseded_and_failed_without_acceptance_checks() -> None:
    for outcome in (Superseded(), failed()):
        t, fixture = world()
        guard = claimed(t, executing(t, reserved(t, fixture)))
        assert receipt(commit(t, guard, outcome)).state is outcome.state


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
    assert select(t, fixture, guard, "result-0", now=1_350) == guard
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


# --- recovery --------------------------------------------------------------------------


def test_recoverable_at_exact_expiry_only() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    assert recoverable(t.state, 4_999) == ()
    (item,) = recoverable(t.state, 5_000)
    assert (item.attempt_id, item.cause) == (guard.attempt_id, "reservation_expired")


def test_recover_moves_to_finalizing_then_fails_interrupted() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-0",
        staging_path="artifacts/.staging-0",
        now_ns=1_200,
    )
    dataset = artifact(ArtifactKind.DATASET, "partial")
    t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id="stage-0",
        artifact=dataset,
        now_ns=1_300,
    )
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-1",
        staging_path="artifacts/.staging-1",
        now_ns=1_400,
    )
    outcome = artifact(ArtifactKind.ATTEMPT, "recovered")
    (done,) = t.do(recover, t_ns=6_000, artifacts={guard.attempt_id: outcome})
    assert (done.state, done.revision, done.finished_at_ns) == (AttemptState.FAILED, 6, 6_000)
    finalizing, finished = t.state.events[-2:]
    assert finalizing.payload == {"from": "executing", "to": "finalizing", "revision": 5}
    assert finished.payload == {
        "from": "finalizing",
        "to": "failed",
        "revision": 6,
        "failure_code": "interrupted_attempt",
        "details": {"cause": "reservation_expired", "interrupted_state": "executing"},
    }
    assert all(
        row.released_at_ns == 6_000 for name, row in t.state.leases.items() if name != "stage-0"
    )
    assert t.state.leases["stage-0"].released_at_ns == 1_300
    assert t.state.attempt_artifacts == {(guard.attempt_id, "leased_root", dataset.id)}
    assert t.do(recover, t_ns=7_000, artifacts={}) == ()


def test_recover_finalizing_attempt_commits_only_the_failure() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)), expires=2_000)
    (done,) = t.do(recover, t_ns=2_000, artifacts={guard.attempt_id: ATTEMPT_ARTIFACT})
    assert done.revision == guard.revision + 1
    assert t.state.events[-2].kind == "attempt_finalizing"
    assert t.state.events[-1].payload["details"] == {
        "cause": "claim_expired",
        "interrupted_state": "finalizing",
    }


def test_live_and_terminal_attempts_are_not_recoverable() -> None:
    t, _, _ = accepted_world()
    assert recoverable(t.state, 10**12) == ()
    t2, fixture2 = world()
    reserved(t2, fixture2, expires=5_000)
    assert recoverable(t2.state, 4_000) == ()
    assert t2.do(recover, t_ns=4_000, artifacts={}) == ()


def test_recover_commits_each_recoverable_attempt_in_id_order() -> None:
    t, fixture = world()
    first = reserved(t, fixture, expires=3_000)
    second = owned(
        t.do(
            advance,
            guard=reserved(t, fixture, name="reservation-1", expires=4_000),
            phase=AttemptState.MATERIALIZING,
            now_ns=3_500,
        )
    )
    outcomes = {
        first.attempt_id: artifact(ArtifactKind.ATTEMPT, "a"),
        second.attempt_id: artifact(ArtifactKind.ATTEMPT, "b"),
    }
    done = t.do(recover, t_ns=4_000, artifacts=outcomes)
    assert isinstance(done, tuple)
    assert [r.attempt_id for r in done] == sorted([first.attempt_id, second.attempt_id])
    assert all(r.finished_at_ns == 4_000 for r in done)
