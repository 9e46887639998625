"""Writer spec tests: ``commit_finalization``'s own checks in every state and order
(SPEC.md section 6, the per-operation table and "Terminal commit").

- Only a finalizing attempt may commit a terminal outcome: from every execution phase,
  every outcome is ``illegal_transition``, checked before the outcome is compared with how
  the attempt entered finalizing (so even ``Accepted`` is not ``claim_required``).
- References name registered artifacts or the final artifact; anything else is
  ``unknown_artifact``. Artifact ids are compared for equality only: a reference "is the
  final artifact" when its id equals the final artifact's, never because of where it sorts.

Every call runs in lockstep with the model, and a refusal writes nothing and delivers no
event.
"""

from __future__ import annotations

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import OwnedAttempt
from runstore import Reference
from runstore import Superseded
from runstore import TerminalOutcome
from runstore.testing import fixtures as sc

from conformance.writer.world import World

S = AttemptState

FINAL = "attempt-0"
"""The label of the final (attempt) artifact every commit here registers."""

PATHS = sc.PHASE_PATHS

OUTCOMES: tuple[TerminalOutcome, ...] = (
    Accepted(),
    Censored(reason="deadline"),
    Superseded(),
    Failed(code="oom", details={}),
)


def test_the_paths_reach_every_state_but_finalizing_and_the_terminal_ones() -> None:
    """The parametrization below covers every nonterminal state other than finalizing."""
    terminal = {S.ACCEPTED, S.CENSORED, S.SUPERSEDED, S.FAILED}
    assert set(PATHS) == set(AttemptState) - terminal - {S.FINALIZING}
    assert {outcome.state for outcome in OUTCOMES} == terminal


@pytest.mark.parametrize("source", list(PATHS), ids=lambda state: state.value)
def test_only_a_finalizing_attempt_may_commit_a_terminal_outcome(
    world: World, source: AttemptState
) -> None:
    """SPEC.md section 6, ``commit_finalization``: ``illegal_transition`` (not finalizing)
    comes right after the guarded sequence, before the outcome is compared with the way into
    finalizing (``claim_required`` / ``outcome_not_permitted``); section 5: only
    ``finalizing`` may move to a terminal state. Every outcome is refused from every
    execution phase, nothing is written, and the attempt can still enter finalizing and
    commit."""
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), PATHS[source], 1_100)
    assert guard.state is source
    for outcome in OUTCOMES:
        world.refused("illegal_transition", lambda o=outcome: world.finish(guard, o, FINAL, 1_200))
    assert world.rows("SELECT state, finished_at_ns FROM attempts") == [(source.value, None)]
    finalizing = world.advance(guard, S.FINALIZING, 1_300)
    assert world.finish(finalizing, OUTCOMES[3], FINAL, 1_400).state is S.FAILED
    world.check()


def unknown_attempt_artifact(before: bool) -> str:
    """The id of an attempt artifact nobody registers (another attempt's, never published)
    that sorts before (or after) the final artifact's id; the first such label in a fixed
    list, so the choice is deterministic."""
    final = sc.artifact(ArtifactKind.ATTEMPT, FINAL).id
    for index in range(1, 64):
        candidate = sc.artifact(ArtifactKind.ATTEMPT, f"attempt-{index}").id
        if (candidate < final) == before:
            return candidate
    raise AssertionError("no label sorts on that side of the final artifact")


def finalizing(world: World) -> OwnedAttempt:
    """An attempt of a one-shot slot that entered finalizing without contending."""
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    return world.advance(guard, S.FINALIZING, 1_200)


@pytest.mark.parametrize("before", [True, False], ids=["sorts-before-final", "sorts-after-final"])
def test_a_reference_to_an_unregistered_artifact_is_unknown_whatever_its_order(
    world: World, before: bool
) -> None:
    """SPEC.md section 6, "Terminal commit": references name registered artifacts or the
    final artifact, else ``unknown_artifact``; an unregistered id that sorts before or after
    the final artifact's id is refused alike, nothing is written, and the same commit with a
    reference to the final artifact itself then succeeds."""
    missing = unknown_attempt_artifact(before)
    final = sc.artifact(ArtifactKind.ATTEMPT, FINAL).id
    assert (missing < final) == before and missing != final
    guard = finalizing(world)
    outcome = Failed(code="oom", details={})
    world.refused(
        "unknown_artifact",
        lambda: world.finish(guard, outcome, FINAL, 1_300, [Reference("previous", missing)]),
    )
    assert world.rows("SELECT count(*) FROM artifacts WHERE id IN (?, ?)", (missing, final)) == [
        (0,)
    ]
    receipt = world.finish(guard, outcome, FINAL, 1_300, [Reference("self", final)])
    assert receipt.state is outcome.state
    assert world.rows("SELECT role, artifact_id FROM attempt_artifacts") == [("self", final)]
    world.check()
