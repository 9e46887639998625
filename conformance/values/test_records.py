"""Domain records, guards and identities (SPEC.md sections 3 and 4): validation at
construction, identity recomputation, document round trips and pinned identities."""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from runstore import TERMINAL_STATES
from runstore import ApplicabilityDecision
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptSlot
from runstore import AttemptState
from runstore import Censored
from runstore import ClaimDisposition
from runstore import Completion
from runstore import ExecutionKind
from runstore import Failed
from runstore import LeaseRequest
from runstore import Next
from runstore import Observation
from runstore import ObservationSlot
from runstore import ObservationSlotKind
from runstore import OwnedAttempt
from runstore import ResolvedRun
from runstore import Retry
from runstore import SlotRole
from runstore import TerminalAttempt
from runstore import run_attempt_id
from runstore.canonical import JSON
from runstore.canonical import MAX_NS
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.errors import IdentityMismatchError
from runstore.errors import InvalidCanonicalJsonError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import RunStoreError
from runstore.identity import identity_input
from runstore.identity import typed_identity
from runstore.records import check_store_path

# --- one fixed record of each type (the pinned identities below are computed from these) ---

DECISION = ApplicabilityDecision(
    candidate_id="candidate-a",
    problem_id="problem-1",
    applicable=True,
    evidence={"checks": ["arch", "memory"], "passed": True},
)
RUN = ResolvedRun(
    decision_id=DECISION.id,
    candidate_id="candidate-a",
    logical_spec_id="spec-1",
    specification={"seed": 7},
)
ATTEMPT_SLOT = AttemptSlot(
    run_id=RUN.id,
    logical_slot="measure-0",
    execution_kind=ExecutionKind.ONE_SHOT,
    role=SlotRole.MEASUREMENT,
    specification={"timeout_s": 60},
)
OBSERVATION_SLOT = ObservationSlot(
    run_id=RUN.id,
    logical_slot="result-0",
    kind=ObservationSlotKind.RESULT,
    checkpoint_index=None,
    attempt_slot_id=ATTEMPT_SLOT.id,
)
ATTEMPT_ID = run_attempt_id(ATTEMPT_SLOT.id, 0)
OBSERVATION = Observation(
    slot_id=OBSERVATION_SLOT.id,
    attempt_id=ATTEMPT_ID,
    valid=True,
    completion=Completion.REACHED,
    result={"score": 42},
)
RECORDS = [DECISION, RUN, ATTEMPT_SLOT, OBSERVATION_SLOT, OBSERVATION]
IDS = ["decision", "run", "attempt-slot", "observation-slot", "observation"]


def digest(n: int) -> str:
    return f"{n:064x}"


def fields(record: Any) -> dict[str, Any]:
    """Constructor keywords that rebuild ``record`` (JSON-object fields by their alias)."""
    result = {}
    for field in attrs.fields(type(record)):
        value = getattr(record, field.alias)
        result[field.alias] = value
    return result


# --- identities ---------------------------------------------------------------------------


def test_identity_hashes_the_documented_bytes() -> None:
    body = DECISION.identity_document()
    data = identity_input("decision", body)
    assert data == b'{"record":' + encode(body) + b',"type":"decision","version":1}'
    assert DECISION.id == "decision:v1:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_id_is_recomputed_from_the_document(record: Any) -> None:
    assert record.id == typed_identity(record.PREFIX, record.identity_document())
    assert record.id.startswith(record.PREFIX + ":v1:")
    doc = record.to_json()
    assert doc == {**record.identity_document(), "id": record.id}


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_document_round_trip(record: Any) -> None:
    cls = type(record)
    assert cls.from_json(record.to_json()) == record
    assert cls.from_bytes(record.to_bytes()) == record
    assert decode(record.to_bytes()) == record.to_json()
    assert hash(cls.from_json(record.to_json())) == hash(record)


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_wrong_id_is_refused(record: Any) -> None:
    doc = record.to_json()
    doc["id"] = record.PREFIX + ":v1:" + digest(0)
    with pytest.raises(IdentityMismatchError):
        type(record).from_json(doc)


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_document_keys_are_exact(record: Any) -> None:
    cls = type(record)
    doc = record.to_json()
    for key in doc:
        partial = {k: v for k, v in doc.items() if k != key}
        with pytest.raises(InvalidRecordError):
            cls.from_json(partial)
    with pytest.raises(InvalidRecordError):
        cls.from_json({**doc, "extra": 1})
    with pytest.raises(InvalidRecordError):
        cls.from_json([doc])


