"""The identity vectors (``vectors/identities.json``, SPEC.md sections 3 and 4): typed
identities and ``record_json`` of every identified record type, refused ``record_json``,
attempt ids, artifact ids and refused artifact documents.

The cases are data here; the bytes, ids and refusal codes come from the library.
``tools/regen`` writes :func:`build`'s text.
"""

from __future__ import annotations

from typing import Any

from runstore import ApplicabilityDecision
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptSlot
from runstore import Completion
from runstore import ExecutionKind
from runstore import Observation
from runstore import ObservationSlot
from runstore import ObservationSlotKind
from runstore import ResolvedRun
from runstore import SlotRole
from runstore.canonical import JSON
from runstore.canonical import MAX_DEPTH
from runstore.canonical import MAX_NS
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import encode
from runstore.identity import ATTEMPT
from runstore.identity import identity_input
from runstore.identity import run_attempt_id
from runstore.identity import typed_identity

from . import header
from . import refusal_code
from . import render

# The first record of each type is the fixed record conformance/values/test_records.py pins.
DECISION = ApplicabilityDecision(
    candidate_id="candidate-a",
    problem_id="problem-1",
    applicable=True,
    evidence={"checks": ["arch", "memory"], "passed": True},
)
EXCLUSION = ApplicabilityDecision(
    candidate_id="candidate-b",
    problem_id="problem-1",
    applicable=False,
    evidence={"reason": "needs a GPU", "checks": {"gpu": False, "memory_gb": 16}},
)
DECISION_TEXT = ApplicabilityDecision(
    candidate_id="kandidat-\u00fc/\U0001f600",
    problem_id='problem "quoted" \\ slash',
    applicable=True,
    evidence={"note": "line\nbreak\ttab\x00", "\uffff": 1, "\U0001f600": 2, "": None},
)


def _object_levels(levels: int) -> dict[str, JSON]:
    """An object nesting exactly ``levels`` deep, counting itself: ``{"a":{"a":...{}}}``."""
    value: dict[str, JSON] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


# The identity input wraps the document in two more levels (SPEC.md section 4), so an object
# field may nest at most MAX_DEPTH - 2 levels deep, counting itself.
FIELD_DEPTH = MAX_DEPTH - 2
DEEP_DECISION = ApplicabilityDecision(
    candidate_id="candidate-deep",
    problem_id="problem-1",
    applicable=True,
    evidence=_object_levels(FIELD_DEPTH),
)
RUN = ResolvedRun(
    decision_id=DECISION.id,
    candidate_id="candidate-a",
    logical_spec_id="spec-1",
    specification={"seed": 7},
)
RUN_NESTED = ResolvedRun(
    decision_id=DECISION_TEXT.id,
    candidate_id=DECISION_TEXT.candidate_id,
    logical_spec_id="spec-2",
    specification={
        "seeds": [0, 1, MAX_SAFE_INTEGER],
        "limits": {"memory_mb": 4096, "offset": -MAX_SAFE_INTEGER},
        "flags": {"deterministic": True, "profile": None},
    },
)
ONE_SHOT = AttemptSlot(
    run_id=RUN.id,
    logical_slot="measure-0",
    execution_kind=ExecutionKind.ONE_SHOT,
    role=SlotRole.MEASUREMENT,
    specification={"timeout_s": 60},
)
STREAM = AttemptSlot(
    run_id=RUN.id,
    logical_slot="stream-0",
    execution_kind=ExecutionKind.STREAM,
    role=SlotRole.MEASUREMENT,
    specification={"checkpoints": 2},
)
WARMUP = AttemptSlot(
    run_id=RUN_NESTED.id,
    logical_slot="warmup-0",
    execution_kind=ExecutionKind.FRESH_OBSERVATION,
    role=SlotRole.WARMUP,
    specification={},
)
RESULT_SLOT = ObservationSlot(
    run_id=RUN.id,
    logical_slot="result-0",
    kind=ObservationSlotKind.RESULT,
    checkpoint_index=None,
    attempt_slot_id=ONE_SHOT.id,
)
CHECKPOINT_SLOT = ObservationSlot(
    run_id=RUN.id,
    logical_slot="stream-0/checkpoint-0",
    kind=ObservationSlotKind.CHECKPOINT,
    checkpoint_index=0,
    attempt_slot_id=STREAM.id,
)
LAST_CHECKPOINT_SLOT = ObservationSlot(
    run_id=RUN.id,
    logical_slot="stream-0/checkpoint-last",
    kind=ObservationSlotKind.CHECKPOINT,
    checkpoint_index=MAX_SAFE_INTEGER,
    attempt_slot_id=STREAM.id,
)
OBSERVATION = Observation(
    slot_id=RESULT_SLOT.id,
    attempt_id=run_attempt_id(ONE_SHOT.id, 0),
    valid=True,
    completion=Completion.REACHED,
    result={"score": 42},
)
CHECKPOINT_OBSERVATION = Observation(
    slot_id=CHECKPOINT_SLOT.id,
    attempt_id=run_attempt_id(STREAM.id, 3),
    valid=False,
    completion=Completion.NOT_REACHED,
    result={"error": "diverged", "step": 1200, "losses": [3, 2, -1]},
)

