"""Regenerate the conformance vectors for canonical JSON, typed identities and events.

Owns exactly ``vectors/canonical_json.json``, ``vectors/identities.json`` and
``vectors/events.json`` (their format is described in ``vectors/README.md`` and SPEC.md
section 10); ``vectors/traces/`` belongs to ``python -m runstore.model.trace``. The cases
are data in this file; the bytes come from the library, and ``conformance/test_vectors.py``
checks both that the committed files are what :func:`build` produces and, independently,
that every vector holds.

The events are those of :data:`SCENARIO` played on a real store (``RunStore.open`` on a
temporary root) and, separately, on the pure model; nothing is written (and ``--check``
fails) unless both give the same results and the same events, byte for byte.

Usage, from the repository root::

    python tools/gen_vectors.py            # rewrite the vector files
    python tools/gen_vectors.py --check    # exit 1 naming each stale file, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from runstore import (
    Accepted,
    ApplicabilityDecision,
    ArtifactKind,
    ArtifactRegistration,
    AttemptSlot,
    AttemptState,
    Censored,
    ClaimDisposition,
    Completion,
    ExecutionKind,
    Failed,
    FirstAttempt,
    LeaseRequest,
    Next,
    Observation,
    ObservationSlot,
    ObservationSlotKind,
    OwnedAttempt,
    ResolvedRun,
    Retry,
    RunStore,
    SlotRole,
    Superseded,
    TerminalAttempt,
    testing,
)
from runstore import model as m
from runstore.canonical import (
    JSON,
    MAX_DEPTH,
    MAX_NS,
    MAX_SAFE_INTEGER,
    decode,
    encode,
    ns_from_json,
)
from runstore.errors import RunStoreError
from runstore.identity import ATTEMPT, identity_input, run_attempt_id, typed_identity
from runstore.testing.lockstep import ModelRefusal, ModelWriter, Writer

ROOT = Path(__file__).resolve().parents[1]
FORMAT_VERSION = 1


# --- value descriptions (vectors/README.md, "Value descriptions") ------------------------


def describe(value: object) -> list[Any]:
    """The language-neutral description of a Python value (JSON or not): a tagged array."""
    if value is None:
        return ["null"]
    if type(value) is bool:
        return ["bool", value]
    if type(value) is int:
        return ["int", str(value)]
    if type(value) is float:
        special = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
        return ["float", special.get(repr(value), repr(value))]
    if type(value) is str:
        if any(0xD800 <= ord(char) <= 0xDFFF for char in value):
            return ["string_code_points", [ord(char) for char in value]]
        return ["string", value.encode("utf-8").hex()]
    if type(value) is list:
        return ["array", *(describe(item) for item in value)]
    if type(value) is dict:
        return ["object", *([describe(key), describe(item)] for key, item in value.items())]
    raise TypeError(f"no description for {type(value).__name__}")


def _nested(depth: int, *, objects: bool) -> JSON:
    """``depth`` containers around ``0``: all arrays, or arrays and ``{"a": ...}`` objects
    alternating (outermost an object). An object costs two levels of nesting in its
    description and an array one, so the vector file stays within the 128 levels that some
    JSON parsers allow by default."""
    value: JSON = 0
    for level in range(depth):
        value = {"a": value} if objects and (depth - level) % 2 == 1 else [value]
    return value


def _refusal_code(operation: Callable[..., object], *arguments: object) -> str:
    """The ``code`` of the refusal ``operation(*arguments)`` raises (it must raise one)."""
    try:
        operation(*arguments)
    except RunStoreError as error:
        return error.code
    raise AssertionError("a refusal case was accepted")


# --- canonical JSON cases ----------------------------------------------------------------

ALL_CONTROLS = "".join(chr(code) for code in range(0x20))

ENCODE: list[tuple[str, JSON]] = [
    ("null", None),
    ("true", True),
    ("false", False),
    ("zero", 0),
    ("minus one", -1),
    ("largest integer", MAX_SAFE_INTEGER),
    ("smallest integer", -MAX_SAFE_INTEGER),
    ("empty string", ""),
    ("empty array", []),
    ("empty object", {}),
    ("scalars in an array", [None, True, False, 0, -1, MAX_SAFE_INTEGER]),
    ("booleans are not integers", {"bool": True, "int": 1, "false": False, "zero": 0}),
    ("keys sorted (uppercase before lowercase, empty first)", {"b": 1, "a": 2, "B": 3, "": 4}),
    ("keys sorted (prefix first)", {"ab": 1, "b": 2, "a": 3}),
    ("keys sorted by code point, not UTF-16", {"\U0001f600": 1, "\uffff": 2, "\ue000": 3}),
    ("keys sorted by raw text, not escaped form", {"\\": 1, '"': 2, "\n": 3, "\x7f": 4}),
    ("keys with non-ASCII", {"z": 1, "\u00e9": 2, "e": 3}),
    ("short escapes", '"\\\b\f\n\r\t'),
    ("every control character", ALL_CONTROLS),
    ("control escapes use lowercase hex", "\x00\x1f\x0b\x1a"),
    ("solidus and DEL raw", "/\x7f"),
    ("C1 controls raw", "\x80\x85\x9f"),
    ("line and paragraph separators raw", "\u2028\u2029"),
    ("non-ASCII raw", "\u00e9\u4e2d\ufeff\uffff"),
    ("astral character raw", "\U0001f600\U0010ffff"),
    ("nested containers", {"x": [{"y": None}, [], {}], "w": {"v": [1, [2, [3]]]}}),
    ("arrays keep their order", [3, 1, 2, "b", "a"]),
    ("deepest arrays", _nested(MAX_DEPTH, objects=False)),
    ("deepest nesting of objects and arrays", _nested(MAX_DEPTH, objects=True)),
]

ENCODE_REFUSED: list[tuple[str, object]] = [
    ("integer above range", MAX_SAFE_INTEGER + 1),
    ("integer below range", -MAX_SAFE_INTEGER - 1),
    ("64-bit integer", 2**63),
    ("out-of-range integer in an array", [10**30]),
    ("float with integral value", 1.0),
    ("fraction", 0.5),
    ("negative zero float", -0.0),
    ("NaN", float("nan")),
    ("Infinity", float("inf")),
    ("-Infinity", float("-inf")),
    ("integer key", {1: "a"}),
    ("boolean key", {True: "a"}),
    ("lone high surrogate", "\ud800"),
    ("lone low surrogate", "a\udfff"),
    ("reversed surrogate pair", "\ude00\ud83d"),
    ("lone surrogate in a key", {"\udfff": 1}),
    ("arrays one level too deep", _nested(MAX_DEPTH + 1, objects=False)),
    ("objects and arrays one level too deep", _nested(MAX_DEPTH + 1, objects=True)),
]

# Each input has exactly one defect, so its refusal code is unambiguous.
DECODE_REFUSED: list[tuple[str, bytes]] = [
    ("empty input", b""),
    ("unsorted keys", b'{"b":1,"a":2}'),
    ("keys in UTF-16 order", '{"\U0001f600":1,"\uffff":2}'.encode()),
    ("duplicate keys", b'{"a":1,"a":1}'),
    ("duplicate keys with different values", b'{"a":1,"a":2}'),
    ("space after colon", b'{"a": 1}'),
    ("space after comma", b"[1, 2]"),
    ("leading space", b" 1"),
    ("trailing newline", b"1\n"),
    ("tab between tokens", b"[1,\t2]"),
    ("byte-order mark", b"\xef\xbb\xbf1"),
    ("leading zero", b"01"),
    ("negative leading zero", b"-01"),
    ("negative zero", b"-0"),
    ("plus sign", b"+1"),
    ("lone minus", b"-"),
    ("fraction", b"1.0"),
    ("fraction without integer part", b".5"),
    ("exponent", b"1e3"),
    ("uppercase exponent", b"1E3"),
    ("NaN", b"NaN"),
    ("Infinity", b"Infinity"),
    ("-Infinity", b"-Infinity"),
    ("capitalized literal", b"True"),
    ("truncated literal", b"nul"),
    ("escaped solidus", b'"\\/"'),
    ("needless unicode escape", b'"\\u0041"'),
    ("escaped non-ASCII", b'"\\u00e9"'),
    ("uppercase hex escape", b'"\\u001F"'),
    ("unicode escape for a short form", b'"\\u000a"'),
    ("escaped DEL", b'"\\u007f"'),
    ("escaped surrogate pair", b'"\\ud83d\\ude00"'),
    ("escaped lone surrogate", b'"\\ud800"'),
    ("unknown escape", b'"\\x41"'),
    ("raw control character", b'"\x01"'),
    ("raw newline", b'"\n"'),
    ("invalid UTF-8", b'"\xff"'),
    ("overlong UTF-8", b'"\xc0\xaf"'),
    ("UTF-8 encoded surrogate", b'"\xed\xa0\x80"'),
    ("UTF-8 beyond U+10FFFF", b'"\xf4\x90\x80\x80"'),
    ("truncated UTF-8", b'"\xe4\xb8"'),
    ("unterminated string", b'"abc'),
    ("unterminated array", b"[1,2"),
    ("trailing comma", b"[1,]"),
    ("single quotes", b"'a'"),
    ("unquoted key", b"{a:1}"),
    ("non-string key", b'{1:"a"}'),
    ("two values", b"1 2"),
    ("two values without separator", b"[][]"),
    ("arrays one level too deep", b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)),
    ("objects one level too deep", b'{"a":' * (MAX_DEPTH + 1) + b"0" + b"}" * (MAX_DEPTH + 1)),
    ("integer above range", b"9007199254740992"),
    ("integer below range", b"-9007199254740992"),
    ("64-bit integer", b"9223372036854775807"),
    ("forty digits", b"1" * 40),
    ("out-of-range integer in an array", b"[123456789012345678]"),
    ("out-of-range integer as a member value", b'{"a":18446744073709551616}'),
]

TIMESTAMPS: list[tuple[str, str]] = [
    ("zero", "0"),
    ("one", "1"),
    ("above the JSON integer range", str(MAX_SAFE_INTEGER + 1)),
    ("largest", str(MAX_NS)),
]

TIMESTAMPS_REFUSED: list[tuple[str, str]] = [
    ("empty", ""),
    ("negative", "-1"),
    ("leading zero", "01"),
    ("double zero", "00"),
    ("plus sign", "+1"),
    ("leading space", " 1"),
    ("trailing space", "1 "),
    ("fraction", "1.0"),
    ("exponent", "1e3"),
    ("non-ASCII digit", "\u0661"),
    ("hexadecimal", "0x1"),
    ("one above the largest", str(MAX_NS + 1)),
    ("forty digits", "1" * 40),
]


def canonical_json_vectors() -> dict[str, Any]:
    """The document written to ``vectors/canonical_json.json``."""
    encode_cases = []
    for name, value in ENCODE:
        data = encode(value)
        encode_cases.append(
            {
                "name": name,
                "value": describe(value),
                "canonical_hex": data.hex(),
                "canonical_utf8": data.decode("utf-8"),
            }
        )
    return {
        "format": "runstore canonical JSON vectors",
        "format_version": FORMAT_VERSION,
        "generator": "tools/gen_vectors.py",
        "encode": encode_cases,
        "encode_refused": [
            {"name": name, "value": describe(value), "error_code": _refusal_code(encode, value)}
            for name, value in ENCODE_REFUSED
        ],
        "decode_refused": [
            {"name": name, "input_hex": data.hex(), "error_code": _refusal_code(decode, data)}
            for name, data in DECODE_REFUSED
        ],
        "timestamps": [
            {"name": name, "text_hex": text.encode().hex(), "ns": str(ns_from_json(text))}
            for name, text in TIMESTAMPS
        ],
        "timestamps_refused": [
            {
                "name": name,
                "text_hex": text.encode().hex(),
                "error_code": _refusal_code(ns_from_json, text),
            }
            for name, text in TIMESTAMPS_REFUSED
        ],
    }


# --- identity cases ----------------------------------------------------------------------

# The first record of each type is the fixed record conformance/test_records.py pins.
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
]


def identity_vectors() -> dict[str, Any]:
    """The document written to ``vectors/identities.json``."""
    return {
        "format": "runstore identity vectors",
        "format_version": FORMAT_VERSION,
        "generator": "tools/gen_vectors.py",
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
                "error_code": _refusal_code(type(record).from_bytes, data),
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
                "error_code": _refusal_code(run_attempt_id, slot_id, retry_index),
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
    }


# --- event cases (a scenario played on a real store and on the model) --------------------

# Wall-clock-sized nanosecond times (beyond 2**53, so every *_ns value is a decimal string).
T0 = 1_700_000_000_000_000_000
EXPIRES_NS = T0 + 3_600 * 10**9


def at(ms: int) -> int:
    """The scenario's time ``ms`` milliseconds after ``T0``."""
    return T0 + ms * 1_000_000


