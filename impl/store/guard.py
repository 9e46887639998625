"""The guard check: reading an attempt's coordination rows and running the guarded check
sequence every operation that takes an ``OwnedAttempt`` runs first.

Rules of this file: every function runs inside the caller's open write transaction and
never commits. The leaf rules (ranges, clock clamping, lease liveness with exclusive
expiry) are :mod:`runstore.rules`, shared with the model. The check *sequence* is written
twice on purpose: here over SQL, and in :mod:`runstore.model.guard` over the model's state,
in the same order with the same codes (SPEC.md section 6); the lockstep tests hold the two
together, so a reading error in either shows up as a divergence.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

import attrs
from runstore import rules
from runstore import sql
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.errors import AttemptTerminalError
from runstore.errors import ClaimExpiredError
from runstore.errors import DatabaseError
from runstore.errors import LeaseMismatchError
from runstore.errors import LeaseReleasedError
from runstore.errors import OwnerMismatchError
from runstore.errors import RunStoreError
from runstore.errors import StaleRevisionError
from runstore.errors import UnknownSlotError
from runstore.receipts import OwnedAttempt


@attrs.frozen(kw_only=True)
class AttemptRecord:
    """The projection columns of one ``attempts`` row."""

    id: str
    slot_id: str
    retry_index: int
    state: AttemptState
    revision: int
    started_at_ns: int
    updated_at_ns: int


@attrs.frozen(kw_only=True)
class LeaseRecord:
    """The authority columns of one ``leases`` row."""

    id: str
    owner_token: str
    expires_at_ns: int
    released_at_ns: int | None


@attrs.frozen(kw_only=True)
class Guarded:
    """What a passed guard check established, for the operation to use."""

    attempt: AttemptRecord
    reservation: LeaseRecord
    claim_lease: LeaseRecord | None
    now_ns: int


def load_attempt(connection: sqlite3.Connection, attempt_id: str) -> AttemptRecord | None:
    rows = sql.execute(
        connection,
        "SELECT id, slot_id, retry_index, state, revision, started_at_ns, updated_at_ns "
        "FROM attempts WHERE id = ?",
        (attempt_id,),
    )
    return _attempt(rows[0]) if rows else None


def _attempt(row: tuple[Any, ...]) -> AttemptRecord:
    """An attempt record from ``(id, slot_id, retry_index, state, revision, started_at_ns,
    updated_at_ns)``."""
    (id_, slot_id, retry_index, state, revision, started, updated) = row
    return AttemptRecord(
        id=id_,
        slot_id=slot_id,
        retry_index=retry_index,
        state=AttemptState(state),
        revision=revision,
        started_at_ns=started,
        updated_at_ns=updated,
    )


def _lease(row: tuple[object, ...]) -> LeaseRecord:
    lease_id, owner, expires, released = row
    assert isinstance(lease_id, str) and isinstance(owner, str) and isinstance(expires, int)
    assert released is None or isinstance(released, int)
    return LeaseRecord(
        id=lease_id, owner_token=owner, expires_at_ns=expires, released_at_ns=released
    )


def reservation_lease(connection: sqlite3.Connection, attempt_id: str) -> LeaseRecord:
    rows = sql.execute(
        connection,
        "SELECT id, owner_token, expires_at_ns, released_at_ns FROM leases "
        "WHERE attempt_id = ? AND purpose = 'reservation'",
        (attempt_id,),
    )
    if len(rows) != 1:
        raise reservations_refusal(attempt_id, len(rows))
    return _lease(rows[0])


def reservations_refusal(attempt_id: str, count: int) -> DatabaseError:
    """An attempt has exactly one reservation lease unless the database was written behind
    the writer's back: refused as the damage it is (``database_error``), before any write."""
    return DatabaseError(
        f"attempt {attempt_id} has {count} reservation leases, not 1: the database was "
        "changed behind the writer's back (runstore validate lists what is wrong)"
    )


def claim_lease(connection: sqlite3.Connection, attempt_id: str) -> LeaseRecord | None:
    """The lease of the finalization claim this attempt holds, if it holds one."""
    rows = sql.execute(
        connection,
        "SELECT l.id, l.owner_token, l.expires_at_ns, l.released_at_ns "
        "FROM finalization_claims AS c JOIN leases AS l ON l.id = c.lease_id "
        "WHERE c.attempt_id = ?",
        (attempt_id,),
    )
    return _lease(rows[0]) if rows else None


