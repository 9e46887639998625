"""runstore.testing: the factories build valid, deterministic, mutually consistent records
that registration (here: the model's) accepts."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any

import pytest
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Completion
from runstore import ExecutionKind
from runstore import FirstAttempt
from runstore import ObservationSlotKind
from runstore import OwnedAttempt
from runstore import SlotRole
from runstore import model as m
from runstore import run_attempt_id
from runstore import testing
from runstore.model.registration import register_one_shot
from runstore.model.registration import register_slots
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.testing import fixtures
from runstore.testing import script
from runstore.testing.lockstep import ModelRefusal
from runstore.testing.lockstep import ModelWriter


def assert_round_trips(record: Any) -> None:
    """The record validates from its own document and canonical bytes."""
    assert type(record).from_json(record.to_json()) == record
    if hasattr(record, "to_bytes"):
        assert type(record).from_bytes(record.to_bytes()) == record


# --- one_shot ------------------------------------------------------------------------------


def test_one_shot_records_round_trip() -> None:
    for record in testing.one_shot().arguments():
        assert_round_trips(record)


def test_one_shot_memberships_are_consistent() -> None:
    bundle = testing.one_shot("m", candidate="cand", problem="prob")
    candidate, run, attempt_slot, observation_slot = bundle.arguments()
    assert (candidate, run) == (bundle.decision, bundle.run)
    assert (attempt_slot, observation_slot) == (bundle.attempt_slot, bundle.observation_slot)
    assert candidate.applicable
    assert (candidate.candidate_id, candidate.problem_id) == ("cand", "prob")
    assert (run.decision_id, run.candidate_id) == (candidate.id, candidate.candidate_id)
    assert attempt_slot.run_id == observation_slot.run_id == run.id
    assert observation_slot.attempt_slot_id == attempt_slot.id == bundle.slot_id
    assert attempt_slot.execution_kind is ExecutionKind.ONE_SHOT
    assert attempt_slot.role is SlotRole.MEASUREMENT
    assert observation_slot.kind is ObservationSlotKind.RESULT
    assert observation_slot.checkpoint_index is None
    assert (attempt_slot.logical_slot, observation_slot.logical_slot) == ("m", "m/result")
    assert bundle.attempt_id(3) == run_attempt_id(attempt_slot.id, 3)
    assert bundle.attempt_id() == run_attempt_id(attempt_slot.id, 0)


def test_one_shot_is_deterministic() -> None:
    first, second = testing.one_shot("x"), testing.one_shot("x")
    assert first == second
    assert [r.id for r in first.arguments()] == [r.id for r in second.arguments()]


def test_distinct_names_give_distinct_slots_in_one_run() -> None:
    a, b = testing.one_shot("a"), testing.one_shot("b")
    assert a.attempt_slot.id != b.attempt_slot.id
    assert a.observation_slot.id != b.observation_slot.id
    assert (a.decision, a.run) == (b.decision, b.run)


def test_distinct_candidates_give_distinct_runs() -> None:
    a, b = testing.one_shot(candidate="c1"), testing.one_shot(candidate="c2")
    ids_a = {record.id for record in a.arguments()}
    ids_b = {record.id for record in b.arguments()}
    assert not ids_a & ids_b
    assert testing.one_shot(problem="p1").run.id != testing.one_shot(problem="p2").run.id


def test_one_shot_bundles_register_and_share_their_run() -> None:
    state = ModelState()
    for name in ("a", "b"):
        bundle = testing.one_shot(name)
        state, result = register_one_shot(state, *bundle.arguments())
        assert result == bundle.slot_id
    assert len(state.runs) == 1
    assert len(state.attempt_slots) == len(state.observation_slots) == 2


def test_warmup_one_shot_is_valid_but_not_registrable() -> None:
    bundle = testing.one_shot(role=SlotRole.WARMUP)
    for record in bundle.arguments():
        assert_round_trips(record)
    _, result = register_one_shot(ModelState(), *bundle.arguments())
    assert isinstance(result, Refusal) and result.code == "invalid_record"


# --- stream, warmup, decision ------------------------------------------------------------


@pytest.mark.parametrize("checkpoints", [1, 3])
def test_stream_owns_numbered_checkpoint_slots(checkpoints: int) -> None:
    bundle = testing.stream("s", checkpoints=checkpoints)
    assert bundle.attempt_slot.execution_kind is ExecutionKind.STREAM
    assert [slot.checkpoint_index for slot in bundle.observation_slots] == list(range(checkpoints))
    for slot in bundle.observation_slots:
        assert slot.kind is ObservationSlotKind.CHECKPOINT
        assert (slot.run_id, slot.attempt_slot_id) == (bundle.run.id, bundle.slot_id)
        assert_round_trips(slot)
    assert len({slot.id for slot in bundle.observation_slots}) == checkpoints
    _, result = register_slots(ModelState(), *bundle.arguments())
    assert result == bundle.slot_id


@pytest.mark.parametrize("kind", list(ExecutionKind))
def test_warmup_owns_no_observation_slot(kind: ExecutionKind) -> None:
    bundle = testing.warmup("w", kind=kind)
    assert bundle.attempt_slot.role is SlotRole.WARMUP
    assert bundle.attempt_slot.execution_kind is kind
    assert bundle.observation_slots == ()
    assert_round_trips(bundle.attempt_slot)
    _, result = register_slots(ModelState(), *bundle.arguments())
    assert result == bundle.slot_id


@pytest.mark.parametrize("role", list(SlotRole))
@pytest.mark.parametrize("kind", list(ExecutionKind))
def test_slots_own_what_their_kind_and_role_call_for(kind: ExecutionKind, role: SlotRole) -> None:
    bundle = testing.slots("x", kind=kind, role=role, checkpoints=3)
    slot = bundle.attempt_slot
    assert (slot.logical_slot, slot.execution_kind, slot.role) == ("x", kind, role)
    names = [member.logical_slot for member in bundle.observation_slots]
    if role is SlotRole.WARMUP:
        assert names == []
    elif kind is ExecutionKind.STREAM:
        assert names == ["x/checkpoint-0", "x/checkpoint-1", "x/checkpoint-2"]
    else:
        assert names == ["x/result"]
        assert bundle.observation_slots[0].kind is ObservationSlotKind.RESULT
    for member in bundle.observation_slots:
        assert (member.run_id, member.attempt_slot_id) == (bundle.run.id, bundle.slot_id)
    _, result = register_slots(ModelState(), *bundle.arguments())
    assert result == bundle.slot_id
    if role is SlotRole.WARMUP:
        assert bundle == testing.warmup("x", kind=kind)
    elif kind is ExecutionKind.STREAM:
        assert bundle == testing.stream("x", checkpoints=3)


def test_testing_imports_only_value_modules() -> None:
    """``import runstore.testing`` loads the factories, which must stay as pure as the
    model: from the package they import only value modules (no store, SQL, files or
    events). ``conformance/meta/test_layers.py`` holds the whole package map; this pins the
    factories' exact imports."""
    assert testing.factories.__file__ is not None
    tree = ast.parse(Path(testing.factories.__file__).read_text(encoding="utf-8"))
    imported = {
        name
        for node in ast.walk(tree)
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
    }
    value_modules = {
        "runstore.canonical",
        "runstore.enums",
        "runstore.identity",
        "runstore.records",
        "runstore.requests",
    }
    assert {name for name in imported if name.startswith("runstore")} == value_modules
    assert imported - value_modules <= {
        "__future__",
        "attrs",
        "hashlib",
    }