ALPHA = testing.one_shot("alpha")
BETA = testing.one_shot("beta")
GAMMA = testing.one_shot("gamma")
CENSOR_REASON = 'budget "\u00e9puis\u00e9" \u2014 \u8a08\u7b97\u6642\u9593 \U0001f600'
FAILURE_DETAILS: dict[str, JSON] = {
    "exit": {"signal": "SIGKILL", "code": 137},
    "stages": [{"name": "evaluate", "ok": False, "retries": [1, 2]}, None],
    "retryable": True,
    "note": "caf\u00e9",
}


def _lease(name: str, owner: str) -> LeaseRequest:
    return testing.lease(name, expires_at_ns=EXPIRES_NS, owner=owner)


def _observation(bundle: testing.OneShot, retry_index: int, score: int) -> Observation:
    return testing.observation(
        bundle.observation_slot, bundle.attempt_id(retry_index), result={"score": score}
    )


def _artifact(kind: ArtifactKind, seed: str, ms: int) -> ArtifactRegistration:
    return testing.artifact(kind, seed, verified_at_ns=at(ms))


@attrs.frozen
class Step:
    """One writer call of the scenario: ``operation`` is the RunStore method's name, and
    ``arguments`` its keyword arguments, except that ``attempt_id`` stands for the guard
    the attempt's latest step returned and ``bundle`` for the records of a registration."""

    name: str
    operation: str
    arguments: dict[str, Any]


