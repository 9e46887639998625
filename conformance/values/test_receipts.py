"""The JSON form of every receipt and report (``to_json()``, in ``runstore.receipts`` and
``runstore.recovery_report``): each field is named with its encoding (vectors/README.md,
"Results"; SPEC.md section 10) and reads back to the value's own field; the document is
plain JSON (the canonical encoder, which refuses tuples, floats, enums and integers beyond
2**53-1, accepts it); and a guard's form leaves out what it must (its owner token).

Each test reads the document as a consumer would (``ns_from_json`` for a ``*_ns`` string,
``bytes.fromhex`` for a ``*_hex`` one, ``AttemptState`` for a state) instead of restating
the encoder, so the two are written independently.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from runstore import TERMINAL_STATES
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import ClaimDisposition
from runstore import CommittedEvent
from runstore import ObservationReceipt
from runstore import OwnedAttempt
from runstore import PublishedArtifact
from runstore import PublishedFinalization
from runstore import RecoveryReport
from runstore import RejectedArtifact
from runstore import TerminalAttempt
from runstore import run_attempt_id
from runstore import testing
from runstore.canonical import MAX_NS
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.canonical import ns_from_json
from runstore.recovery_report import REJECTION_CODES

SLOT = testing.one_shot("receipts").slot_id
GUARD_KEYS = {"attempt_id", "claimed", "retry_index", "revision", "state"}
TERMINAL_KEYS = {
    "attempt_id",
    "event_sequence",
    "finished_at_ns",
    "retry_index",
    "revision",
    "state",
}
REPORT_KEYS = {
    "busy_stages",
    "imported_artifacts",
    "quarantined_stages",
    "rejected_artifacts",
    "terminals",
}

indices = st.integers(0, MAX_SAFE_INTEGER)
times = st.integers(0, MAX_NS)
# Event sequences are written as JSON numbers (as the vectors write them), which SPEC.md
# section 10 keeps within 2**53-1; no store comes near it.
sequences = st.integers(1, MAX_SAFE_INTEGER)
texts = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=24)
store_paths = st.lists(
    st.from_regex(r"[a-z0-9][a-z0-9._-]{0,15}", fullmatch=True), min_size=1, max_size=3
).map("/".join)


def form(value: Any, keys: set[str]) -> dict[str, Any]:
    """``value.to_json()``, after checking that it has exactly ``keys`` and is plain
    canonical JSON that survives a round trip through the canonical encoder and through
    ``json`` unchanged."""
    document = value.to_json()
    assert set(document) == keys
    assert decode(encode(document)) == document
    assert json.loads(json.dumps(document)) == document
    return document


def attempt_of(kind: type[Any], retry_index: int, **fields: Any) -> Any:
    """A guard or terminal receipt (``kind``) of attempt ``retry_index`` of :data:`SLOT`."""
    attempt_id = run_attempt_id(SLOT, retry_index)
    return kind(attempt_id=attempt_id, slot_id=SLOT, retry_index=retry_index, **fields)


@st.composite
def guards(draw: st.DrawFn, state: AttemptState | None = None) -> OwnedAttempt:
    claimed = draw(st.booleans())
    guard: OwnedAttempt = attempt_of(
        OwnedAttempt,
        draw(indices),
        state=draw(st.sampled_from(AttemptState)) if state is None else state,
        revision=draw(indices),
        owner_token=draw(texts),
        lease_id=draw(texts),
        claim_lease_id=draw(texts) if claimed else None,
    )
    return guard


@st.composite
def terminals(draw: st.DrawFn) -> TerminalAttempt:
    terminal: TerminalAttempt = attempt_of(
        TerminalAttempt,
        draw(indices),
        state=draw(st.sampled_from(sorted(TERMINAL_STATES, key=lambda s: s.value))),
        revision=draw(st.integers(2, MAX_SAFE_INTEGER)),
        finished_at_ns=draw(times),
        event_sequence=draw(sequences),
    )
    return terminal


artifacts = st.builds(testing.artifact, st.sampled_from(ArtifactKind), texts, verified_at_ns=times)
rejections = st.builds(
    RejectedArtifact, path=store_paths, code=st.sampled_from(REJECTION_CODES), message=st.text()
)


def guard_fields(document: dict[str, Any]) -> tuple[object, ...]:
    """What a guard's form says, read back: id, retry index, state, revision, claimed."""
    return (
        document["attempt_id"],
        document["retry_index"],
        AttemptState(document["state"]),
        document["revision"],
        document["claimed"],
    )