RECORDS: list[tuple[str, Any]] = [
    ("decision: applicable (test_records DECISION)", DECISION),
    ("decision: exclusion", EXCLUSION),
    ("decision: non-ASCII, quotes, escapes and code point key order", DECISION_TEXT),
    ("decision: evidence nested 62 levels deep, the deepest an object field may be", DEEP_DECISION),
    ("run: test_records RUN", RUN),
    ("run: nested specification with integer bounds", RUN_NESTED),
    ("attempt-slot: one-shot measurement (test_records ATTEMPT_SLOT)", ONE_SHOT),
    ("attempt-slot: stream measurement", STREAM),
    ("attempt-slot: fresh-observation warm-up", WARMUP),
    ("observation-slot: result (test_records OBSERVATION_SLOT)", RESULT_SLOT),
    ("observation-slot: checkpoint 0", CHECKPOINT_SLOT),
    ("observation-slot: largest checkpoint index", LAST_CHECKPOINT_SLOT),
    ("observation: valid, reached (test_records OBSERVATION)", OBSERVATION),
    ("observation: invalid, not reached", CHECKPOINT_OBSERVATION),
]

ATTEMPTS: list[tuple[str, str, int]] = [
    ("retry 0 of the one-shot slot (test_records ATTEMPT_ID)", ONE_SHOT.id, 0),
    ("retry 1 of the one-shot slot", ONE_SHOT.id, 1),
    ("retry 3 of the stream slot", STREAM.id, 3),
    ("largest retry index", STREAM.id, MAX_SAFE_INTEGER),
]

ATTEMPTS_REFUSED: list[tuple[str, str, int]] = [
    ("negative retry index", ONE_SHOT.id, -1),
    ("retry index above range", ONE_SHOT.id, MAX_SAFE_INTEGER + 1),
    ("slot id of a run", RUN.id, 0),
    ("slot id with uppercase hex", "attempt-slot:v1:" + ONE_SHOT.id[-64:].upper(), 0),
    ("slot id of version 2", ONE_SHOT.id.replace(":v1:", ":v2:"), 0),
    ("slot id with a short digest", ONE_SHOT.id[:-1], 0),
]

ARTIFACTS: list[tuple[str, ArtifactRegistration]] = [
    (
        "attempt artifact verified at 0",
        ArtifactRegistration(
            kind=ArtifactKind.ATTEMPT,
            path=f"artifacts/attempt-{'ab' * 32}",
            content_sha256="ab" * 32,
            manifest_sha256="cd" * 32,
            verified_at_ns=0,
        ),
    ),
    (
        "dataset artifact verified at the largest timestamp",
        ArtifactRegistration(
            kind=ArtifactKind.DATASET,
            path=f"artifacts/dataset-{'0123456789abcdef' * 4}",
            content_sha256="0123456789abcdef" * 4,
            manifest_sha256="f" * 64,
            verified_at_ns=MAX_NS,
        ),
    ),
]


def _defective(record: Any, changes: dict[str, JSON], *, drop: str = "") -> bytes:
    """``record``'s document with ``changes`` applied and the field ``drop`` removed, under
    the id those altered fields hash to: the change is the document's only defect."""
    body = {**record.identity_document(), **changes}
    body.pop(drop, None)
    return encode({**body, "id": typed_identity(record.PREFIX, body)})