def _advance(name: str, attempt_id: str, phase: AttemptState, ms: int) -> Step:
    return Step(name, "advance", {"attempt_id": attempt_id, "phase": phase, "now_ns": at(ms)})


A0, A1 = ALPHA.attempt_id(0), ALPHA.attempt_id(1)
B0, B1 = BETA.attempt_id(0), BETA.attempt_id(1)
C0 = GAMMA.attempt_id(0)
S = AttemptState
BETA_RESULT = _artifact(ArtifactKind.OBSERVATION, "beta-0-result", 21)

SCENARIO: list[Step] = [
    *(
        Step(
            f"register one-shot slot {bundle.attempt_slot.logical_slot}",
            "register_one_shot",
            {"bundle": bundle},
        )
        for bundle in (ALPHA, BETA, GAMMA)
    ),
    Step(
        "reserve alpha retry 0 (first_attempt)",
        "reserve",
        {
            "slot_id": ALPHA.slot_id,
            "authorization": FirstAttempt(),
            "lease": _lease("alpha-0", "worker-1"),
            "now_ns": at(1),
        },
    ),
    Step(
        "reserve beta retry 0 (next, retry false)",
        "reserve",
        {
            "slot_id": BETA.slot_id,
            "authorization": Next(retry=False),
            "lease": _lease("beta-0", "worker-2"),
            "now_ns": at(2),
        },
    ),
    _advance("alpha#0 reserved -> materializing", A0, S.MATERIALIZING, 3),
    _advance("alpha#0 materializing -> starting", A0, S.STARTING, 4),
    Step(
        "reserve beta retry 1 while retry 0 is live (next, retry true)",
        "reserve",
        {
            "slot_id": BETA.slot_id,
            "authorization": Next(retry=True),
            "lease": _lease("beta-1", "worker-3"),
            "now_ns": at(5),
        },
    ),
    _advance("beta#0 reserved -> materializing", B0, S.MATERIALIZING, 6),
    _advance("alpha#0 starting -> preparing", A0, S.PREPARING, 7),
    _advance("alpha#0 preparing -> executing", A0, S.EXECUTING, 8),
    _advance("alpha#0 executing -> checkpointing", A0, S.CHECKPOINTING, 9),
    _advance("alpha#0 checkpointing -> validating", A0, S.VALIDATING, 10),
    _advance("alpha#0 validating -> evaluating", A0, S.EVALUATING, 11),
    _advance("alpha#0 evaluating -> executing (the loop)", A0, S.EXECUTING, 12),
    _advance("alpha#0 executing -> validating (no checkpoint)", A0, S.VALIDATING, 13),
    _advance("alpha#0 validating -> evaluating again", A0, S.EVALUATING, 14),
    _advance("beta#0 materializing -> starting", B0, S.STARTING, 15),
    _advance("beta#0 starting -> preparing", B0, S.PREPARING, 16),
    _advance("beta#0 preparing -> executing", B0, S.EXECUTING, 17),
    _advance("beta#1 reserved -> materializing", B1, S.MATERIALIZING, 18),
    Step(
        "beta#0 begin_finalization from executing (claimed)",
        "begin_finalization",
        {"attempt_id": B0, "lease": _lease("beta-0-claim", "worker-2"), "now_ns": at(19)},
    ),
    Step(
        "beta#1 begin_finalization from materializing (superseded: beta#0 holds the claim)",
        "begin_finalization",
        {"attempt_id": B1, "lease": _lease("beta-1-claim", "worker-3"), "now_ns": at(20)},
    ),
    Step(
        "beta#0 register_observation and select (no event)",
        "register_observation",
        {
            "attempt_id": B0,
            "observation": _observation(BETA, 0, 41),
            "artifact": BETA_RESULT,
            "select": True,
            "now_ns": at(21),
        },
    ),
    Step(
        "beta#0 commit accepted (with a reference)",
        "commit_finalization",
        {
            "attempt_id": B0,
            "outcome": Accepted(),
            "artifact": _artifact(ArtifactKind.ATTEMPT, "beta-0", 22),
            "references": [("result", BETA_RESULT.id)],
            "now_ns": at(22),
        },
    ),
    Step(
        "beta#1 commit superseded (without the claim)",
        "commit_finalization",
        {
            "attempt_id": B1,
            "outcome": Superseded(),
            "artifact": _artifact(ArtifactKind.ATTEMPT, "beta-1", 23),
            "references": [],
            "now_ns": at(23),
        },
    ),
    Step(
        "alpha#0 begin_finalization from evaluating (claimed)",
        "begin_finalization",
        {"attempt_id": A0, "lease": _lease("alpha-0-claim", "worker-1"), "now_ns": at(24)},
    ),
    Step(
        "alpha#0 commit failed (code, nested details)",
        "commit_finalization",
        {
            "attempt_id": A0,
            "outcome": Failed(code="worker_crashed", details=FAILURE_DETAILS),
            "artifact": _artifact(ArtifactKind.ATTEMPT, "alpha-0", 25),
            "references": [],
            "now_ns": at(25),
        },
    ),
    Step(
        "reserve alpha retry 1 after a failure (next, retry true)",
        "reserve",
        {
            "slot_id": ALPHA.slot_id,
            "authorization": Next(retry=True),
            "lease": _lease("alpha-1", "worker-1"),
            "now_ns": at(26),
        },
    ),
    _advance("alpha#1 reserved -> materializing", A1, S.MATERIALIZING, 27),
    _advance("alpha#1 materializing -> starting, clock behind (clamped)", A1, S.STARTING, 26),
    Step(
        "alpha#1 begin_finalization from starting (claimed)",
        "begin_finalization",
        {"attempt_id": A1, "lease": _lease("alpha-1-claim", "worker-1"), "now_ns": at(28)},
    ),
    Step(
        "alpha#1 register_observation and select (no event)",
        "register_observation",
        {
            "attempt_id": A1,
            "observation": _observation(ALPHA, 1, 7),
            "artifact": _artifact(ArtifactKind.OBSERVATION, "alpha-1-result", 29),
            "select": True,
            "now_ns": at(29),
        },
    ),
    Step(
        "alpha#1 commit accepted",
        "commit_finalization",
        {
            "attempt_id": A1,
            "outcome": Accepted(),
            "artifact": _artifact(ArtifactKind.ATTEMPT, "alpha-1", 30),
            "references": [],
            "now_ns": at(30),
        },
    ),
    Step(
        "reserve gamma retry 0 (retry 0 of at most 2)",
        "reserve",
        {
            "slot_id": GAMMA.slot_id,
            "authorization": Retry(next_index=0, max_index=2),
            "lease": _lease("gamma-0", "worker-4"),
            "now_ns": at(31),
        },
    ),
    Step(
        "gamma#0 begin_finalization from reserved (claimed)",
        "begin_finalization",
        {"attempt_id": C0, "lease": _lease("gamma-0-claim", "worker-4"), "now_ns": at(32)},
    ),
    Step(
        "gamma#0 commit censored (non-ASCII reason with a quote, by the claim holder)",
        "commit_finalization",
        {
            "attempt_id": C0,
            "outcome": Censored(reason=CENSOR_REASON),
            "artifact": _artifact(ArtifactKind.ATTEMPT, "gamma-0", 33),
            "references": [],
            "now_ns": at(33),
        },
    ),
]

