"""The recovered-failure vectors (``vectors/recovery.json``, SPEC.md sections 13 and 14):
the committed file is what ``tools/vectorgen/recovery.py`` builds, and, reading only the
file, each case's operations replayed on a fresh real store and on the model, then one
recovery pass at the pinned time on both, give the pinned report and event sequences, and
the final object the pass published holds exactly the pinned ``outcome.json`` and
``manifest.json`` bytes.

The second half reads the file as another implementation would (its operations are written
like ``events.json``'s, plus ``recover``, see vectors/README.md); it uses none of the
generator's cases or helpers. The model recovers first, looking at the store's root
before the store's own pass (so both see the same disk: no final object yet).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from runstore import TERMINAL_STATES
from runstore import AttemptState
from runstore import OwnedAttempt
from runstore import RunStore
from runstore import model as m
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.model import outcome_document as model_builder
from runstore.store.publication import objects
from runstore.testing.disk import disk_view
from runstore.testing.lockstep import ModelWriter

from conformance.closed_store import reading
from conformance.vectors.readers import assert_current
from conformance.vectors.readers import read_vector_file
from conformance.vectors.readers import replay_checked

NONTERMINAL = {state.value for state in AttemptState if state not in TERMINAL_STATES}


def test_the_committed_file_is_what_the_generator_builds() -> None:
    assert_current("recovery")


# --- reading only the file --------------------------------------------------------------------


VECTORS = read_vector_file("recovery.json")
CASES = VECTORS["recoveries"]
IDS = [case["name"] for case in CASES]


def pinned_document(case: dict[str, Any]) -> Any:
    """The case's ``outcome.json`` decoded (canonical JSON)."""
    return decode(bytes.fromhex(case["outcome_hex"]))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_recovery_publishes_the_pinned_bytes(case: dict[str, Any], tmp_path: Path) -> None:
    root = tmp_path
    model = ModelWriter(m.ModelState(), disk=lambda state: disk_view(str(root), state))
    model_guards: dict[str, OwnedAttempt] = {}
    store_guards: dict[str, OwnedAttempt] = {}
    delivered: list[int] = []

    def modelled() -> list[int]:
        return [row.sequence for row in model.state.events]

    with RunStore.open(root) as store:
        store.subscribe(lambda event: delivered.append(event.sequence))
        for operation in case["operations"]:
            replay_checked(store, operation, store_guards, lambda: delivered)
            replay_checked(model, operation, model_guards, modelled)
        # The model looks at the disk as the store's pass will find it (no final object).
        replay_checked(model, case["recover"], model_guards, modelled)
        replay_checked(store, case["recover"], store_guards, lambda: delivered)
        database_path = store.database_path

    pinned = case["final_artifact"]
    directory = root / pinned["path"]
    assert (directory / "outcome.json").read_bytes().hex() == case["outcome_hex"]
    assert (directory / "manifest.json").read_bytes().hex() == case["manifest_hex"]
    assert sorted(p.name for p in directory.iterdir()) == ["manifest.json", "outcome.json"]
    verified = objects.verify(str(directory), sync=False)
    assert verified.tree_sha256 == pinned["content_sha256"]
    assert verified.manifest_sha256 == pinned["manifest_sha256"]

    with reading(database_path) as connection:
        (final_id,) = connection.execute(
            "SELECT final_artifact_id FROM attempts WHERE id = ?", (case["attempt_id"],)
        ).fetchone()
        row = connection.execute(
            "SELECT path, content_sha256, manifest_sha256 FROM artifacts WHERE id = ?",
            (final_id,),
        ).fetchone()
    assert final_id == pinned["id"]
    assert row == (pinned["path"], pinned["content_sha256"], pinned["manifest_sha256"])

    attempt = model.state.attempts[case["attempt_id"]]
    assert attempt.final_artifact_id == pinned["id"]
    final = model.state.artifacts[pinned["id"]]
    assert (final.path, final.content_sha256, final.manifest_sha256) == row
    assert attempt.outcome is not None and attempt.finished_at_ns is not None
    document = model_builder.outcome_document(
        model.state, case["attempt_id"], attempt.outcome, [], attempt.finished_at_ns
    )
    assert document.hex() == case["outcome_hex"]


