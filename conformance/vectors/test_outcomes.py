"""The outcome document vectors (``vectors/outcomes.json``, SPEC.md section 13): the
committed file is what ``tools/vectorgen/outcomes.py`` builds, and, reading only the file,
each case's operations replayed on a fresh real store and on the model leave its attempt in
a state where both builders give exactly ``outcome_hex``.

The second half reads the file as another implementation would (its operations are written
like ``events.json``'s, see vectors/README.md); it uses none of the generator's cases or
helpers. The store's builder runs after the store is closed, on a plain ``sqlite3``
connection inside ``BEGIN``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runstore import OwnedAttempt
from runstore import Reference
from runstore import RunStore
from runstore import TerminalOutcome
from runstore import model as m
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.canonical import ns_from_json
from runstore.model import outcome_document as model_builder
from runstore.store.publication import outcome_document as store_builder
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import Writer

from conformance.vectors.readers import assert_current
from conformance.vectors.readers import outcome_of
from conformance.vectors.readers import read_vector_file
from conformance.vectors.readers import references_of
from conformance.vectors.readers import replay_checked

TERMINAL = {"accepted", "censored", "failed", "superseded"}


def test_the_committed_file_is_what_the_generator_builds() -> None:
    assert_current("outcomes")


# --- reading only the file --------------------------------------------------------------------


VECTORS = read_vector_file("outcomes.json")
CASES = VECTORS["outcomes"]


def play(writer: Writer, case: dict[str, Any], events: list[int]) -> None:
    """Replay the case's operations, checking each result and its event sequences
    (``events`` grows with each committed event's sequence)."""
    guards: dict[str, OwnedAttempt] = {}
    for operation in case["operations"]:
        replay_checked(writer, operation, guards, lambda: events)


def arguments(case: dict[str, Any]) -> tuple[str, TerminalOutcome, list[Reference], int]:
    return (
        case["attempt_id"],
        outcome_of(case["outcome"]),
        references_of(case["references"]),
        ns_from_json(case["finished_at_ns"]),
    )


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_store_builds_the_pinned_bytes(case: dict[str, Any], tmp_path: Path) -> None:
    sequences: list[int] = []
    with RunStore.open(tmp_path) as store:
        store.subscribe(lambda event: sequences.append(event.sequence))
        play(store, case, sequences)
        database_path = store.database_path
    connection = sqlite3.connect(database_path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        document = store_builder.outcome_document(connection, *arguments(case))
        connection.execute("ROLLBACK")
    finally:
        connection.close()
    assert document.hex() == case["outcome_hex"]


class CountingModel(ModelWriter):
    """The model writer, with the sequences of the events each call appended."""

    def __init__(self, sequences: list[int]) -> None:
        super().__init__(m.ModelState())
        self.sequences = sequences

    def apply(self, step: Any) -> Any:
        before = len(self.state.events)
        result = super().apply(step)
        self.sequences.extend(row.sequence for row in self.state.events[before:])
        return result


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_model_builds_the_pinned_bytes(case: dict[str, Any]) -> None:
    sequences: list[int] = []
    model = CountingModel(sequences)
    play(model, case, sequences)
    document = model_builder.outcome_document(model.state, *arguments(case))
    assert document.hex() == case["outcome_hex"]


# --- the file's layout and what its cases cover ---------------------------------------------


def test_the_file_layout() -> None:
    assert VECTORS["format_version"] == 1
    assert isinstance(VECTORS["format"], str) and isinstance(VECTORS["generator"], str)
    names = [case["name"] for case in CASES]
    assert names and len(set(names)) == len(names)
    keys = {
        "name",
        "operations",
        "attempt_id",
        "outcome",
        "references",
        "finished_at_ns",
        "outcome_hex",
        "outcome_utf8",
    }
    assert all(set(case) == keys for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_each_document_states_its_case(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["outcome_hex"])
    assert case["outcome_utf8"].encode("utf-8") == data
    document = decode(data)
    assert isinstance(document, dict) and encode(document) == data
    assert document["run_store_version"] == 1
    assert document["attempt"]["id"] == case["attempt_id"]
    assert document["finished_at_ns"] == case["finished_at_ns"]
    given = case["outcome"]
    expected = {"state": given["state"]}
    if given["state"] == "failed":
        expected |= {"failure_code": given["code"], "details": given["details"]}
    if given["state"] == "censored":
        expected["reason"] = given["reason"]
    assert document["outcome"] == expected
    roles = [(d["role"], d["artifact"]["id"]) for d in document["dependencies"]]
    wanted = sorted(
        references_of(case["references"]), key=lambda r: (r.role.encode(), r.artifact_id.encode())
    )
    assert roles == [reference.pair for reference in wanted]
    snapshot = document["snapshot"]
    assert ("selected_observations" in snapshot) == (given["state"] in {"accepted", "censored"})


def test_the_cases_cover_every_outcome_and_non_ascii() -> None:
    states = {case["outcome"]["state"] for case in CASES}
    assert states == TERMINAL
    roles = [role for case in CASES for role, _ in case["references"]]
    assert any(not role.isascii() for role in roles)
    assert any(
        not case["outcome_utf8"].isascii() and case["outcome"]["state"] == "censored"
        for case in CASES
    )
    failed = [case for case in CASES if case["outcome"]["state"] == "failed"]
    assert any(
        isinstance(v, dict | list) for case in failed for v in case["outcome"]["details"].values()
    )
    censored = [
        decode(bytes.fromhex(c["outcome_hex"]))
        for c in CASES
        if c["outcome"]["state"] == "censored"
    ]
    # one censored case binds a selection produced by another attempt
    assert any(
        isinstance(d, dict)
        and any(
            e["observation"]["attempt_id"] != d["attempt"]["id"]
            for e in d["snapshot"]["selected_observations"]
        )
        for d in censored
    )
