"""The outcome document (SPEC.md section 13): the store's builder over SQL
(:mod:`runstore.store.publication.outcome_document`) and the model's over its state
(:mod:`runstore.model.outcome_document`) give the same canonical bytes, with exactly the
promised structure, for every terminal outcome.

One world is played through the lockstep kit (every call on the model and on a real store,
equal results required), so the model and the store hold the same records. Four attempts
stay finalizing in it:

* ``flux#0`` (a stream slot with two checkpoint slots) holds the claim and selected its own
  two observations, the second with references: **accepted**;
* ``alpha#1`` entered finalizing without contending; its slot's selection is ``alpha#0``'s
  observation (``alpha#0`` then failed), and it produced an unselected one of its own:
  **censored**;
* ``beta#0`` holds the claim and selected its own observation: **failed** (nested details);
* ``beta#1`` lost the contest and produced an unselected observation: **superseded**.

The store's builder runs on a plain ``sqlite3`` connection inside ``BEGIN`` after the
store is closed. Dependencies include non-ASCII roles and are handed over unsorted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import FirstAttempt
from runstore import Next
from runstore import Reference
from runstore import RunStore
from runstore import Superseded
from runstore import TerminalOutcome
from runstore import model as m
from runstore import testing
from runstore.canonical import JSON
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.model import outcome_document as model_builder
from runstore.records import ArtifactRegistration
from runstore.records import Observation
from runstore.store.publication import outcome_document as store_builder
from runstore.testing import publishing
from runstore.testing import script
from runstore.testing.lockstep import ModelWriter
from runstore.testing.script import Call
from runstore.testing.script import Context

T0 = 1_700_000_000_000_000_000  # beyond 2**53: every time is a decimal string
EXPIRES = T0 + 3_600 * 10**9
VERIFIED = T0 + 999_999_937  # verification times: must never appear in a document


def at(ms: int) -> int:
    return T0 + ms * 1_000_000


FLUX = testing.stream("flux", checkpoints=2)
ALPHA = testing.one_shot("alpha")
BETA = testing.one_shot("beta")
S0 = FLUX.attempt_id(0)
A0, A1 = ALPHA.attempt_id(0), ALPHA.attempt_id(1)
B0, B1 = BETA.attempt_id(0), BETA.attempt_id(1)


def artifact(kind: ArtifactKind, seed: str, offset: int) -> ArtifactRegistration:
    return testing.artifact(kind, seed, verified_at_ns=VERIFIED + offset)


OBS_S0_0 = artifact(ArtifactKind.OBSERVATION, "flux-0-checkpoint-0", 1)
OBS_S0_1 = artifact(ArtifactKind.OBSERVATION, "flux-0-checkpoint-1", 2)
OBS_A0 = artifact(ArtifactKind.OBSERVATION, "alpha-0-result", 3)
OBS_A1 = artifact(ArtifactKind.OBSERVATION, "alpha-1-result", 4)
OBS_B0 = artifact(ArtifactKind.OBSERVATION, "beta-0-result", 5)
OBS_B1 = artifact(ArtifactKind.OBSERVATION, "beta-1-result", 6)
FINAL_A0 = artifact(ArtifactKind.ATTEMPT, "alpha-0", 7)

CHECKPOINT_0, CHECKPOINT_1 = FLUX.observation_slots
OBSERVATION_S0_0 = testing.observation(CHECKPOINT_0, S0, result={"step": 0})
OBSERVATION_S0_1 = testing.observation(
    CHECKPOINT_1, S0, result={"step": 1, "note": "\u00e9t\u00e9"}
)
OBSERVATION_A0 = testing.observation(ALPHA.observation_slot, A0, result={"score": 3})
OBSERVATION_A1 = testing.observation(ALPHA.observation_slot, A1, result={"score": 5})
OBSERVATION_B0 = testing.observation(BETA.observation_slot, B0, result={"score": 8})
OBSERVATION_B1 = testing.observation(BETA.observation_slot, B1, result={"score": 13})
S0_1_REFERENCES = [Reference("pr\u00e9c\u00e9dent", OBS_S0_0.id), Reference("copie", OBS_S0_1.id)]
A1_REFERENCES = [Reference("origine \U0001f600", OBS_A0.id)]

LEASES = {
    name: testing.lease(name, expires_at_ns=EXPIRES, owner=f"owner-of-{owner}")
    for owner in ("flux-0", "alpha-0", "alpha-1", "beta-0", "beta-1")
    for name in (owner, f"{owner}-claim")
}
RESERVED_AT = {S0: at(1), A0: at(5), A1: at(9), B0: at(12), B1: at(13)}
REGISTERED_AT = [at(3), at(4), at(7), at(10), at(16), at(17)]

WORLD: list[Call] = [
    script.register_slots(*FLUX.arguments()),
    script.register_one_shot(*ALPHA.arguments()),
    script.register_one_shot(*BETA.arguments()),
    script.reserve(S0, FLUX.slot_id, FirstAttempt(), LEASES["flux-0"], RESERVED_AT[S0]),
    script.begin_finalization(S0, LEASES["flux-0-claim"], at(2)),
    script.register_observation(S0, OBSERVATION_S0_0, OBS_S0_0, True, at(3)),
    script.register_observation(
        S0, OBSERVATION_S0_1, OBS_S0_1, True, at(4), references=S0_1_REFERENCES
    ),
    script.reserve(A0, ALPHA.slot_id, FirstAttempt(), LEASES["alpha-0"], RESERVED_AT[A0]),
    script.begin_finalization(A0, LEASES["alpha-0-claim"], at(6)),
    script.register_observation(A0, OBSERVATION_A0, OBS_A0, True, at(7)),
    script.commit_finalization(A0, Failed(code="lost", details={}), FINAL_A0, [], at(8)),
    script.reserve(A1, ALPHA.slot_id, Next(retry=True), LEASES["alpha-1"], RESERVED_AT[A1]),
    script.register_observation(
        A1, OBSERVATION_A1, OBS_A1, False, at(10), references=A1_REFERENCES
    ),
    script.advance(A1, AttemptState.FINALIZING, at(11)),
    script.reserve(B0, BETA.slot_id, FirstAttempt(), LEASES["beta-0"], RESERVED_AT[B0]),
    script.reserve(B1, BETA.slot_id, Next(retry=True), LEASES["beta-1"], RESERVED_AT[B1]),
    script.begin_finalization(B0, LEASES["beta-0-claim"], at(14)),
    script.begin_finalization(B1, LEASES["beta-1-claim"], at(15)),
    script.register_observation(B0, OBSERVATION_B0, OBS_B0, True, at(16)),
    script.register_observation(B1, OBSERVATION_B1, OBS_B1, False, at(17)),
]


@attrs.frozen
class Case:
    attempt_id: str
    outcome: TerminalOutcome
    references: tuple[Reference, ...]
    finished_at_ns: int
    produced: tuple[Observation, ...]
    selected: tuple[Observation, ...] | None


CASES = {
    "accepted": Case(
        S0,
        Accepted(),
        (
            Reference("donn\u00e9es \U0001f600", FINAL_A0.id),
            Reference("dataset", OBS_S0_1.id),
            Reference("Zeta", OBS_A0.id),
            Reference("dataset", OBS_S0_0.id),
            Reference("\u00e9", OBS_S0_0.id),
        ),
        at(20),
        (OBSERVATION_S0_0, OBSERVATION_S0_1),
        (OBSERVATION_S0_0, OBSERVATION_S0_1),
    ),
    "censored": Case(
        A1,
        Censored(reason='budget "\u00e9puis\u00e9" \u2014 \u8a08\u7b97'),
        (Reference("journal", FINAL_A0.id),),
        at(21),
        (OBSERVATION_A1,),
        (OBSERVATION_A0,),
    ),
    "failed": Case(
        B0,
        Failed(
            code="worker_crashed",
            details={"exit": {"code": 137, "signal": "SIGKILL"}, "stages": [{"ok": False}, None]},
        ),
        (Reference("entr\u00e9e", OBS_B0.id), Reference("entr\u00e9e", FINAL_A0.id)),
        at(22),
        (OBSERVATION_B0,),
        None,
    ),
    "superseded": Case(B1, Superseded(), (), at(23), (OBSERVATION_B1,), None),
}
REGISTRATIONS = {a.id: a for a in (OBS_S0_0, OBS_S0_1, OBS_A0, OBS_A1, OBS_B0, OBS_B1, FINAL_A0)}
REFERENCES = {
    OBSERVATION_S0_1.id: S0_1_REFERENCES,
    OBSERVATION_A1.id: A1_REFERENCES,
}
OBSERVATION_ARTIFACTS = {
    OBSERVATION_S0_0.id: OBS_S0_0,
    OBSERVATION_S0_1.id: OBS_S0_1,
    OBSERVATION_A0.id: OBS_A0,
    OBSERVATION_A1.id: OBS_A1,
    OBSERVATION_B0.id: OBS_B0,
    OBSERVATION_B1.id: OBS_B1,
}
SLOTS = {S0: FLUX, A1: ALPHA, B0: BETA, B1: BETA}


@attrs.frozen
class Built:
    """Both builders' results per case: ``(document bytes, snapshot)``."""

    store: dict[str, tuple[bytes, dict[str, JSON]]]
    model: dict[str, tuple[bytes, dict[str, JSON]]]
    revisions: dict[str, int]