Event = tuple[int, str, str | None, int, bytes]
"""``(sequence, kind, attempt_id, at_ns, canonical payload bytes)``."""


class Disagreement(Exception):
    """The store and the model did not produce the same results or events."""


def _model_events(state: m.ModelState) -> list[Event]:
    """The model's events so far, in the form the store's subscriber records them."""
    return [
        (row.sequence, row.kind, row.attempt_id, row.at_ns, encode(dict(row.payload)))
        for row in state.events
    ]


def _call(writer: Writer, step: Step, guards: dict[str, OwnedAttempt]) -> object:
    """Apply one step through ``writer``'s method of the same name."""
    a = step.arguments
    if step.operation == "register_one_shot":
        return writer.register_one_shot(*a["bundle"].arguments())
    if step.operation == "reserve":
        return writer.reserve(a["slot_id"], a["authorization"], a["lease"], a["now_ns"])
    guard = guards[a["attempt_id"]]
    if step.operation == "advance":
        return writer.advance(guard, a["phase"], a["now_ns"])
    if step.operation == "begin_finalization":
        return writer.begin_finalization(guard, a["lease"], a["now_ns"])
    if step.operation == "register_observation":
        return writer.register_observation(
            guard, a["observation"], a["artifact"], a["select"], a["now_ns"]
        )
    if step.operation == "commit_finalization":
        return writer.commit_finalization(
            guard, a["outcome"], a["artifact"], a["references"], a["now_ns"]
        )
    raise AssertionError(f"unknown operation {step.operation}")


