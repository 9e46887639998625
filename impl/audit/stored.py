"""What the audit reads from a snapshot: every committed row, as values the model accepts.

Rules of this file: reads only, through the connection it is given (an inspection
snapshot's private copy); no model logic. Records are rebuilt from their ``record_json``
with the value layer's ``from_json`` (which recomputes and checks every id); a row that
cannot be rebuilt is an :class:`Unreadable` fact for the audit to report, never skipped.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from typing import Any

import attrs
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.enums import LeasePurpose
from runstore.errors import RunStoreError
from runstore.model.state import LeaseRow
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun


class Unreadable(Exception):
    """A stored row the value layer refuses to rebuild."""

    def __init__(self, subject: str, message: str) -> None:
        super().__init__(f"{subject}: {message}")
        self.subject = subject
        self.message = message


@attrs.frozen(kw_only=True)
class StoredEvent:
    """One ``events`` row; in a partition ``sequence`` is renumbered from 1 and ``origin``
    keeps the stored sequence (the one every report names)."""

    sequence: int
    kind: str
    attempt_id: str | None
    at_ns: int
    payload: dict[str, JSON]
    origin: int | None = None

    @property
    def reported(self) -> int:
        return self.sequence if self.origin is None else self.origin


@attrs.frozen(kw_only=True)
class StoredObservation:
    observation: Observation
    attempt_slot_id: str
    artifact_id: str


@attrs.frozen(kw_only=True)
class Stored:
    """The rows the replay draws its arguments from."""

    decisions: dict[str, ApplicabilityDecision]
    runs: dict[str, ResolvedRun]
    attempt_slots: dict[str, AttemptSlot]
    members: dict[str, list[ObservationSlot]]  # attempt slot id -> its observation slots
    artifacts: dict[str, ArtifactRegistration]
    leases: dict[str, list[LeaseRow]]  # attempt id -> its leases by fencing token
    attempt_final: dict[str, str | None]  # attempt id -> final artifact id
    references: dict[str, list[tuple[str, str]]]  # attempt id -> (role, artifact id)
    rooted: dict[str, list[str]]  # lease id -> artifacts rooted under it
    observations: dict[str, StoredObservation]
    events: list[StoredEvent]
    needed: frozenset[str] | None = None
    """In a partition, the artifacts it registers (None: every stored artifact)."""

    def lease(self, attempt_id: str, purpose: LeasePurpose) -> LeaseRow | None:
        """The attempt's one lease of ``purpose`` (reservation or finalization), if any."""
        return next((row for row in self.leases[attempt_id] if row.purpose is purpose), None)


def _rows(connection: sqlite3.Connection, query: str) -> list[tuple[Any, ...]]:
    return connection.execute(query).fetchall()


def _record(kind: Any, subject: str, text: str) -> Any:
    try:
        return kind.from_json(json.loads(text))
    except (ValueError, RunStoreError) as error:
        raise Unreadable(subject, str(error)) from None


def _registrations(connection: sqlite3.Connection) -> dict[str, Any]:
    decisions = {
        row[0]: _record(ApplicabilityDecision, row[0], row[1])
        for row in _rows(connection, "SELECT id, record_json FROM applicability_decisions")
    }
    runs = {
        row[0]: _record(ResolvedRun, row[0], row[1])
        for row in _rows(connection, "SELECT id, record_json FROM resolved_runs")
    }
    slots = {
        row[0]: _record(AttemptSlot, row[0], row[1])
        for row in _rows(connection, "SELECT id, record_json FROM attempt_slots")
    }
    members: dict[str, list[ObservationSlot]] = defaultdict(list)
    query = (
        "SELECT o.id, o.record_json, m.attempt_slot_id FROM observation_slots o "
        "JOIN attempt_observation_slots m ON m.observation_slot_id = o.id ORDER BY o.id"
    )
    for slot_id, text, owner in _rows(connection, query):
        members[owner].append(_record(ObservationSlot, slot_id, text))
    return {"decisions": decisions, "runs": runs, "attempt_slots": slots, "members": members}


