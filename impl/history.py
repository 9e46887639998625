"""Attempt history: events, transitions, the attempt projection, leases and artifacts.

Rules of this file: helpers that run inside the caller's write transaction and never
commit. Every state change appends exactly one event and one transition and moves the
attempt projection by exactly one revision, checking the updated row count. Event payloads
are canonical JSON (SPEC.md section 7); they are built here and nowhere else in the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import attrs
from runstore import canonical, sql
from runstore.canonical import JSON
from runstore.enums import TERMINAL_STATES, AttemptState, LeasePurpose
from runstore.errors import DatabaseError, StaleRevisionError
from runstore.guards import Censored, Failed, TerminalOutcome
from runstore.ownership import AttemptRecord
from runstore.records import ArtifactRegistration

ATTEMPT_RESERVED = "attempt_reserved"
ATTEMPT_TRANSITION = "attempt_transition"
ATTEMPT_FINALIZING = "attempt_finalizing"
ATTEMPT_FINISHED = "attempt_finished"


@attrs.frozen(kw_only=True)
class CommittedEvent:
    """An event as delivered to subscribers, after its transaction committed."""

    sequence: int
    kind: str
    attempt_id: str | None
    at_ns: int
    payload: bytes
    """The canonical JSON bytes stored in ``events.payload_json``."""


# --- payloads (SPEC.md section 7) ----------------------------------------------------------


def reserved_payload(slot_id: str, retry_index: int) -> dict[str, JSON]:
    return {
        "from": None,
        "to": AttemptState.RESERVED.value,
        "revision": 0,
        "slot_id": slot_id,
        "retry_index": retry_index,
    }


def transition_payload(
    source: AttemptState, target: AttemptState, revision: int
) -> dict[str, JSON]:
    return {"from": source.value, "to": target.value, "revision": revision}


def finalizing_payload(source: AttemptState, revision: int, claim: str | None) -> dict[str, JSON]:
    payload = transition_payload(source, AttemptState.FINALIZING, revision)
    if claim is not None:
        payload["claim"] = claim
    return payload


def finished_payload(outcome: TerminalOutcome, revision: int) -> dict[str, JSON]:
    payload = transition_payload(AttemptState.FINALIZING, outcome.state, revision)
    if isinstance(outcome, Failed):
        payload["failure_code"] = outcome.code
        payload["details"] = outcome.details
    elif isinstance(outcome, Censored):
        payload["reason"] = outcome.reason
    return payload


# --- appending history ---------------------------------------------------------------------


def append_event(
    connection: sqlite3.Connection,
    kind: str,
    attempt_id: str,
    at_ns: int,
    payload: dict[str, JSON],
) -> CommittedEvent:
    """Insert one event; its sequence is allocated by SQLite."""
    document = canonical.encode(payload)
    rows = sql.execute(
        connection,
        "INSERT INTO events (kind, attempt_id, at_ns, payload_json) VALUES (?, ?, ?, ?) "
        "RETURNING sequence",
        (kind, attempt_id, at_ns, document.decode("utf-8")),
    )
    return CommittedEvent(
        sequence=rows[0][0], kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=document
    )


def append_transition(
    connection: sqlite3.Connection,
    attempt_id: str,
    revision: int,
    source: AttemptState | None,
    target: AttemptState,
    event: CommittedEvent,
) -> None:
    sql.execute(
        connection,
        "INSERT INTO attempt_transitions (attempt_id, revision, from_state, to_state, at_ns, "
        "event_sequence) VALUES (?, ?, ?, ?, ?, ?)",
        (
            attempt_id,
            revision,
            None if source is None else source.value,
            target.value,
            event.at_ns,
            event.sequence,
        ),
    )


def transition(
    connection: sqlite3.Connection,
    before: AttemptRecord,
    now_ns: int,
    target: AttemptState,
    kind: str,
    payload: dict[str, JSON],
    *,
    final_artifact_id: str | None = None,
    failure_code: str | None = None,
    censor_reason: str | None = None,
) -> tuple[AttemptRecord, CommittedEvent]:
    """Move ``before`` one edge to ``target`` at ``now_ns`` (already effective): one event,
    one transition, and the projection updated only if it is still at ``before``'s
    revision and state (a stale writer updates no row and fails)."""
    revision = before.revision + 1
    event = append_event(connection, kind, before.id, now_ns, payload)
    append_transition(connection, before.id, revision, before.state, target, event)
    terminal = target in TERMINAL_STATES
    updated = sql.execute(
        connection,
        "UPDATE attempts SET state = ?, revision = ?, updated_at_ns = ?, finished_at_ns = ?, "
        "failure_code = ?, censor_reason = ?, final_artifact_id = ?, final_artifact_kind = ? "
        "WHERE id = ? AND revision = ? AND state = ? RETURNING id",
        (
            target.value,
            revision,
            now_ns,
            now_ns if terminal else None,
            failure_code,
            censor_reason,
            final_artifact_id,
            "attempt" if final_artifact_id is not None else None,
            before.id,
            before.revision,
            before.state.value,
        ),
    )
    if len(updated) != 1:
        raise StaleRevisionError(f"attempt {before.id} moved past revision {before.revision}")
    after = attrs.evolve(before, state=target, revision=revision, updated_at_ns=now_ns)
    return after, event


# --- leases --------------------------------------------------------------------------------


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
    return bool(sql.execute(connection, "SELECT 1 FROM leases WHERE id = ?", (lease_id,)))


def extend_leases(
    connection: sqlite3.Connection, lease_ids: Sequence[str], expires_at_ns: int
) -> None:
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
    sql.execute(
        connection,
        "UPDATE leases SET released_at_ns = ? WHERE attempt_id = ? AND released_at_ns IS NULL",
        (now_ns, attempt_id),
    )


# --- artifacts -----------------------------------------------------------------------------


def _artifact_key(artifact: ArtifactRegistration) -> tuple[str, str, str, str]:
    return (artifact.kind.value, artifact.path, artifact.content_sha256, artifact.manifest_sha256)


def _registered_key(connection: sqlite3.Connection, artifact_id: str) -> tuple[object, ...] | None:
    rows = sql.execute(
        connection,
        "SELECT kind, path, content_sha256, manifest_sha256 FROM artifacts WHERE id = ?",
        (artifact_id,),
    )
    return rows[0] if rows else None


def artifact_conflicts(connection: sqlite3.Connection, artifact: ArtifactRegistration) -> bool:
    """Whether ``artifact``'s id is registered with another kind, path or digest."""
    registered = _registered_key(connection, artifact.id)
    return registered is not None and registered != _artifact_key(artifact)


def insert_artifact(connection: sqlite3.Connection, artifact: ArtifactRegistration) -> None:
    """Insert the artifact row unless one with its id exists. The caller has already
    refused a conflicting row (:func:`artifact_conflicts`) in this transaction, so an
    existing row is identical and is reused (its first verification time stays)."""
    sql.execute(
        connection,
        "INSERT INTO artifacts (id, kind, path, content_sha256, manifest_sha256, verified_at_ns) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (artifact.id, *_artifact_key(artifact), artifact.verified_at_ns),
    )


def artifact_exists(connection: sqlite3.Connection, artifact_id: str) -> bool:
    return _registered_key(connection, artifact_id) is not None
