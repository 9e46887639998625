"""A pass judges every object it lists, and a deferred attempt stops nothing but itself
(SPEC.md section 14.2 steps 2 to 6, section 14.3), one test per rule:

- every unregistered ``attempt-*`` object is read and judged: one rejected as
  ``corrupt`` (it does not verify, or has no ``outcome.json``) or ``malformed_outcome``
  (its document is not one, or repeats a dependency) does not stop the objects after it,
  each of which is listed too (section 14.3: rejected objects stay on disk and are
  listed);
- every unregistered object of another kind is verified: one that does not verify is
  listed ``corrupt`` and the others are still verified (step 6);
- each free stage is judged in name order: a stage of a deferred attempt is left, and the
  stages after it are still judged (step 5);
- nothing of a deferred attempt is touched, even past its expiry: not its free stage, and
  not the lease of its stage that is gone (steps 2 and 5);
- ``dependency_corrupt``: the references of an observation the snapshot lists are
  verified too, not only its directory (section 14.3).

Rules of this file: defective objects are made in pairs with different contents, so
that whichever of the two the pass meets first, the other comes after it. Leftovers are
made through ``world.store`` as in :mod:`conformance.recovery.world`; a stage is held by
this process through its own descriptor (a ``flock`` is per open file, so recovery's
attempt on its own descriptor fails as another process's would). Expected values are
SPEC.md's, not the model's.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import RecoveryReport
from runstore import Reference
from runstore import canonical
from runstore import recovery_report as codes
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import crash_finalization
from conformance.recovery.world import crash_populate
from conformance.recovery.world import flip_byte
from conformance.recovery.world import forge_outcome
from conformance.recovery.world import leases
from conformance.recovery.world import make_object
from conformance.recovery.world import quarantined
from conformance.recovery.world import recover
from conformance.recovery.world import store_path
from conformance.recovery.world import tree

S = AttemptState
ATTEMPT = ArtifactKind.ATTEMPT
OUTCOME = "outcome.json"


def listed(report: RecoveryReport) -> list[tuple[str, str]]:
    return [(item.path, item.code) for item in report.rejected_artifacts]


# --- every candidate ---------------------------------------------------------------------------


Named = tuple[str, Reference]
"""A finalizing attempt's id and a reference to a dataset it published."""


def _corrupt(world: PublicationWorld, n: int, _: Named) -> Path:
    candidate = make_object(world, ATTEMPT, {"log.txt": b"%d" % n}, {OUTCOME: b"{}"})
    flip_byte(candidate / "log.txt")
    return candidate


def _without_outcome(world: PublicationWorld, n: int, _: Named) -> Path:
    return make_object(world, ATTEMPT, {"log.txt": b"%d" % n})


def _not_a_document(world: PublicationWorld, n: int, _: Named) -> Path:
    return make_object(world, ATTEMPT, {"log.txt": b"%d" % n}, {OUTCOME: b"hello"})


def _repeated_dependency(world: PublicationWorld, n: int, named: Named) -> Path:
    """A document that is the store's own but for its one dependency listed twice."""
    attempt_id, dataset = named
    data = forge_outcome(world, attempt_id, Censored(reason="budget"), [dataset], 5_000)
    document = canonical.decode_object(data)
    dependencies = document["dependencies"]
    assert isinstance(dependencies, list) and len(dependencies) == 1
    document["dependencies"] = dependencies * 2
    runtime = {OUTCOME: canonical.encode(document)}
    return make_object(world, ATTEMPT, {"log.txt": b"%d" % n}, runtime)