def store_build(database_path: str) -> dict[str, tuple[bytes, dict[str, JSON]]]:
    """Every case's document and snapshot, read by the store's builder on a plain
    connection inside one transaction (the store itself is closed)."""
    connection = sqlite3.connect(database_path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        built = {
            name: (
                store_builder.outcome_document(
                    connection, case.attempt_id, case.outcome, case.references, case.finished_at_ns
                ),
                store_builder.snapshot(connection, case.attempt_id, case.outcome),
            )
            for name, case in CASES.items()
        }
        connection.execute("ROLLBACK")
    finally:
        connection.close()
    return built


def model_build(state: m.ModelState) -> dict[str, tuple[bytes, dict[str, JSON]]]:
    return {
        name: (
            model_builder.outcome_document(
                state, case.attempt_id, case.outcome, case.references, case.finished_at_ns
            ),
            model_builder.snapshot(state, case.attempt_id, case.outcome),
        )
        for name, case in CASES.items()
    }


def commit_calls() -> Iterator[Call]:
    for name, case in CASES.items():
        final = artifact(ArtifactKind.ATTEMPT, f"final-{name}", 100)
        yield script.commit_finalization(
            case.attempt_id, case.outcome, final, case.references, case.finished_at_ns + 1
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Built, Built]]:
    """The world while finalizing, and again after every case has committed."""
    root = tmp_path_factory.mktemp("outcome-world")
    model = ModelWriter(m.ModelState())
    context: Context = {}
    with RunStore.open(root) as store:
        for call in WORLD:
            script.apply_in_lockstep(call, model, store, context)
        database_path = store.database_path
    revisions = {name: context[case.attempt_id].revision for name, case in CASES.items()}
    before = Built(store_build(database_path), model_build(model.state), revisions)
    with RunStore.open(root) as store:
        for call in commit_calls():
            script.apply_in_lockstep(call, model, store, context)
    after = Built(store_build(database_path), model_build(model.state), revisions)
    yield before, after