def test_changing_any_identity_field_changes_the_id() -> None:
    other = attrs.evolve(DECISION, applicable=False)
    assert other.id != DECISION.id
    assert attrs.evolve(DECISION, evidence={"checks": []}).id != DECISION.id
    assert attrs.evolve(OBSERVATION, valid=False).id != OBSERVATION.id
    assert attrs.evolve(OBSERVATION, completion=Completion.NOT_REACHED).id != OBSERVATION.id


def test_exclusion_is_a_valid_decision() -> None:
    excluded = attrs.evolve(DECISION, applicable=False, evidence={"reason": "no gpu"})
    assert ApplicabilityDecision.from_json(excluded.to_json()) == excluded


def test_json_object_fields_are_detached_copies() -> None:
    evidence: dict[str, Any] = {"list": [1]}
    record = attrs.evolve(DECISION, evidence=evidence)
    evidence["list"].append(2)
    copy = record.evidence
    copy["list"] = [3]
    assert record.evidence == {"list": [1]}


@given(st.integers(0, MAX_SAFE_INTEGER), st.integers(0, MAX_SAFE_INTEGER))
def test_run_attempt_id_is_deterministic_and_distinct(first: int, second: int) -> None:
    other_slot = attrs.evolve(ATTEMPT_SLOT, logical_slot="measure-1").id
    assert run_attempt_id(ATTEMPT_SLOT.id, first) == run_attempt_id(ATTEMPT_SLOT.id, first)
    assert (first == second) == (
        run_attempt_id(ATTEMPT_SLOT.id, first) == run_attempt_id(ATTEMPT_SLOT.id, second)
    )
    assert run_attempt_id(ATTEMPT_SLOT.id, first) != run_attempt_id(other_slot, first)


def test_run_attempt_id_hashes_slot_and_retry_index() -> None:
    body: dict[str, JSON] = {"retry_index": 3, "slot_id": ATTEMPT_SLOT.id}
    assert run_attempt_id(ATTEMPT_SLOT.id, 3) == typed_identity("attempt", body)


@pytest.mark.parametrize(
    ("slot_id", "retry_index", "error"),
    [
        ("attempt-slot:v1:" + digest(1), -1, OutOfRangeError),
        ("attempt-slot:v1:" + digest(1), MAX_SAFE_INTEGER + 1, OutOfRangeError),
        ("attempt-slot:v1:" + digest(1), True, InvalidRecordError),
        ("attempt-slot:v1:" + digest(1), 1.0, InvalidRecordError),
        ("run:v1:" + digest(1), 0, InvalidRecordError),
        ("attempt-slot:v1:" + digest(0xAB).upper(), 0, InvalidRecordError),
        ("attempt-slot:v1:" + digest(1)[:-1], 0, InvalidRecordError),
        ("attempt-slot:v2:" + digest(1), 0, InvalidRecordError),
    ],
)
def test_run_attempt_id_refusals(
    slot_id: Any, retry_index: Any, error: type[RunStoreError]
) -> None:
    with pytest.raises(error):
        run_attempt_id(slot_id, retry_index)