def test_excluded_decision_and_its_run() -> None:
    excluded = testing.decision("c", "p", applicable=False)
    assert not excluded.applicable
    assert excluded.id != testing.decision("c", "p").id
    run = testing.resolved_run(excluded)
    assert run.decision_id == excluded.id
    assert_round_trips(run)


# --- lease, observation, artifact ---------------------------------------------------------


def test_lease_is_deterministic_per_name_and_owner() -> None:
    first = testing.lease("r0", expires_at_ns=10)
    assert first == testing.lease("r0", expires_at_ns=10)
    assert first.expires_at_ns == 10
    other = testing.lease("r1", expires_at_ns=10)
    assert other.lease_id != first.lease_id
    assert other.owner_token == first.owner_token
    assert testing.lease("r0", expires_at_ns=10, owner="b").owner_token != first.owner_token


def test_observation_belongs_to_its_slot_and_attempt() -> None:
    bundle = testing.one_shot()
    attempt_id = bundle.attempt_id(0)
    result = testing.observation(bundle.observation_slot, attempt_id)
    assert (result.slot_id, result.attempt_id) == (bundle.observation_slot.id, attempt_id)
    assert result.valid and result.completion is Completion.REACHED
    assert result.result == {}
    assert_round_trips(result)
    assert result == testing.observation(bundle.observation_slot, attempt_id)
    variants = {
        result.id,
        testing.observation(bundle.observation_slot, attempt_id, valid=False).id,
        testing.observation(
            bundle.observation_slot, attempt_id, completion=Completion.NOT_REACHED
        ).id,
        testing.observation(bundle.observation_slot, attempt_id, result={"score": 1}).id,
        testing.observation(bundle.observation_slot, bundle.attempt_id(1)).id,
    }
    assert len(variants) == 5


