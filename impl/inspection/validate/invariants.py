"""``validate``'s fourth part, the invariants (SPEC.md section 16.1, *Invariants*, and
section 6), read past the indexes that encode them: slots, outcomes, claims, leases and
selections.

Rules of this file: reads only, streamed (:mod:`.reading`); the rules are the value
layer's (:func:`runstore.rules.outcome_refusal`, the payloads' claim words, the stage
names of :mod:`runstore.store.publication.staging`), never re-implemented here.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from runstore.enums import AttemptState
from runstore.enums import ExecutionKind
from runstore.enums import LeasePurpose
from runstore.enums import SlotRole
from runstore.inspection.validate.findings import Report
from runstore.inspection.validate.reading import TERMINAL_SQL
from runstore.inspection.validate.reading import TERMINAL_VALUES
from runstore.inspection.validate.reading import Row
from runstore.inspection.validate.reading import stream
from runstore.payloads import CLAIMED
from runstore.payloads import SUPERSEDED
from runstore.requests import INTERRUPTED_ATTEMPT
from runstore.rules import outcome_refusal
from runstore.store.publication.staging import lease_id_for
from runstore.store.publication.staging import store_path_for

SLOT_ACCEPTED_TWICE: Final = "slot_accepted_twice"
RETRY_GAP: Final = "retry_gap"
SLOT_MEMBERSHIP: Final = "slot_membership"
OUTCOME_NOT_PERMITTED: Final = "outcome_not_permitted"
ACCEPTANCE_UNSATISFIED: Final = "acceptance_unsatisfied"
CLAIM_INCONSISTENT: Final = "claim_inconsistent"
CLAIM_MISSING: Final = "claim_missing"
RESERVATION_LEASE: Final = "reservation_lease"
LEASE_UNRELEASED: Final = "lease_unreleased"
LEASE_INCONSISTENT: Final = "lease_inconsistent"
FENCING_GAP: Final = "fencing_gap"
SELECTION_INVALID: Final = "selection_invalid"
CODES: Final = (
    SLOT_ACCEPTED_TWICE,
    RETRY_GAP,
    SLOT_MEMBERSHIP,
    OUTCOME_NOT_PERMITTED,
    ACCEPTANCE_UNSATISFIED,
    CLAIM_INCONSISTENT,
    CLAIM_MISSING,
    RESERVATION_LEASE,
    LEASE_UNRELEASED,
    LEASE_INCONSISTENT,
    FENCING_GAP,
    SELECTION_INVALID,
)

_CLAIM_OF_EVENT: Final = (
    "CASE WHEN json_valid(e.payload_json) THEN json_extract(e.payload_json, '$.claim') END"
)


def check_invariants(connection: sqlite3.Connection, log: Report) -> dict[str, int]:
    _check_slots(connection, log)
    _check_outcomes(connection, log)
    return {
        "finalization_claims": _check_claims(connection, log),
        "leases": _check_leases(connection, log),
        "selected_observations": _check_selections(connection, log),
    }


def _check_slots(connection: sqlite3.Connection, log: Report) -> None:
    """At most one accepted attempt per slot (read past the unique index, which a damaged
    store may contradict), retry indices 0..n-1, and each slot's observation slots the
    shape its kind and role need."""
    twice = (
        "SELECT slot_id, count(*) FROM attempts NOT INDEXED WHERE state = 'accepted' "
        "GROUP BY slot_id HAVING count(*) > 1"
    )
    for slot_id, count in stream(connection, twice):
        log(SLOT_ACCEPTED_TWICE, slot_id, f"{count} accepted attempts")
    retries = (
        "SELECT slot_id, count(*), max(retry_index) FROM attempts GROUP BY slot_id "
        "HAVING max(retry_index) != count(*) - 1"
    )
    for slot_id, count, highest in stream(connection, retries):
        log(RETRY_GAP, slot_id, f"{count} attempts but retry indices up to {highest}")
    members = (
        "SELECT s.id, s.execution_kind, s.role, count(CASE WHEN o.kind = 'result' THEN 1 END), "
        "count(CASE WHEN o.kind = 'checkpoint' THEN 1 END), count(m.observation_slot_id) "
        "FROM attempt_slots AS s LEFT JOIN attempt_observation_slots AS m "
        "ON m.attempt_slot_id = s.id LEFT JOIN observation_slots AS o "
        "ON o.id = m.observation_slot_id GROUP BY s.id"
    )
    for row in stream(connection, members):
        problem = _membership_problem(row)
        if problem is not None:
            log(SLOT_MEMBERSHIP, row[0], problem)


def _membership_problem(row: Row) -> str | None:
    _, kind, role, results, checkpoints, members = row
    if role == SlotRole.WARMUP.value:
        return None if members == 0 else f"a warm-up owning {members} observation slots"
    if kind == ExecutionKind.STREAM.value:
        shaped = checkpoints >= 1 and checkpoints == members
    else:
        shaped = results == 1 and members == 1
    if shaped:
        return None
    return f"a {kind} measurement owning {results} result and {checkpoints} checkpoint slots"


def _check_outcomes(connection: sqlite3.Connection, log: Report) -> None:
    """Each terminal outcome matches how its attempt entered finalizing (SPEC.md section
    6, :func:`runstore.rules.outcome_refusal`; recovery's ``interrupted_attempt`` failure
    ends any way in), and each accepted measurement's acceptance still holds."""
    ways = (
        f"SELECT a.id, a.state, a.failure_code, {_CLAIM_OF_EVENT} FROM attempts AS a "
        "JOIN attempt_transitions AS t ON t.attempt_id = a.id AND t.revision = a.revision - 1 "
        f"JOIN events AS e ON e.sequence = t.event_sequence WHERE a.state IN {TERMINAL_SQL}"
    )
    for attempt_id, state, failure_code, claim in stream(connection, ways):
        if state == AttemptState.FAILED.value and failure_code == INTERRUPTED_ATTEMPT:
            continue
        decision = claim if claim in (CLAIMED, SUPERSEDED) else None
        refusal = outcome_refusal(
            decision, state == AttemptState.ACCEPTED.value, state == AttemptState.SUPERSEDED.value
        )
        if refusal is not None:
            log(
                OUTCOME_NOT_PERMITTED,
                attempt_id,
                f"{state} after entering finalizing {decision or 'without contending'}: {refusal}",
            )
    acceptance = (
        "SELECT a.id, s.execution_kind, m.observation_slot_id, "
        "EXISTS (SELECT 1 FROM selected_observations AS x "
        "WHERE x.slot_id = m.observation_slot_id), "
        "EXISTS (SELECT 1 FROM observations AS o WHERE o.attempt_id = a.id "
        "AND o.slot_id = m.observation_slot_id AND o.valid = 1 AND o.completion = 'reached') "
        "FROM attempts AS a JOIN attempt_slots AS s ON s.id = a.slot_id "
        "JOIN attempt_observation_slots AS m ON m.attempt_slot_id = a.slot_id "
        "WHERE a.state = 'accepted' AND s.role = 'measurement'"
    )
    for attempt_id, kind, slot_id, selected, produced in stream(connection, acceptance):
        if not selected:
            log(ACCEPTANCE_UNSATISFIED, attempt_id, f"observation slot {slot_id} has no selection")
        elif kind != ExecutionKind.STREAM.value and not produced:
            log(
                ACCEPTANCE_UNSATISFIED,
                attempt_id,
                f"it produced no valid, reached observation for {slot_id}",
            )