def play(writer: Writer, events: Callable[[], list[Event]]) -> list[tuple[object, list[int]]]:
    """Play :data:`SCENARIO` through ``writer``: each step's result and the sequences of the
    events it committed (``events()`` lists every event so far)."""
    guards: dict[str, OwnedAttempt] = {}
    played: list[tuple[object, list[int]]] = []
    for step in SCENARIO:
        before = len(events())
        result = _call(writer, step, guards)
        if isinstance(result, ClaimDisposition):
            result_guard: object = result.attempt
        else:
            result_guard = result
        if isinstance(result_guard, OwnedAttempt):
            guards[result_guard.attempt_id] = result_guard
        played.append((result, [event[0] for event in events()[before:]]))
    return played


def store_run() -> tuple[list[tuple[object, list[int]]], list[Event]]:
    """The scenario played on a real store in a fresh temporary root."""
    committed: list[Event] = []
    with (
        tempfile.TemporaryDirectory(prefix="runstore-vectors-") as root,
        RunStore.open(root) as store,
    ):
        store.subscribe(
            lambda e: committed.append((e.sequence, e.kind, e.attempt_id, e.at_ns, e.payload))
        )
        played = play(store, lambda: committed)
    return played, committed


def model_run() -> tuple[list[tuple[object, list[int]]], list[Event]]:
    """The scenario played on the pure model (which refuses nothing in it)."""
    writer = ModelWriter(m.ModelState())
    try:
        played = play(writer, lambda: _model_events(writer.state))
    except ModelRefusal as refusal:
        raise Disagreement(f"the model refused a step: {refusal}") from refusal
    return played, _model_events(writer.state)


