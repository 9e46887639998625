"""The model's recovery pass (SPEC.md section 14): which attempts are recoverable, the
stages (busy, deferred, left, quarantined; abandoned staging leases released), the
candidate outcomes an attempt imports or rejects (every rejection code), the interrupted
failure it commits otherwise, independent orphans, and a second pass that adds nothing.

Candidate objects are described, not built: their outcome documents are the model's own
``outcome_document`` bytes (what the store would write), their registrations fixture
digests, except where a test needs the address recovery's own failure object has.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Censored
from runstore import ClaimDisposition
from runstore import Failed
from runstore import OwnedAttempt
from runstore import Reference
from runstore import Superseded
from runstore import TerminalOutcome
from runstore import recovery_report as codes
from runstore.model import DiskObject
from runstore.model import DiskView
from runstore.model import ModelState
from runstore.model import Refusal
from runstore.model import advance
from runstore.model import begin_staging
from runstore.model import content
from runstore.model import publish_staged_artifact
from runstore.model import recover
from runstore.model import recoverable
from runstore.model.artifacts import with_artifact
from runstore.model.outcome_document import outcome_document
from runstore.model.state import AttemptRow
from runstore.recovery_report import RecoveryReport
from runstore.requests import interrupted_outcome
from runstore.testing import scenarios
from runstore.testing.fixtures import SlotFixture
from runstore.testing.fixtures import artifact
from runstore.testing.transcript import Transcript

from conformance.model.world import accepted_world
from conformance.model.world import claimed
from conformance.model.world import executing
from conformance.model.world import owned
from conformance.model.world import refused
from conformance.model.world import reserved
from conformance.model.world import select
from conformance.model.world import world

# --- helpers -----------------------------------------------------------------------------------


def report(result: object) -> RecoveryReport:
    assert isinstance(result, RecoveryReport), result
    return result


def document(
    state: ModelState,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    finished: int,
    references: Sequence[Reference] = (),
) -> bytes:
    """The ``outcome.json`` the store would write now for the finalizing attempt."""
    return outcome_document(state, guard.attempt_id, outcome, references, finished)


def published(data: bytes | None, label: str = "candidate") -> tuple[str, DiskObject]:
    """An unregistered attempt object holding ``data`` as its ``outcome.json``."""
    registration = artifact(ArtifactKind.ATTEMPT, label)
    return registration.path, DiskObject(registration=registration, outcome=data)


def disk(*objects: tuple[str, DiskObject], **options: object) -> DiskView:
    return DiskView(objects=dict(objects), **options)  # type: ignore[arg-type]


def codes_of(result: object) -> list[tuple[str, str]]:
    return [(item.path, item.code) for item in report(result).rejected_artifacts]


def finalizing(t: Transcript, guard: OwnedAttempt, now: int = 1_200) -> OwnedAttempt:
    """Enter finalizing without contending (the way a failing attempt does)."""
    return owned(t.do(advance, guard=guard, phase=AttemptState.FINALIZING, now_ns=now))


def expiring_claim_holder(
    t: Transcript, fixture: SlotFixture, expires: int = 5_000
) -> OwnedAttempt:
    """A one-shot attempt holding the slot's claim, reservation and claim expiring at
    ``expires``, that selected a valid, reached result at 1_300."""
    guard = claimed(t, executing(t, reserved(t, fixture, expires=expires)), expires=expires)
    select(t, fixture, guard, "result-0")
    return guard


def registered(t: Transcript, label: str) -> ArtifactRegistration:
    """Register a dataset artifact row directly (as an earlier publication would have)."""
    dataset = artifact(ArtifactKind.DATASET, label)
    state = with_artifact(t.state, dataset)
    assert isinstance(state, ModelState)
    t.state = state
    return dataset


def failure_object(data: bytes) -> tuple[str, DiskObject]:
    """The object recovery publishes for its own failure: only ``outcome.json``."""
    completed = content.complete({}, {"outcome.json": data})
    assert not isinstance(completed, Refusal)
    _, tree_sha256, manifest_sha256 = completed
    registration = ArtifactRegistration(
        kind=ArtifactKind.ATTEMPT,
        path=f"artifacts/attempt-{tree_sha256}",
        content_sha256=tree_sha256,
        manifest_sha256=manifest_sha256,
        verified_at_ns=0,
    )
    return registration.path, DiskObject(registration=registration, outcome=data)


def expired_finalizing() -> tuple[Transcript, OwnedAttempt]:
    """A finalizing attempt that entered without contending; its reservation expires at
    5_000."""
    t, fixture = world()
    return t, finalizing(t, executing(t, reserved(t, fixture, expires=5_000)))


# --- which attempts are recoverable -------------------------------------------------------------


def test_recoverable_at_exact_expiry_only() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    assert recoverable(t.state, 4_999) == ()
    (item,) = recoverable(t.state, 5_000)
    assert (item.attempt_id, item.cause) == (guard.attempt_id, "reservation_expired")


def test_a_pass_one_nanosecond_before_expiry_changes_nothing_and_one_at_expiry_fails_it() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    before = t.state
    assert report(t.do(recover, t_ns=4_999, disk=DiskView())) == RecoveryReport()
    assert t.state is before
    (done,) = report(t.do(recover, t_ns=5_000, disk=DiskView())).terminals
    assert (done.attempt_id, done.state, done.finished_at_ns) == (
        guard.attempt_id,
        AttemptState.FAILED,
        5_000,
    )


def test_live_and_terminal_attempts_are_left_and_nothing_is_committed() -> None:
    t, _, _ = accepted_world()
    before = t.state
    assert recoverable(t.state, 10**12) == ()
    assert report(t.do(recover, t_ns=10**12, disk=DiskView())) == RecoveryReport()
    assert t.state is before


# --- the interrupted failure ----------------------------------------------------------------------


def test_interrupted_failure_moves_to_finalizing_roots_the_leased_artifacts_and_fails() -> None:
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
    (done,) = report(t.do(recover, t_ns=6_000, disk=DiskView())).terminals
    assert (done.state, done.revision, done.finished_at_ns) == (AttemptState.FAILED, 6, 6_000)
    finalizing_event, finished = t.state.events[-2:]
    assert finalizing_event.payload == {"from": "executing", "to": "finalizing", "revision": 5}
    assert finished.payload == {
        "from": "finalizing",
        "to": "failed",
        "revision": 6,
        "failure_code": "interrupted_attempt",
        "details": {"cause": "reservation_expired", "interrupted_state": "executing"},
    }
    assert t.state.leases["stage-0"].released_at_ns == 1_300
    assert t.state.leases["reservation-0"].released_at_ns == 6_000
    assert t.state.attempt_artifacts == {(guard.attempt_id, "leased_root", dataset.id)}


def test_the_failure_object_is_the_one_holding_the_document_the_store_would_write() -> None:
    t, guard = expired_finalizing()
    outcome = interrupted_outcome("reservation_expired", AttemptState.FINALIZING)
    _, expected = failure_object(document(t.state, guard, outcome, 6_000))
    report(t.do(recover, t_ns=6_000, disk=DiskView()))
    final = t.state.artifacts[t.state.attempts[guard.attempt_id].final_artifact_id or ""]
    assert final == attrs.evolve(expected.registration, verified_at_ns=6_000)


def test_a_claim_holder_past_its_claim_expiry_fails_with_claim_expired() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)), expires=2_000)
    (done,) = report(t.do(recover, t_ns=2_000, disk=DiskView())).terminals
    assert done.revision == guard.revision + 1
    assert t.state.events[-1].payload["details"] == {
        "cause": "claim_expired",
        "interrupted_state": "finalizing",
    }
    assert not t.state.claims


def test_several_recoverable_attempts_are_listed_in_id_order() -> None:
    t, fixture = world()
    first = reserved(t, fixture, expires=3_000)
    second = reserved(t, fixture, name="reservation-1", expires=4_000)
    done = report(t.do(recover, t_ns=4_000, disk=DiskView())).terminals
    assert [r.attempt_id for r in done] == sorted([first.attempt_id, second.attempt_id])


# --- importing a candidate ----------------------------------------------------------------------


def outcomes() -> list[tuple[str, TerminalOutcome]]:
    return [
        ("accepted", Accepted()),
        ("censored", Censored(reason="budget exhausted")),
        ("failed", Failed(code="worker_crashed", details={"exit_status": 1})),
    ]


@pytest.mark.parametrize(("name", "outcome"), outcomes(), ids=[n for n, _ in outcomes()])
def test_a_claim_holders_published_outcome_is_imported_with_its_finish_time(
    name: str, outcome: TerminalOutcome
) -> None:
    t, fixture = world()
    guard = expiring_claim_holder(t, fixture)
    candidate = published(document(t.state, guard, outcome, 1_400))
    result = report(t.do(recover, t_ns=6_000, disk=disk(candidate)))
    (done,) = result.terminals
    assert (done.state.value, done.finished_at_ns) == (name, 1_400)
    assert result.rejected_artifacts == ()
    row = t.state.attempts[guard.attempt_id]
    assert row.outcome == outcome
    final = t.state.artifacts[row.final_artifact_id or ""]
    assert (final.path, final.verified_at_ns) == (candidate[0], 6_000)
    assert {lease.released_at_ns for lease in t.state.attempt_leases(guard.attempt_id)} == {6_000}
    assert not t.state.claims


def test_a_failure_without_claim_is_imported_with_its_references() -> None:
    t, guard = expired_finalizing()
    dataset = registered(t, "input")
    failure = Failed(code="worker_crashed", details={})
    candidate = published(
        document(t.state, guard, failure, 4_000, [Reference("input", dataset.id)])
    )
    (done,) = report(t.do(recover, t_ns=6_000, disk=disk(candidate))).terminals
    assert (done.state, done.finished_at_ns) == (AttemptState.FAILED, 4_000)
    assert t.state.attempt_artifacts == {(guard.attempt_id, "input", dataset.id)}
    assert t.state.leases["reservation-0"].released_at_ns == 6_000


def test_a_superseded_contenders_published_outcome_is_imported() -> None:
    t, fixture = world()
    claimed(t, executing(t, reserved(t, fixture, expires=50_000)))
    loser = executing(t, reserved(t, fixture, name="reservation-1", expires=5_000), now=1_300)
    disposition = scenarios.finalize(t, loser, "claim-1", expires=5_000, now=1_400)
    assert isinstance(disposition, ClaimDisposition) and not disposition.claimed
    candidate = published(document(t.state, disposition.attempt, Superseded(), 1_500))
    (done,) = report(t.do(recover, t_ns=6_000, disk=disk(candidate))).terminals
    assert (done.attempt_id, done.state) == (loser.attempt_id, AttemptState.SUPERSEDED)


def test_recovery_imports_the_failure_a_crashed_pass_published() -> None:
    """A pass at 6_000 published its failure and crashed before committing; the next pass
    (its clock behind, at 5_500) imports that same object: finished at 6_000, committed
    at max(e, finish) = 6_000."""
    t, guard = expired_finalizing()
    fresh = Transcript()
    fresh.state = t.state
    report(fresh.do(recover, t_ns=6_000, disk=DiskView()))
    outcome = interrupted_outcome("reservation_expired", AttemptState.FINALIZING)
    crashed = failure_object(document(t.state, guard, outcome, 6_000))
    result = report(t.do(recover, t_ns=5_500, disk=disk(crashed)))
    (done,) = result.terminals
    assert (done.finished_at_ns, result.rejected_artifacts) == (6_000, ())
    row, expected = t.state.attempts[guard.attempt_id], fresh.state.attempts[guard.attempt_id]
    assert (row.final_artifact_id, row.outcome) == (expected.final_artifact_id, expected.outcome)
    assert t.state.leases["reservation-0"].released_at_ns == 6_000
    assert t.state.artifacts[row.final_artifact_id or ""].verified_at_ns == 5_500


def test_recovery_imports_its_failure_of_an_attempt_it_had_moved_to_finalizing() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    fresh = Transcript()
    fresh.state = t.state
    report(fresh.do(recover, t_ns=6_000, disk=DiskView()))
    final = fresh.state.attempts[guard.attempt_id].final_artifact_id or ""
    # The crash state: the finalizing transition committed, the failure object published.
    finalizing_only = attrs.evolve(
        fresh.state,
        attempts={**fresh.state.attempts, guard.attempt_id: moved(fresh.state, guard)},
        artifacts=t.state.artifacts,
        transitions=fresh.state.transitions[:-1],
        events=fresh.state.events[:-1],
        leases=t.state.leases,
    )
    outcome = interrupted_outcome("reservation_expired", AttemptState.EXECUTING)
    crashed = failure_object(
        outcome_document(finalizing_only, guard.attempt_id, outcome, (), 6_000)
    )
    assert crashed[1].registration is not None and crashed[1].registration.id == final
    t.state = finalizing_only
    (done,) = report(t.do(recover, t_ns=7_000, disk=disk(crashed))).terminals
    assert (done.finished_at_ns, t.state.attempts[guard.attempt_id].final_artifact_id) == (
        6_000,
        final,
    )


def moved(state: ModelState, guard: OwnedAttempt) -> AttemptRow:
    """The attempt row as it was after recovery's finalizing transition (before its
    terminal commit): the row of the transition before the last, finalizing."""
    row = state.attempts[guard.attempt_id]
    return AttemptRow(
        id=row.id,
        slot_id=row.slot_id,
        retry_index=row.retry_index,
        state=AttemptState.FINALIZING,
        revision=row.revision - 1,
        started_at_ns=row.started_at_ns,
        updated_at_ns=state.transitions[-2].at_ns,
    )


def test_a_recovery_failure_with_another_cause_or_roots_is_not_authorized() -> None:
    t, guard = expired_finalizing()
    wrong_cause = interrupted_outcome("reservation_released", AttemptState.EXECUTING)
    candidate = published(document(t.state, guard, wrong_cause, 6_000))
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(candidate))) == [
        (candidate[0], codes.NOT_AUTHORIZED)
    ]


def test_two_passing_candidates_are_both_ambiguous_and_the_attempt_fails_interrupted() -> None:
    t, guard = expired_finalizing()
    data = document(t.state, guard, Failed(code="worker_crashed", details={}), 1_400)
    one, two = published(data, "one"), published(data, "two")
    result = report(t.do(recover, t_ns=6_000, disk=disk(one, two)))
    assert codes_of(result) == sorted([(one[0], codes.AMBIGUOUS), (two[0], codes.AMBIGUOUS)])
    (done,) = result.terminals
    assert t.state.attempts[done.attempt_id].failure_code == "interrupted_attempt"


# --- rejections -----------------------------------------------------------------------------------


def test_objects_that_do_not_verify_or_have_no_outcome_are_corrupt() -> None:
    t, _ = expired_finalizing()
    unverified = ("artifacts/attempt-" + "a" * 64, DiskObject(registration=None))
    no_outcome = published(None)
    dataset = ("artifacts/dataset-" + "b" * 64, DiskObject(registration=None))
    result = t.do(recover, t_ns=6_000, disk=disk(unverified, no_outcome, dataset))
    assert codes_of(result) == sorted(
        [(path, codes.CORRUPT) for path in (unverified[0], no_outcome[0], dataset[0])]
    )
    assert report(result).imported_artifacts == ()


def test_a_malformed_outcome_or_reference_list_is_malformed_outcome() -> None:
    t, guard = expired_finalizing()
    dataset = registered(t, "input")
    dependency = [Reference("input", dataset.id)]
    # No Reference takes the role final, so the document is written with another and edited.
    final_role = document(t.state, guard, Censored(reason="x"), 1_400, dependency).replace(
        b'"role":"input"', b'"role":"final"'
    )
    assert b'"role":"final"' in final_role
    bad = [
        published(b"{}", "empty"),
        published(b"not json", "text"),
        published(final_role, "final"),
    ]
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(*bad))) == sorted(
        (path, codes.MALFORMED_OUTCOME) for path, _ in bad
    )


def test_an_outcome_naming_an_unknown_or_terminal_attempt_is_rejected_whatever_it_names() -> None:
    t, _, winner = accepted_world()
    terminal = document(t.state, winner, Accepted(), 1_400)
    forged = terminal.replace(winner.attempt_id.encode(), b"attempt:v1:" + b"0" * 64)
    assert forged != terminal
    objects = (published(terminal, "terminal"), published(forged, "forged"))
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(*objects))) == sorted(
        [(objects[0][0], codes.ATTEMPT_TERMINAL), (objects[1][0], codes.UNKNOWN_ATTEMPT)]
    )


def test_an_outcome_naming_a_live_attempt_is_its_owners_and_not_listed() -> None:
    t, fixture = world()
    guard = finalizing(t, executing(t, reserved(t, fixture, expires=50_000)))
    candidate = published(document(t.state, guard, Censored(reason="x"), 1_400))
    before = t.state
    assert report(t.do(recover, t_ns=6_000, disk=disk(candidate))) == RecoveryReport()
    assert t.state is before


def test_an_outcome_of_an_attempt_not_finalizing_is_not_finalizing() -> None:
    t, fixture = world()
    guard = executing(t, reserved(t, fixture, expires=5_000))
    later = Transcript()
    later.state = t.state
    written = finalizing(later, guard)
    candidate = published(document(later.state, written, Censored(reason="x"), 1_400))
    result = t.do(recover, t_ns=6_000, disk=disk(candidate))
    assert codes_of(result) == [(candidate[0], codes.NOT_FINALIZING)]


def test_a_dependency_without_a_row_is_unknown_artifact() -> None:
    t, guard = expired_finalizing()
    dataset = artifact(ArtifactKind.DATASET, "input")
    elsewhere = with_artifact(t.state, dataset)
    assert isinstance(elsewhere, ModelState)
    data = document(elsewhere, guard, Censored(reason="x"), 1_400, [Reference("input", dataset.id)])
    candidate = published(data)
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(candidate))) == [
        (candidate[0], codes.UNKNOWN_ARTIFACT)
    ]


def test_records_that_changed_after_the_document_was_written_are_evidence_mismatch() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture, expires=5_000)), expires=5_000)
    candidate = published(document(t.state, guard, Censored(reason="x"), 1_400))
    select(t, fixture, guard, "result-0", now=1_450)
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(candidate))) == [
        (candidate[0], codes.EVIDENCE_MISMATCH)
    ]


@pytest.mark.parametrize(
    ("finished", "code"),
    [(4_999, None), (5_000, codes.NOT_AUTHORIZED), (1_150, codes.NOT_AUTHORIZED)],
    ids=["before-expiry", "at-expiry", "before-last-transition"],
)
def test_an_owner_outcome_must_finish_while_the_reservation_is_live(
    finished: int, code: str | None
) -> None:
    t, guard = expired_finalizing()
    candidate = published(document(t.state, guard, Censored(reason="x"), finished))
    result = t.do(recover, t_ns=6_000, disk=disk(candidate))
    assert codes_of(result) == ([] if code is None else [(candidate[0], code)])


@pytest.mark.parametrize("outcome", [Accepted(), Superseded()], ids=["accepted", "superseded"])
def test_an_outcome_not_permitted_by_the_way_into_finalizing_is_not_authorized(
    outcome: TerminalOutcome,
) -> None:
    t, guard = expired_finalizing()
    candidate = published(document(t.state, guard, outcome, 1_400))
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(candidate))) == [
        (candidate[0], codes.NOT_AUTHORIZED)
    ]


def test_acceptance_without_a_selection_is_acceptance_unsatisfied() -> None:
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture, expires=5_000)), expires=5_000)
    candidate = published(document(t.state, guard, Accepted(), 1_400))
    assert codes_of(t.do(recover, t_ns=6_000, disk=disk(candidate))) == [
        (candidate[0], codes.ACCEPTANCE_UNSATISFIED)
    ]


def test_evidence_that_no_longer_verifies_is_dependency_corrupt() -> None:
    t, fixture = world()
    guard = expiring_claim_holder(t, fixture)
    (observation,) = t.state.observations.values()
    for outcome in (Accepted(), Failed(code="x", details={})):
        candidate = published(document(t.state, guard, outcome, 1_400))
        broken = disk(candidate, corrupt=frozenset({observation.artifact_id}))
        assert codes_of(recover(t.state, 6_000, broken)[1]) == [
            (candidate[0], codes.DEPENDENCY_CORRUPT)
        ]


def test_an_object_rejected_for_a_recovered_attempt_is_attempt_terminal_in_the_next_pass() -> None:
    t, guard = expired_finalizing()
    candidate = published(document(t.state, guard, Superseded(), 1_400))
    view = disk(candidate)
    assert codes_of(t.do(recover, t_ns=6_000, disk=view)) == [(candidate[0], codes.NOT_AUTHORIZED)]
    after = t.state
    second = report(t.do(recover, t_ns=7_000, disk=view))
    assert codes_of(second) == [(candidate[0], codes.ATTEMPT_TERMINAL)]
    assert (second.terminals, t.state) == ((), after)


# --- stages ---------------------------------------------------------------------------------------


def staged(t: Transcript, guard: OwnedAttempt, name: str, now: int) -> str:
    path = f"artifacts/.staging-{name}"
    t.do(begin_staging, guard=guard, lease_id=f"stage-{name}", staging_path=path, now_ns=now)
    return path


def published_from_stage(
    t: Transcript, guard: OwnedAttempt, name: str, label: str, now: int
) -> ArtifactRegistration:
    """Register the stage's dataset: rooted under the reservation, the stage's lease
    released."""
    dataset = artifact(ArtifactKind.DATASET, label)
    lease_id = f"stage-{name}"
    t.do(
        publish_staged_artifact,
        guard=guard,
        staging_lease_id=lease_id,
        artifact=dataset,
        now_ns=now,
    )
    return dataset


def test_stages_are_busy_left_or_quarantined_and_abandoned_leases_released() -> None:
    t, fixture = world()
    live = reserved(t, fixture, name="reservation-live", expires=50_000)
    left = staged(t, live, "live", 1_100)
    dead = executing(t, reserved(t, fixture, name="reservation-dead", expires=5_000), now=1_200)
    expired = staged(t, dead, "expired", 1_300)
    staged(t, dead, "missing", 1_400)
    dataset = artifact(ArtifactKind.DATASET, "published")
    released = staged(t, dead, "released", 1_500)
    t.do(
        publish_staged_artifact,
        guard=dead,
        staging_lease_id="stage-released",
        artifact=dataset,
        now_ns=1_600,
    )
    orphan, busy = "artifacts/.staging-orphan", "artifacts/.staging-held"
    view = DiskView(
        stages={left: False, expired: False, released: False, orphan: False, busy: True}
    )
    result = report(t.do(recover, t_ns=6_000, disk=view))
    assert result.busy_stages == (busy,)
    assert result.quarantined_stages == tuple(sorted([expired, released, orphan]))
    leases = t.state.leases
    assert leases["stage-live"].released_at_ns is None
    assert leases["stage-released"].released_at_ns == 1_600
    assert leases["stage-expired"].released_at_ns == 6_000
    assert leases["stage-missing"].released_at_ns == 6_000
    assert [r.attempt_id for r in result.terminals] == [dead.attempt_id]


def test_a_free_stage_is_left_before_its_leases_exact_expiry_and_quarantined_at_it() -> None:
    t, fixture = world()
    guard = reserved(t, fixture, expires=5_000)
    view = DiskView(stages={staged(t, guard, "0", 4_000): False})
    before = t.state
    assert report(t.do(recover, t_ns=4_999, disk=view)) == RecoveryReport()
    assert t.state is before
    result = report(t.do(recover, t_ns=5_000, disk=view))
    assert result.quarantined_stages == ("artifacts/.staging-0",)
    assert t.state.leases["stage-0"].released_at_ns == 5_000


def test_a_held_stage_defers_its_attempt_entirely() -> None:
    t, fixture = world()
    guard = finalizing(t, executing(t, reserved(t, fixture, expires=5_000)))
    held = staged(t, guard, "held", 1_300)
    free = staged(t, guard, "free", 1_400)
    staged(t, guard, "missing", 1_500)
    candidate = published(document(t.state, guard, Censored(reason="x"), 1_600))
    view = disk(candidate, stages={held: True, free: False})
    before = t.state
    result = report(t.do(recover, t_ns=6_000, disk=view))
    assert result == RecoveryReport(busy_stages=(held,))
    assert t.state is before


# --- independent orphans and repetition -----------------------------------------------------------


def test_verified_orphans_are_registered_as_rows_only_and_a_second_pass_adds_nothing() -> None:
    t, guard = expired_finalizing()
    dataset = artifact(ArtifactKind.DATASET, "orphan", verified_at_ns=1)
    stage = "artifacts/.staging-crashed"
    view = disk(
        (dataset.path, DiskObject(registration=dataset)),
        published(document(t.state, guard, Censored(reason="x"), 1_400)),
        stages={stage: False},
    )
    first = report(t.do(recover, t_ns=6_000, disk=view))
    assert first.imported_artifacts == (attrs.evolve(dataset, verified_at_ns=6_000),)
    assert first.quarantined_stages == (stage,)
    assert len(first.terminals) == 1 and first.changed
    assert t.state.artifacts[dataset.id].verified_at_ns == 6_000
    after = t.state
    remaining = DiskView(objects=view.objects)  # the stage was moved away
    second = report(t.do(recover, t_ns=7_000, disk=remaining))
    assert second == RecoveryReport() and not second.changed
    assert t.state is after


def test_recover_refuses_a_bad_clock_or_disk_with_the_state_unchanged() -> None:
    t, _ = world()
    assert refused(t.do(recover, t_ns=-1, disk=DiskView())) == "out_of_range"
    assert refused(t.do(recover, t_ns=True, disk=DiskView())) == "invalid_record"
    assert refused(t.do(recover, t_ns=1, disk={})) == "invalid_record"
