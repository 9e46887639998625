"""Two of a candidate's checks that compare exactly (SPEC.md section 14.3), one test per
rule, each with differences on both sides of the exact value:

- a document recovery wrote itself (``Failed`` with code ``interrupted_attempt``) is
  authorized only when its ``cause`` is the attempt's recovery cause at its finish time
  *and* its dependencies are exactly the ``leased_root`` references to the artifacts
  rooted under the attempt's leases: another cause (one spelled before the true cause and
  one after it), a part of the roots or the roots and one more reference are each
  ``not_authorized``, and the exact document is imported;
- ``evidence_mismatch``: a document that differs in any byte from the one the store builds
  now is rejected, whether its differing bytes sort before or after the store's.

Rules of this file: the candidates are built with the store's own document code
(``forge_outcome``) and placed at their address (``make_object``); the attempt entered
finalizing by ``advance`` at 1,500 and its reservation expires at ``EXPIRES``, so a
failure finished at ``EXPIRES`` is not its owner's (the reservation was not live then) and
only recovery's authority can admit it. Expected values are SPEC.md's, not the model's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Reference
from runstore import RejectedArtifact
from runstore import canonical
from runstore import recovery_report as codes
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import forge_outcome
from conformance.recovery.world import interrupted
from conformance.recovery.world import make_object
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

S = AttemptState
ROOT = "leased_root"


def place(world: PublicationWorld, document: bytes) -> Path:
    """An unregistered attempt object holding ``document`` as its ``outcome.json``."""
    return make_object(
        world, ArtifactKind.ATTEMPT, {"log.txt": b"forged\n"}, {"outcome.json": document}
    )


def rejected(path: Path, code: str) -> RejectedArtifact:
    return RejectedArtifact(path=store_path(path), code=code, message="")


def finalizing_with_two_roots(world: PublicationWorld) -> tuple[str, list[Reference]]:
    """An attempt that published two datasets under its reservation and then entered
    finalizing without contending: its id and its ``leased_root`` references, sorted."""
    guard = world.executing(sc.slot_fixture())
    published = [
        world.publish_artifact(guard, ArtifactKind.DATASET, files(d=data), at(now))
        for data, now in ((b"first", 1_200), (b"second", 1_300))
    ]
    world.finalizing(guard, 1_500)
    roots = sorted(Reference(ROOT, p.artifact.id) for p in published)
    return guard.attempt_id, roots


FORGERIES = {
    "cause-spelled-before": ("claim_expired", "all"),
    "cause-spelled-after": ("reservation_released", "all"),
    "roots-first-only": ("reservation_expired", "first"),
    "roots-and-one-more": ("reservation_expired", "more"),
}
"""Each case's ``cause`` and dependencies. The attempt's true cause at ``EXPIRES`` is
``reservation_expired``; ``claim_expired`` sorts before it and ``reservation_released``
after it. ``first`` is the first root alone (a list that sorts before the roots), ``more``
the roots and one more reference (a list that sorts after them)."""


def dependencies(roots: list[Reference], which: str) -> list[Reference]:
    if which == "first":
        return roots[:1]
    if which == "more":
        return [*roots, Reference("output", roots[0].artifact_id)]
    return roots


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_a_recovery_failure_with_another_cause_or_other_roots_is_not_authorized(
    world: PublicationWorld, case: str
) -> None:
    """SPEC.md section 14.3: an ``interrupted_attempt`` failure passes ``not_authorized``
    only when its cause is the attempt's recovery cause at its finish time and its
    dependencies are exactly the ``leased_root`` references to the artifacts rooted under
    the attempt's leases; each condition is needed on its own, and "exactly" admits
    neither part of the roots nor more than them. The rejected document stays on disk and
    the pass commits its own failure instead."""
    attempt_id, roots = finalizing_with_two_roots(world)
    cause, which = FORGERIES[case]
    outcome = interrupted(cause, S.FINALIZING)
    forged = place(
        world, forge_outcome(world, attempt_id, outcome, dependencies(roots, which), EXPIRES)
    )

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(forged, codes.NOT_AUTHORIZED),)
    assert report.imported_artifacts == ()
    assert forged.is_dir()
    check_interrupted(world, attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)
    final = attempt_row(world, attempt_id)["final_artifact_id"]
    assert final != f"run-store-v1:{forged.name}"


def test_the_exact_recovery_failure_is_imported(world: PublicationWorld) -> None:
    """SPEC.md section 14.3, the other side of the rule above: with the true cause and
    exactly the roots, the same kind of document passes and is imported as it is."""
    attempt_id, roots = finalizing_with_two_roots(world)
    outcome = interrupted("reservation_expired", S.FINALIZING)
    exact = place(world, forge_outcome(world, attempt_id, outcome, roots, EXPIRES))

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == ()
    row = attempt_row(world, attempt_id)
    assert (row["state"], row["final_artifact_id"]) == ("failed", f"run-store-v1:{exact.name}")


STARTED = {"sorting-before": "10", "sorting-after": "999"}
"""A ``started_at_ns`` other than the attempt's (1000): ``"10"`` makes the document's bytes
sort before the store's (``"`` before ``0``), ``"999"`` after them (``9`` after ``1``)."""


@pytest.mark.parametrize("case", sorted(STARTED))
def test_a_document_differing_from_the_records_in_either_direction_is_evidence_mismatch(
    world: PublicationWorld, case: str
) -> None:
    """SPEC.md section 14.3, ``evidence_mismatch``: the document the store builds now for
    the same outcome, dependencies and finish time differs in any byte (here the start
    time). An owner's ``Censored`` outcome, finished while its reservation was live and
    otherwise exactly the store's, is rejected whether its bytes sort before or after the
    store's; the attempt then takes the interrupted failure."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_500)
    true_document = forge_outcome(world, guard.attempt_id, Censored(reason="budget"), [], 5_000)
    document = canonical.decode_object(true_document)
    assert document["started_at_ns"] == "1000"
    document["started_at_ns"] = STARTED[case]
    changed = canonical.encode(document)
    assert (changed < true_document) == (case == "sorting-before")
    forged = place(world, changed)

    report = recover(world, EXPIRES)
    assert report.rejected_artifacts == (rejected(forged, codes.EVIDENCE_MISMATCH),)
    assert forged.is_dir()
    check_interrupted(world, guard.attempt_id, "reservation_expired", S.FINALIZING, EXPIRES)