# Each fixed record's identity, computed once and pinned; a change here breaks every store.
PINNED = [
    (
        "decision: DECISION",
        DECISION,
        "decision:v1:afe8efd01f1c950fb34208a8f65fcae9c74c3beb4f638bf281958cdd9f361723",
    ),
    ("run: RUN", RUN, "run:v1:dbdf5c0b4d71c52ac813845362bdf3720d91c30964b3c3275526edf6b0460a01"),
    (
        "attempt-slot: ATTEMPT_SLOT",
        ATTEMPT_SLOT,
        "attempt-slot:v1:c250512f79da33dbb31930fa6ceaf9c6184cb1a606733d3cd89d6c222c737ec6",
    ),
    (
        "observation-slot: OBSERVATION_SLOT",
        OBSERVATION_SLOT,
        "observation-slot:v1:2e29f2a73e9713fe0dc05870175fcf910add654805b1aafff16bbccdb7097e3e",
    ),
    (
        "observation: OBSERVATION",
        OBSERVATION,
        "observation:v1:f3c3675d4fdd11af65e9b8889c0dcdaeb077f79e73b0c6bdf7e3c6d94345e6ed",
    ),
    (
        "attempt: retry 0 of ATTEMPT_SLOT",
        ATTEMPT_ID,
        "attempt:v1:b953c97eb7650c5c9d48e6b9e5b925d2f18f983c96e1df004de581cec9184e74",
    ),
]


@pytest.mark.parametrize(("case", "record", "pinned"), PINNED, ids=[c for c, _, _ in PINNED])
def test_pinned_identities(case: str, record: Any, pinned: str) -> None:
    assert (record if isinstance(record, str) else record.id) == pinned


# --- construction validation: each invalid field refuses with its code ---------------------

BAD_TEXT: list[tuple[Any, type[RunStoreError]]] = [
    ("", InvalidRecordError),
    ("x" * 257, InvalidRecordError),
    ("tab\there", InvalidRecordError),
    ("del\x7f", InvalidRecordError),
    ("c1\x85", InvalidRecordError),
    ("\ud800", InvalidRecordError),
    (1, InvalidRecordError),
    (None, InvalidRecordError),
]
BAD_JSON_OBJECT: list[tuple[Any, type[RunStoreError]]] = [
    ([], InvalidRecordError),
    (None, InvalidRecordError),
    ({"x": 1.5}, InvalidCanonicalJsonError),
    ({"x": 2**53}, OutOfRangeError),
    ({1: "x"}, InvalidCanonicalJsonError),
]
BAD_CASES: list[tuple[Any, str, list[tuple[Any, type[RunStoreError]]]]] = [
    (DECISION, "candidate_id", BAD_TEXT),
    (DECISION, "problem_id", BAD_TEXT),
    (DECISION, "applicable", [(1, InvalidRecordError), ("true", InvalidRecordError)]),
    (DECISION, "evidence", BAD_JSON_OBJECT),
    (RUN, "decision_id", [(RUN.id, InvalidRecordError), ("d", InvalidRecordError)]),
    (RUN, "candidate_id", BAD_TEXT),
    (RUN, "logical_spec_id", BAD_TEXT),
    (RUN, "specification", BAD_JSON_OBJECT),
    (ATTEMPT_SLOT, "run_id", [(DECISION.id, InvalidRecordError)]),
    (ATTEMPT_SLOT, "logical_slot", BAD_TEXT),
    (ATTEMPT_SLOT, "execution_kind", [("one_shot", InvalidRecordError)]),
    (ATTEMPT_SLOT, "role", [(ExecutionKind.STREAM, InvalidRecordError)]),
    (ATTEMPT_SLOT, "specification", BAD_JSON_OBJECT),
    (OBSERVATION_SLOT, "run_id", [(ATTEMPT_SLOT.id, InvalidRecordError)]),
    (OBSERVATION_SLOT, "logical_slot", BAD_TEXT),
    (OBSERVATION_SLOT, "kind", [("result", InvalidRecordError)]),
    (OBSERVATION_SLOT, "checkpoint_index", [(0, InvalidRecordError)]),
    (OBSERVATION_SLOT, "attempt_slot_id", [(RUN.id, InvalidRecordError)]),
    (OBSERVATION, "slot_id", [(ATTEMPT_SLOT.id, InvalidRecordError)]),
    (OBSERVATION, "attempt_id", [(ATTEMPT_SLOT.id, InvalidRecordError)]),
    (OBSERVATION, "valid", [(None, InvalidRecordError)]),
    (OBSERVATION, "completion", [("reached", InvalidRecordError)]),
    (OBSERVATION, "result", BAD_JSON_OBJECT),
]


