"""Leases: renewing an attempt's leases together, and the lease rows every other operation
inserts, extends and releases.

Rules of this file: runs inside the caller's write transaction and never commits. ``renew``
mirrors :func:`runstore.model.leases.renew` check for check (the sequence is written twice
on purpose; the lockstep tests hold the two together); liveness and the renewal rule are
:mod:`runstore.rules`. Leases are never deleted or reactivated: a released lease stays
released, and an extension never shortens an expiry.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore import rules
from runstore import sql
from runstore.enums import LeasePurpose
from runstore.errors import DatabaseError
from runstore.receipts import OwnedAttempt
from runstore.store.guard import check_guard


def renew(
    connection: sqlite3.Connection, guard: OwnedAttempt, expires_at_ns: int, now_ns: int
) -> OwnedAttempt:
    """Extend the reservation, the owned claim's lease and the live staging leases to
    ``expires_at_ns``, all or nothing.

    Check order: the guarded sequence (with expires_at_ns range-checked first), then
    expiry_not_after_now, then renewal_shortens (earlier than the reservation's or the
    claim lease's current expiry; the same expiry is allowed). Released or expired staging
    leases are left for recovery. Not a transition: no event, no revision change.
    """
    checked = check_guard(connection, guard, now_ns, ns=[("expires_at_ns", expires_at_ns)])
    renewed = [checked.reservation]
    if checked.claim_lease is not None:
        renewed.append(checked.claim_lease)
    current = max(lease.expires_at_ns for lease in renewed)
    refusal = rules.renewal_refusal(expires_at_ns, current, checked.now_ns)
    if refusal is not None:
        raise refusal
    staging = sql.execute(
        connection,
        "SELECT id FROM leases WHERE attempt_id = ? AND purpose = 'staging' "
        "AND released_at_ns IS NULL AND expires_at_ns > ? ORDER BY fencing_token",
        (checked.attempt.id, checked.now_ns),
    )
    lease_ids = [lease.id for lease in renewed] + [row[0] for row in staging]
    extend_leases(connection, lease_ids, expires_at_ns)
    return guard


def insert_lease(
    connection: sqlite3.Connection,
    *,
    lease_id: str,
    owner_token: str,
    attempt_id: str,
    purpose: LeasePurpose,
    acquired_at_ns: int,
    expires_at_ns: int,
    staging_path: str | None = None,
) -> None:
    """Insert a lease with the next fencing token (one more than the largest so far)."""
    sql.execute(
        connection,
        "INSERT INTO leases (id, fencing_token, owner_token, attempt_id, purpose, "
        "acquired_at_ns, expires_at_ns, staging_path) VALUES (?, "
        "(SELECT coalesce(max(fencing_token), 0) + 1 FROM leases), ?, ?, ?, ?, ?, ?)",
        (
            lease_id,
            owner_token,
            attempt_id,
            purpose.value,
            acquired_at_ns,
            expires_at_ns,
            staging_path,
        ),
    )


def lease_exists(connection: sqlite3.Connection, lease_id: str) -> bool:
    """Whether a lease with this id exists (released or not)."""
    return bool(sql.execute(connection, "SELECT 1 FROM leases WHERE id = ?", (lease_id,)))


def extend_leases(
    connection: sqlite3.Connection, lease_ids: Sequence[str], expires_at_ns: int
) -> None:
    """Move each unreleased lease's expiry to ``expires_at_ns`` (never earlier); a lease
    that cannot be extended is a ``database_error`` (the caller checked it first)."""
    for lease_id in lease_ids:
        updated = sql.execute(
            connection,
            "UPDATE leases SET expires_at_ns = ? WHERE id = ? AND released_at_ns IS NULL "
            "AND expires_at_ns <= ? RETURNING id",
            (expires_at_ns, lease_id, expires_at_ns),
        )
        if len(updated) != 1:
            raise DatabaseError(f"lease {lease_id} could not be extended")


def release_attempt_leases(connection: sqlite3.Connection, attempt_id: str, now_ns: int) -> None:
    """Release every unreleased lease of the attempt at ``now_ns``, or at its acquisition
    when that is later (a stage acquired at a clamped time after a backward clock's
    commit time: a release never precedes its lease)."""
    sql.execute(
        connection,
        "UPDATE leases SET released_at_ns = max(?, acquired_at_ns) "
        "WHERE attempt_id = ? AND released_at_ns IS NULL",
        (now_ns, attempt_id),
    )