_CLAIMS: Final = (
    "SELECT c.attempt_id, c.slot_id, a.slot_id, a.state, l.attempt_id, l.purpose, "
    "l.released_at_ns, (SELECT "
    + _CLAIM_OF_EVENT
    + " FROM attempt_transitions AS t JOIN events AS e ON e.sequence = t.event_sequence "
    "WHERE t.attempt_id = c.attempt_id AND t.revision = a.revision) "
    "FROM finalization_claims AS c LEFT JOIN attempts AS a ON a.id = c.attempt_id "
    "LEFT JOIN leases AS l ON l.id = c.lease_id ORDER BY c.rowid"
)


def _check_claims(connection: sqlite3.Connection, log: Report) -> int:
    """A claim belongs to a nonterminal attempt of its slot that is finalizing and entered
    it claimed, under an unreleased finalization lease of that attempt; and every such
    attempt still holds its claim (only its terminal commit deletes it)."""
    count = 0
    for row in stream(connection, _CLAIMS):
        count += 1
        problem = _claim_problem(row)
        if problem is not None:
            log(CLAIM_INCONSISTENT, row[0], problem)
    unclaimed = (
        f"SELECT a.id FROM attempts AS a JOIN attempt_transitions AS t ON t.attempt_id = a.id "
        "AND t.revision = a.revision JOIN events AS e ON e.sequence = t.event_sequence "
        f"WHERE a.state = 'finalizing' AND {_CLAIM_OF_EVENT} = ? AND NOT EXISTS "
        "(SELECT 1 FROM finalization_claims AS c WHERE c.slot_id = a.slot_id "
        "AND c.attempt_id = a.id)"
    )
    for (attempt_id,) in stream(connection, unclaimed, (CLAIMED,)):
        log(CLAIM_MISSING, attempt_id, "it entered finalizing claimed but holds no claim")
    return count


