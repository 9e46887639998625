"""The durable projection: everything the store has committed, as comparable values, read
from a database connection or file, or from a model state.

Rules of this file: reads only. The functions produce the same shape (table name -> sorted
row tuples), so the audit and the tests compare a store with the model with one ``==``.
Event payloads are compared as canonical bytes, which pins the writer's payload encoding
to the model's documents.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from runstore import canonical
from runstore.model.state import AttemptRow
from runstore.model.state import ModelState

Projection = dict[str, Any]

_QUERIES = {
    "decisions": "SELECT id FROM applicability_decisions",
    "runs": "SELECT id FROM resolved_runs",
    "attempt_slots": "SELECT id FROM attempt_slots",
    "memberships": "SELECT observation_slot_id, attempt_slot_id FROM attempt_observation_slots",
    "attempts": "SELECT id, slot_id, retry_index, state, revision, started_at_ns, updated_at_ns, "
    "finished_at_ns, failure_code, censor_reason, final_artifact_id, "
    "CAST(record_json AS BLOB) FROM attempts",
    "transitions": "SELECT attempt_id, revision, from_state, to_state, at_ns, event_sequence "
    "FROM attempt_transitions",
    "events": "SELECT sequence, kind, attempt_id, at_ns, CAST(payload_json AS BLOB) FROM events",
    "leases": "SELECT id, fencing_token, owner_token, attempt_id, purpose, acquired_at_ns, "
    "expires_at_ns, released_at_ns, staging_path FROM leases",
    "claims": "SELECT slot_id, attempt_id, lease_id, claimed_at_ns FROM finalization_claims",
    "observations": "SELECT id, slot_id, attempt_id, attempt_slot_id, valid, completion, "
    "artifact_id, registered_at_ns FROM observations",
    "selections": "SELECT slot_id, observation_id, selected_at_ns FROM selected_observations",
    "artifacts": "SELECT id, kind, path, content_sha256, manifest_sha256, verified_at_ns "
    "FROM artifacts",
    "attempt_artifacts": "SELECT attempt_id, role, artifact_id FROM attempt_artifacts",
    "observation_artifacts": "SELECT observation_id, role, artifact_id FROM observation_artifacts",
    "leased_artifacts": "SELECT lease_id, artifact_id FROM leased_artifacts",
}


TABLES = tuple(_QUERIES)
"""The projection's tables, in the order every projection lists them."""


def table_rows(connection: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    """One table of the projection, read through ``connection``."""
    return sorted(
        tuple(bytes(v) if isinstance(v, bytes) else v for v in row)
        for row in connection.execute(_QUERIES[table])
    )


def connection_projection(connection: sqlite3.Connection) -> Projection:
    """The committed projection seen by ``connection`` (the audit's snapshot copy)."""
    return {name: table_rows(connection, name) for name in _QUERIES}


def store_projection(database_path: str) -> Projection:
    """The committed projection of the database at ``database_path``, read through a new
    read-only connection (never the writer's)."""
    connection = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True)
    try:
        return connection_projection(connection)
    finally:
        connection.close()


def attempt_row(row: AttemptRow) -> tuple[Any, ...]:
    """A model attempt as the projection's ``attempts`` row."""
    return (
        row.id,
        row.slot_id,
        row.retry_index,
        row.state.value,
        row.revision,
        row.started_at_ns,
        row.updated_at_ns,
        row.finished_at_ns,
        row.failure_code,
        row.censor_reason,
        row.final_artifact_id,
        canonical.encode(row.record()),
    )


def model_projection(state: ModelState) -> Projection:
    """The same projection of a model state."""
    return {
        "decisions": sorted((key,) for key in state.decisions),
        "runs": sorted((key,) for key in state.runs),
        "attempt_slots": sorted((key,) for key in state.attempt_slots),
        "memberships": sorted(
            (slot.id, slot.attempt_slot_id) for slot in state.observation_slots.values()
        ),
        "attempts": sorted(attempt_row(row) for row in state.attempts.values()),
        "transitions": sorted(
            (t.attempt_id, t.revision, t.from_state, t.to_state, t.at_ns, t.event_sequence)
            for t in state.transitions
        ),
        "events": sorted(
            (e.sequence, e.kind, e.attempt_id, e.at_ns, canonical.encode(dict(e.payload)))
            for e in state.events
        ),
        "leases": sorted(
            (
                row.id,
                row.fencing_token,
                row.owner_token,
                row.attempt_id,
                row.purpose.value,
                row.acquired_at_ns,
                row.expires_at_ns,
                row.released_at_ns,
                row.staging_path,
            )
            for row in state.leases.values()
        ),
        "claims": sorted(
            (c.slot_id, c.attempt_id, c.lease_id, c.claimed_at_ns) for c in state.claims.values()
        ),
        "observations": sorted(
            (
                row.observation.id,
                row.observation.slot_id,
                row.observation.attempt_id,
                row.attempt_slot_id,
                int(row.observation.valid),
                row.observation.completion.value,
                row.artifact_id,
                row.registered_at_ns,
            )
            for row in state.observations.values()
        ),
        "selections": sorted(
            (s.slot_id, s.observation_id, s.selected_at_ns) for s in state.selections.values()
        ),
        "artifacts": sorted(
            (a.id, a.kind.value, a.path, a.content_sha256, a.manifest_sha256, a.verified_at_ns)
            for a in state.artifacts.values()
        ),
        "attempt_artifacts": sorted(state.attempt_artifacts),
        "observation_artifacts": sorted(state.observation_artifacts),
        "leased_artifacts": sorted(state.leased_artifacts),
    }
