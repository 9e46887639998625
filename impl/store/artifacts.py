"""Artifact rows: registering verified artifact metadata, and checking references to it.

Rules of this file: helpers that run inside the caller's write transaction and never
commit. The writer registers metadata only: its trusted caller has already verified,
synced and published every directory it names. A registration is reused when an identical
row (same kind, path and digests) exists; any other row with the same id is a conflict.
"""

from __future__ import annotations

import sqlite3

from runstore import sql
from runstore.records import ArtifactRegistration


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
    return registered is not None and registered != artifact.indexed_columns()


def insert_artifact(connection: sqlite3.Connection, artifact: ArtifactRegistration) -> None:
    """Insert the artifact row unless one with its id exists. The caller has already
    refused a conflicting row (:func:`artifact_conflicts`) in this transaction, so an
    existing row is identical and is reused (its first verification time stays)."""
    sql.execute(
        connection,
        "INSERT INTO artifacts (id, kind, path, content_sha256, manifest_sha256, verified_at_ns) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (artifact.id, *artifact.indexed_columns(), artifact.verified_at_ns),
    )


def artifact_exists(connection: sqlite3.Connection, artifact_id: str) -> bool:
    """Whether an artifact with this id is registered."""
    return _registered_key(connection, artifact_id) is not None
