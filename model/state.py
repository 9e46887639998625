"""The model's state: an immutable value holding what the store's tables hold.

Rules of this file: values only. Rows are frozen attrs classes; tables are read-only
mappings (keyed like the table's primary key) that are never mutated after construction:
an operation builds a new mapping with :func:`put` / :func:`drop` and a new
:class:`ModelState` with ``attrs.evolve``. No I/O, no clock, no SQLite. A refusal is a
:class:`Refusal` value, never an exception, and comes with the unchanged state object.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

import attrs
from runstore.attempt_record import attempt_document
from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.enums import LeasePurpose
from runstore.errors import RunStoreError
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.requests import TerminalOutcome

K = TypeVar("K")
V = TypeVar("V")


def frozen_map(items: Mapping[K, V] | None = None) -> Mapping[K, V]:
    """A read-only copy of ``items``."""
    return MappingProxyType(dict(items or {}))


def put(table: Mapping[K, V], key: K, value: V) -> Mapping[K, V]:
    """A copy of ``table`` with ``key`` set to ``value``."""
    return MappingProxyType({**table, key: value})


def drop(table: Mapping[K, V], key: K) -> Mapping[K, V]:
    """A copy of ``table`` without ``key`` (which must be present)."""
    return MappingProxyType({k: v for k, v in table.items() if k != key})


@attrs.frozen(kw_only=True)
class Refusal:
    """An operation was refused; ``code`` is the code of the runstore error the store
    raises for the same call. The state returned alongside is the unchanged input."""

    code: str
    message: str


def refuse(error: type[RunStoreError], message: str) -> Refusal:
    """The refusal the store expresses by raising ``error``."""
    return Refusal(code=error.code, message=message)


def refused(error: RunStoreError) -> Refusal:
    """The refusal for an error a shared rule (:mod:`runstore.rules`,
    :mod:`runstore.shapes`) returned: the same code and message the writer raises."""
    return Refusal(code=error.code, message=error.message)


@attrs.frozen(kw_only=True)
class AttemptRow:
    """One ``attempts`` row; ``record_json`` is :meth:`record` (the terminal ``outcome`` is
    kept for it)."""

    id: str
    slot_id: str
    retry_index: int
    state: AttemptState
    revision: int
    started_at_ns: int
    updated_at_ns: int
    finished_at_ns: int | None = None
    failure_code: str | None = None
    censor_reason: str | None = None
    final_artifact_id: str | None = None
    outcome: TerminalOutcome | None = None

    def record(self) -> dict[str, JSON]:
        """The complete attempt record the store keeps in ``record_json``."""
        return attempt_document(
            attempt_id=self.id,
            slot_id=self.slot_id,
            retry_index=self.retry_index,
            state=self.state,
            revision=self.revision,
            started_at_ns=self.started_at_ns,
            updated_at_ns=self.updated_at_ns,
            outcome=self.outcome,
            finished_at_ns=self.finished_at_ns,
            final_artifact_id=self.final_artifact_id,
        )


@attrs.frozen(kw_only=True)
class LeaseRow:
    """One ``leases`` row. ``released_at_ns`` is None while the lease is unreleased."""

    id: str
    fencing_token: int
    owner_token: str
    attempt_id: str
    purpose: LeasePurpose
    acquired_at_ns: int
    expires_at_ns: int
    released_at_ns: int | None = None
    staging_path: str | None = None


@attrs.frozen(kw_only=True)
class ClaimRow:
    """One ``finalization_claims`` row, keyed by the attempt slot it serializes."""

    slot_id: str
    attempt_id: str
    lease_id: str
    claimed_at_ns: int


@attrs.frozen(kw_only=True)
class ObservationRow:
    """One ``observations`` row: the record plus the columns the writer adds."""

    observation: Observation
    attempt_slot_id: str
    artifact_id: str
    registered_at_ns: int


@attrs.frozen(kw_only=True)
class SelectionRow:
    """One ``selected_observations`` row, keyed by observation slot."""

    slot_id: str
    observation_id: str
    selected_at_ns: int


@attrs.frozen(kw_only=True)
class TransitionRow:
    """One ``attempt_transitions`` row."""

    attempt_id: str
    revision: int
    from_state: str | None
    to_state: str
    at_ns: int
    event_sequence: int


@attrs.frozen(kw_only=True)
class EventRow:
    """One ``events`` row; ``payload`` is the document stored (canonically) in payload_json."""

    sequence: int
    kind: str
    attempt_id: str | None
    at_ns: int
    payload: Mapping[str, JSON]


@attrs.frozen(kw_only=True)
class ModelState:
    """Everything the model knows. Field names follow the schema's table names.

    ``observation_slots`` also carries membership (each observation slot names its
    attempt slot), so ``attempt_observation_slots`` is not a separate field.
    """

    decisions: Mapping[str, ApplicabilityDecision] = attrs.field(factory=frozen_map)
    runs: Mapping[str, ResolvedRun] = attrs.field(factory=frozen_map)
    attempt_slots: Mapping[str, AttemptSlot] = attrs.field(factory=frozen_map)
    observation_slots: Mapping[str, ObservationSlot] = attrs.field(factory=frozen_map)
    attempts: Mapping[str, AttemptRow] = attrs.field(factory=frozen_map)
    leases: Mapping[str, LeaseRow] = attrs.field(factory=frozen_map)
    claims: Mapping[str, ClaimRow] = attrs.field(factory=frozen_map)
    observations: Mapping[str, ObservationRow] = attrs.field(factory=frozen_map)
    selections: Mapping[str, SelectionRow] = attrs.field(factory=frozen_map)
    artifacts: Mapping[str, ArtifactRegistration] = attrs.field(factory=frozen_map)
    # (attempt_id, role, artifact_id)
    attempt_artifacts: frozenset[tuple[str, str, str]] = frozenset()
    # (observation_id, role, artifact_id)
    observation_artifacts: frozenset[tuple[str, str, str]] = frozenset()
    # (lease_id, artifact_id)
    leased_artifacts: frozenset[tuple[str, str]] = frozenset()
    transitions: tuple[TransitionRow, ...] = ()
    events: tuple[EventRow, ...] = ()

    # --- derived views (pure reads) ----------------------------------------------------

    def slot_attempts(self, slot_id: str) -> list[AttemptRow]:
        """The attempts of an attempt slot, by retry index."""
        rows = [row for row in self.attempts.values() if row.slot_id == slot_id]
        return sorted(rows, key=lambda row: row.retry_index)

    def slot_satisfied(self, slot_id: str) -> bool:
        """Whether the attempt slot has an accepted attempt."""
        return any(row.state is AttemptState.ACCEPTED for row in self.slot_attempts(slot_id))

    def member_slots(self, attempt_slot_id: str) -> list[ObservationSlot]:
        """The observation slots owned by an attempt slot, by id."""
        slots = [s for s in self.observation_slots.values() if s.attempt_slot_id == attempt_slot_id]
        return sorted(slots, key=lambda s: s.id)

    def attempt_leases(self, attempt_id: str) -> list[LeaseRow]:
        """The leases of an attempt, by fencing token."""
        rows = [row for row in self.leases.values() if row.attempt_id == attempt_id]
        return sorted(rows, key=lambda row: row.fencing_token)

    def reservation_lease(self, attempt_id: str) -> LeaseRow:
        """The attempt's reservation lease (every attempt has exactly one)."""
        for row in self.attempt_leases(attempt_id):
            if row.purpose is LeasePurpose.RESERVATION:
                return row
        raise AssertionError(f"attempt {attempt_id} has no reservation lease")

    def owned_claim(self, attempt_id: str) -> ClaimRow | None:
        """The finalization claim this attempt holds, if any."""
        for claim in self.claims.values():
            if claim.attempt_id == attempt_id:
                return claim
        return None

    def next_fencing_token(self) -> int:
        """The fencing token the next lease receives: one more than the largest so far."""
        return max((row.fencing_token for row in self.leases.values()), default=0) + 1

    def next_event_sequence(self) -> int:
        """The sequence number the next event receives (1 for the first)."""
        return len(self.events) + 1
