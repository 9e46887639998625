"""What the audit reads from a snapshot, as values the model accepts: one attempt slot's
rows (:class:`~runstore.audit.slot_rows.SlotRecords`) decoded into a :class:`Stored`.

Rules of this file: decoding only, no queries and no model logic. Records are rebuilt from
their ``record_json`` with the value layer's ``from_json`` (which recomputes and checks
every id); a row that cannot be rebuilt is an :class:`Unreadable` fact for the audit to
report, never skipped.
"""

from __future__ import annotations

import json
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

Row = tuple[Any, ...]


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
    """The rows one partition's replay draws its arguments from."""

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
    """The artifacts the partition registers (None: every artifact of ``artifacts``)."""

    def lease(self, attempt_id: str, purpose: LeasePurpose) -> LeaseRow | None:
        """The attempt's one lease of ``purpose`` (reservation or finalization), if any."""
        return next((row for row in self.leases[attempt_id] if row.purpose is purpose), None)


def record(kind: Any, subject: str, text: object) -> Any:
    """``kind`` rebuilt from the ``record_json`` ``text``; :class:`Unreadable` otherwise."""
    try:
        if not isinstance(text, str | bytes):
            raise ValueError(f"record_json is {type(text).__name__}, not text")
        return kind.from_json(json.loads(text))
    except (ValueError, RunStoreError) as error:
        raise Unreadable(subject, str(error)) from None


def artifact(row: Row) -> ArtifactRegistration:
    """An ``artifacts`` projection row as a registration whose id is the row's."""
    artifact_id, kind, path, content, manifest, verified = row
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
    return registration


def lease(row: Row) -> LeaseRow:
    """A ``leases`` projection row as the model's lease."""
    try:
        purpose = LeasePurpose(row[4])
    except ValueError:
        raise Unreadable(row[0], f"lease purpose {row[4]!r:.40} is unknown") from None
    return LeaseRow(
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


def observation(row: Row, record_json: object) -> StoredObservation:
    """An ``observations`` projection row and its record."""
    return StoredObservation(
        observation=record(Observation, row[0], record_json),
        attempt_slot_id=row[3],
        artifact_id=row[6],
    )


def event(row: Row) -> StoredEvent:
    """An ``events`` projection row (its payload as bytes) as a stored event."""
    sequence, kind, attempt_id, at_ns, data = row
    try:
        payload = json.loads(data)
    except ValueError as error:
        raise Unreadable(f"event {sequence}", f"payload is not JSON: {error}") from None
    if type(payload) is not dict:
        raise Unreadable(f"event {sequence}", "payload is not a JSON object")
    return StoredEvent(
        sequence=sequence, kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=payload
    )
