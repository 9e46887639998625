"""Writer spec tests: refusals and failures write nothing.

Duplicate lease ids, references to unregistered artifacts (missing artifact roots), and
failures injected through the SQL seam after some of a call's rows were already written,
including after the terminal projection update of ``commit_finalization``: every partial
write is rolled back, which a fresh connection confirms row by row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import Next
from runstore import OwnedAttempt
from runstore import Reference
from runstore import TerminalOutcome
from runstore import sql
from runstore.errors import DatabaseError
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

S = AttemptState


class FailAfter:
    """An SQL observer that records every statement and raises ``sqlite3.OperationalError``
    before the first statement starting with ``target`` that runs after one starting with
    ``after`` (so the failure strikes inside the transaction, after that write)."""

    def __init__(self, after: str, target: str) -> None:
        self.after, self.target = after, target
        self.statements: list[str] = []
        self.armed = False
        self.fired = False

    def __call__(self, phase: str, statement: str) -> None:
        if phase == "after" and statement.startswith(self.after):
            self.armed = True
        if phase != "before":
            return
        self.statements.append(statement)
        if self.armed and not self.fired and statement.startswith(self.target):
            self.fired = True
            raise sqlite3.OperationalError(f"injected before {self.target}")


def injected(world: World, observer: FailAfter, call: Callable[[], object]) -> None:
    """``call`` fails with database_error through ``observer``; nothing is written and no
    event is delivered."""
    before, delivered = world.projection(), len(world.delivered)
    previous = sql.install_observer(observer)
    try:
        with pytest.raises(DatabaseError):
            call()
    finally:
        sql.install_observer(previous)
    assert observer.fired
    assert observer.statements[0] == "BEGIN IMMEDIATE"
    assert observer.statements[-1] == "ROLLBACK"
    assert world.projection() == before
    assert len(world.delivered) == delivered


def claimed_with_result(world: World, fixture: sc.SlotFixture) -> OwnedAttempt:
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    guard = world.claim(guard, "claim-0", 1_200, expires=9_000).attempt
    world.publish(guard, fixture.observation_slots[0], "result-0", 1_300)
    return guard


FINALIZING_STATE = (
    "SELECT state, revision, updated_at_ns, finished_at_ns, final_artifact_id FROM attempts"
)


# --- duplicate leases -----------------------------------------------------------------------


def test_a_reserve_with_an_existing_lease_id_leaves_no_attempt_transition_or_event(
    world: World,
) -> None:
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0")
    guard = world.claim(guard, "claim-0", 1_100).attempt
    for taken in ("reservation-0", "claim-0"):
        for owner in (sc.OWNER, sc.OTHER_OWNER):
            world.refused(
                "duplicate_lease",
                world.reserve,
                fixture.slot_id,
                Next(retry=True),
                sc.lease(taken, EXPIRES * 2, owner),
                1_200,
            )
    assert world.rows("SELECT retry_index FROM attempts") == [(0,)]
    assert world.rows("SELECT count(*) FROM attempt_transitions") == [(2,)]
    assert world.rows("SELECT count(*) FROM events") == [(2,)]
    assert world.rows("SELECT id FROM leases ORDER BY fencing_token") == [
        ("reservation-0",),
        ("claim-0",),
    ]
    world.check()


def test_a_claim_with_an_existing_lease_id_leaves_the_attempt_where_it_was(world: World) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    world.refused("duplicate_lease", lambda: world.claim(guard, "reservation-0", 1_200))
    assert world.rows("SELECT state, revision FROM attempts") == [("executing", 4)]
    assert world.rows("SELECT * FROM finalization_claims") == []
    world.check()


def test_a_failing_lease_insert_rolls_back_the_attempt_row_already_written(
    world: World,
) -> None:
    fixture = world.registered()
    observer = FailAfter("INSERT INTO attempts", "INSERT INTO leases")
    request = sc.lease("reservation-0", EXPIRES)
    injected(
        world,
        observer,
        lambda: world.store.reserve(fixture.slot_id, Next(retry=True), request, 1_000),
    )
    assert world.rows("SELECT count(*) FROM attempts") == [(0,)]
    # Nothing stuck: the same reservation then succeeds as retry 0.
    assert world.start(fixture, "reservation-0", authorization=Next(retry=True)).retry_index == 0
    world.check()


# --- missing artifact roots -----------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome",
    [Accepted(), Failed(code="oom", details={}), Censored(reason="budget")],
    ids=lambda outcome: outcome.state.value,
)
def test_a_reference_to_an_unregistered_artifact_writes_nothing(
    world: World, outcome: TerminalOutcome
) -> None:
    fixture = world.registered()
    guard = claimed_with_result(world, fixture)
    registered = sc.artifact(ArtifactKind.OBSERVATION, "result-0").id
    missing = sc.artifact(ArtifactKind.DATASET, "never-published").id
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0").id
    references = [Reference("inputs", registered), Reference("dataset", missing)]
    world.refused(
        "unknown_artifact",
        lambda: world.finish(guard, outcome, "attempt-0", 1_400, references),
    )
    assert world.rows(FINALIZING_STATE) == [("finalizing", 5, 1_200, None, None)]
    assert world.rows("SELECT id FROM artifacts WHERE id IN (?, ?)", (missing, final)) == []
    assert world.rows("SELECT * FROM attempt_artifacts") == []
    assert world.rows("SELECT lease_id FROM finalization_claims") == [("claim-0",)]
    # A reference may name the final artifact itself or a registered one.
    receipt = world.finish(
        guard,
        outcome,
        "attempt-0",
        1_400,
        [Reference("inputs", registered), Reference("self", final)],
    )
    assert receipt.state is outcome.state
    assert sorted(world.rows("SELECT role, artifact_id FROM attempt_artifacts")) == [
        ("inputs", registered),
        ("self", final),
    ]
    world.check()


# --- rollback after the terminal projection update ------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["DELETE FROM finalization_claims", "UPDATE leases SET released_at_ns", "COMMIT"],
)
def test_a_terminal_commit_failing_after_the_attempts_update_rolls_everything_back(
    world: World, target: str
) -> None:
    fixture = world.registered()
    guard = claimed_with_result(world, fixture)
    before = world.projection()
    observer = FailAfter("UPDATE attempts SET state", target)
    dataset = sc.artifact(ArtifactKind.OBSERVATION, "result-0").id
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0")
    injected(
        world,
        observer,
        lambda: world.store.commit_finalization(
            guard, Accepted(), final, [Reference("inputs", dataset)], 1_400, 1_400
        ),
    )
    # The failure struck after the projection update, the terminal event and transition,
    # the final artifact and the reference had all been written in the transaction.
    written = observer.statements
    position = written.index(next(s for s in written if s.startswith("UPDATE attempts")))
    for earlier in (
        "INSERT INTO artifacts",
        "INSERT INTO attempt_artifacts",
        "INSERT INTO events",
        "INSERT INTO attempt_transitions",
    ):
        assert any(s.startswith(earlier) for s in written[:position]), earlier
    # Through a fresh connection: still finalizing, with its claim and leases intact.
    assert world.projection() == before
    assert world.rows(FINALIZING_STATE) == [("finalizing", 5, 1_200, None, None)]
    assert world.rows("SELECT slot_id, attempt_id, lease_id FROM finalization_claims") == [
        (fixture.slot_id, guard.attempt_id, "claim-0")
    ]
    assert world.rows("SELECT id, released_at_ns FROM leases ORDER BY fencing_token") == [
        ("reservation-0", None),
        ("claim-0", None),
    ]
    assert world.rows("SELECT count(*) FROM events WHERE kind = 'attempt_finished'") == [(0,)]
    assert world.rows("SELECT count(*) FROM artifacts WHERE id = ?", (final.id,)) == [(0,)]
    assert world.rows("SELECT * FROM attempt_artifacts") == []
    # The owner's guard is still good: the same commit then goes through.
    receipt = world.finish(guard, Accepted(), "attempt-0", 1_400, [Reference("inputs", dataset)])
    # Events: 6 transitions, the observation's registration, then this terminal one.
    assert (receipt.state, receipt.event_sequence) == (S.ACCEPTED, 8)
    world.check()


def test_a_claim_failing_after_its_transition_rolls_back_to_the_execution_phase(
    world: World,
) -> None:
    fixture = world.registered()
    guard = world.walk(world.start(fixture, "reservation-0"), sc.EXECUTION_PATH, 1_100)
    observer = FailAfter("UPDATE attempts SET state", "INSERT INTO finalization_claims")
    request = sc.lease("claim-0", EXPIRES)
    injected(world, observer, lambda: world.store.begin_finalization(guard, request, 1_200))
    assert world.rows("SELECT state, revision FROM attempts") == [("executing", 4)]
    assert world.rows("SELECT id FROM leases WHERE id = 'claim-0'") == []
    assert world.claim(guard, "claim-0", 1_200).claimed
    world.check()