def agreed_run() -> tuple[list[tuple[object, list[int]]], list[Event]]:
    """The store's run, after checking that the model's is identical step for step and
    event for event (sequence, kind, attempt id, time and payload bytes)."""
    store_played, store_events = store_run()
    model_played, model_events = model_run()
    for step, stored, modelled in zip(SCENARIO, store_played, model_played, strict=True):
        if stored != modelled:
            raise Disagreement(f"step {step.name!r}: store {stored!r}, model {modelled!r}")
    if len(store_events) != len(model_events):
        raise Disagreement(f"{len(store_events)} store events, {len(model_events)} model events")
    for stored_event, model_event in zip(store_events, model_events, strict=True):
        if stored_event != model_event:
            raise Disagreement(f"event: store {stored_event!r}, model {model_event!r}")
    return store_played, store_events


def _lease_json(lease: LeaseRequest) -> dict[str, JSON]:
    return {
        "lease_id": lease.lease_id,
        "owner_token": lease.owner_token,
        "expires_at_ns": str(lease.expires_at_ns),
    }


def _authorization_json(authorization: object) -> dict[str, JSON]:
    if isinstance(authorization, FirstAttempt):
        return {"kind": "first_attempt"}
    if isinstance(authorization, Next):
        return {"kind": "next", "retry": authorization.retry}
    if isinstance(authorization, Retry):
        return {
            "kind": "retry",
            "next_index": authorization.next_index,
            "max_index": authorization.max_index,
        }
    raise TypeError(authorization)


