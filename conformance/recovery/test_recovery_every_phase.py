"""Recovery of an attempt interrupted in each execution phase (SPEC.md section 5 lists
them: reserved, materializing, starting, preparing, executing, checkpointing, validating,
evaluating), one test per rule, each run in every phase:

- ``not_finalizing`` (section 14.3): an outcome is only ever written while finalizing, so
  a candidate naming an attempt in any execution phase is rejected with that code, however
  well it matches the records (phases whose names sort before and after ``finalizing``
  alike: the check is on the state, not on its spelling);
- the interrupted failure (section 14.2 step 4, a and d): the pass moves the attempt to
  finalizing with an ``attempt_finalizing`` event whose payload is section 7's (``from``
  the phase, ``to`` finalizing, ``revision`` the revision after the change, one more than
  the phase's, and no ``claim`` key), then commits ``interrupted_attempt`` naming that
  phase.

Rules of this file: each attempt is walked to its phase by the owner's own calls, one
nanosecond apart from 1,100 (so the phase's revision is its place in the walk). The
store builds a document only for a finalizing attempt, so the candidate is the one the
same attempt (same slot and retry index, so the same id) writes in a twin store where it
went on to finalizing: the document it would have published had it gone on. Expected
values are SPEC.md's, not the model's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Failed
from runstore import OwnedAttempt
from runstore import RecoveryReport
from runstore import RejectedArtifact
from runstore import recovery_report as codes
from runstore.edges import EXECUTION_PHASES
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.publication.world import open_world
from conformance.recovery.world import attempt_row
from conformance.recovery.world import check_interrupted
from conformance.recovery.world import events
from conformance.recovery.world import forge_outcome
from conformance.recovery.world import make_object
from conformance.recovery.world import recover
from conformance.recovery.world import store_path

S = AttemptState
PHASES = (
    S.RESERVED,
    S.MATERIALIZING,
    S.STARTING,
    S.PREPARING,
    S.EXECUTING,
    S.CHECKPOINTING,
    S.VALIDATING,
    S.EVALUATING,
)
"""SPEC.md section 5's execution phases, in the order one walk passes through them."""
FAILED = Failed(code="exit_status", details={"status": 3})


def in_phase(world: PublicationWorld, phase: AttemptState) -> OwnedAttempt:
    """An attempt of the registered fixture walked from reserved to ``phase``."""
    guard = world.start(sc.slot_fixture(), "reservation-0")
    walked = PHASES[1 : PHASES.index(phase) + 1]
    guard = world.walk(guard, walked, 1_100)
    row = attempt_row(world, guard.attempt_id)
    assert (row["state"], row["revision"]) == (phase.value, len(walked))
    return guard


def document_had_it_gone_on(twin_root: Path, phase: AttemptState) -> bytes:
    """The ``outcome.json`` of an owner's failure (finished at 5,000, while its reservation
    was live) that the attempt walked to ``phase`` writes once it enters finalizing next,
    built in a twin store."""
    twin_world = open_world(twin_root)
    twin = next(twin_world)
    try:
        twin.register(sc.slot_fixture())
        guard = twin.finalizing(in_phase(twin, phase), 1_200)
        return forge_outcome(twin, guard.attempt_id, FAILED, [], 5_000)
    finally:
        twin_world.close()


def test_the_phases_are_the_specs() -> None:
    """The list this file walks is the package's list of execution phases."""
    assert PHASES == EXECUTION_PHASES


@pytest.mark.parametrize("phase", PHASES, ids=[p.value for p in PHASES])
def test_a_candidate_of_an_attempt_in_any_execution_phase_is_not_finalizing(
    world: PublicationWorld, tmp_path_factory: pytest.TempPathFactory, phase: AttemptState
) -> None:
    """SPEC.md section 14.3, ``not_finalizing``: the attempt a candidate names is not
    finalizing. The candidate here is the failure the owner would have published had it
    gone on to finalizing, finished while its reservation was live: only the state refuses
    it, in every execution phase. The attempt then takes the interrupted failure, and the
    candidate stays on disk."""
    document = document_had_it_gone_on(tmp_path_factory.mktemp("twin"), phase)
    world.register(sc.slot_fixture())
    attempt_id = in_phase(world, phase).attempt_id
    candidate = make_object(
        world, ArtifactKind.ATTEMPT, {"log.txt": b"forged\n"}, {"outcome.json": document}
    )

    report = recover(world, EXPIRES)
    expected = RejectedArtifact(path=store_path(candidate), code=codes.NOT_FINALIZING, message="")
    assert report.rejected_artifacts == (expected,)
    assert report.imported_artifacts == ()
    assert candidate.is_dir()
    check_interrupted(world, attempt_id, "reservation_expired", phase, EXPIRES)


@pytest.mark.parametrize("phase", PHASES, ids=[p.value for p in PHASES])
def test_recovery_moves_an_attempt_in_any_execution_phase_to_finalizing_as_section_7_says(
    world: PublicationWorld, phase: AttemptState
) -> None:
    """SPEC.md section 14.2 step 4 (a) and section 7: an attempt interrupted in an
    execution phase is moved to finalizing at its effective time by an
    ``attempt_finalizing`` event whose payload is ``from`` the phase, ``to`` finalizing and
    ``revision`` the attempt's revision after the change (one more than the phase's, odd
    and even alike), with no ``claim`` key; the terminal commit follows at the next
    revision, and the failure names the phase it interrupted."""
    world.register(sc.slot_fixture())
    attempt_id = in_phase(world, phase).attempt_id
    revision = PHASES.index(phase)

    report = recover(world, EXPIRES)
    assert [t.attempt_id for t in report.terminals] == [attempt_id]
    assert report == RecoveryReport(terminals=report.terminals)
    moved, finished = events(world, attempt_id)[-2:]
    assert moved[1:] == (
        "attempt_finalizing",
        EXPIRES,
        {"from": phase.value, "revision": revision + 1, "to": "finalizing"},
    )
    assert (finished[1], finished[3]["revision"]) == ("attempt_finished", revision + 2)
    row = attempt_row(world, attempt_id)
    assert (row["state"], row["revision"]) == ("failed", revision + 2)
    check_interrupted(world, attempt_id, "reservation_expired", phase, EXPIRES)
