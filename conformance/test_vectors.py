"""The conformance vectors (vectors/*.json, SPEC.md section 10): the committed files are
current, and every vector holds against the library.

The second half reads only the committed files, as another implementation would (format in
vectors/README.md); it does not use the generator's cases or helpers. Regenerate the files
with ``python tools/gen_vectors.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from runstore.canonical import decode, encode, ns_from_json, ns_to_json
from runstore.errors import RunStoreError
from runstore.identity import PREFIXES, identity_input, run_attempt_id
from runstore.records import (
    ApplicabilityDecision,
    ArtifactRegistration,
    AttemptSlot,
    Observation,
    ObservationSlot,
    ResolvedRun,
)

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "vectors"
OWNED = ("canonical_json.json", "identities.json")


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_vectors", ROOT / "tools" / "gen_vectors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the committed files are what the generator writes ------------------------------------


def test_committed_vector_files_are_current() -> None:
    built = load_generator().build()
    assert sorted(built) == sorted(OWNED)
    for name, text in built.items():
        committed = (VECTORS / name).read_text(encoding="utf-8")
        assert committed == text, f"vectors/{name} is stale: run python tools/gen_vectors.py"


def test_check_mode_names_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generator = load_generator()
    assert generator.main(["--dir", str(tmp_path)]) == 0
    assert generator.main(["--check", "--dir", str(tmp_path)]) == 0
    stale = tmp_path / "identities.json"
    stale.write_text(stale.read_text(encoding="utf-8").replace("decision:v1:", "decision:v2:"))
    capsys.readouterr()
    assert generator.main(["--check", "--dir", str(tmp_path)]) == 1
    assert "identities.json" in capsys.readouterr().err
    assert generator.main(["--dir", str(tmp_path)]) == 0
    assert generator.main(["--check", "--dir", str(tmp_path)]) == 0


# --- reading the vectors as another implementation would ----------------------------------


def read_vectors(name: str) -> dict[str, Any]:
    data = (VECTORS / name).read_bytes()
    data.decode("ascii")  # the files are ASCII (README)
    document = json.loads(data)
    assert isinstance(document, dict)
    return document


CANONICAL = read_vectors("canonical_json.json")
IDENTITIES = read_vectors("identities.json")


def cases(document: dict[str, Any], section: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("case", document[section], ids=lambda case: case["name"])


def value_of(description: list[Any]) -> Any:
    """The Python value a description denotes (vectors/README.md, "Value descriptions")."""
    tag, *rest = description
    if tag == "null":
        assert rest == []
        return None
    if tag == "bool":
        assert len(rest) == 1 and type(rest[0]) is bool
        return rest[0]
    if tag == "int":
        return int(rest[0])
    if tag == "string":
        return bytes.fromhex(rest[0]).decode("utf-8")
    if tag == "string_code_points":
        return "".join(chr(point) for point in rest[0])
    if tag == "float":
        return float(rest[0])
    if tag == "array":
        return [value_of(item) for item in rest]
    if tag == "object":
        members = {value_of(key): value_of(item) for key, item in rest}
        assert len(members) == len(rest), "an object description repeats a key"
        return members
    raise AssertionError(f"unknown description tag {tag!r}")


def same(left: Any, right: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, and object key order does not matter."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


def refusal(operation: Any, *arguments: Any) -> str:
    with pytest.raises(RunStoreError) as caught:
        operation(*arguments)
    return caught.value.code


@cases(CANONICAL, "encode")
def test_encode(case: dict[str, Any]) -> None:
    value = value_of(case["value"])
    data = bytes.fromhex(case["canonical_hex"])
    assert case["canonical_utf8"].encode("utf-8") == data
    assert encode(value) == data
    assert same(decode(data), value)


@cases(CANONICAL, "encode_refused")
def test_encode_refused(case: dict[str, Any]) -> None:
    assert refusal(encode, value_of(case["value"])) == case["error_code"]


@cases(CANONICAL, "decode_refused")
def test_decode_refused(case: dict[str, Any]) -> None:
    assert refusal(decode, bytes.fromhex(case["input_hex"])) == case["error_code"]


@cases(CANONICAL, "timestamps")
def test_timestamp(case: dict[str, Any]) -> None:
    text = bytes.fromhex(case["text_hex"]).decode("utf-8")
    assert ns_from_json(text) == int(case["ns"])
    assert ns_to_json(int(case["ns"])) == text


@cases(CANONICAL, "timestamps_refused")
def test_timestamp_refused(case: dict[str, Any]) -> None:
    text = bytes.fromhex(case["text_hex"]).decode("utf-8")
    assert refusal(ns_from_json, text) == case["error_code"]


RECORD_TYPES: dict[str, Any] = {
    "decision": ApplicabilityDecision,
    "run": ResolvedRun,
    "attempt-slot": AttemptSlot,
    "observation-slot": ObservationSlot,
    "observation": Observation,
}


def hashed_id(prefix: str, data: bytes) -> str:
    return f"{prefix}:v1:{hashlib.sha256(data).hexdigest()}"


@cases(IDENTITIES, "records")
def test_record_identity(case: dict[str, Any]) -> None:
    prefix, fields = case["type"], case["fields"]
    hashed = bytes.fromhex(case["identity_input_hex"])
    record_json = bytes.fromhex(case["record_json_hex"])
    # The hashed bytes are literally {"record":<fields>,"type":"<prefix>","version":1}.
    assert hashed == b'{"record":' + encode(fields) + b',"type":"%s","version":1}' % prefix.encode()
    assert identity_input(prefix, fields) == hashed
    assert hashed_id(prefix, hashed) == case["id"]
    record = RECORD_TYPES[prefix].from_json({**fields, "id": case["id"]})
    assert record.id == case["id"]
    assert record.identity_document() == fields
    assert record.to_bytes() == record_json
    assert RECORD_TYPES[prefix].from_bytes(record_json) == record


@cases(IDENTITIES, "records_refused")
def test_record_refused(case: dict[str, Any]) -> None:
    record_type = RECORD_TYPES[case["type"]]
    data = bytes.fromhex(case["record_json_hex"])
    assert refusal(record_type.from_bytes, data) == case["error_code"]


@cases(IDENTITIES, "attempt_ids")
def test_attempt_id(case: dict[str, Any]) -> None:
    retry_index = int(case["retry_index"])
    hashed = bytes.fromhex(case["identity_input_hex"])
    document = {"retry_index": retry_index, "slot_id": case["slot_id"]}
    assert identity_input("attempt", document) == hashed
    assert hashed_id("attempt", hashed) == case["id"]
    assert run_attempt_id(case["slot_id"], retry_index) == case["id"]


@cases(IDENTITIES, "attempt_ids_refused")
def test_attempt_id_refused(case: dict[str, Any]) -> None:
    code = refusal(run_attempt_id, case["slot_id"], int(case["retry_index"]))
    assert code == case["error_code"]


@cases(IDENTITIES, "artifacts")
def test_artifact_id(case: dict[str, Any]) -> None:
    fields = case["fields"]
    artifact = ArtifactRegistration.from_json({**fields, "id": case["id"]})
    assert case["id"] == f"run-store-v1:{fields['kind']}-{fields['content_sha256']}"
    assert fields["path"] == f"artifacts/{fields['kind']}-{fields['content_sha256']}"
    assert artifact.verified_at_ns == int(fields["verified_at_ns"])
    assert encode(artifact.to_json()) == bytes.fromhex(case["document_hex"])


# --- the vector files cover what SPEC.md section 10 promises ------------------------------


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@pytest.mark.parametrize("document", [CANONICAL, IDENTITIES], ids=list(OWNED))
def test_vector_file_layout(document: dict[str, Any]) -> None:
    assert document["format_version"] == 1
    assert nesting(document) < 128
    for section, entries in document.items():
        if isinstance(entries, list):
            names = [case["name"] for case in entries]
            assert names, f"section {section} is empty"
            assert len(set(names)) == len(names), f"section {section} repeats a name"


def test_vectors_cover_every_identity_type_and_refusal_code() -> None:
    assert {case["type"] for case in IDENTITIES["records"]} == PREFIXES - {"attempt"}
    codes = {
        case["error_code"]
        for section in ("encode_refused", "decode_refused", "timestamps_refused")
        for case in CANONICAL[section]
    }
    assert codes == {"invalid_canonical_json", "out_of_range"}
    record_codes = {case["error_code"] for case in IDENTITIES["records_refused"]}
    assert record_codes == {
        "identity_mismatch",
        "invalid_record",
        "invalid_canonical_json",
        "out_of_range",
    }