def document_of(built: Built, name: str) -> dict[str, Any]:
    decoded = decode(built.store[name][0])
    assert isinstance(decoded, dict)
    return decoded


def entry(registration: ArtifactRegistration) -> dict[str, JSON]:
    fields = registration.to_json()
    del fields["verified_at_ns"]
    return fields


def observation_entry(observation: Observation) -> dict[str, JSON]:
    references = sorted(r.pair for r in REFERENCES.get(observation.id, []))
    return {
        "observation": observation.to_json(),
        "artifact": entry(OBSERVATION_ARTIFACTS[observation.id]),
        "references": [
            {"role": role, "artifact": entry(REGISTRATIONS[artifact_id])}
            for role, artifact_id in references
        ],
    }


def utf8_key(*parts: str) -> tuple[bytes, ...]:
    return tuple(part.encode("utf-8") for part in parts)


# --- the two builders agree --------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_store_and_model_give_identical_bytes(name: str, world: tuple[Built, Built]) -> None:
    before, _ = world
    assert before.store[name][0] == before.model[name][0]
    assert before.store[name][1] == before.model[name][1]


@pytest.mark.parametrize("name", CASES)
def test_the_snapshot_is_the_documents_snapshot(name: str, world: tuple[Built, Built]) -> None:
    before, _ = world
    for built in (before.store, before.model):
        document, snapshot = built[name]
        decoded = decode(document)
        assert isinstance(decoded, dict)
        assert decoded["snapshot"] == snapshot