def _outcome_json(outcome: object) -> dict[str, JSON]:
    if isinstance(outcome, Failed):
        return {"state": "failed", "code": outcome.code, "details": outcome.details}
    if isinstance(outcome, Censored):
        return {"state": "censored", "reason": outcome.reason}
    if isinstance(outcome, Accepted | Superseded):
        return {"state": outcome.state.value}
    raise TypeError(outcome)


def _arguments_json(step: Step) -> dict[str, JSON]:
    """The step's arguments as plain JSON (vectors/README.md, ``events.json``)."""
    a = step.arguments
    if step.operation == "register_one_shot":
        bundle: testing.OneShot = a["bundle"]
        return {
            "candidate": bundle.candidate.to_json(),
            "run": bundle.run.to_json(),
            "attempt_slot": bundle.attempt_slot.to_json(),
            "observation_slot": bundle.observation_slot.to_json(),
        }
    document: dict[str, JSON] = {}
    for key, value in a.items():
        if key == "authorization":
            document[key] = _authorization_json(value)
        elif key == "lease":
            document[key] = _lease_json(value)
        elif key == "outcome":
            document[key] = _outcome_json(value)
        elif key in ("observation", "artifact"):
            document[key] = value.to_json()
        elif key == "phase":
            document[key] = value.value
        elif key == "now_ns":
            document[key] = str(value)
        elif key == "references":
            document[key] = [[role, artifact_id] for role, artifact_id in value]
        else:
            document[key] = value
    return document


