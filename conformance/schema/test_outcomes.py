"""Terminal outcomes: required fields per outcome, frozen terminal rows, acceptance under a
claim, and at most one accepted attempt per slot."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.contract import TERMINAL_STATES
from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import count
from conformance.schema.rows import fk_failed
from conformance.schema.rows import refused
from conformance.schema.rows import rolled_back
from conformance.schema.rows import row_of


def finalizing(rows: Rows, *, claimed: bool = False) -> str:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "finalizing")
    if claimed:
        rows.claim(attempt)
    return attempt


@pytest.mark.parametrize("outcome", TERMINAL_STATES)
def test_each_outcome_commits_with_its_required_fields(rows: Rows, outcome: str) -> None:
    attempt = finalizing(rows)
    rows.advance(attempt, outcome)
    (state, finished, final, kind, code, reason) = rows.conn.execute(
        "SELECT state, finished_at_ns, final_artifact_id, final_artifact_kind, failure_code, "
        "censor_reason FROM attempts WHERE id = ?",
        (attempt,),
    ).fetchone()
    assert state == outcome
    assert finished is not None
    assert kind == "attempt"
    assert count(rows.conn, "artifacts", "id = ? AND kind = 'attempt'", final) == 1
    assert (code is not None) == (outcome == "failed")
    assert (reason is not None) == (outcome == "censored")


MISSING_CASES: list[tuple[str, dict[str, Any], str]] = (
    [
        (outcome, {"finished_at_ns": None}, "attempt_finish_iff_terminal")
        for outcome in TERMINAL_STATES
    ]
    + [
        (
            outcome,
            {"final_artifact_id": None, "final_artifact_kind": None},
            "attempt_final_artifact_iff_terminal",
        )
        for outcome in TERMINAL_STATES
    ]
    + [
        ("failed", {"failure_code": None}, "attempt_failure_code_iff_failed"),
        ("failed", {"failure_code": ""}, "attempt_failure_code_nonempty"),
        ("censored", {"censor_reason": None}, "attempt_censor_reason_iff_censored"),
        ("censored", {"censor_reason": ""}, "attempt_censor_reason_nonempty"),
        ("accepted", {"failure_code": "oops"}, "attempt_failure_code_iff_failed"),
        ("superseded", {"censor_reason": "late"}, "attempt_censor_reason_iff_censored"),
        ("failed", {"final_artifact_kind": "observation"}, "attempt_final_artifact_kind"),
        # Without its kind the composite foreign key is skipped: the id could dangle.
        ("failed", {"final_artifact_kind": None}, "attempt_final_artifact_iff_terminal"),
    ]
)


@pytest.mark.parametrize(("outcome", "fields", "constraint"), MISSING_CASES)
def test_outcome_refused_without_its_requirements(
    rows: Rows, outcome: str, fields: dict[str, Any], constraint: str
) -> None:
    attempt = finalizing(rows, claimed=outcome == "accepted")
    before = row_of(rows.conn, "attempts", "id = ?", attempt)
    with check_failed(constraint):
        rows.advance(attempt, outcome, **fields)
    assert row_of(rows.conn, "attempts", "id = ?", attempt) == before
    assert count(rows.conn, "attempt_transitions", "attempt_id = ?", attempt) == 2


@pytest.mark.parametrize("outcome", TERMINAL_STATES)
def test_final_artifact_must_exist_and_be_an_attempt_directory(rows: Rows, outcome: str) -> None:
    attempt = finalizing(rows, claimed=outcome == "accepted")
    observation_dir = rows.artifact("observation")
    with fk_failed():
        rows.advance(attempt, outcome, final_artifact_id=observation_dir)
    with fk_failed():
        rows.advance(attempt, outcome, final_artifact_id="run-store-v1:attempt-" + "0" * 64)
    assert rows.current(attempt)[2] == "finalizing"


def test_finish_cannot_precede_the_start(rows: Rows) -> None:
    attempt = finalizing(rows)
    (started,) = rows.conn.execute(
        "SELECT started_at_ns FROM attempts WHERE id = ?", (attempt,)
    ).fetchone()
    with check_failed("attempt_finished_at_range"):
        rows.advance(attempt, "failed", finished_at_ns=started - 1)


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"finished_at_ns": 1_500_000}, "attempt_finish_iff_terminal"),
        ({"failure_code": "early"}, "attempt_failure_code_iff_failed"),
        ({"censor_reason": "early"}, "attempt_censor_reason_iff_censored"),
    ],
)
def test_nonterminal_rows_carry_no_outcome(
    rows: Rows, fields: dict[str, Any], constraint: str
) -> None:
    world = rows.world()
    attempt = rows.reserve(world.slot, started_at_ns=1_000_000)
    with check_failed(constraint):
        rows.advance(attempt, "finalizing", **fields)
    final = rows.artifact("attempt")
    with check_failed("attempt_final_artifact_iff_terminal"):
        rows.advance(attempt, "finalizing", final_artifact_id=final, final_artifact_kind="attempt")
    assert rows.current(attempt)[2] == "reserved"


@pytest.mark.parametrize("outcome", TERMINAL_STATES)
def test_terminal_rows_are_frozen(rows: Rows, outcome: str) -> None:
    attempt = finalizing(rows)
    rows.advance(attempt, outcome)
    conn = rows.conn
    before = row_of(conn, "attempts", "id = ?", attempt)
    for assignment in (
        "record_json = '{\"changed\":true}'",
        "revision = revision + 1, state = 'failed', failure_code = 'late'",
        "revision = revision + 1, state = 'finalizing', finished_at_ns = NULL, "
        "final_artifact_id = NULL, final_artifact_kind = NULL, failure_code = NULL, "
        "censor_reason = NULL",
    ):
        with refused("attempts: a terminal attempt is immutable"):
            conn.execute(f"UPDATE attempts SET {assignment} WHERE id = ?", (attempt,))
    with refused("attempts: rows cannot be deleted"):
        conn.execute("DELETE FROM attempts WHERE id = ?", (attempt,))
    assert row_of(conn, "attempts", "id = ?", attempt) == before


def test_acceptance_requires_the_slot_claim(rows: Rows) -> None:
    attempt = finalizing(rows)
    with (
        refused("attempts: acceptance requires the slot finalization claim"),
        rolled_back(rows.conn),
    ):
        rows.step(attempt, "accepted")
    # Another attempt's claim on the slot does not count either.
    slot = rows.current(attempt)[0]
    rival = rows.attempt_in(slot, "finalizing")
    rows.claim(rival)
    with (
        refused("attempts: acceptance requires the slot finalization claim"),
        rolled_back(rows.conn),
    ):
        rows.step(attempt, "accepted")
    rows.advance(rival, "accepted")
    assert rows.current(rival)[2] == "accepted"
    assert rows.current(attempt)[2] == "finalizing"


def test_other_outcomes_need_no_claim(rows: Rows) -> None:
    for outcome in ("censored", "superseded", "failed"):
        attempt = finalizing(rows)
        rows.advance(attempt, outcome)
        assert rows.current(attempt)[2] == outcome


def test_retries_coexist_with_one_accepted_attempt(rows: Rows) -> None:
    world = rows.world()
    rows.attempt_in(world.slot, "failed")
    rows.attempt_in(world.slot, "superseded")
    rows.attempt_in(world.slot, "accepted")
    rows.attempt_in(world.slot, "censored")
    rows.reserve(world.slot)
    assert count(rows.conn, "attempts", "slot_id = ?", world.slot) == 5
    assert count(rows.conn, "attempts", "slot_id = ? AND state = 'accepted'", world.slot) == 1


def test_one_accepted_attempt_per_slot_holds_without_the_claim_guard(rows: Rows) -> None:
    """The claim guards already keep a second acceptance out; the partial unique index is the
    backstop that holds even when they are bypassed (here: the claim insert guard dropped)."""
    world = rows.world()
    rows.attempt_in(world.slot, "accepted")
    rows.conn.execute("DROP TRIGGER finalization_claims_insert_guard")
    second = rows.attempt_in(world.slot, "finalizing")
    rows.claim(second)
    with refused("UNIQUE constraint failed: attempts.slot_id"):
        rows.advance(second, "accepted")
    assert rows.current(second)[2] == "finalizing"
    # A different slot can still accept.
    other = rows.attempt_slot(world.run)
    rows.attempt_in(other, "accepted")
    assert count(rows.conn, "attempts", "state = 'accepted'") == 2