@pytest.mark.parametrize("name", CASES)
def test_the_document_is_unchanged_by_its_own_commit(name: str, world: tuple[Built, Built]) -> None:
    """After the terminal step the builders still name the finalizing revision and read
    the same records (no other attempt changed this world meanwhile)."""
    before, after = world
    assert after.store[name] == before.store[name]
    assert after.model[name] == before.model[name]


# --- the exact structure -----------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_the_document_has_exactly_the_promised_structure(
    name: str, world: tuple[Built, Built]
) -> None:
    before, _ = world
    case = CASES[name]
    data = before.store[name][0]
    document = document_of(before, name)
    assert encode(document) == data  # canonical: sorted keys, no whitespace
    assert set(document) == {
        "run_store_version",
        "attempt",
        "outcome",
        "started_at_ns",
        "finished_at_ns",
        "dependencies",
        "snapshot",
    }
    assert document["run_store_version"] == 1
    slot = SLOTS[case.attempt_id]
    assert document["attempt"] == {
        "id": case.attempt_id,
        "slot_id": slot.slot_id,
        "retry_index": 1 if case.attempt_id == A1 or case.attempt_id == B1 else 0,
        "finalizing_revision": before.revisions[name],
    }
    assert document["started_at_ns"] == str(RESERVED_AT[case.attempt_id])
    assert document["finished_at_ns"] == str(case.finished_at_ns)
    for key in ("started_at_ns", "finished_at_ns"):
        assert type(document[key]) is str and int(document[key]) > MAX_SAFE_INTEGER
    dependencies = document["dependencies"]
    assert dependencies == [
        {"role": role, "artifact": entry(REGISTRATIONS[artifact_id])}
        for role, artifact_id in sorted(
            (r.pair for r in case.references), key=lambda r: utf8_key(*r)
        )
    ]
    snapshot = document["snapshot"]
    expected_keys = {
        "decision",
        "run",
        "attempt_slot",
        "observation_slots",
        "produced_observations",
    }
    if case.selected is not None:
        expected_keys.add("selected_observations")
    assert set(snapshot) == expected_keys
    assert snapshot["decision"] == slot.decision.to_json()
    assert snapshot["run"] == slot.run.to_json()
    assert snapshot["attempt_slot"] == slot.attempt_slot.to_json()
    members = FLUX.observation_slots if slot is FLUX else (slot.observation_slot,)
    assert snapshot["observation_slots"] == [
        s.to_json() for s in sorted(members, key=lambda s: utf8_key(s.id))
    ]
    assert snapshot["produced_observations"] == [
        observation_entry(o) for o in sorted(case.produced, key=lambda o: utf8_key(o.id))
    ]
    if case.selected is not None:
        assert snapshot["selected_observations"] == [
            observation_entry(o) for o in sorted(case.selected, key=lambda o: utf8_key(o.slot_id))
        ]


def test_each_outcome_object() -> None:
    documents = {
        name: decode(model_builder.outcome_document(state(), c.attempt_id, c.outcome, (), at(30)))
        for name, c in CASES.items()
    }
    outcomes = {name: doc["outcome"] for name, doc in documents.items() if isinstance(doc, dict)}
    assert outcomes == {
        "accepted": {"state": "accepted"},
        "censored": {
            "state": "censored",
            "reason": 'budget "\u00e9puis\u00e9" \u2014 \u8a08\u7b97',
        },
        "failed": {
            "state": "failed",
            "failure_code": "worker_crashed",
            "details": {
                "exit": {"code": 137, "signal": "SIGKILL"},
                "stages": [{"ok": False}, None],
            },
        },
        "superseded": {"state": "superseded"},
    }
    assert all(isinstance(doc, dict) and doc["dependencies"] == [] for doc in documents.values())
    assert all(
        isinstance(doc, dict) and doc["finished_at_ns"] == str(at(30)) for doc in documents.values()
    )


_STATE: list[m.ModelState] = []


