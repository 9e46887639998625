"""One attempt slot's partition of the audit: its rows decoded and renumbered, and the
projection its replay must reach (SPEC.md section 16.2, "Partitions").

Rules of this file: pure over one slot's rows (:class:`~runstore.audit.slot_rows.SlotRecords`)
and the artifact and observation rows looked up for it; no queries, no model calls.
Attempt slots never interact in the model except through two global counters, the event
sequence and the fencing token; inside a partition both are renumbered from 1 in stored
order (events by sequence, leases by token), on the stored rows and the expected
projection alike (a transition naming an event outside its partition gets 0, which no
replayed transition has). :mod:`runstore.audit.counters` checks the global counters
themselves. A partition is made in two steps: :func:`draft` decodes the slot's own rows
and names the artifacts (and foreign observations) its calls need, :func:`complete` adds
them once the caller has looked them up for a batch of drafts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import attrs
from runstore.model.state import LeaseRow
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun

from .projection import TABLES
from .projection import Projection
from .slot_rows import SlotRecords
from .stored import Stored
from .stored import StoredEvent
from .stored import StoredObservation
from .stored import artifact
from .stored import event
from .stored import lease
from .stored import observation
from .stored import record

Row = tuple[Any, ...]


@attrs.frozen(kw_only=True)
class Partition:
    """One attempt slot: the rows its replay draws from, and the projection it must reach."""

    slot_id: str
    stored: Stored
    expected: Projection


@attrs.frozen(kw_only=True)
class Draft:
    """A partition whose artifacts are not looked up yet: ``needed`` names them, and
    ``foreign`` the observations its events name that it does not hold."""

    partition: Partition
    needed: frozenset[str]
    foreign: frozenset[str]


def draft(rows: SlotRecords) -> Draft:
    """Decode one slot's rows (:class:`~runstore.audit.stored.Unreadable` for the first
    row the value layer refuses: the decision, the run, the slot, its observation slots,
    leases, observations, events) and lay out its expected projection."""
    owned = rows.owned
    decisions: dict[str, ApplicabilityDecision] = {}
    if rows.decision is not None:
        decisions[rows.decision[0]] = record(ApplicabilityDecision, *rows.decision)
    runs: dict[str, ResolvedRun] = {}
    if rows.run is not None:
        runs[rows.run[0]] = record(ResolvedRun, *rows.run)
    slot = record(AttemptSlot, rows.slot_id, rows.slot_json)
    members = [
        record(ObservationSlot, observation_slot_id, text)
        for observation_slot_id, _, text in sorted(owned["memberships"])
        if text is not None
    ]
    attempts = sorted(owned["attempts"])
    attempt_ids = [row[0] for row in attempts]
    stored_leases = sorted(owned["leases"], key=lambda row: row[1])
    token = {row[1]: index + 1 for index, row in enumerate(stored_leases)}
    leases: dict[str, list[LeaseRow]] = {attempt_id: [] for attempt_id in attempt_ids}
    for row in stored_leases:
        leases[row[3]].append(attrs.evolve(lease(row), fencing_token=token[row[1]]))
    observations = {row[0]: observation(row[:-1], row[-1]) for row in sorted(owned["observations"])}
    stored_events = owned["events"]  # in sequence order
    sequence = {row[0]: index + 1 for index, row in enumerate(stored_events)}
    events = [
        attrs.evolve(event(row), sequence=sequence[row[0]], origin=row[0]) for row in stored_events
    ]
    references: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for attempt_id, role, artifact_id in sorted(owned["attempt_artifacts"]):
        references[attempt_id].append((role, artifact_id))
    rooted: dict[str, list[str]] = defaultdict(list)
    for lease_id, artifact_id in sorted(owned["leased_artifacts"], key=lambda row: row[1]):
        rooted[lease_id].append(artifact_id)
    stored = Stored(
        decisions=decisions,
        runs=runs,
        attempt_slots={rows.slot_id: slot},
        members={rows.slot_id: members},
        artifacts={},
        leases=leases,
        attempt_final={row[0]: row[10] for row in attempts},
        references=dict(references),
        rooted=dict(rooted),
        observations=observations,
        events=events,
    )
    expected = _expected(rows, attempts, sequence, token)
    needed = _needed(stored) | _event_artifacts(events)
    named = {
        str(item.payload.get("observation_id"))
        for item in events
        if item.kind == "observation_registered"
    }
    return Draft(
        partition=Partition(slot_id=rows.slot_id, stored=stored, expected=expected),
        needed=frozenset(needed),
        foreign=frozenset(named - observations.keys()),
    )


def _expected(
    rows: SlotRecords, attempts: list[Row], sequence: dict[int, int], token: dict[int, int]
) -> Projection:
    """The slot's projection rows, renumbered, each table sorted (``artifacts`` left for
    :func:`complete`)."""
    owned = rows.owned
    expected: dict[str, list[Row]] = {table: [] for table in TABLES}
    expected["decisions"] = [] if rows.decision is None else [(rows.decision[0],)]
    expected["runs"] = [] if rows.run is None else [(rows.run[0],)]
    expected["attempt_slots"] = [(rows.slot_id,)]
    expected["memberships"] = [row[:2] for row in owned["memberships"]]
    expected["attempts"] = attempts
    expected["transitions"] = [(*row[:5], sequence.get(row[5], 0)) for row in owned["transitions"]]
    expected["events"] = [(sequence[row[0]], *row[1:]) for row in owned["events"]]
    expected["leases"] = [(row[0], token[row[1]], *row[2:]) for row in owned["leases"]]
    expected["observations"] = [row[:-1] for row in owned["observations"]]
    for table in ("claims", "selections", "attempt_artifacts"):
        expected[table] = list(owned[table])
    for table in ("observation_artifacts", "leased_artifacts"):
        expected[table] = list(owned[table])
    for table in expected:
        expected[table].sort()
    return expected


def complete(
    draft: Draft, artifacts: Mapping[str, Row], foreign: Mapping[str, StoredObservation]
) -> Partition:
    """``draft`` with the artifacts it needs (``artifacts``: the projection rows found, by
    id; a missing one stays missing, for the replay to report) and the foreign
    observations found."""
    partition = draft.partition
    found = {key: artifacts[key] for key in draft.needed if key in artifacts}
    expected = dict(partition.expected)
    expected["artifacts"] = sorted(found.values())
    observations = {
        **{key: foreign[key] for key in draft.foreign if key in foreign},
        **partition.stored.observations,
    }
    stored = attrs.evolve(
        partition.stored,
        artifacts={key: artifact(row) for key, row in found.items()},
        observations=observations,
        needed=draft.needed,
    )
    return Partition(slot_id=partition.slot_id, stored=stored, expected=expected)


def _needed(stored: Stored) -> set[str]:
    """The artifacts a partition's calls name: final artifacts, references and roots."""
    needed: set[str] = set()
    for attempt_id, final in stored.attempt_final.items():
        if final is not None:
            needed.add(final)
        needed.update(artifact_id for _, artifact_id in stored.references.get(attempt_id, []))
    for artifact_ids in stored.rooted.values():
        needed.update(artifact_ids)
    return needed


def _event_artifacts(events: list[StoredEvent]) -> set[str]:
    """The observation artifacts and references the events name."""
    found: set[str] = set()
    for item in events:
        artifact_id = item.payload.get("artifact_id")
        if isinstance(artifact_id, str):
            found.add(artifact_id)
        references = item.payload.get("references")
        if isinstance(references, list):
            for reference in references:
                if isinstance(reference, dict) and isinstance(reference.get("artifact_id"), str):
                    found.add(str(reference["artifact_id"]))
    return found