def _claim_problem(row: Row) -> str | None:
    _, slot_id, attempt_slot, state, lease_attempt, purpose, released, claim = row
    if state is None:
        return "the claiming attempt does not exist"
    if attempt_slot != slot_id:
        return f"the claim's slot {slot_id!r:.100} is not the attempt's"
    if state != AttemptState.FINALIZING.value:
        return f"the claiming attempt is {state}, not finalizing"
    if claim != CLAIMED:
        return f"the attempt entered finalizing {claim or 'without contending'}"
    if (lease_attempt, purpose) != (row[0], LeasePurpose.FINALIZATION.value):
        return "its lease is not a finalization lease of the attempt"
    if released is not None:
        return f"its lease was released at {released}"
    return None


def _check_leases(connection: sqlite3.Connection, log: Report) -> int:
    """Every attempt has exactly one reservation lease and at most one finalization lease;
    a terminal attempt holds no unreleased lease; a lease belongs to an attempt; a staging
    lease's path is its stage's; roots are held by reservation leases; fencing tokens are
    1..n. Returns the number of leases."""
    per_attempt = (
        "SELECT a.id, a.state, count(CASE WHEN l.purpose = 'reservation' THEN 1 END), "
        "count(CASE WHEN l.purpose = 'finalization' THEN 1 END), "
        "count(CASE WHEN l.id IS NOT NULL AND l.released_at_ns IS NULL THEN 1 END) "
        "FROM attempts AS a LEFT JOIN leases AS l ON l.attempt_id = a.id GROUP BY a.id"
    )
    for attempt_id, state, reservations, finalizations, unreleased in stream(
        connection, per_attempt
    ):
        if reservations != 1:
            log(RESERVATION_LEASE, attempt_id, f"{reservations} reservation leases, not 1")
        if finalizations > 1:
            log(LEASE_INCONSISTENT, attempt_id, f"{finalizations} finalization leases")
        if state in TERMINAL_VALUES and unreleased:
            log(LEASE_UNRELEASED, attempt_id, f"{state} with {unreleased} unreleased leases")
    leases = "SELECT rowid, id, attempt_id, purpose, staging_path FROM leases ORDER BY rowid"
    count = 0
    for rowid, lease_id, attempt_id, purpose, staging_path in stream(connection, leases):
        count += 1
        if attempt_id is None:
            log(LEASE_INCONSISTENT, f"leases:{rowid}", f"lease {lease_id!r:.100} has no attempt")
        if purpose == LeasePurpose.STAGING.value and not _is_stage(lease_id, staging_path):
            log(LEASE_INCONSISTENT, f"leases:{rowid}", "its staging path is not its stage's")
    roots = (
        "SELECT r.rowid, l.purpose FROM leased_artifacts AS r JOIN leases AS l "
        "ON l.id = r.lease_id WHERE l.purpose != 'reservation'"
    )
    for rowid, purpose in stream(connection, roots):
        log(LEASE_INCONSISTENT, f"leased_artifacts:{rowid}", f"rooted under a {purpose} lease")
    for total, lowest, highest in stream(
        connection, "SELECT count(*), min(fencing_token), max(fencing_token) FROM leases"
    ):
        if total and (lowest, highest) != (1, total):
            log(FENCING_GAP, "leases", f"{total} leases hold tokens {lowest}..{highest}")
    return count


def _is_stage(lease_id: str, staging_path: object) -> bool:
    token = lease_id.removeprefix(lease_id_for(""))
    return lease_id == lease_id_for(token) and token != "" and staging_path == store_path_for(token)


_SELECTIONS: Final = (
    "SELECT s.slot_id, s.observation_id, s.selected_at_ns, o.slot_id, o.valid, "
    "o.registered_at_ns, EXISTS (SELECT 1 FROM attempt_transitions AS t JOIN events AS e "
    "ON e.sequence = t.event_sequence WHERE t.attempt_id = o.attempt_id "
    f"AND t.to_state = 'finalizing' AND {_CLAIM_OF_EVENT} = ?) "
    "FROM selected_observations AS s LEFT JOIN observations AS o ON o.id = s.observation_id "
    "ORDER BY s.rowid"
)


def _check_selections(connection: sqlite3.Connection, log: Report) -> int:
    """A selection names a valid observation of its own slot, registered no later than
    the selection, whose attempt held the slot's claim. Returns the number of
    selections."""
    count = 0
    for row in stream(connection, _SELECTIONS, (CLAIMED,)):
        count += 1
        problem = _selection_problem(row)
        if problem is not None:
            log(SELECTION_INVALID, row[0], problem)
    return count


def _selection_problem(row: Row) -> str | None:
    slot_id, observation_id, selected_at, observed_slot, valid, registered_at, claimed = row
    if observed_slot is None:
        return f"it selects the unknown observation {observation_id!r:.100}"
    if observed_slot != slot_id:
        return f"it selects {observation_id}, an observation of another slot"
    if valid != 1:
        return f"it selects the invalid observation {observation_id}"
    if selected_at < registered_at:
        return f"selected at {selected_at}, before {observation_id} was registered"
    if not claimed:
        return f"the attempt of {observation_id} never held the slot's claim"
    return None