def state() -> m.ModelState:
    """The model's world while finalizing (played once, on the model alone)."""
    if not _STATE:
        model, context = ModelWriter(m.ModelState()), {}
        for call in WORLD:
            call.apply(model, context)
        _STATE.append(model.state)
    return _STATE[0]


def test_censored_binds_another_attempts_selection_and_failed_binds_none(
    world: tuple[Built, Built],
) -> None:
    before, _ = world
    censored = document_of(before, "censored")["snapshot"]
    assert [e["observation"]["attempt_id"] for e in censored["selected_observations"]] == [A0]
    assert [e["observation"]["attempt_id"] for e in censored["produced_observations"]] == [A1]
    # beta#0 selected its own observation, yet a failed document carries no selection; and
    # beta#1's superseded document keeps only its own (unselected) observation.
    assert state().selections[BETA.observation_slot.id].observation_id == OBSERVATION_B0.id
    for name, attempt in (("failed", B0), ("superseded", B1)):
        snapshot = document_of(before, name)["snapshot"]
        assert "selected_observations" not in snapshot
        assert [e["observation"]["attempt_id"] for e in snapshot["produced_observations"]] == [
            attempt
        ]


def test_an_accepted_document_binds_every_checkpoint_selection(
    world: tuple[Built, Built],
) -> None:
    before, _ = world
    snapshot = document_of(before, "accepted")["snapshot"]
    selected = [e["observation"]["slot_id"] for e in snapshot["selected_observations"]]
    assert selected == sorted(s.id for s in FLUX.observation_slots)
    second = next(
        e
        for e in snapshot["produced_observations"]
        if e["observation"]["id"] == OBSERVATION_S0_1.id
    )
    assert [r["role"] for r in second["references"]] == ["copie", "pr\u00e9c\u00e9dent"]


@pytest.mark.parametrize("name", CASES)
def test_no_owner_token_lease_id_staging_path_or_bookkeeping_time(
    name: str, world: tuple[Built, Built]
) -> None:
    before, _ = world
    data = before.store[name][0]
    text = data.decode("utf-8")
    for lease in LEASES.values():
        assert lease.lease_id not in text and lease.owner_token not in text
    assert "lease" not in text and "token" not in text and "staging" not in text
    for key in ("verified_at_ns", "registered_at_ns", "selected_at_ns", "claimed_at_ns"):
        assert key not in text
    for registration in REGISTRATIONS.values():
        assert str(registration.verified_at_ns) not in text
    for registered in REGISTERED_AT:  # also every selection time
        assert str(registered) not in text


def test_times_beyond_two_to_the_53_stay_exact() -> None:
    late = 2**63 - 1
    case = CASES["superseded"]
    data = model_builder.outcome_document(state(), case.attempt_id, case.outcome, (), late)
    assert b'"finished_at_ns":"9223372036854775807"' in data
    assert f'"started_at_ns":"{RESERVED_AT[B1]}"'.encode() in data


# --- what the publisher writes -----------------------------------------------------------------


def test_publish_finalization_writes_exactly_the_builders_bytes(tmp_path: Path) -> None:
    """Each case published through ``publish_finalization`` in lockstep: its artifact's
    ``outcome.json`` is the builders' document for the receipt's finish time, and stays
    so after the commit (read at the finalizing revision)."""
    model = ModelWriter(m.ModelState())
    context: Context = {}
    published = {}
    with RunStore.open(tmp_path) as store:
        for call in WORLD:
            script.apply_in_lockstep(call, model, store, context)
        for index, (name, case) in enumerate(CASES.items()):
            call = script.publish_finalization(
                case.attempt_id,
                case.outcome,
                case.references,
                publishing.files(**{"stderr.log": name.encode()}),
                publishing.at(at(40 + index)),
            )
            published[name] = script.apply_in_lockstep(call, model, store, context)
    for name, case in CASES.items():
        receipt = published[name]
        written = (tmp_path / receipt.artifact.path / "outcome.json").read_bytes()
        finished = receipt.terminal.finished_at_ns
        expected = model_builder.outcome_document(
            model.state, case.attempt_id, case.outcome, case.references, finished
        )
        assert written == expected, name
        document = decode(written)
        assert isinstance(document, dict) and document["finished_at_ns"] == str(finished)
