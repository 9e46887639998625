"""The model's recovery decision: which attempts are recoverable at a time, and what
recovery commits for them (an interrupted failure, once).
"""

from __future__ import annotations

from model_world import (
    ATTEMPT_ARTIFACT,
    accepted_world,
    claimed,
    executing,
    owned,
    reserved,
    world,
)
from runstore import (
    ArtifactKind,
    AttemptState,
)
from runstore.model import (
    advance,
    begin_staging,
    publish_staged_artifact,
    recover,
    recoverable,
)
from runstore.testing.fixtures import artifact

# --- recovery --------------------------------------------------------------------------


def test_recoverable_at_exact_expiry_only() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    assert recoverable(t.state, 4_999) == ()
    (item,) = recoverable(t.state, 5_000)
    assert (item.attempt_id, item.cause) == (guard.attempt_id, "reservation_expired")


def test_recover_moves_to_finalizing_then_fails_interrupted() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-0",
        staging_path="artifacts/.staging-0",
        now_ns=1_200,
    )
    dataset = artifact(ArtifactKind.DATASET, "partial")
    t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id="stage-0",
        artifact=dataset,
        now_ns=1_300,
    )
    t.do(
        begin_staging,
        guard=guard,
        lease_id="stage-1",
        staging_path="artifacts/.staging-1",
        now_ns=1_400,
    )
    outcome = artifact(ArtifactKind.ATTEMPT, "recovered")
    (done,) = t.do(recover, t_ns=6_000, artifacts={guard.attempt_id: outcome})
    assert (done.state, done.revision, done.finished_at_ns) == (AttemptState.FAILED, 6, 6_000)
    finalizing, finished = t.state.events[-2:]
    assert finalizing.payload == {"from": "executing", "to": "finalizing", "revision": 5}
    assert finished.payload == {
        "from": "finalizing",
        "to": "failed",
        "revision": 6,
        "failure_code": "interrupted_attempt",
        "details": {"cause": "reservation_expired", "interrupted_state": "executing"},
    }
    assert all(
        row.released_at_ns == 6_000 for name, row in t.state.leases.items() if name != "stage-0"
    )
    assert t.state.leases["stage-0"].released_at_ns == 1_300
    assert t.state.attempt_artifacts == {(guard.attempt_id, "leased_root", dataset.id)}
    assert t.do(recover, t_ns=7_000, artifacts={}) == ()


def test_recover_finalizing_attempt_commits_only_the_failure() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)), expires=2_000)
    (done,) = t.do(recover, t_ns=2_000, artifacts={guard.attempt_id: ATTEMPT_ARTIFACT})
    assert done.revision == guard.revision + 1
    assert t.state.events[-2].kind == "attempt_finalizing"
    assert t.state.events[-1].payload["details"] == {
        "cause": "claim_expired",
        "interrupted_state": "finalizing",
    }


def test_live_and_terminal_attempts_are_not_recoverable() -> None:
    t, _, _ = accepted_world()
    assert recoverable(t.state, 10**12) == ()
    t2, fixture2 = world()
    reserved(t2, fixture2, expires=5_000)
    assert recoverable(t2.state, 4_000) == ()
    assert t2.do(recover, t_ns=4_000, artifacts={}) == ()


def test_recover_commits_each_recoverable_attempt_in_id_order() -> None:
    t, fixture = world()
    first = reserved(t, fixture, expires=3_000)
    second = owned(
        t.do(
            advance,
            guard=reserved(t, fixture, name="reservation-1", expires=4_000),
            phase=AttemptState.MATERIALIZING,
            now_ns=3_500,
        )
    )
    outcomes = {
        first.attempt_id: artifact(ArtifactKind.ATTEMPT, "a"),
        second.attempt_id: artifact(ArtifactKind.ATTEMPT, "b"),
    }
    done = t.do(recover, t_ns=4_000, artifacts=outcomes)
    assert isinstance(done, tuple)
    assert [r.attempt_id for r in done] == sorted([first.attempt_id, second.attempt_id])
    assert all(r.finished_at_ns == 4_000 for r in done)
