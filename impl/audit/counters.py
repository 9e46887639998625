"""The audit's global checks: the two counters partitions renumber (SPEC.md section 16.2,
"Partitions"), and every artifact row readable.

Rules of this file: reads only, through the connection it is given, in a few set-based
queries streamed from a cursor (gaps are found by SQLite's window functions, the leases
events create by index lookups), so time grows linearly with the store and memory stays
bounded. Each check returns its first divergence as a value, or None.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from .replay import Divergence
from .stored import Unreadable
from .stored import artifact

_SEQUENCE_GAP: Final = (
    "SELECT rank FROM (SELECT sequence, row_number() OVER (ORDER BY sequence) AS rank "
    "FROM events) WHERE sequence != rank LIMIT 1"
)
_TOKEN_GAP: Final = (
    "SELECT rank FROM (SELECT fencing_token, row_number() OVER (ORDER BY fencing_token) "
    "AS rank FROM leases) WHERE fencing_token != rank LIMIT 1"
)
_FIRST_LEASE: Final = (
    "(SELECT l.{column} FROM leases AS l WHERE l.attempt_id = e.attempt_id "
    "AND l.purpose = e.purpose ORDER BY l.fencing_token LIMIT 1)"
)
_CREATED: Final = f"""
SELECT e.sequence, {_FIRST_LEASE.format(column="fencing_token")},
       {_FIRST_LEASE.format(column="id")}
FROM (
    SELECT sequence, attempt_id,
           CASE WHEN kind = 'attempt_reserved' THEN 'reservation'
                WHEN json_valid(payload_json)
                     AND json_extract(payload_json, '$.claim') = 'claimed'
                THEN 'finalization' END AS purpose
    FROM events WHERE attempt_id IS NOT NULL) AS e
WHERE e.purpose IS NOT NULL
ORDER BY e.sequence
"""
"""Each event that creates a lease (a reservation; a finalization that claimed), in event
order, with the token and id of its attempt's first lease of that purpose."""

_ARTIFACTS: Final = (
    "SELECT id, kind, path, content_sha256, manifest_sha256, verified_at_ns FROM artifacts"
)


def counter_divergence(connection: sqlite3.Connection) -> Divergence | None:
    """Event sequences and fencing tokens each exactly 1..n, and the leases events create
    (reservations, claimed finalizations) with increasing tokens in event order."""
    gap = connection.execute(_SEQUENCE_GAP).fetchone()
    if gap is not None:
        return _counter(gap[0], f"event sequences are not contiguous: {gap[0]} is missing")
    gap = connection.execute(_TOKEN_GAP).fetchone()
    if gap is not None:
        return _counter(None, f"fencing tokens are not contiguous: {gap[0]} is missing")
    last = 0
    for sequence, token, lease_id in connection.execute(_CREATED):
        if token is None:
            continue
        if token <= last:
            return _counter(sequence, f"lease {lease_id} has token {token}, not above {last}")
        last = token
    return None


def unreadable_artifact(connection: sqlite3.Connection) -> Divergence | None:
    """The first artifact row whose columns make no registration with its id."""
    for row in connection.execute(_ARTIFACTS):
        try:
            artifact(tuple(row))
        except Unreadable as error:
            return Divergence(code="unreadable", sequence=None, attempt_id=None, message=str(error))
    return None


def _counter(sequence: int | None, message: str) -> Divergence:
    return Divergence(
        code="event_differs" if sequence is not None else "projection_differs",
        sequence=sequence,
        attempt_id=None,
        message=message,
    )