# --- the file's layout and what its cases state ---------------------------------------------


def test_the_file_layout() -> None:
    assert VECTORS["format_version"] == 1
    assert isinstance(VECTORS["format"], str) and isinstance(VECTORS["generator"], str)
    assert IDS and len(set(IDS)) == len(IDS)
    keys = {
        "name",
        "operations",
        "recover",
        "attempt_id",
        "final_artifact",
        "outcome_hex",
        "outcome_utf8",
        "manifest_hex",
    }
    assert all(set(case) == keys for case in CASES)
    for case in CASES:
        assert case["recover"]["operation"] == "recover"
        assert set(case["recover"]["arguments"]) == {"clock"}
        assert set(case["recover"]["result"]) == {
            "terminals",
            "imported_artifacts",
            "quarantined_stages",
            "busy_stages",
            "rejected_artifacts",
        }
        assert "recover" not in {operation["operation"] for operation in case["operations"]}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_document_states_its_case(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["outcome_hex"])
    assert case["outcome_utf8"].encode("utf-8") == data
    document = pinned_document(case)
    assert isinstance(document, dict) and encode(document) == data
    assert document["run_store_version"] == 1
    assert document["attempt"]["id"] == case["attempt_id"]
    outcome = document["outcome"]
    assert outcome["state"] == "failed"
    assert outcome["failure_code"] == "interrupted_attempt"
    assert set(outcome["details"]) == {"cause", "interrupted_state"}
    assert outcome["details"]["interrupted_state"] in NONTERMINAL
    assert document["dependencies"] == []  # nothing is rooted under the attempt's leases
    assert "selected_observations" not in document["snapshot"]
    # The pass finalized exactly this attempt, at the pinned finish time.
    (terminal,) = case["recover"]["result"]["terminals"]
    assert terminal["attempt_id"] == case["attempt_id"]
    assert terminal["state"] == "failed"
    assert terminal["finished_at_ns"] == document["finished_at_ns"]
    assert int(document["finished_at_ns"]) >= int(case["recover"]["arguments"]["clock"])
    assert terminal["event_sequence"] == case["recover"]["event_sequences"][-1]
    # The object holds only outcome.json, listed in its manifest.
    pinned = case["final_artifact"]
    manifest = bytes.fromhex(case["manifest_hex"])
    assert hashlib.sha256(manifest).hexdigest() == pinned["manifest_sha256"]
    listed = decode(manifest)
    assert isinstance(listed, dict)
    (entry,) = listed["files"]
    assert entry["path"] == "outcome.json"
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert entry["size_bytes"] == len(data)
    assert pinned["path"] == f"artifacts/attempt-{pinned['content_sha256']}"
    assert pinned["id"] == f"run-store-v1:attempt-{pinned['content_sha256']}"


def test_the_cases_cover_both_causes_and_states() -> None:
    details = [pinned_document(case)["outcome"]["details"] for case in CASES]
    found = {(d["cause"], d["interrupted_state"]) for d in details}
    assert ("reservation_expired", "executing") in found
    assert ("claim_expired", "finalizing") in found
    # the claim holder's own (selected) observation is in the snapshot it produced
    claimed = [
        pinned_document(case)
        for case, d in zip(CASES, details, strict=True)
        if d["cause"] == "claim_expired"
    ]
    assert claimed and all(d["snapshot"]["produced_observations"] for d in claimed)
    # a pass that moves its attempt to finalizing commits two events; otherwise one
    moves = {len(c["recover"]["event_sequences"]) for c in CASES}
    assert moves == {1, 2}
