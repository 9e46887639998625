"""Every schema trigger that guards on an attempt's state, in every state SPEC.md names.

Rules of this file: the two lists the matrix spans are read at test time, never written
here: the states from ``runstore.enums.AttemptState`` (SPEC.md section 5's list) and the
triggers from ``sqlite_master`` of a store built by :func:`conformance.schema.rows.open_store`
(a trigger guards on state when its body, string literals left out, reads a ``state``,
``from_state`` or ``to_state`` column). So a new state, or a new trigger that reads one,
fails :func:`test_the_matrix_covers_every_state_guard` until it has its row here.

The expected outcome of each cell is a small rule function written from SPEC.md's text
(sections 5 and 6; quoted in each docstring), over :mod:`conformance.contract`'s states
and edges, never from the SQL. Rows are written with raw SQL through the schema group's
builders (:class:`conformance.schema.rows.Rows`); the guarded write itself runs in a
transaction that is always rolled back. A cell counts as refused only when the write fails
with one of the trigger's own ``RAISE`` messages (read from its SQL); any other failure
fails the test, since another guard fired and the cell says nothing about this trigger.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from functools import partial

import pytest
from runstore.enums import AttemptState

from conformance.contract import EDGES
from conformance.contract import PHASES
from conformance.contract import STATES
from conformance.contract import TERMINAL_STATES
from conformance.schema.rows import PATH_TO
from conformance.schema.rows import Rows
from conformance.schema.rows import open_store
from conformance.schema.rows import rolled_back

# --- the rules, from SPEC.md's text -------------------------------------------------------


def known(state: str) -> str:
    """``state`` if SPEC.md section 5 places it (an execution phase, finalizing or
    terminal); a state the rules below know nothing about fails the test."""
    assert state in (*PHASES, "finalizing", *TERMINAL_STATES), f"no SPEC rule for {state}"
    return state


def terminal(state: str) -> bool:
    """SPEC.md section 5: accepted, censored, superseded and failed are terminal ("terminal:
    none": no edge leaves them)."""
    return known(state) in TERMINAL_STATES


# Each rule returns None when SPEC.md permits the write, else the refusal it gives, in the
# words the schema's refusal uses (the wording the schema tests match).
NOT_A_RESERVATION = "a new attempt must be reserved at revision 0"
NOT_REVISION_ZERO = "revision 0 must be the reservation"
IMMUTABLE = "a terminal attempt is immutable"
ILLEGAL = "illegal state transition"
CLAIM_REQUIRED = "acceptance requires the slot finalization claim"
SATISFIED = "the slot already has an accepted attempt"
OPEN_CLAIMANT = "the claiming attempt is not terminal"
CLOSED = "terminal"


def new_attempt_refusal(state: str) -> str | None:
    """SPEC.md section 5: "Revision 0 is the reservation itself (no state -> reserved)": a
    new attempt starts reserved and in no other state (and so does its first transition)."""
    return None if known(state) == "reserved" else NOT_A_RESERVATION


def first_transition_refusal(state: str) -> str | None:
    """:func:`new_attempt_refusal` for the history's revision 0."""
    return None if new_attempt_refusal(state) is None else NOT_REVISION_ZERO


def step_refusal(old: str, new: str, *, holds_claim: bool = True) -> str | None:
    """SPEC.md section 4, "Attempt record" (the record is immutable once terminal), section
    5's table (an attempt moves only along a legal edge) and section 6, "Claims" (only the holder of
    the slot's success claim may commit ``Accepted``: "Accepted without the claim is
    claim_required"), in that order."""
    if terminal(old):
        return IMMUTABLE
    if (old, known(new)) not in EDGES:
        return ILLEGAL
    if new == "accepted" and not holds_claim:
        return CLAIM_REQUIRED
    return None


def history_refusal(old: str, new: str) -> str | None:
    """SPEC.md section 5's table: each transition is one legal edge; none leaves a terminal
    state."""
    return None if (known(old), known(new)) in EDGES else ILLEGAL


def claim_refusal(slot_states: tuple[str, ...]) -> str | None:
    """SPEC.md section 6, "Claims": a contender "is claimed when the slot has no accepted
    attempt and no claim row" (the matrix holds no other claim row)."""
    return SATISFIED if any(known(state) == "accepted" for state in slot_states) else None


def claim_delete_refusal(state: str) -> str | None:
    """SPEC.md section 6, "Claims": "A claim row is deleted only by its attempt's terminal
    commit"."""
    return None if terminal(state) else OPEN_CLAIMANT


def reference_refusal(state: str) -> str | None:
    """SPEC.md section 6, "Terminal commit": reference rows are history, and the schema
    refuses "adding one to a terminal attempt"; an open attempt (any other state) takes
    them."""
    return CLOSED if terminal(state) else None


# --- reading the schema -------------------------------------------------------------------

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_STATE_COLUMN = re.compile(r"\b(?:state|from_state|to_state)\b")
_RAISE = re.compile(r"RAISE\(ABORT, '((?:[^']|'')*)'\)")
DELETE_CLAIM = "DELETE FROM finalization_claims WHERE attempt_id = ?"


def triggers(conn: sqlite3.Connection) -> dict[str, str]:
    """Every trigger of the store: name -> its SQL."""
    found = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
    return dict(found.fetchall())


def state_guards(conn: sqlite3.Connection) -> set[str]:
    """The triggers whose body reads an attempt state column (literals left out)."""
    return {
        name
        for name, text in triggers(conn).items()
        if _STATE_COLUMN.search(_LITERAL.sub("", text))
    }


def states() -> list[str]:
    """SPEC.md section 5's states, as the runtime's enum lists them, read now."""
    return [state.value for state in AttemptState]


class Probe:
    """One trigger's cells: each builds its rows (committed), then makes the guarded write
    in a transaction that is rolled back, and says whether the trigger let it through."""

    def __init__(self, conn: sqlite3.Connection, trigger: str) -> None:
        self.rows = Rows(conn)
        self.conn = conn
        text = triggers(conn)[trigger]
        self.messages = {m.replace("''", "'") for m in _RAISE.findall(text)}
        assert self.messages, f"{trigger} raises nothing"

    def refusal(self, write: Callable[[], object]) -> str | None:
        """None when ``write`` succeeds (it must then report one row written when it
        returns a row count), else the message of this trigger's refusal."""
        with rolled_back(self.conn):
            try:
                written = write()
            except sqlite3.IntegrityError as error:
                if str(error) in self.messages:
                    return str(error)
                raise
        assert written in (None, 1), written
        return None

    def attempt_in(self, state: str, slot: str | None = None) -> str:
        return self.rows.attempt_in(slot or self.rows.world().slot, state)

    def holding_claim(self, state: str) -> str:
        """An attempt that took its slot's claim while reserved and then walked to
        ``state`` keeping it (its terminal step does not delete the claim)."""
        attempt = self.rows.reserve(self.rows.world().slot)
        self.rows.claim(attempt)
        for step in PATH_TO[state]:
            self.rows.advance(attempt, step, release_claim=False)
        return attempt

    def claim(self, attempt: str) -> None:
        """The attempt takes its slot's claim with a new finalization lease."""
        self.rows.claim(attempt)

    def insert_attempt(self, row: dict[str, object]) -> None:
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.conn.execute(f"INSERT INTO attempts ({columns}) VALUES ({marks})", (*row.values(),))

    def delete_claim(self, attempt: str) -> int:
        return self.conn.execute(DELETE_CLAIM, (attempt,)).rowcount

    def update(self, attempt: str, new: str) -> int:
        """One step of the projection to ``new`` with every other column as a correct
        writer sets it (next revision, a later time, the outcome columns of ``new``)."""
        _slot, revision, _state, _updated = self.rows.current(attempt)
        at = self.rows.now()
        fields: dict[str, object] = {
            "state": new,
            "revision": revision + 1,
            "updated_at_ns": at,
            "finished_at_ns": None,
            "final_artifact_id": None,
            "final_artifact_kind": None,
            "failure_code": None,
            "censor_reason": None,
        }
        fields.update(self.rows.outcome_fields(new, at))
        return self.rows.update_attempt(attempt, fields)


# --- the cells of each trigger ------------------------------------------------------------
# Each returns {cell: (expected, actual)}, both a refusal or None; a cell is a state, or a
# tuple naming the states.

Cells = dict[object, tuple[str | None, str | None]]


def new_attempts(probe: Probe) -> Cells:
    """Inserting a new attempt row in each state (revision 0, no outcome)."""
    cells: Cells = {}
    for state in states():
        row = probe.rows.attempt_row(probe.rows.world().slot, state=state)

        cells[state] = (
            new_attempt_refusal(state),
            probe.refusal(partial(probe.insert_attempt, row)),
        )
    return cells


def projection_steps(probe: Probe) -> Cells:
    """Updating an attempt in each state to each state; an acceptance holds the slot's
    claim unless the cell says ``without claim``."""
    cells: Cells = {}
    for old in states():
        for new in states():
            attempt = probe.attempt_in(old)

            def write(attempt: str = attempt, new: str = new, old: str = old) -> int:
                if new == "accepted" and old != "accepted":
                    probe.claim(attempt)
                return probe.update(attempt, new)

            cells[(old, new)] = (step_refusal(old, new), probe.refusal(write))
        attempt = probe.attempt_in(old)
        unclaimed = probe.refusal(partial(probe.update, attempt, "accepted"))
        cells[(old, "accepted", "without claim")] = (
            step_refusal(old, "accepted", holds_claim=False),
            unclaimed,
        )
    return cells


def history_steps(probe: Probe) -> Cells:
    """Appending the next transition (with its event) from each state to each state, and a
    revision-0 transition of a new attempt to each state."""
    cells: Cells = {}
    for old in states():
        for new in states():
            attempt = probe.attempt_in(old)
            _slot, revision, _state, _updated = probe.rows.current(attempt)

            def write(
                attempt: str = attempt, revision: int = revision, edge: tuple[str, str] = (old, new)
            ) -> None:
                probe.rows.transition(attempt, revision + 1, *edge, probe.rows.now())

            cells[(old, new)] = (history_refusal(old, new), probe.refusal(write))
    for state in states():
        row = probe.rows.attempt_row(probe.rows.world().slot)

        def first(row: dict[str, object] = row, state: str = state) -> None:
            probe.insert_attempt(row)
            probe.rows.transition(str(row["id"]), 0, None, state, int(str(row["started_at_ns"])))

        cells[("revision 0", state)] = (first_transition_refusal(state), probe.refusal(first))
    return cells


def claims_taken(probe: Probe) -> Cells:
    """Taking the slot's claim for a reserved retry while another attempt of the slot is
    in each state, and for an attempt that is itself in each state."""
    cells: Cells = {}
    for state in states():
        slot = probe.rows.world().slot
        probe.attempt_in(state, slot)
        retry = probe.rows.reserve(slot)
        cells[("sibling", state)] = (
            claim_refusal((state, "reserved")),
            probe.refusal(partial(probe.claim, retry)),
        )
        attempt = probe.attempt_in(state)
        cells[("claimant", state)] = (
            claim_refusal((state,)),
            probe.refusal(partial(probe.claim, attempt)),
        )
    return cells


def claims_deleted(probe: Probe) -> Cells:
    """Deleting the claim of an attempt in each state."""
    cells: Cells = {}
    for state in states():
        attempt = probe.holding_claim(state)
        cells[state] = (
            claim_delete_refusal(state),
            probe.refusal(partial(probe.delete_claim, attempt)),
        )
    return cells


def attempt_references(probe: Probe) -> Cells:
    """Adding a reference of an attempt in each state."""
    cells: Cells = {}
    for state in states():
        attempt = probe.attempt_in(state)
        artifact = probe.rows.artifact("dataset")
        cells[state] = (
            reference_refusal(state),
            probe.refusal(partial(probe.rows.attempt_reference, attempt, artifact)),
        )
    return cells


def observation_references(probe: Probe) -> Cells:
    """Adding a reference of an observation whose producing attempt (which registered it
    while reserved) is now in each state."""
    cells: Cells = {}
    for state in states():
        world = probe.rows.world()
        attempt = probe.rows.reserve(world.slot)
        observation = probe.rows.observation(attempt, world.obs_slot)
        probe.rows.drive(attempt, *PATH_TO[state])
        artifact = probe.rows.artifact("metrics")
        cells[state] = (
            reference_refusal(state),
            probe.refusal(partial(probe.rows.observation_reference, observation, artifact)),
        )
    return cells


def leased_roots(probe: Probe) -> Cells:
    """Rooting an artifact under an unreleased lease of an attempt in each state."""
    cells: Cells = {}
    for state in states():
        attempt = probe.attempt_in(state)
        lease = probe.rows.lease(attempt)
        artifact = probe.rows.artifact("dataset")
        cells[state] = (
            reference_refusal(state),
            probe.refusal(partial(probe.rows.leased_root, lease, artifact)),
        )
    return cells


MATRIX: dict[str, Callable[[Probe], Cells]] = {
    "attempts_insert_is_reservation": new_attempts,
    "attempts_update_is_one_legal_step": projection_steps,
    "attempt_transitions_insert_is_next_step": history_steps,
    "finalization_claims_insert_guard": claims_taken,
    "finalization_claims_delete_requires_terminal_attempt": claims_deleted,
    "attempt_artifacts_insert_requires_open_attempt": attempt_references,
    "observation_artifacts_insert_requires_open_attempt": observation_references,
    "leased_artifacts_insert_requires_live_lease": leased_roots,
}
"""Each trigger that guards on state, and the cells that exercise it in every state."""


# --- the tests ----------------------------------------------------------------------------


def test_the_matrix_covers_every_state_guard() -> None:
    """Every trigger of the schema that reads an attempt state has its row in the matrix,
    and every row names such a trigger; SPEC.md section 5's states are the enum's."""
    assert state_guards(open_store()) == set(MATRIX)
    assert states() == list(STATES)


@pytest.mark.parametrize("trigger", sorted(MATRIX))
def test_each_guard_in_each_state(trigger: str) -> None:
    """The trigger lets each write through exactly when SPEC.md's rule permits it, and
    otherwise refuses it for the rule's reason, in every state (and pair of states) the
    matrix spans."""
    cells = MATRIX[trigger](Probe(open_store(), trigger))
    wrong = {
        cell: (expected, actual)
        for cell, (expected, actual) in cells.items()
        if (expected is None) != (actual is None) or (expected or "") not in (actual or "")
    }
    assert wrong == {}, f"{trigger}: cells whose outcome differs from the rule"
    outcomes = {expected is None for expected, _ in cells.values()}
    assert outcomes == {True, False}, "a row of the matrix must hold both outcomes"
