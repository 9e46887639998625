"""``runstore.inspection.explain`` (SPEC.md 15.6/15.7): one slot's records and history.

Reads the store of :func:`test_inspection_status.build_store` (closed) through a snapshot;
the expected counts come from a fresh read-only connection on the database, not from the
reader. Owner tokens are the lease holders' secrets: they must never reach the output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runstore import RunStoreError
from runstore.inspection.explain import Explanation
from runstore.inspection.explain import explain
from runstore.inspection.snapshot import Snapshot

from conformance.closed_store import rows
from conformance.inspection.test_status import OWNER_TOKEN
from conformance.inspection.test_status import Built
from conformance.inspection.test_status import build_store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    root = tmp_path_factory.mktemp("explain-store")
    return root, build_store(root)


def explained(root: Path, target: str) -> Explanation:
    with Snapshot.take(root) as snapshot:
        return explain(snapshot, target)


def test_attempt_id_explains_its_slot(built: tuple[Path, Built]) -> None:
    root, ids = built
    attempt_id = ids.attempts["accepted-0"]
    explanation = explained(root, attempt_id)
    assert explanation.slot.slot_id == ids.slots["accepted"]
    assert explanation.slot.state.value == "accepted"
    assert explanation.highlighted_attempt_id == attempt_id
    (attempt,) = explanation.attempts
    assert attempt.id == attempt_id and attempt.highlighted
    assert (attempt.state, attempt.revision, attempt.finished_at_ns) == ("accepted", 7, 1_500)

    ((transitions,),) = rows(
        root, "SELECT count(*) FROM attempt_transitions WHERE attempt_id = ?", (attempt_id,)
    )
    assert len(attempt.transitions) == transitions == attempt.revision + 1
    assert [t.revision for t in attempt.transitions] == list(range(attempt.revision + 1))
    assert attempt.transitions[-1].to_state == "accepted"
    db_events = rows(
        root,
        "SELECT sequence, kind, at_ns FROM events WHERE attempt_id = ? ORDER BY sequence",
        (attempt_id,),
    )
    assert [(e.sequence, e.kind, e.at_ns) for e in attempt.events] == db_events
    assert "observation_registered" in [e.kind for e in attempt.events]
    assert attempt.events[0].payload["to"] == "reserved"

    assert sorted(lease.purpose for lease in attempt.leases) == ["finalization", "reservation"]
    assert all(lease.released_at_ns == 1_500 for lease in attempt.leases)
    assert attempt.final_artifact is not None and attempt.final_artifact.kind == "attempt"
    (reference,) = attempt.artifacts
    assert reference.role == "observation" and reference.artifact.kind == "observation"
    (observation,) = attempt.observations
    assert observation.selected and observation.valid and observation.completion == "reached"
    assert observation.result == {"metrics": {"bytes": "123", "ratio": "0.5"}}
    assert observation.artifact == reference.artifact
    (slot,) = explanation.observation_slots
    assert slot.selected_observation_id == observation.id
    assert explanation.decision["candidate_id"] == "camp/c2"
    assert explanation.decision["applicable"] is True
    assert explanation.run["logical_spec_id"] == "camp/c2/p1"
    assert explanation.attempt_slot["execution_kind"] == "one_shot"


def test_slot_id_explains_every_attempt(built: tuple[Path, Built]) -> None:
    root, ids = built
    slot_id = ids.slots["superseded"]
    explanation = explained(root, slot_id)
    assert explanation.highlighted_attempt_id is None
    assert [(a.retry_index, a.state) for a in explanation.attempts] == [
        (0, "failed"),
        (1, "superseded"),
    ]
    assert not any(a.highlighted for a in explanation.attempts)
    first, second = explanation.attempts
    assert first.failure_code == "worker_failed" and first.details == {"signal": 9}
    assert second.failure_code is None and second.details is None
    db = dict(
        rows(
            root,
            "SELECT a.id, count(*) FROM attempts a JOIN events e ON e.attempt_id = a.id "
            "WHERE a.slot_id = ? GROUP BY a.id",
            (slot_id,),
        )
    )
    assert {a.id: len(a.events) for a in explanation.attempts} == db
    claims = [e.payload.get("claim") for a in explanation.attempts for e in a.events]
    assert claims.count("claimed") == 1 and claims.count("superseded") == 1


def test_interrupted_and_censored_details(built: tuple[Path, Built]) -> None:
    root, ids = built
    (interrupted,) = explained(root, ids.slots["interrupted"]).attempts
    assert interrupted.failure_code == "interrupted_attempt"
    assert interrupted.details == {"cause": "reservation_expired", "interrupted_state": "executing"}
    assert interrupted.transitions[-2].to_state == "finalizing"
    (censored,) = explained(root, ids.slots["censored"]).attempts
    assert (censored.state, censored.reason) == ("censored", "budget")


def test_logical_spec_targets(built: tuple[Path, Built]) -> None:
    root, ids = built
    assert explained(root, "camp/c2/p1").slot.slot_id == ids.slots["accepted"]
    assert explained(root, "camp/c2/p1/measurement").slot.slot_id == ids.slots["accepted"]
    assert explained(root, "camp/c1/p1").attempts == ()


@pytest.mark.parametrize(
    "target",
    [
        "attempt-slot:v1:" + "0" * 64,
        "attempt:v1:" + "0" * 64,
        "camp/c9/p1",
        "camp/c2/p1/warmup",
        "camp/cx/p1",  # excluded: a decision without a run
        "",
    ],
)
def test_unknown_targets(built: tuple[Path, Built], target: str) -> None:
    root, _ = built
    with Snapshot.take(root) as snapshot, pytest.raises(RunStoreError) as info:
        explain(snapshot, target)
    assert info.value.code == "unknown_slot"


def test_owner_tokens_never_appear(built: tuple[Path, Built]) -> None:
    root, ids = built
    # The token is in the database (so this test could fail) ...
    assert rows(root, "SELECT count(*) FROM leases WHERE owner_token = ?", (OWNER_TOKEN,))[0][0] > 3
    for slot_id in ids.slots.values():
        document = explained(root, slot_id).to_json()
        text = json.dumps(document)
        # ... but never in an explanation, which is plain JSON with integer times.
        assert OWNER_TOKEN not in text
        assert json.loads(text) == document
        attempts = document["attempts"]
        assert isinstance(attempts, list)
        for attempt in attempts:
            assert isinstance(attempt, dict) and isinstance(attempt["started_at_ns"], int)
            assert "owner_token" not in json.dumps(attempt)