@pytest.mark.parametrize("kind", list(ArtifactKind))
def test_artifact_derives_digest_path_and_id(kind: ArtifactKind) -> None:
    registration = testing.artifact(kind, "seed", verified_at_ns=7)
    content = hashlib.sha256(b"seed").hexdigest()
    assert registration.content_sha256 == content == testing.digest("seed")
    assert registration.path == f"artifacts/{kind.value}-{content}"
    assert registration.id == f"run-store-v1:{kind.value}-{content}"
    assert registration.verified_at_ns == 7
    assert ArtifactRegistration.from_json(registration.to_json()) == registration
    assert registration == testing.artifact(kind, "seed", verified_at_ns=7)
    assert testing.artifact(kind, "other", verified_at_ns=7).id != registration.id


# --- call scripts (runstore.testing.script) ---------------------------------------------------


def test_a_call_names_an_attempt_exactly_when_it_needs_one() -> None:
    with pytest.raises(ValueError, match="only reserve and guarded calls"):
        script.Call("advance without a handle", "advance", {"phase": AttemptState.STARTING})
    with pytest.raises(ValueError, match="only reserve and guarded calls"):
        script.Call("register with a handle", "register_slots", {}, attempt="a")
    with pytest.raises(ValueError):
        script.Call("unknown", "drop_table", {})


def test_a_script_plays_on_the_model_and_keeps_guards_by_handle() -> None:
    fixture = fixtures.slot_fixture()
    lease = fixtures.lease("reservation-a", 10_000)
    calls = [
        script.register_slots(*fixture.arguments()),
        script.reserve("a", fixture.slot_id, FirstAttempt(), lease, 1_000),
        script.advance("a", AttemptState.MATERIALIZING, 1_100),
    ]
    writer = ModelWriter(m.ModelState())
    context: script.Context = {}
    results = script.play(calls, writer, context)
    assert results[0] == fixture.slot_id
    assert isinstance(results[2], OwnedAttempt)
    assert context == {"a": results[2]}
    assert results[2].state is AttemptState.MATERIALIZING
    stale = script.advance("a", AttemptState.MATERIALIZING, 1_200)
    with pytest.raises(ModelRefusal):
        stale.apply(writer, context)
    assert context == {"a": results[2]}