@pytest.mark.parametrize(
    ("record", "field", "value", "error"),
    [(r, f, v, e) for r, f, bad in BAD_CASES for v, e in bad],
    ids=[f"{type(r).__name__}.{f}={v!r:.20}" for r, f, bad in BAD_CASES for v, _ in bad],
)
def test_invalid_field_is_refused(
    record: Any, field: str, value: Any, error: type[RunStoreError]
) -> None:
    with pytest.raises(error):
        type(record)(**{**fields(record), field: value})


def test_checkpoint_slot_needs_an_index() -> None:
    checkpoint = attrs.evolve(
        OBSERVATION_SLOT, kind=ObservationSlotKind.CHECKPOINT, checkpoint_index=3
    )
    assert ObservationSlot.from_json(checkpoint.to_json()) == checkpoint
    for bad, error in [
        (None, InvalidRecordError),
        (-1, OutOfRangeError),
        (True, InvalidRecordError),
    ]:
        with pytest.raises(error):
            attrs.evolve(checkpoint, checkpoint_index=bad)


def test_document_with_unknown_enum_value_is_refused() -> None:
    doc = ATTEMPT_SLOT.to_json()
    doc["role"] = "referee"
    with pytest.raises(InvalidRecordError):
        AttemptSlot.from_json(doc)


# --- artifacts -----------------------------------------------------------------------------

ARTIFACT = ArtifactRegistration(
    kind=ArtifactKind.ATTEMPT,
    path="artifacts/attempt-" + digest(10),
    content_sha256=digest(10),
    manifest_sha256=digest(11),
    verified_at_ns=MAX_NS,
)


def test_artifact_identity_and_document() -> None:
    assert ARTIFACT.id == "run-store-v1:attempt-" + digest(10)
    doc = ARTIFACT.to_json()
    assert doc["verified_at_ns"] == "9223372036854775807"
    assert ArtifactRegistration.from_json(doc) == ARTIFACT
    with pytest.raises(IdentityMismatchError):
        ArtifactRegistration.from_json({**doc, "id": "run-store-v1:dataset-" + digest(10)})


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("path", "artifacts/attempt-" + digest(12), InvalidRecordError),
        ("path", "artifacts/dataset-" + digest(10), InvalidRecordError),
        ("path", "/artifacts/attempt-" + digest(10), InvalidRecordError),
        ("content_sha256", digest(10).upper(), InvalidRecordError),
        ("manifest_sha256", digest(11)[1:], InvalidRecordError),
        ("manifest_sha256", "g" * 64, InvalidRecordError),
        ("kind", "attempt", InvalidRecordError),
        ("verified_at_ns", -1, OutOfRangeError),
        ("verified_at_ns", MAX_NS + 1, OutOfRangeError),
        ("verified_at_ns", "1", InvalidRecordError),
    ],
)
def test_invalid_artifact_is_refused(field: str, value: Any, error: type[RunStoreError]) -> None:
    with pytest.raises(error):
        attrs.evolve(ARTIFACT, **{field: value})


@pytest.mark.parametrize(
    "path",
    ["", "/a", "a/", "a//b", "./a", "a/.", "a/../b", "..", "a\\b", "a\x00b", "a\nb", 3],
)
def test_unnormalized_store_path_is_refused(path: Any) -> None:
    with pytest.raises(InvalidRecordError):
        check_store_path(path)


@pytest.mark.parametrize("path", ["a", "artifacts/x-1", "a/b.c/.d/..e"])
def test_normalized_store_path_is_accepted(path: str) -> None:
    assert check_store_path(path) == path