DEFECTS: dict[str, tuple[Callable[[PublicationWorld, int, Named], Path], str]] = {
    "corrupt": (_corrupt, codes.CORRUPT),
    "no-outcome-json": (_without_outcome, codes.CORRUPT),
    "not-a-document": (_not_a_document, codes.MALFORMED_OUTCOME),
    "repeated-dependency": (_repeated_dependency, codes.MALFORMED_OUTCOME),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_a_rejected_candidate_does_not_stop_the_candidates_after_it(
    world: PublicationWorld, defect: str
) -> None:
    """SPEC.md section 14.3: unregistered ``attempt-*`` objects that fail the first two
    items (``corrupt``, ``malformed_outcome``) are listed in ``rejected_artifacts``,
    whatever attempt they name: with two such objects, both are listed, whichever is met
    first, and both stay on disk."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_500)
    dataset = world.publish_artifact(guard, ArtifactKind.DATASET, files(d=b"d"), at(1_200))
    named = (guard.attempt_id, Reference("input", dataset.artifact.id))
    make, code = DEFECTS[defect]
    pair = [make(world, n, named) for n in (1, 2)]

    report = recover(world, 5_000)
    assert listed(report) == sorted((store_path(p), code) for p in pair)
    assert all(p.is_dir() for p in pair)


def test_an_orphan_that_does_not_verify_does_not_stop_the_orphans_after_it(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.2 step 6 and 14.3: every unregistered object of another kind is
    verified, and those that do not verify are listed ``corrupt`` and stay unregistered:
    with two such objects both are listed, and a third, sound one is registered."""
    pair = [make_object(world, ArtifactKind.DATASET, {"d": b"%d" % n}) for n in (1, 2)]
    for path in pair:
        flip_byte(path / "d")
    sound = make_object(world, ArtifactKind.DATASET, {"d": b"sound"})

    report = recover(world, 5_000)
    assert listed(report) == sorted((store_path(p), codes.CORRUPT) for p in pair)
    assert [a.path for a in report.imported_artifacts] == [store_path(sound)]
    assert world.rows("SELECT path FROM artifacts") == [(store_path(sound),)]


# --- a deferred attempt stops nothing but itself ------------------------------------------------

LAST_STAGE = ".staging-" + "f" * 32
"""A hand-made stage no lease names, after every stage the publisher makes in name order."""


@contextmanager
def holding(lock: Path) -> Iterator[None]:
    """Hold the stage's lock through this process's own descriptor."""
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def deferred_attempt(world: PublicationWorld) -> tuple[str, list[Path], Path]:
    """A finalizing attempt that left three registered stages (tokens 1 to 3, leases
    unreleased, expiring at ``EXPIRES``): the first to be held, the second free, the third
    gone from ``artifacts/`` (moved aside); and a stage no lease names after them. Returns
    the attempt id, its three stages and the unnamed stage."""
    guard, _ = world.terminal_scenario("censored")
    stages = [crash_populate(world, guard, start=2_000 + 100 * n) for n in range(3)]
    assert [p.name for p in stages] == sorted(p.name for p in stages)
    os.rename(stages[2], world.root / "moved-aside")
    unnamed = world.artifacts / LAST_STAGE
    (unnamed / "object").mkdir(parents=True)
    (unnamed / "lock").write_bytes(b"")
    return guard.attempt_id, stages, unnamed


def test_the_stages_after_a_deferred_attempts_stage_are_still_judged(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.2 step 5: each free stage is judged, in name order; a stage of a
    deferred attempt is left, and the stages after it are judged all the same (here a
    stage no lease names, quarantined)."""
    attempt_id, (held, free, _), unnamed = deferred_attempt(world)
    contents = tree(free)
    with holding(held / "lock"):
        report = recover(world, EXPIRES)
    assert report == RecoveryReport(
        busy_stages=(store_path(held),), quarantined_stages=(store_path(unnamed),)
    )
    assert quarantined(world) == [LAST_STAGE]
    assert tree(free) == contents
    assert attempt_row(world, attempt_id)["state"] == "finalizing"


def test_nothing_of_a_deferred_attempt_is_released_even_a_lease_whose_stage_is_gone(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.2 steps 2 and 5: a held stage defers the attempt its lease names,
    and nothing of that attempt is touched in the pass, even past its expiry: the lease
    of its stage that is gone stays unreleased, as do all its others. Only the expired
    leases of attempts *not* deferred whose stage does not exist are released: beside it,
    a live owner's expired lease of a stage that is gone is released in the same pass.
    Once the lock is free, the next pass fails the deferred attempt and releases them
    all."""
    attempt_id, (held, _, _), _ = deferred_attempt(world)
    other = world.executing(sc.slot_fixture(name="other"), "reservation-1")
    gone = crash_populate(world, other, start=2_500)
    os.rename(gone, world.root / "also-moved-aside")
    with sqlite3.connect(world.database_path, isolation_level=None) as connection:
        connection.execute(
            "UPDATE leases SET expires_at_ns = ? WHERE id = 'reservation-1'", (2 * EXPIRES,)
        )
    connection.close()
    before = leases(world, attempt_id)
    assert set(before.values()) == {None}

    with holding(held / "lock"):
        recover(world, EXPIRES + 1)
    assert leases(world, attempt_id) == before
    assert leases(world, other.attempt_id) == {"reservation-1": None, OTHER_STAGE: EXPIRES + 1}

    report = recover(world, EXPIRES + 1)
    assert [t.attempt_id for t in report.terminals] == [attempt_id]
    assert set(leases(world, attempt_id).values()) == {EXPIRES + 1}


OTHER_STAGE = f"staging-{4:032x}"
"""The lease id of the fourth stage (deterministic tokens): the live owner's."""


# --- every artifact a document names -----------------------------------------------------------


def test_a_reference_of_a_listed_observation_that_does_not_verify_is_dependency_corrupt(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.3, ``dependency_corrupt``: the directory of an observation the
    snapshot lists, *or of one of its references*, must verify. The outcome names no
    dependency; its attempt's observation references a dataset whose bytes changed: the
    candidate is rejected and the attempt takes the interrupted failure."""
    fixture = sc.slot_fixture()
    guard = world.executing(fixture)
    dataset = world.publish_artifact(guard, ArtifactKind.DATASET, files(d=b"input"), at(1_200))
    result = files(**{"result.json": b'{"score":1}'})
    published = world.publish_artifact(guard, ArtifactKind.OBSERVATION, result, at(1_300))
    observation = sc.observation(fixture.observation_slots[0], guard)
    references = [Reference("input", dataset.artifact.id)]
    world.observe(guard, observation, published.artifact, False, 1_400, references)
    guard = world.finalizing(guard, 1_500)
    orphan = crash_finalization(world, guard, Censored(reason="budget"))
    flip_byte(world.root / dataset.artifact.path / "d")

    report = recover(world, EXPIRES)
    assert listed(report) == [(store_path(orphan), codes.DEPENDENCY_CORRUPT)]
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)