def _artifacts(connection: sqlite3.Connection) -> dict[str, ArtifactRegistration]:
    found = {}
    query = "SELECT id, kind, path, content_sha256, manifest_sha256, verified_at_ns FROM artifacts"
    for artifact_id, kind, path, content, manifest, verified in _rows(connection, query):
        try:
            registration = ArtifactRegistration(
                kind=ArtifactKind(kind),
                path=path,
                content_sha256=content,
                manifest_sha256=manifest,
                verified_at_ns=verified,
            )
        except (ValueError, RunStoreError) as error:
            raise Unreadable(artifact_id, str(error)) from None
        if registration.id != artifact_id:
            raise Unreadable(artifact_id, f"its columns give the id {registration.id}")
        found[artifact_id] = registration
    return found


def _leases(connection: sqlite3.Connection) -> dict[str, list[LeaseRow]]:
    leases: dict[str, list[LeaseRow]] = defaultdict(list)
    query = (
        "SELECT id, fencing_token, owner_token, attempt_id, purpose, acquired_at_ns, "
        "expires_at_ns, released_at_ns, staging_path FROM leases ORDER BY fencing_token"
    )
    for row in _rows(connection, query):
        try:
            purpose = LeasePurpose(row[4])
        except ValueError:
            raise Unreadable(row[0], f"lease purpose {row[4]!r:.40} is unknown") from None
        leases[row[3]].append(
            LeaseRow(
                id=row[0],
                fencing_token=row[1],
                owner_token=row[2],
                attempt_id=row[3],
                purpose=purpose,
                acquired_at_ns=row[5],
                expires_at_ns=row[6],
                released_at_ns=row[7],
                staging_path=row[8],
            )
        )
    return leases


def _observations(connection: sqlite3.Connection) -> dict[str, StoredObservation]:
    query = "SELECT id, record_json, attempt_slot_id, artifact_id FROM observations"
    return {
        row[0]: StoredObservation(
            observation=_record(Observation, row[0], row[1]),
            attempt_slot_id=row[2],
            artifact_id=row[3],
        )
        for row in _rows(connection, query)
    }


def _events(connection: sqlite3.Connection) -> list[StoredEvent]:
    events = []
    query = "SELECT sequence, kind, attempt_id, at_ns, payload_json FROM events ORDER BY sequence"
    for sequence, kind, attempt_id, at_ns, text in _rows(connection, query):
        try:
            payload = json.loads(text)
        except ValueError as error:
            raise Unreadable(f"event {sequence}", f"payload is not JSON: {error}") from None
        if type(payload) is not dict:
            raise Unreadable(f"event {sequence}", "payload is not a JSON object")
        events.append(
            StoredEvent(
                sequence=sequence, kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=payload
            )
        )
    return events


def read(connection: sqlite3.Connection) -> Stored:
    """Every committed row the replay needs, read through ``connection``; raises
    :class:`Unreadable` for the first row the value layer refuses."""
    references: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for attempt_id, role, artifact_id in _rows(
        connection, "SELECT attempt_id, role, artifact_id FROM attempt_artifacts"
    ):
        references[attempt_id].append((role, artifact_id))
    rooted: dict[str, list[str]] = defaultdict(list)
    for lease_id, artifact_id in _rows(
        connection, "SELECT lease_id, artifact_id FROM leased_artifacts ORDER BY artifact_id"
    ):
        rooted[lease_id].append(artifact_id)
    return Stored(
        **_registrations(connection),
        artifacts=_artifacts(connection),
        leases=_leases(connection),
        attempt_final=dict(_rows(connection, "SELECT id, final_artifact_id FROM attempts")),
        references=references,
        rooted=rooted,
        observations=_observations(connection),
        events=_events(connection),
    )