def claimed_by(guard: OwnedAttempt) -> tuple[object, ...]:
    return (guard.attempt_id, guard.retry_index, guard.state, guard.revision)


# --- the guard and the claim decision -------------------------------------------------------


@given(guards())
def test_a_guard_names_its_attempt_state_revision_and_whether_it_holds_a_claim(
    guard: OwnedAttempt,
) -> None:
    document = form(guard, GUARD_KEYS)
    assert guard_fields(document) == (*claimed_by(guard), guard.claim_lease_id is not None)


def test_a_guard_form_leaves_out_its_owner_token_and_lease_ids() -> None:
    guard = attempt_of(
        OwnedAttempt,
        3,
        state=AttemptState.FINALIZING,
        revision=7,
        owner_token="owner-credential-5f1e",
        lease_id="reservation-lease-77",
        claim_lease_id="claim-lease-78",
    )
    text = json.dumps(guard.to_json())
    for secret in ("owner-credential-5f1e", "reservation-lease-77", "claim-lease-78"):
        assert secret not in text
    assert guard.to_json()["claimed"] is True
    assert guard.moved(AttemptState.FINALIZING, 8, None).to_json()["claimed"] is False


@given(guards(AttemptState.FINALIZING))
def test_a_claim_disposition_is_its_guard_form_whose_claimed_is_the_decision(
    guard: OwnedAttempt,
) -> None:
    claimed = guard.claim_lease_id is not None
    disposition = ClaimDisposition(attempt=guard, claimed=claimed)
    document = form(disposition, GUARD_KEYS)
    assert guard_fields(document) == (*claimed_by(guard), disposition.claimed)
    assert document == guard.to_json()


def test_a_superseded_disposition_says_not_claimed() -> None:
    guard = OwnedAttempt.reserved(SLOT, 1, testing.lease("r", expires_at_ns=10)).moved(
        AttemptState.FINALIZING, 1, None
    )
    assert ClaimDisposition(attempt=guard, claimed=False).to_json()["claimed"] is False


# --- the observation receipt ------------------------------------------------------------------


@st.composite
def observation_receipts(draw: st.DrawFn) -> ObservationReceipt:
    observation_id = draw(texts)
    selected = draw(st.booleans())
    selection = observation_id if selected else draw(st.none() | texts)
    return ObservationReceipt(
        attempt=draw(guards()),
        observation_id=observation_id,
        selected=selected,
        selection=selection,
        event_sequence=draw(st.none() | sequences),
    )


@given(observation_receipts())
def test_an_observation_receipt_is_its_guard_form_plus_what_the_call_did(
    receipt: ObservationReceipt,
) -> None:
    document = form(
        receipt,
        GUARD_KEYS
        | {
            "event_sequence",
            "observation_id",
            "selected",
            "selection",
        },
    )
    assert guard_fields(document) == guard_fields(receipt.attempt.to_json())
    read_back = (
        document["observation_id"],
        document["selected"],
        document["selection"],
        document["event_sequence"],
    )
    assert read_back == (
        receipt.observation_id,
        receipt.selected,
        receipt.selection,
        receipt.event_sequence,
    )


def test_a_receipt_that_changed_nothing_writes_null_for_its_event_and_selection() -> None:
    guard = OwnedAttempt.reserved(SLOT, 0, testing.lease("r", expires_at_ns=10))
    receipt = ObservationReceipt(
        attempt=guard,
        observation_id="observation:v1:x",
        selected=False,
        selection=None,
        event_sequence=None,
    )
    text = encode(receipt.to_json()).decode("utf-8")
    assert '"event_sequence":null' in text and '"selection":null' in text
    assert '"selected":false' in text


# --- the terminal receipt and the published receipts --------------------------------------------


@given(terminals())
def test_a_terminal_receipt_writes_its_finish_time_as_a_decimal_string(
    terminal: TerminalAttempt,
) -> None:
    document = form(terminal, TERMINAL_KEYS)
    finished = document["finished_at_ns"]
    assert isinstance(finished, str)
    read_back = (
        document["attempt_id"],
        document["retry_index"],
        AttemptState(document["state"]),
        document["revision"],
        ns_from_json(finished),
        document["event_sequence"],
    )
    assert read_back == (
        terminal.attempt_id,
        terminal.retry_index,
        terminal.state,
        terminal.revision,
        terminal.finished_at_ns,
        terminal.event_sequence,
    )