_COORDINATION_SQL = (
    "SELECT a.id, a.slot_id, a.retry_index, a.state, a.revision, a.started_at_ns, "
    "a.updated_at_ns, r.id, r.owner_token, r.expires_at_ns, r.released_at_ns, "
    "l.id, l.owner_token, l.expires_at_ns, l.released_at_ns "
    "FROM attempts AS a "
    "LEFT JOIN leases AS r ON r.attempt_id = a.id AND r.purpose = 'reservation' "
    "LEFT JOIN finalization_claims AS c ON c.slot_id = a.slot_id AND c.attempt_id = a.id "
    "LEFT JOIN leases AS l ON l.id = c.lease_id "
    "WHERE a.id = ?"
)


@attrs.frozen(kw_only=True)
class Coordination:
    """An attempt's row with its reservation leases (exactly one in a sound store) and the
    lease of the claim it holds, read together."""

    attempt: AttemptRecord
    reservations: tuple[LeaseRecord, ...]
    claim_lease: LeaseRecord | None


def load_coordination(connection: sqlite3.Connection, attempt_id: str) -> Coordination | None:
    """The attempt (None when unregistered), its reservation leases and its claim's lease,
    in one statement: what :func:`load_attempt`, :func:`reservation_lease` and
    :func:`claim_lease` read one by one. The claim is found through its primary key (the
    attempt's slot), and only with its lease row, as :func:`claim_lease`'s inner join; a
    slot has at most one claim, so the result has one row per reservation lease (one row
    with NULL lease columns when there is none)."""
    rows = sql.execute(connection, _COORDINATION_SQL, (attempt_id,))
    if not rows:
        return None
    attempt = _attempt(rows[0][:7])
    reservations = tuple(_lease(row[7:11]) for row in rows if row[7] is not None)
    claim = None if rows[0][11] is None else _lease(rows[0][11:15])
    return Coordination(attempt=attempt, reservations=reservations, claim_lease=claim)


def check_guard(
    connection: sqlite3.Connection,
    guard: OwnedAttempt,
    now_ns: int,
    *,
    ns: Iterable[tuple[str, int]] = (),
    indices: Iterable[tuple[str, int]] = (),
    shape: RunStoreError | None = None,
    not_before_ns: int = 0,
) -> Guarded:
    """Run the guarded check sequence for ``guard`` at ``now_ns`` (clamped up to
    ``not_before_ns`` and to the attempt's preceding transition) and raise the first
    failure: out_of_range, the operation's shape refusal, unknown_slot, attempt_terminal,
    owner_mismatch, lease_mismatch, lease_released / lease_expired, the claim's
    owner_mismatch / lease_released / claim_expired, stale_revision, and lease_mismatch
    for the guard's claim lease. Everything it decides on is read by one statement
    (:func:`load_coordination`)."""
    refusal = rules.range_refusal(ns=[("now_ns", now_ns), *ns], indices=indices) or shape
    if refusal is not None:
        raise refusal
    found = load_coordination(connection, guard.attempt_id)
    if found is None:
        raise UnknownSlotError(f"attempt {guard.attempt_id} is not registered")
    attempt = found.attempt
    if attempt.state in TERMINAL_STATES:
        raise AttemptTerminalError(f"attempt is already {attempt.state.value}")
    now = rules.effective_now(max(now_ns, not_before_ns), attempt.updated_at_ns)
    if len(found.reservations) != 1:
        raise reservations_refusal(attempt.id, len(found.reservations))
    reservation = found.reservations[0]
    if guard.owner_token != reservation.owner_token:
        raise OwnerMismatchError("the owner token is not the reservation's owner")
    if guard.lease_id != reservation.id:
        raise LeaseMismatchError("the lease is not the attempt's reservation lease")
    refusal = rules.lease_refusal(
        "the reservation lease",
        reservation.expires_at_ns,
        reservation.released_at_ns is not None,
        now,
    )
    if refusal is not None:
        raise refusal
    claim = found.claim_lease
    if claim is not None:
        if claim.owner_token != guard.owner_token:
            raise OwnerMismatchError("the claim's lease belongs to another owner")
        if claim.released_at_ns is not None:
            raise LeaseReleasedError("the claim's lease was released")
        if not rules.lease_live(claim.expires_at_ns, False, now):
            raise ClaimExpiredError(f"the claim expired at {claim.expires_at_ns}")
    if (guard.revision, guard.state) != (attempt.revision, attempt.state):
        raise StaleRevisionError(
            f"guard is at revision {guard.revision} ({guard.state.value}); attempt is at "
            f"{attempt.revision} ({attempt.state.value})"
        )
    if guard.claim_lease_id != (None if claim is None else claim.id):
        raise LeaseMismatchError("the guard's claim lease is not the attempt's claim")
    return Guarded(attempt=attempt, reservation=reservation, claim_lease=claim, now_ns=now)
