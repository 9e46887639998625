"""Attempts: reservation, distinct retries, rollback, transition history, event linkage and
the state machine."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from runstore.edges import LEGAL_EDGES

from conformance.contract import PHASES
from conformance.contract import STATES
from conformance.contract import TERMINAL_STATES
from conformance.schema.rows import MAX_JSON_INT
from conformance.schema.rows import PATH_TO
from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import count
from conformance.schema.rows import event_kind_for
from conformance.schema.rows import fk_failed
from conformance.schema.rows import insert
from conformance.schema.rows import open_store
from conformance.schema.rows import refused
from conformance.schema.rows import rolled_back
from conformance.schema.rows import row_of
from conformance.schema.rows import transaction

# The legal edges exist once, as data, in the model; the schema's triggers must permit
# exactly those.


def history(conn: sqlite3.Connection, attempt_id: str) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT revision, from_state, to_state FROM attempt_transitions "
        "WHERE attempt_id = ? ORDER BY revision",
        (attempt_id,),
    ).fetchall()


# --- reservation and rollback ------------------------------------------------------------


def test_reservation_commits_attempt_event_and_transition_together(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    conn = rows.conn
    assert rows.current(attempt)[1:3] == (0, "reserved")
    assert history(conn, attempt) == [(0, None, "reserved")]
    (kind, event_attempt) = conn.execute(
        "SELECT e.kind, e.attempt_id FROM events e JOIN attempt_transitions t "
        "ON t.event_sequence = e.sequence WHERE t.attempt_id = ?",
        (attempt,),
    ).fetchone()
    assert (kind, event_attempt) == ("attempt_reserved", attempt)


def test_reservation_without_history_fails_at_commit_and_rolls_back(rows: Rows) -> None:
    world = rows.world()
    conn = rows.conn
    conn.execute("BEGIN IMMEDIATE")
    row = rows.attempt_row(world.slot)
    insert(conn, "attempts", row)
    rows.event("attempt_reserved", row["id"], row["started_at_ns"])
    with fk_failed():
        conn.execute("COMMIT")
    assert conn.in_transaction  # a deferred violation leaves the transaction open
    conn.execute("ROLLBACK")
    assert count(conn, "attempts") == 0
    assert count(conn, "events") == 0


def test_reservation_with_mismatched_history_fails_at_commit(rows: Rows) -> None:
    world = rows.world()
    conn = rows.conn
    row = rows.attempt_row(world.slot)
    with fk_failed(), transaction(conn):
        insert(conn, "attempts", row)
        # The history says reserved at another time than the projection.
        rows.transition(row["id"], 0, None, "reserved", row["started_at_ns"] + 1)
    assert count(conn, "attempts") == 0
    assert count(conn, "attempt_transitions") == 0


def test_failed_statement_then_rollback_leaves_nothing(rows: Rows) -> None:
    conn = rows.conn
    conn.execute("BEGIN IMMEDIATE")
    decision = rows.decision()
    with fk_failed():
        rows.run(decision, candidate_id="someone-else")
    assert conn.in_transaction  # a refused statement does not end the transaction
    rows.run(decision)
    conn.execute("ROLLBACK")
    assert count(conn, "applicability_decisions") == 0
    assert count(conn, "resolved_runs") == 0


def test_projection_update_without_history_fails_at_commit(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    before = row_of(rows.conn, "attempts", "id = ?", attempt)
    with fk_failed(), transaction(rows.conn):
        rows.update_attempt(
            attempt, {"state": "materializing", "revision": 1, "updated_at_ns": rows.now()}
        )
    assert row_of(rows.conn, "attempts", "id = ?", attempt) == before


def test_history_may_lead_but_the_projection_cannot_skip(rows: Rows) -> None:
    # A transition may be written first and the projection caught up in the same
    # transaction; history alone commits (the projection still names revision 0), but the
    # projection can never skip it afterwards.
    world = rows.world()
    attempt = rows.reserve(world.slot)
    with transaction(rows.conn):
        rows.transition(attempt, 1, "reserved", "materializing", rows.now())
    with refused("attempts: revision must advance by exactly one"):
        rows.update_attempt(
            attempt, {"state": "starting", "revision": 2, "updated_at_ns": rows.now()}
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"state": "materializing"}, "attempts: a new attempt must be reserved at revision 0"),
        ({"revision": 1}, "attempts: a new attempt must be reserved at revision 0"),
        ({"updated_at_ns": 5_000_000}, "attempts: a new attempt must be updated at its start"),
        ({"failure_code": "x"}, "attempts: a new attempt has no outcome"),
        ({"censor_reason": "x"}, "attempts: a new attempt has no outcome"),
        ({"finished_at_ns": 5_000_000}, "attempts: a new attempt has no outcome"),
    ],
)
def test_a_new_attempt_is_a_bare_reservation(
    rows: Rows, overrides: dict[str, object], message: str
) -> None:
    world = rows.world()
    with refused(message):
        rows.reserve(world.slot, started_at_ns=4_000_000, **overrides)
    assert count(rows.conn, "attempts") == 0


# --- distinct retries --------------------------------------------------------------------


def test_retry_indices_are_distinct_per_slot(rows: Rows) -> None:
    world = rows.world()
    first = rows.reserve(world.slot, retry_index=0)
    with refused("UNIQUE constraint failed: attempts.slot_id, attempts.retry_index"):
        rows.reserve(world.slot, retry_index=0, id="attempt:v1:" + "1" * 64)
    rows.reserve(world.slot, retry_index=1)
    other = rows.attempt_slot(world.run)
    rows.reserve(other, retry_index=0)
    assert count(rows.conn, "attempts", "slot_id = ?", world.slot) == 2
    with refused("UNIQUE constraint failed: attempts.id"):
        rows.reserve(other, retry_index=1, id=first)


@pytest.mark.parametrize(("retry", "ok"), [(0, True), (MAX_JSON_INT, True), (-1, False)])
def test_retry_index_range(rows: Rows, retry: int, ok: bool) -> None:
    world = rows.world()
    if ok:
        rows.reserve(world.slot, retry_index=retry)
    else:
        with check_failed("attempt_retry_index_range"):
            rows.reserve(world.slot, retry_index=retry)


def test_retry_index_beyond_canonical_json_range(rows: Rows) -> None:
    world = rows.world()
    with check_failed("attempt_retry_index_range"):
        rows.reserve(world.slot, retry_index=MAX_JSON_INT + 1)


def test_attempt_needs_a_resolved_slot(rows: Rows) -> None:
    rows.world()
    with fk_failed():
        rows.reserve("attempt-slot:v1:" + "f" * 64)


# --- projection updates ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("id", "attempt:v1:" + "e" * 64),
        ("slot_id", None),  # replaced by another real slot below
        ("retry_index", 7),
        ("started_at_ns", 1),
    ],
)
def test_identity_columns_are_immutable(rows: Rows, column: str, value: object) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    if column == "slot_id":
        value = rows.attempt_slot(world.run)
    before = row_of(rows.conn, "attempts", "id = ?", attempt)
    with (
        refused("attempts: id, slot_id, retry_index and started_at_ns are immutable"),
        rolled_back(rows.conn),
    ):
        fields: dict[str, Any] = {column: value}
        rows.step(attempt, "materializing", **fields)
    assert row_of(rows.conn, "attempts", "id = ?", attempt) == before


@pytest.mark.parametrize("revision", [0, 2, 5])
def test_revision_advances_by_exactly_one(rows: Rows, revision: int) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    with refused("attempts: revision must advance by exactly one"), rolled_back(rows.conn):
        rows.update_attempt(
            attempt, {"state": "materializing", "revision": revision, "updated_at_ns": rows.now()}
        )
    assert rows.current(attempt)[1] == 0


def test_projection_time_cannot_go_backwards(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    rows.advance(attempt, "materializing")
    updated = rows.current(attempt)[3]
    with refused("attempts: transition time cannot go backwards"), rolled_back(rows.conn):
        rows.update_attempt(
            attempt, {"state": "starting", "revision": 2, "updated_at_ns": updated - 1}
        )
    # Equal times are allowed (a writer clamps a backward clock to the previous time).
    rows.advance(attempt, "starting", at_ns=updated)
    assert rows.current(attempt)[1:] == (2, "starting", updated)


def test_attempts_are_never_deleted(rows: Rows) -> None:
    world = rows.world()
    live = rows.reserve(world.slot)
    done = rows.attempt_in(world.slot, "failed")
    for attempt in (live, done):
        with refused("attempts: rows cannot be deleted"):
            rows.conn.execute("DELETE FROM attempts WHERE id = ?", (attempt,))
    assert count(rows.conn, "attempts") == 2


def test_attempts_cannot_be_replaced(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    row = rows.attempt_row(world.slot, retry_index=0, id=attempt)
    with refused("attempts: rows cannot be deleted"):
        insert(rows.conn, "attempts", row, verb="INSERT OR REPLACE")
    assert count(rows.conn, "attempts") == 1


# --- transition history ------------------------------------------------------------------


def test_full_history_is_contiguous(rows: Rows) -> None:
    world = rows.world(execution_kind="stream")
    attempt = rows.reserve(world.slot)
    # Every phase in order, the loop back to executing once, then finalizing and accepted.
    path = (*PHASES[1:], "executing", "validating", "evaluating", "finalizing", "accepted")
    rows.drive(attempt, *path)
    states = ("reserved", *path)
    expected = [(0, None, "reserved")] + [
        (n, states[n - 1], states[n]) for n in range(1, len(states))
    ]
    assert history(rows.conn, attempt) == expected
    assert rows.current(attempt)[1:3] == (len(path), "accepted")


def test_revision_zero_is_the_reservation(rows: Rows) -> None:
    world = rows.world()
    row = rows.attempt_row(world.slot)
    with refused("attempt_transitions: revision 0 must be the reservation"), transaction(rows.conn):
        insert(rows.conn, "attempts", row)
        rows.transition(row["id"], 0, "reserved", "reserved", row["started_at_ns"])
    assert count(rows.conn, "attempts") == 0


def test_history_cannot_skip_a_revision(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    with refused("attempt_transitions: the previous revision is missing"), rolled_back(rows.conn):
        rows.transition(attempt, 2, "materializing", "starting", rows.now())
    assert history(rows.conn, attempt) == [(0, None, "reserved")]


def test_history_continues_from_the_previous_state(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "materializing")
    with (
        refused("attempt_transitions: from_state must be the previous to_state"),
        rolled_back(rows.conn),
    ):
        rows.transition(attempt, 2, "reserved", "finalizing", rows.now())
    with (
        refused("attempt_transitions: from_state must be the previous to_state"),
        rolled_back(rows.conn),
    ):
        rows.transition(attempt, 2, None, "starting", rows.now())


def test_history_time_cannot_go_backwards(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "materializing")
    last = rows.current(attempt)[3]
    with (
        refused("attempt_transitions: transition time cannot go backwards"),
        rolled_back(rows.conn),
    ):
        rows.transition(attempt, 2, "materializing", "starting", last - 1)


def test_history_keeps_pace_with_the_projection(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    with transaction(rows.conn):
        rows.transition(attempt, 1, "reserved", "materializing", rows.now())
    with (
        refused("attempt_transitions: must extend the attempt's current revision"),
        rolled_back(rows.conn),
    ):
        rows.transition(attempt, 2, "materializing", "starting", rows.now())


def test_a_revision_is_written_once(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "materializing")
    with (
        refused("UNIQUE constraint failed: attempt_transitions.attempt_id"),
        rolled_back(rows.conn),
    ):
        rows.transition(attempt, 1, "reserved", "finalizing", rows.now())


def test_history_is_insert_only(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "starting")
    conn = rows.conn
    before = history(conn, attempt)
    with refused("attempt_transitions: rows are insert-only"):
        conn.execute(
            "UPDATE attempt_transitions SET to_state = 'finalizing' WHERE attempt_id = ? "
            "AND revision = 2",
            (attempt,),
        )
    with refused("attempt_transitions: rows are insert-only"):
        conn.execute("DELETE FROM attempt_transitions WHERE attempt_id = ?", (attempt,))
    (row,) = conn.execute(
        "SELECT * FROM attempt_transitions WHERE attempt_id = ? AND revision = 2", (attempt,)
    ).fetchall()
    names = [c[1] for c in conn.execute("PRAGMA table_info(attempt_transitions)")]
    with refused("attempt_transitions: rows are insert-only"):
        insert(conn, "attempt_transitions", dict(zip(names, row, strict=True)), "INSERT OR REPLACE")
    assert history(conn, attempt) == before


# --- event linkage -----------------------------------------------------------------------


def test_transition_event_belongs_to_the_same_attempt(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    other = rows.reserve(world.slot)
    at = rows.now()
    with fk_failed(), rolled_back(rows.conn):
        sequence = rows.event("attempt_transition", other, at)
        rows.transition(attempt, 1, "reserved", "materializing", at, event_sequence=sequence)
    with fk_failed(), rolled_back(rows.conn):
        sequence = rows.event("attempt_transition", None, at)
        rows.transition(attempt, 1, "reserved", "materializing", at, event_sequence=sequence)


def test_transition_event_has_the_same_time(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    at = rows.now()
    with fk_failed(), rolled_back(rows.conn):
        sequence = rows.event("attempt_transition", attempt, at + 1)
        rows.transition(attempt, 1, "reserved", "materializing", at, event_sequence=sequence)


def test_transition_needs_an_existing_event(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    with refused("attempt_transitions: event kind does not match"), rolled_back(rows.conn):
        rows.transition(attempt, 1, "reserved", "materializing", rows.now(), event_sequence=999)


def test_one_event_per_transition(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "materializing")
    (sequence,) = rows.conn.execute(
        "SELECT event_sequence FROM attempt_transitions WHERE attempt_id = ? AND revision = 1",
        (attempt,),
    ).fetchone()
    at = rows.current(attempt)[3]
    # The revision-1 event has the right attempt, time and kind for revision 2 as well.
    with (
        refused("UNIQUE constraint failed: attempt_transitions.event_sequence"),
        rolled_back(rows.conn),
    ):
        rows.transition(attempt, 2, "materializing", "starting", at, event_sequence=sequence)


@pytest.mark.parametrize(
    ("to_state", "wrong_kind"),
    [
        ("materializing", "attempt_finalizing"),
        ("finalizing", "attempt_transition"),
        ("finalizing", "attempt_finished"),
    ],
)
def test_event_kind_matches_the_step(rows: Rows, to_state: str, wrong_kind: str) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    at = rows.now()
    with refused("attempt_transitions: event kind does not match"), rolled_back(rows.conn):
        sequence = rows.event(wrong_kind, attempt, at)
        rows.transition(attempt, 1, "reserved", to_state, at, event_sequence=sequence)


def test_events_are_insert_only(rows: Rows) -> None:
    world = rows.world()
    rows.attempt_in(world.slot, "starting")
    conn = rows.conn
    before = conn.execute("SELECT * FROM events ORDER BY sequence").fetchall()
    with refused("events: rows are insert-only"):
        conn.execute("UPDATE events SET payload_json = '{\"x\":1}' WHERE sequence = 1")
    with refused("events: rows are insert-only"):
        conn.execute("DELETE FROM events WHERE sequence = 2")
    names = [c[1] for c in conn.execute("PRAGMA table_info(events)")]
    with refused("events: rows are insert-only"):
        insert(conn, "events", dict(zip(names, before[0], strict=True)), "INSERT OR REPLACE")
    assert conn.execute("SELECT * FROM events ORDER BY sequence").fetchall() == before


def test_event_kinds_and_sequence(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot)
    with check_failed("event_kind"):
        rows.event("attempt_paused", attempt, rows.now())
    with fk_failed():
        rows.event("attempt_transition", "attempt:v1:" + "d" * 64, rows.now())
    rows.event("attempt_transition", None, rows.now())  # events may be unscoped
    sequences = [s for (s,) in rows.conn.execute("SELECT sequence FROM events ORDER BY 1")]
    assert sequences == [1, 2]


# --- the state machine -------------------------------------------------------------------


def _history_only(rows: Rows, attempt: str, source: str, target: str) -> None:
    revision = rows.current(attempt)[1] + 1
    at = rows.now()
    sequence = rows.event(event_kind_for(revision, target), attempt, at)
    rows.transition(attempt, revision, source, target, at, event_sequence=sequence)


def _projection_only(rows: Rows, attempt: str, source: str, target: str) -> None:
    revision = rows.current(attempt)[1] + 1
    at = rows.now()
    fields = {"state": target, "revision": revision, "updated_at_ns": at}
    fields.update(rows.outcome_fields(target, at))
    rows.update_attempt(attempt, fields)


def _whole_step(rows: Rows, attempt: str, source: str, target: str) -> None:
    rows.step(attempt, target)


def _permitted(
    rows: Rows,
    action: Callable[[Rows, str, str, str], None],
    attempt: str,
    edge: tuple[str, str],
    *,
    commit: bool,
) -> bool:
    """Run one attempt at ``edge`` in a transaction; True if it (and COMMIT, when asked)
    succeeded. Without ``commit`` the transaction is always rolled back."""
    conn = rows.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        action(rows, attempt, *edge)
        if commit:
            conn.execute("COMMIT")
        return True
    except sqlite3.IntegrityError:
        return False
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def test_every_legal_edge_and_only_those() -> None:
    """Each of the 169 (from, to) pairs, tried three ways: the transition row alone, the
    projection update alone (both rolled back before COMMIT, so only the triggers judge),
    and the whole step committed. Each must be permitted exactly for the contract's edges."""
    rows = Rows(open_store())
    world = rows.world()
    ways = {"history": _history_only, "projection": _projection_only, "step": _whole_step}
    allowed: dict[str, set[tuple[str, str]]] = {way: set() for way in ways}
    for edge in itertools.product(STATES, STATES):
        source, target = edge
        attempt = rows.attempt_in(rows.attempt_slot(world.run), source)
        if target == "accepted" and source not in TERMINAL_STATES:
            rows.claim(attempt)  # acceptance needs the claim; give every source one
        assert rows.current(attempt)[2] == source
        for way, action in ways.items():
            if _permitted(rows, action, attempt, edge, commit=way == "step"):
                allowed[way].add(edge)
        expected_state = target if edge in LEGAL_EDGES else source
        assert rows.current(attempt)[2] == expected_state
    assert len(LEGAL_EDGES) == 21
    assert allowed["history"] == LEGAL_EDGES
    assert allowed["projection"] == LEGAL_EDGES
    assert allowed["step"] == LEGAL_EDGES


def test_paths_in_the_helper_are_legal() -> None:
    for state, path in PATH_TO.items():
        states = ("reserved", *path)
        assert all(edge in LEGAL_EDGES for edge in itertools.pairwise(states))
        assert states[-1] == state