def test_a_finish_time_at_the_top_of_the_range_stays_exact() -> None:
    terminal = attempt_of(
        TerminalAttempt,
        0,
        state=AttemptState.ACCEPTED,
        revision=2,
        finished_at_ns=MAX_NS,
        event_sequence=1,
    )
    assert terminal.to_json()["finished_at_ns"] == "9223372036854775807" == str(2**63 - 1)


@given(guards(), terminals(), artifacts)
def test_a_published_receipt_nests_the_artifact_document_and_its_receipt_form(
    guard: OwnedAttempt, terminal: TerminalAttempt, artifact: ArtifactRegistration
) -> None:
    published = {
        "attempt": (PublishedArtifact(attempt=guard, artifact=artifact), guard),
        "terminal": (PublishedFinalization(terminal=terminal, artifact=artifact), terminal),
    }
    for key, (receipt, inner) in published.items():
        document = form(receipt, {"artifact", key})
        assert ArtifactRegistration.from_json(document["artifact"]) == artifact
        assert document[key] == inner.to_json()


# --- the committed event ----------------------------------------------------------------------


@given(sequences, texts, st.none() | texts, times, st.binary(max_size=64))
def test_a_committed_event_writes_its_time_as_a_string_and_its_payload_as_hex(
    sequence: int, kind: str, attempt_id: str | None, at_ns: int, payload: bytes
) -> None:
    event = CommittedEvent(
        sequence=sequence, kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=payload
    )
    document = form(event, {"at_ns", "attempt_id", "kind", "payload_hex", "sequence"})
    payload_hex = document["payload_hex"]
    assert isinstance(payload_hex, str) and payload_hex == payload_hex.lower()
    at_text = document["at_ns"]
    assert isinstance(at_text, str)
    read_back = CommittedEvent(
        sequence=document["sequence"],
        kind=document["kind"],
        attempt_id=document["attempt_id"],
        at_ns=ns_from_json(at_text),
        payload=bytes.fromhex(payload_hex),
    )
    assert read_back == event


# --- the recovery report ----------------------------------------------------------------------


@given(rejections)
def test_a_rejection_round_trips_with_its_message(rejected: RejectedArtifact) -> None:
    document = form(rejected, {"code", "message", "path"})
    read_back = RejectedArtifact(**document)
    assert (read_back, read_back.message) == (rejected, rejected.message)


reports = st.fixed_dictionaries(
    {
        "terminals": st.lists(terminals(), max_size=3).map(tuple),
        "imported_artifacts": st.lists(artifacts, max_size=3).map(tuple),
        "quarantined_stages": st.lists(store_paths, max_size=3).map(tuple),
        "busy_stages": st.lists(store_paths, max_size=3).map(tuple),
        "rejected_artifacts": st.lists(rejections, max_size=3).map(tuple),
    }
).map(lambda fields: RecoveryReport(**fields))


@given(reports)
def test_a_recovery_report_writes_each_list_in_the_report_order(report: RecoveryReport) -> None:
    document = form(report, REPORT_KEYS)
    read_back = (
        [ArtifactRegistration.from_json(item) for item in document["imported_artifacts"]],
        document["quarantined_stages"],
        document["busy_stages"],
        [RejectedArtifact(**item) for item in document["rejected_artifacts"]],
        [item["message"] for item in document["rejected_artifacts"]],
    )
    assert read_back == (
        list(report.imported_artifacts),
        list(report.quarantined_stages),
        list(report.busy_stages),
        list(report.rejected_artifacts),
        [item.message for item in report.rejected_artifacts],
    )
    # A terminal's form has no slot id to rebuild it from: it is compared as a form.
    assert document["terminals"] == [terminal.to_json() for terminal in report.terminals]
    assert report.counts() == {key: len(document[key]) for key in sorted(REPORT_KEYS)}


def test_an_empty_report_writes_empty_lists_and_zero_counts() -> None:
    report = RecoveryReport()
    assert report.to_json() == {key: [] for key in REPORT_KEYS}
    assert report.counts() == dict.fromkeys(REPORT_KEYS, 0)
    assert list(report.counts()) == sorted(REPORT_KEYS)  # the rows of recover's table


def test_each_call_returns_a_fresh_document() -> None:
    report = RecoveryReport(busy_stages=("artifacts/.staging-1",))
    document = report.to_json()
    busy = document["busy_stages"]
    assert isinstance(busy, list)
    busy.append("artifacts/.staging-2")
    document["terminals"] = None
    assert report.to_json() == {
        **{key: [] for key in REPORT_KEYS},
        "busy_stages": ["artifacts/.staging-1"],
    }