def _result_json(result: object) -> dict[str, JSON]:
    """What a step returned, as plain JSON (vectors/README.md, ``events.json``)."""
    if isinstance(result, str):
        return {"slot_id": result}
    if isinstance(result, OwnedAttempt):
        return {
            "attempt_id": result.attempt_id,
            "retry_index": result.retry_index,
            "state": result.state.value,
            "revision": result.revision,
            "claimed": result.claim_lease_id is not None,
        }
    if isinstance(result, ClaimDisposition):
        return {**_result_json(result.attempt), "claimed": result.claimed}
    if isinstance(result, TerminalAttempt):
        return {
            "attempt_id": result.attempt_id,
            "retry_index": result.retry_index,
            "state": result.state.value,
            "revision": result.revision,
            "finished_at_ns": str(result.finished_at_ns),
            "event_sequence": result.event_sequence,
        }
    raise TypeError(result)


def event_vectors() -> dict[str, Any]:
    """The document written to ``vectors/events.json`` (only once the store's events and
    the model's agree)."""
    played, events = agreed_run()
    names: dict[int, str] = {}
    operations = []
    for step, (result, sequences) in zip(SCENARIO, played, strict=True):
        operations.append(
            {
                "name": step.name,
                "operation": step.operation,
                "arguments": _arguments_json(step),
                "result": _result_json(result),
                "event_sequences": sequences,
            }
        )
        names.update(dict.fromkeys(sequences, step.name))
    return {
        "format": "runstore event vectors",
        "format_version": FORMAT_VERSION,
        "generator": "tools/gen_vectors.py",
        "operations": operations,
        "events": [
            {
                "name": names[sequence],
                "sequence": sequence,
                "kind": kind,
                "attempt_id": attempt_id,
                "at_ns": str(at_ns),
                "payload_hex": payload.hex(),
                "payload_utf8": payload.decode("utf-8"),
            }
            for sequence, kind, attempt_id, at_ns, payload in events
        ],
    }


# --- files -------------------------------------------------------------------------------


def render(document: dict[str, Any]) -> str:
    """Deterministic text of a vector file: ASCII JSON, keys sorted, each top-level list one
    case per line, and a trailing newline."""
    lines = ["{"]
    keys = sorted(document)
    for position, key in enumerate(keys):
        comma = "," if position < len(keys) - 1 else ""
        value = document[key]
        if isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            for index, case in enumerate(value):
                tail = "," if index < len(value) - 1 else ""
                lines.append("    " + json.dumps(case, sort_keys=True, ensure_ascii=True) + tail)
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=True)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def build() -> dict[str, str]:
    """Every file this generator owns: path relative to ``vectors/`` -> its text."""
    return {
        "canonical_json.json": render(canonical_json_vectors()),
        "identities.json": render(identity_vectors()),
        "events.json": render(event_vectors()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the vector files, or with ``--check`` report (exit 1) those that are stale;
    either way exit 1, writing nothing, if the store's and the model's events disagree."""
    parser = argparse.ArgumentParser(prog="python tools/gen_vectors.py", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument(
        "--dir", type=Path, default=ROOT / "vectors", help="vector folder (default: vectors/)"
    )
    options = parser.parse_args(argv)
    try:
        built = build()
    except Disagreement as error:
        print(
            f"refused, nothing written: the store and the model disagree: {error}", file=sys.stderr
        )
        return 1
    stale = []
    for name, text in built.items():
        path = options.dir / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not options.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if options.check else 'updated'}: {path}", file=sys.stderr)
    return 1 if stale and options.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
