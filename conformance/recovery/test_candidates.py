"""``RunStore.recover``'s candidate outcomes (SPEC.md section 14, "Validating a candidate"),
outside in: the source's corrupted dependencies, changed metadata, missing claims and
ambiguous outcomes, and every other rejection code the SPEC's table names, each shown on an
unregistered ``attempt-*`` object left on a real store.

A rejected object stays on disk, unregistered, and is listed in ``rejected_artifacts`` with
its code; an attempt whose candidates all fail (or that has several passing ones) commits
the interrupted failure instead. Objects a publisher could never write (a malformed or
unauthorized ``outcome.json``) are built with :func:`recovery_world.make_object` and
:func:`recovery_world.forge_outcome`. Expected values are SPEC.md section 14's, not the
model's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import RecoveryReport
from runstore import Reference
from runstore import RejectedArtifact
from runstore import canonical
from runstore import recovery_report as codes
from runstore.store.publication import objects
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.recovery.world import addresses
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import crash_artifact
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crashing_clock
from conformance.recovery.world import entry
from conformance.recovery.world import flip_byte
from conformance.recovery.world import forge_outcome
from conformance.recovery.world import make_object
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

S = AttemptState
ATTEMPT = ArtifactKind.ATTEMPT
CENSORED = Censored(reason="budget")


def rejected(path: Path, code: str) -> RejectedArtifact:
    return RejectedArtifact(path=store_path(path), code=code, message="")


def codes_of(report: RecoveryReport) -> list[tuple[str, str]]:
    return [(item.path, item.code) for item in report.rejected_artifacts]


def unregistered(world: PublicationWorld, path: Path) -> bool:
    """The object is still on disk and no artifact row names it."""
    count = world.rows("SELECT count(*) FROM artifacts WHERE path = ?", (store_path(path),))
    return path.is_dir() and count == [(0,)]


def place_document(world: PublicationWorld, data: bytes) -> Path:
    """An attempt object holding ``data`` as its ``outcome.json`` (and one payload file)."""
    return make_object(world, ATTEMPT, {"log.txt": b"forged\n"}, {"outcome.json": data})


# --- the source's list ------------------------------------------------------------------------


@pytest.mark.parametrize("damaged", ["dependency", "snapshot-observation"])
def test_corrupted_dependencies(world: PublicationWorld, damaged: str) -> None:
    fixture = sc.slot_fixture()
    if damaged == "dependency":
        guard = world.executing(fixture)
        dataset = world.publish_artifact(guard, ArtifactKind.DATASET, files(d=b"data"), at(1_200))
        guard = world.finalizing(guard, 1_500)
        orphan = crash_finalization(
            world, guard, CENSORED, [Reference("input", dataset.artifact.id)]
        )
        victim = world.root / dataset.artifact.path / "d"
    else:
        guard, published = world.ready_to_accept(fixture)
        orphan = crash_finalization(world, guard, Accepted())
        victim = world.root / published.artifact.path / "result.json"
    flip_byte(victim)

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(orphan, codes.DEPENDENCY_CORRUPT),)
    assert unregistered(world, orphan)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)


def test_changed_metadata(world: PublicationWorld) -> None:
    fixture = sc.slot_fixture()
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome)
    # After the document was written, the attempt registered another observation: the
    # records its snapshot describes changed.
    published = world.store.publish_artifact(
        guard, ArtifactKind.OBSERVATION, files(**{"r.json": b"{}"}), crashing_clock(2_100, 99)
    )
    observation = sc.observation(fixture.observation_slots[0], guard)
    world.store.register_observation(
        guard, observation, published.artifact, (), select=False, now_ns=2_200
    )

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(orphan, codes.EVIDENCE_MISMATCH),)
    assert unregistered(world, orphan)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)


@pytest.mark.parametrize(
    ("case", "finished", "expected"),
    [
        ("claim live at the finish time", 2_999, None),
        ("claim expired at the finish time", 3_000, codes.NOT_AUTHORIZED),
        ("claim expired before the finish time", 3_001, codes.NOT_AUTHORIZED),
    ],
)
def test_missing_claims(
    world: PublicationWorld, case: str, finished: int, expected: str | None
) -> None:
    # The claim's lease expires at 3000, long before the reservation's: no publisher could
    # write an Accepted document finished at or after it, so the document is forged.
    guard, _ = world.ready_to_accept(sc.slot_fixture(), expires=20_000, claim_expires=3_000)
    document = forge_outcome(world, guard.attempt_id, Accepted(), (), finished)
    candidate = place_document(world, document)

    report = recover(world, 20_000)
    (terminal,) = report.terminals
    if expected is None:
        assert report.rejected_artifacts == ()
        assert (terminal.state.value, terminal.finished_at_ns) == ("accepted", finished)
        assert attempt_row(world, guard.attempt_id)["final_artifact_id"] == (
            f"run-store-v1:{candidate.name}"
        )
    else:
        assert report.rejected_artifacts == (rejected(candidate, expected),), case
        assert unregistered(world, candidate)
        check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)


def test_missing_claims_an_attempt_that_never_held_one(world: PublicationWorld) -> None:
    guard, _ = world.terminal_scenario("failed")  # finalizing without contending
    candidate = place_document(world, forge_outcome(world, guard.attempt_id, Accepted(), (), 2_000))
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.NOT_AUTHORIZED),)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)


def test_an_outcome_finished_before_the_last_transition(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")  # finalizing at 1500
    candidate = place_document(world, forge_outcome(world, guard.attempt_id, outcome, (), 1_499))
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.NOT_AUTHORIZED),)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)


def test_ambiguous_outcomes(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")
    first = crash_finalization(world, guard, outcome, payload=files(a=b"first"), start=2_000)
    second = crash_finalization(world, guard, outcome, payload=files(a=b"second"), start=2_100)

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == tuple(
        sorted(
            (rejected(first, codes.AMBIGUOUS), rejected(second, codes.AMBIGUOUS)),
            key=lambda item: item.path,
        )
    )
    assert unregistered(world, first) and unregistered(world, second)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)
    final = attempt_row(world, guard.attempt_id)["final_artifact_id"]
    assert final not in {f"run-store-v1:{first.name}", f"run-store-v1:{second.name}"}


# --- the other rejection codes ----------------------------------------------------------------


def real_document(world: PublicationWorld) -> tuple[str, dict[str, object]]:
    """A censored finalizing attempt and the decoded document the store would write."""
    guard, outcome = world.terminal_scenario("censored")
    data = forge_outcome(world, guard.attempt_id, outcome, (), 2_000)
    return guard.attempt_id, canonical.decode_object(data)


MALFORMED = {
    "not-json": lambda doc: b"hello",
    "not-canonical": lambda doc: canonical.encode(doc) + b"\n",
    "version-2": lambda doc: canonical.encode({**doc, "run_store_version": 2}),
    "missing-key": lambda doc: canonical.encode({k: v for k, v in doc.items() if k != "outcome"}),
    "finish-time-as-integer": lambda doc: canonical.encode({**doc, "finished_at_ns": 2_000}),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_outcome(world: PublicationWorld, case: str) -> None:
    attempt_id, document = real_document(world)
    candidate = place_document(world, MALFORMED[case](document))
    before = world.database_bytes()
    # Listed whatever attempt it names, even a live one's (which is left alone).
    report = recover(world, 5_000)
    assert report == RecoveryReport(
        rejected_artifacts=(rejected(candidate, codes.MALFORMED_OUTCOME),)
    )
    assert world.database_bytes() == before
    assert unregistered(world, candidate)
    # Past expiry it is still no candidate: the attempt fails, interrupted.
    report = recover(world, EXPIRES)
    assert codes_of(report) == [(store_path(candidate), codes.MALFORMED_OUTCOME)]
    check_interrupted(world, attempt_id, "reservation_expired", S.FINALIZING)


def test_an_object_naming_an_unknown_attempt(world: PublicationWorld) -> None:
    _, document = real_document(world)
    attempt = document["attempt"]
    assert isinstance(attempt, dict)
    unknown = {**attempt, "id": "attempt:v1:" + "0" * 64}
    candidate = place_document(world, canonical.encode({**document, "attempt": unknown}))
    before = world.database_bytes()
    report = recover(world, 5_000)
    expected = RecoveryReport(rejected_artifacts=(rejected(candidate, codes.UNKNOWN_ATTEMPT),))
    assert report == expected
    assert world.database_bytes() == before
    assert unregistered(world, candidate)


def test_an_object_naming_a_terminal_attempt(world: PublicationWorld) -> None:
    guard, outcome = world.terminal_scenario("censored")
    orphan = crash_finalization(world, guard, outcome, payload=files(a=b"first"), start=2_000)
    (stage,) = world.stages()
    world.store.publish_finalization(
        guard, outcome, (), files(a=b"second"), crashing_clock(3_000, 99)
    )
    before = world.database_bytes()

    report = recover(world, EXPIRES)
    # The crashed stage's lease was released by the terminal commit: quarantined.
    assert report == RecoveryReport(
        quarantined_stages=(store_path(stage),),
        rejected_artifacts=(rejected(orphan, codes.ATTEMPT_TERMINAL),),
    )
    assert world.database_bytes() == before
    assert unregistered(world, orphan)
    assert attempt_row(world, guard.attempt_id)["state"] == "censored"


def test_a_candidate_of_an_attempt_that_is_not_finalizing(world: PublicationWorld) -> None:
    # The store builds documents only for finalizing attempts, so this one is another
    # attempt's document renamed to the executing attempt.
    _, document = real_document(world)
    guard = world.executing(sc.slot_fixture(name="other"), "reservation-9")
    attempt = document["attempt"]
    assert isinstance(attempt, dict)
    named = {**attempt, "id": guard.attempt_id, "slot_id": guard.slot_id}
    candidate = place_document(world, canonical.encode({**document, "attempt": named}))
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.NOT_FINALIZING),)
    assert len(report.terminals) == 2
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.EXECUTING)


def test_a_candidate_naming_an_unknown_dependency(world: PublicationWorld) -> None:
    attempt_id, document = real_document(world)
    ghost = objects.registration(
        ArtifactKind.DATASET,
        objects.verify(str(make_object(world, ArtifactKind.DATASET, {"g": b"g"})), sync=False),
        0,
    )
    # The ghost's object exists on disk but no row names it (yet: it is an independent
    # orphan this same pass imports, after the attempts).
    dependencies = [{"artifact": entry(ghost), "role": "input"}]
    candidate = place_document(world, canonical.encode({**document, "dependencies": dependencies}))
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.UNKNOWN_ARTIFACT),)
    check_interrupted(world, attempt_id, "reservation_expired", S.FINALIZING)


def test_an_accepted_candidate_without_its_selections(world: PublicationWorld) -> None:
    guard = world.executing(sc.slot_fixture())
    assert world.claim(guard, "claim-0", 1_200).claimed
    candidate = place_document(world, forge_outcome(world, guard.attempt_id, Accepted(), (), 2_000))
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.ACCEPTANCE_UNSATISFIED),)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)


CORRUPT = ["flipped-byte", "renamed", "no-outcome", "independent-object"]


@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_object(world: PublicationWorld, case: str) -> None:
    guard, outcome = world.terminal_scenario("censored")
    if case == "independent-object":
        candidate = crash_artifact(world, guard, ArtifactKind.DATASET, files(d=b"data"))
        flip_byte(candidate / "d")
    elif case == "no-outcome":
        candidate = make_object(world, ATTEMPT, {"log.txt": b"no outcome here\n"})
    else:
        candidate = crash_finalization(world, guard, outcome)
        if case == "flipped-byte":
            flip_byte(candidate / "data.bin")
        else:
            moved = candidate.with_name("attempt-" + "0" * 64)
            candidate.rename(moved)
            candidate = moved
    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(candidate, codes.CORRUPT),)
    assert report.imported_artifacts == ()
    assert unregistered(world, candidate)
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING)
    assert addresses(world, ATTEMPT)  # the failure's own object beside the rejected one