# --- requests, outcomes, guards and receipts ---------------------------------------------


def test_lease_request_validation_and_secret_repr() -> None:
    request = LeaseRequest(lease_id="lease-1", owner_token="secret-token", expires_at_ns=5)
    assert "secret-token" not in repr(request)
    with pytest.raises(InvalidRecordError):
        LeaseRequest(lease_id="", owner_token="t", expires_at_ns=5)
    with pytest.raises(OutOfRangeError):
        LeaseRequest(lease_id="l", owner_token="t", expires_at_ns=MAX_NS + 1)


def test_retry_authorizations() -> None:
    assert Retry(next_index=2, max_index=2).next_index == 2
    with pytest.raises(InvalidRecordError):
        Retry(next_index=3, max_index=2)
    with pytest.raises(OutOfRangeError):
        Retry(next_index=1, max_index=2**53)
    with pytest.raises(InvalidRecordError):
        Next(retry=1)  # type: ignore[arg-type]


def test_terminal_outcomes() -> None:
    failed = Failed(code="worker_crashed", details={"exit": 9})
    assert failed.state is AttemptState.FAILED
    assert failed.details == {"exit": 9}
    assert Censored(reason="budget exhausted").state is AttemptState.CENSORED
    with pytest.raises(InvalidRecordError):
        Failed(code="", details={})
    with pytest.raises(InvalidRecordError):
        Failed(code="x", details=[])  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError):
        Censored(reason="")
    assert Censored(reason="r" * 4096).reason
    with pytest.raises(InvalidRecordError):
        Censored(reason="r" * 4097)


def owned(**changes: Any) -> OwnedAttempt:
    base: dict[str, Any] = {
        "attempt_id": ATTEMPT_ID,
        "slot_id": ATTEMPT_SLOT.id,
        "retry_index": 0,
        "state": AttemptState.FINALIZING,
        "revision": 1,
        "owner_token": "owner-secret",
        "lease_id": "lease-1",
        "claim_lease_id": "lease-2",
    }
    return OwnedAttempt(**{**base, **changes})


def test_owned_attempt_binds_its_identity() -> None:
    guard = owned()
    assert "owner-secret" not in repr(guard)
    with pytest.raises(IdentityMismatchError):
        owned(retry_index=1)
    with pytest.raises(InvalidRecordError):
        owned(state="finalizing")
    with pytest.raises(OutOfRangeError):
        owned(revision=-1)
    with pytest.raises(InvalidRecordError):
        owned(claim_lease_id="")


def test_claim_disposition_agrees_with_the_claim_lease() -> None:
    assert ClaimDisposition(attempt=owned(), claimed=True).claimed
    assert not ClaimDisposition(attempt=owned(claim_lease_id=None), claimed=False).claimed
    with pytest.raises(InvalidRecordError):
        ClaimDisposition(attempt=owned(), claimed=False)
    with pytest.raises(InvalidRecordError):
        ClaimDisposition(attempt=owned(state=AttemptState.EVALUATING), claimed=True)


def test_terminal_attempt_receipt() -> None:
    base: dict[str, Any] = {
        "attempt_id": ATTEMPT_ID,
        "slot_id": ATTEMPT_SLOT.id,
        "retry_index": 0,
        "state": AttemptState.ACCEPTED,
        "revision": 2,
        "finished_at_ns": 10,
        "event_sequence": 1,
    }
    assert TerminalAttempt(**base).state in TERMINAL_STATES
    for field, value, error in [
        ("state", AttemptState.FINALIZING, InvalidRecordError),
        ("revision", 1, InvalidRecordError),
        ("event_sequence", 0, OutOfRangeError),
        ("finished_at_ns", -1, OutOfRangeError),
        ("attempt_id", run_attempt_id(ATTEMPT_SLOT.id, 1), IdentityMismatchError),
    ]:
        with pytest.raises(error):
            TerminalAttempt(**{**base, field: value})
