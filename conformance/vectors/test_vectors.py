"""The conformance vectors (vectors/*.json, SPEC.md section 10): the committed files are
current, and every vector holds against the library (events.json: replayed on a real store);
and ``tools/regen``, the one command that rewrites or checks every generated file.

The second half reads only the committed files, as another implementation would (format in
vectors/README.md); it does not use the generator's cases or helpers. Regenerate the files
with ``tools/regen``.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import CommittedEvent
from runstore import OwnedAttempt
from runstore import RunStore
from runstore import TerminalAttempt
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.canonical import ns_from_json
from runstore.canonical import ns_to_json
from runstore.errors import RunStoreError
from runstore.identity import PREFIXES
from runstore.identity import identity_input
from runstore.identity import run_attempt_id
from runstore.kit.driver_values import RECORD_TYPES
from runstore.kit.wire import same
from runstore.kit.wire import value_of
from runstore.testing.lockstep import ModelWriter
from runstore.testing.script import GUARDED
from runstore.testing.script import Call

from conformance.vectors.readers import replay_checked

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "vectors"
REGEN_SCRIPT = ROOT / "tools" / "regen"
OWNED = (
    "canonical_json.json",
    "identities.json",
    "events.json",
    "content.json",
    "outcomes.json",
    "recovery.json",
)


def load_regen() -> ModuleType:
    """``tools/regen`` as a module (it has no ``.py`` suffix); it makes ``tools/vectorgen``
    and ``tools/gen_spec.py`` importable, and holds them as ``canonical_json``,
    ``identities``, ``events`` and ``gen_spec``."""
    loader = importlib.machinery.SourceFileLoader("regen", str(REGEN_SCRIPT))
    spec = importlib.util.spec_from_loader("regen", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


REGEN = load_regen()
GENERATED_EVENTS: ModuleType = REGEN.events


def copy_of_the_tree(tmp_path: Path) -> tuple[Path, Path]:
    """Copies of vectors/ (traces included) and SPEC.md: ``(vector folder, spec file)``."""
    vectors, spec = tmp_path / "vectors", tmp_path / "SPEC.md"
    shutil.copytree(VECTORS, vectors)
    shutil.copyfile(ROOT / "SPEC.md", spec)
    return vectors, spec


def snapshot(*roots: Path) -> dict[Path, bytes]:
    """Every file under (or at) ``roots`` and its bytes."""
    files = [path for root in roots for path in ([root] if root.is_file() else root.rglob("*"))]
    return {path: path.read_bytes() for path in files if path.is_file()}


def make_spec_block_stale(spec: Path) -> None:
    text = spec.read_text(encoding="utf-8")
    stale = text.replace("Generated from `runstore.edges.LEGAL_EDGES`", "Generated from `edges`")
    assert stale != text
    spec.write_text(stale, encoding="utf-8")


# --- the committed files are what the generator writes ------------------------------------


def test_committed_vector_files_are_current() -> None:
    assert sorted(REGEN.VECTORS) == sorted(OWNED)
    for name, module in REGEN.VECTORS.items():
        committed = (VECTORS / name).read_text(encoding="utf-8")
        assert committed == module.build(), f"vectors/{name} is stale: run tools/regen"


def test_check_mode_names_a_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vectors, spec = tmp_path / "vectors", tmp_path / "SPEC.md"
    shutil.copyfile(ROOT / "SPEC.md", spec)
    assert REGEN.main(["--vectors", str(vectors), "--spec", str(spec)]) == 0
    assert REGEN.main(["--check", "--vectors", str(vectors), "--spec", str(spec)]) == 0
    stale = vectors / "identities.json"
    stale.write_text(stale.read_text(encoding="utf-8").replace("decision:v1:", "decision:v2:"))
    capsys.readouterr()
    assert REGEN.main(["--check", "--vectors", str(vectors), "--spec", str(spec)]) == 1
    assert "identities.json" in capsys.readouterr().err
    assert REGEN.main(["--vectors", str(vectors), "--spec", str(spec)]) == 0
    assert REGEN.main(["--check", "--vectors", str(vectors), "--spec", str(spec)]) == 0
    for name in OWNED:
        assert (vectors / name).read_bytes() == (VECTORS / name).read_bytes()


class OnePayloadOff(ModelWriter):
    """The model, except that the censored outcome's event says ``"To"`` for ``"to"``: every
    result agrees, only the durable projection (the payload bytes) differs."""

    def commit_finalization(self, *args: Any, **kwargs: Any) -> TerminalAttempt:
        result: TerminalAttempt = super().commit_finalization(*args, **kwargs)
        if result.state is AttemptState.CENSORED:
            *earlier, last = self.state.events
            payload = {("To" if key == "to" else key): v for key, v in last.payload.items()}
            events = (*earlier, attrs.evolve(last, payload=payload))
            self.state = attrs.evolve(self.state, events=events)
        return result


class OneResultOff(ModelWriter):
    """The model, except that one ``advance`` (to ``preparing``) returns the next revision."""

    def advance(self, attempt: OwnedAttempt, phase: AttemptState, now_ns: int) -> OwnedAttempt:
        result = super().advance(attempt, phase, now_ns)
        if phase is AttemptState.PREPARING:
            return attrs.evolve(result, revision=result.revision + 1)
        return result


@pytest.mark.parametrize("mode", [[], ["--check"]], ids=["write", "check"])
@pytest.mark.parametrize(
    ("model_writer", "says"),
    [(OnePayloadOff, "durable projection: events"), (OneResultOff, "preparing")],
    ids=["payload", "result"],
)
def test_a_model_disagreement_writes_nothing(
    mode: list[str],
    model_writer: type[ModelWriter],
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vectors, spec = tmp_path / "vectors", tmp_path / "SPEC.md"
    vectors.mkdir()
    shutil.copyfile(ROOT / "SPEC.md", spec)
    make_spec_block_stale(spec)
    before = snapshot(tmp_path)
    monkeypatch.setattr(GENERATED_EVENTS, "ModelWriter", model_writer)
    capsys.readouterr()
    assert REGEN.main([*mode, "--vectors", str(vectors), "--spec", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "refused, nothing written" in err and "disagree" in err and says in err
    assert list(vectors.iterdir()) == []
    assert snapshot(tmp_path) == before


def test_a_refused_call_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = GENERATED_EVENTS.SCENARIO
    first_reserve = next(call for call in scenario if call.operation == "reserve")
    position = scenario.index(first_reserve) + 1
    twice = [*scenario[:position], first_reserve, *scenario[position:]]
    monkeypatch.setattr(GENERATED_EVENTS, "SCENARIO", twice)
    vectors, spec = copy_of_the_tree(tmp_path)
    (vectors / "events.json").unlink()
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert REGEN.main(["--vectors", str(vectors), "--spec", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "refused, nothing written" in err and "the scenario refuses nothing" in err
    assert snapshot(tmp_path) == before


def test_the_events_scenario_is_one_call_script_keyed_by_attempt_id() -> None:
    scenario = GENERATED_EVENTS.SCENARIO
    assert scenario and all(isinstance(call, Call) for call in scenario)
    operations = EVENTS["operations"]
    assert [call.name for call in scenario] == [operation["name"] for operation in operations]
    for call, operation in zip(scenario, operations, strict=True):
        assert call.operation == operation["operation"]
        assert GENERATED_EVENTS.arguments_json(call) == operation["arguments"], call.name
        if call.operation in GUARDED:
            assert call.attempt == operation["arguments"]["attempt_id"]
        if call.operation == "reserve":
            assert call.attempt == operation["result"]["attempt_id"]
            assert "attempt_id" not in operation["arguments"]


# --- tools/regen: every generated file, one command ----------------------------------------


def test_regen_is_an_executable_script_and_clean_on_the_committed_tree(tmp_path: Path) -> None:
    text = REGEN_SCRIPT.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env python3\n")
    assert REGEN.__doc__ and "--check" in REGEN.__doc__
    assert os.access(REGEN_SCRIPT, os.X_OK)
    before = snapshot(VECTORS, ROOT / "SPEC.md")
    command = [sys.executable, str(REGEN_SCRIPT), "--check"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert snapshot(VECTORS, ROOT / "SPEC.md") == before


def test_regen_check_names_each_stale_file_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vectors, spec = copy_of_the_tree(tmp_path)
    arguments = ["--vectors", str(vectors), "--spec", str(spec)]
    assert REGEN.main(["--check", *arguments]) == 0
    events = vectors / "events.json"
    stale_events = events.read_text(encoding="utf-8").replace("worker_crashed", "worker_lost")
    assert stale_events != events.read_text(encoding="utf-8")
    events.write_text(stale_events, encoding="utf-8")
    (vectors / "traces" / "happy_path_accepted.md").write_text("stale\n", encoding="utf-8")
    (vectors / "traces" / "stale_revision_refused.md").unlink()
    (vectors / "traces" / "retired_scenario.md").write_text("old\n", encoding="utf-8")
    make_spec_block_stale(spec)
    before = snapshot(tmp_path)
    capsys.readouterr()
    assert REGEN.main(["--check", *arguments]) == 1
    reported = capsys.readouterr().err.splitlines()
    assert snapshot(tmp_path) == before
    stale = {line.removeprefix("stale: ") for line in reported if line.startswith("stale: ")}
    assert stale == {
        str(events),
        str(vectors / "traces" / "happy_path_accepted.md"),
        str(vectors / "traces" / "stale_revision_refused.md"),
        f"{vectors / 'traces' / 'retired_scenario.md'} (orphaned transcript)",
        str(spec),
    }
    assert REGEN.main(arguments) == 0
    assert not (vectors / "traces" / "retired_scenario.md").exists()
    assert REGEN.main(["--check", *arguments]) == 0
    assert snapshot(vectors, spec) == {
        tmp_path / path.relative_to(ROOT): data
        for path, data in snapshot(VECTORS, ROOT / "SPEC.md").items()
    }


# --- reading the vectors as another implementation would ----------------------------------


def read_vectors(name: str) -> dict[str, Any]:
    data = (VECTORS / name).read_bytes()
    data.decode("ascii")  # the files are ASCII (README)
    document = json.loads(data)
    assert isinstance(document, dict)
    return document


CANONICAL = read_vectors("canonical_json.json")
IDENTITIES = read_vectors("identities.json")
EVENTS = read_vectors("events.json")
CONTENT = read_vectors("content.json")
OUTCOMES = read_vectors("outcomes.json")
RECOVERY = read_vectors("recovery.json")


def cases(document: dict[str, Any], section: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("case", document[section], ids=lambda case: case["name"])


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


ARTIFACT_KEYS = {"content_sha256", "id", "kind", "manifest_sha256", "path", "verified_at_ns"}


@cases(IDENTITIES, "artifacts_refused")
def test_artifact_refused(case: dict[str, Any]) -> None:
    fields = case["fields"]
    assert set(fields) == ARTIFACT_KEYS  # a whole document: the defect is in a value
    assert refusal(ArtifactRegistration.from_json, fields) == case["error_code"]


# --- events.json: payload bytes, history shape, and a replay on a real store ---------------

TERMINAL = {"accepted", "censored", "superseded", "failed"}
EXECUTION_EDGES = {
    ("reserved", "materializing"),
    ("materializing", "starting"),
    ("starting", "preparing"),
    ("preparing", "executing"),
    ("executing", "checkpointing"),
    ("executing", "validating"),
    ("checkpointing", "validating"),
    ("validating", "evaluating"),
    ("evaluating", "executing"),
}


def payload_keys(kind: str, payload: dict[str, Any]) -> set[str]:
    """The keys SPEC.md section 7 lists for an event of ``kind`` with this payload."""
    base = {"from", "to", "revision"}
    if kind == "attempt_reserved":
        return base | {"slot_id", "retry_index"}
    if kind == "attempt_transition":
        return base
    if kind == "attempt_finalizing":
        return base | {"claim"} if "claim" in payload else base
    if kind == "attempt_finished":
        extra = {"failed": {"failure_code", "details"}, "censored": {"reason"}}
        return base | extra.get(payload["to"], set())
    if kind == "observation_registered":
        return {"observation_id", "slot_id", "artifact_id", "references", "registered", "selected"}
    raise AssertionError(f"unknown event kind {kind!r}")


def event_payload(case: dict[str, Any]) -> dict[str, Any]:
    payload = decode(bytes.fromhex(case["payload_hex"]))
    assert isinstance(payload, dict)
    return payload


@cases(EVENTS, "events")
def test_event_payload_bytes(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["payload_hex"])
    assert case["payload_utf8"].encode("utf-8") == data
    decoded = decode(data)
    assert isinstance(decoded, dict)
    assert encode(decoded) == data
    payload: dict[str, Any] = decoded
    kind = case["kind"]
    assert set(payload) == payload_keys(kind, payload)
    assert ns_to_json(ns_from_json(case["at_ns"])) == case["at_ns"]
    assert type(case["sequence"]) is int and case["sequence"] >= 1
    if kind == "observation_registered":
        references = payload["references"]
        assert references == sorted(references, key=lambda r: (r["role"], r["artifact_id"]))
        assert all(set(r) == {"artifact_id", "role"} for r in references)
        assert type(payload["registered"]) is bool and type(payload["selected"]) is bool
        return
    assert type(payload["revision"]) is int and payload["revision"] >= 0
    assert ns_to_json(ns_from_json(case["at_ns"])) == case["at_ns"]
    assert type(case["sequence"]) is int and case["sequence"] >= 1
    if kind == "attempt_reserved":
        assert (payload["from"], payload["to"], payload["revision"]) == (None, "reserved", 0)
        attempt_id = run_attempt_id(payload["slot_id"], payload["retry_index"])
        assert attempt_id == case["attempt_id"]
    elif kind == "attempt_transition":
        assert (payload["from"], payload["to"]) in EXECUTION_EDGES
    elif kind == "attempt_finalizing":
        assert payload["to"] == "finalizing"
        assert payload["from"] not in TERMINAL | {"finalizing"}
        assert payload.get("claim", "claimed") in {"claimed", "superseded"}
    else:
        assert payload["from"] == "finalizing" and payload["to"] in TERMINAL
        if payload["to"] == "failed":
            assert type(payload["failure_code"]) is str and type(payload["details"]) is dict
        if payload["to"] == "censored":
            assert type(payload["reason"]) is str and payload["reason"]


def test_event_history_is_one_chain_per_attempt() -> None:
    events, operations = EVENTS["events"], EVENTS["operations"]
    assert [case["sequence"] for case in events] == list(range(1, len(events) + 1))
    produced = {
        sequence: operation for operation in operations for sequence in operation["event_sequences"]
    }
    assert sorted(produced) == [case["sequence"] for case in events]
    last: dict[str, tuple[str, int, int]] = {}
    for case in events:
        payload = event_payload(case)
        at_ns = int(case["at_ns"])
        assert case["name"] == produced[case["sequence"]]["name"]
        if case["kind"] == "observation_registered":  # no transition: not in the chain
            assert case["attempt_id"] in last and last[case["attempt_id"]][0] not in TERMINAL
            continue
        if case["attempt_id"] in last:
            state, revision, previous_ns = last[case["attempt_id"]]
            assert (payload["from"], payload["revision"]) == (state, revision + 1)
            assert at_ns >= previous_ns
        else:
            assert case["kind"] == "attempt_reserved"
        assert last.get(case["attempt_id"], ("", 0, 0))[0] not in TERMINAL
        last[case["attempt_id"]] = (payload["to"], payload["revision"], at_ns)


def test_event_operations_replay_to_the_same_bytes(tmp_path: Path) -> None:
    delivered: list[CommittedEvent] = []
    guards: dict[str, OwnedAttempt] = {}
    with RunStore.open(tmp_path) as store:
        store.subscribe(delivered.append)
        for operation in EVENTS["operations"]:
            replay_checked(store, operation, guards, lambda: [e.sequence for e in delivered])
    reading_aids = ("name", "payload_utf8")  # what a case adds to the event's own form
    pinned = [
        {key: value for key, value in case.items() if key not in reading_aids}
        for case in EVENTS["events"]
    ]
    assert [event.to_json() for event in delivered] == pinned


# --- the vector files cover what SPEC.md section 10 promises ------------------------------


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@pytest.mark.parametrize(
    "document", [CANONICAL, IDENTITIES, EVENTS, CONTENT, OUTCOMES, RECOVERY], ids=list(OWNED)
)
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
    artifact_codes = {case["error_code"] for case in IDENTITIES["artifacts_refused"]}
    assert artifact_codes == {"invalid_record", "invalid_canonical_json", "out_of_range"}


def test_events_cover_the_scenario_section_10_promises() -> None:
    events = [(case, event_payload(case)) for case in EVENTS["events"]]
    assert {case["kind"] for case, _ in events} == {
        "attempt_reserved",
        "attempt_transition",
        "attempt_finalizing",
        "attempt_finished",
        "observation_registered",
    }
    assert {p["retry_index"] for c, p in events if c["kind"] == "attempt_reserved"} == {0, 1}
    transitions = {(p["from"], p["to"]) for c, p in events if c["kind"] == "attempt_transition"}
    assert transitions == EXECUTION_EDGES
    claims = {p.get("claim") for c, p in events if c["kind"] == "attempt_finalizing"}
    assert claims == {"claimed", "superseded", None}
    finished = {p["to"]: p for c, p in events if c["kind"] == "attempt_finished"}
    assert set(finished) == TERMINAL
    reason = finished["censored"]["reason"]
    assert '"' in reason and not reason.isascii()
    assert any(type(value) is dict for value in finished["failed"]["details"].values())
    now = {
        sequence: operation["arguments"]["now_ns"]
        for operation in EVENTS["operations"]
        for sequence in operation["event_sequences"]
    }
    clamped = [c for c, _ in events if int(c["at_ns"]) > int(now[c["sequence"]])]
    assert clamped, "no event pins the clamp of a clock that went backward"
    selected = [o for o in EVENTS["operations"] if o["operation"] == "register_observation"]
    assert selected and all(o["arguments"]["select"] for o in selected)
    assert any(o["arguments"]["references"] for o in selected)
    commits = [o["arguments"] for o in EVENTS["operations"] if "finished_at_ns" in o["arguments"]]
    assert any(int(a["finished_at_ns"]) < int(a["now_ns"]) for a in commits)