RECORDS_REFUSED: list[tuple[str, Any, bytes]] = [
    (
        "id of another record",
        DECISION,
        encode({**DECISION.identity_document(), "id": EXCLUSION.id}),
    ),
    (
        "id of the same document under another type",
        RUN,
        encode({**RUN.identity_document(), "id": "decision" + RUN.id[len("run") :]}),
    ),
    ("missing id", DECISION, encode(DECISION.identity_document())),
    ("missing field", RUN, _defective(RUN, {}, drop="logical_spec_id")),
    ("unknown field", RUN, _defective(RUN, {"note": "x"})),
    ("not canonical (space after colon)", DECISION, DECISION.to_bytes().replace(b":", b": ", 1)),
    ("not an object", DECISION, b"[]"),
    ("boolean as integer", DECISION, _defective(DECISION, {"applicable": 1})),
    ("empty plain string", DECISION, _defective(DECISION, {"candidate_id": ""})),
    (
        "DEL (a control character) in a plain string",
        DECISION,
        _defective(DECISION, {"problem_id": "a\x7f"}),
    ),
    ("plain string of 257 code points", RUN, _defective(RUN, {"logical_spec_id": "x" * 257})),
    ("evidence not an object", DECISION, _defective(DECISION, {"evidence": []})),
    ("reference with the wrong prefix", RUN, _defective(RUN, {"decision_id": ONE_SHOT.id})),
    ("unknown enumeration value", ONE_SHOT, _defective(ONE_SHOT, {"role": "Measurement"})),
    (
        "result slot with a checkpoint index",
        RESULT_SLOT,
        _defective(RESULT_SLOT, {"checkpoint_index": 0}),
    ),
    (
        "checkpoint slot without an index",
        CHECKPOINT_SLOT,
        _defective(CHECKPOINT_SLOT, {"checkpoint_index": None}),
    ),
    (
        "negative checkpoint index",
        CHECKPOINT_SLOT,
        _defective(CHECKPOINT_SLOT, {"checkpoint_index": -1}),
    ),
    ("unknown completion", OBSERVATION, _defective(OBSERVATION, {"completion": "done"})),
    # 63 levels cannot be hashed (the identity input would nest 65 deep), so the id is a
    # well-formed decision id (the 62-level decision's): the depth is the one defect.
    (
        "evidence one level too deep",
        DECISION,
        encode(
            {
                **DEEP_DECISION.identity_document(),
                "evidence": _object_levels(FIELD_DEPTH + 1),
                "id": DEEP_DECISION.id,
            }
        ),
    ),
    ("id not a string", DECISION, encode({**DECISION.identity_document(), "id": 5})),
    ("a string, not an object", DECISION, b'"x"'),
]

_ARTIFACT: dict[str, JSON] = ARTIFACTS[0][1].to_json()
_CONTENT = "ab" * 32

# Each document (with its "id") has exactly one defect.
ARTIFACTS_REFUSED: list[tuple[str, dict[str, JSON]]] = [
    ("verified_at_ns with a leading zero", {**_ARTIFACT, "verified_at_ns": "01"}),
    ("verified_at_ns as a JSON number", {**_ARTIFACT, "verified_at_ns": 0}),
    ("verified_at_ns above 2^63-1", {**_ARTIFACT, "verified_at_ns": str(MAX_NS + 1)}),
    (
        "path not at the content address",
        {**_ARTIFACT, "path": f"artifacts/attempt-{_ARTIFACT['manifest_sha256']}"},
    ),
    (
        "unknown kind",
        {
            **_ARTIFACT,
            "kind": "checkpoint",
            "path": f"artifacts/checkpoint-{_CONTENT}",
            "id": f"run-store-v1:checkpoint-{_CONTENT}",
        },
    ),
]


def document() -> dict[str, Any]:
    """The document written to ``vectors/identities.json``."""
    return {
        **header("runstore identity vectors"),
        "records": [
            {
                "name": name,
                "type": record.PREFIX,
                "fields": record.identity_document(),
                "identity_input_hex": identity_input(
                    record.PREFIX, record.identity_document()
                ).hex(),
                "id": record.id,
                "record_json_hex": record.to_bytes().hex(),
            }
            for name, record in RECORDS
        ],
        "records_refused": [
            {
                "name": name,
                "type": record.PREFIX,
                "record_json_hex": data.hex(),
                "error_code": refusal_code(type(record).from_bytes, data),
            }
            for name, record, data in RECORDS_REFUSED
        ],
        "attempt_ids": [
            {
                "name": name,
                "slot_id": slot_id,
                "retry_index": str(retry_index),
                "identity_input_hex": identity_input(
                    ATTEMPT, {"retry_index": retry_index, "slot_id": slot_id}
                ).hex(),
                "id": run_attempt_id(slot_id, retry_index),
            }
            for name, slot_id, retry_index in ATTEMPTS
        ],
        "attempt_ids_refused": [
            {
                "name": name,
                "slot_id": slot_id,
                "retry_index": str(retry_index),
                "error_code": refusal_code(run_attempt_id, slot_id, retry_index),
            }
            for name, slot_id, retry_index in ATTEMPTS_REFUSED
        ],
        "artifacts": [
            {
                "name": name,
                "fields": {key: value for key, value in artifact.to_json().items() if key != "id"},
                "id": artifact.id,
                "document_hex": encode(artifact.to_json()).hex(),
            }
            for name, artifact in ARTIFACTS
        ],
        "artifacts_refused": [
            {
                "name": name,
                "fields": fields,
                "error_code": refusal_code(ArtifactRegistration.from_json, fields),
            }
            for name, fields in ARTIFACTS_REFUSED
        ],
    }


def build() -> str:
    """The text of ``vectors/identities.json``."""
    return render(document())
