"""The outcome document in the model: the snapshot of the records an attempt's outcome
binds, and the canonical ``outcome.json`` bytes, read from a :class:`ModelState`.

Rules of this file: pure functions of the state (no I/O, no SQLite, no clock). The
store's counterpart is :mod:`runstore.store.publication.outcome_document`; which records a snapshot
holds is decided twice on purpose (there over SQL, here over the model's tables) and only the
document's shape and order, :mod:`runstore.outcome_json`, is shared, so the conformance
tests' byte equality holds the two readings together. Records are their ``to_json()``
objects (what the store keeps in ``record_json``), artifacts their indexed fields only.
The caller has already checked the attempt and the references; a missing row is an
``AssertionError`` here.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence

from runstore import outcome_json
from runstore.canonical import JSON
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.model.state import AttemptRow
from runstore.model.state import ModelState
from runstore.model.state import ObservationRow
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Reference
from runstore.requests import TerminalOutcome


def _attempt(state: ModelState, attempt_id: str) -> tuple[AttemptRow, int]:
    """The attempt's row and the revision it had while finalizing (its current one while
    finalizing, the one before its terminal step after)."""
    row = state.attempts.get(attempt_id)
    assert row is not None, f"attempt {attempt_id} is unknown"
    if row.state is AttemptState.FINALIZING:
        return row, row.revision
    assert row.state in TERMINAL_STATES, f"attempt {attempt_id} has not been finalizing"
    return row, row.revision - 1


def _artifact(state: ModelState, artifact_id: str) -> dict[str, JSON]:
    artifact = state.artifacts.get(artifact_id)
    assert artifact is not None, f"artifact {artifact_id} is unknown"
    return outcome_json.artifact_entry(artifact.id, *artifact.indexed_columns())


def _entries(state: ModelState, rows: Iterable[ObservationRow]) -> list[dict[str, JSON]]:
    """Observation entries: each observation with its directory and its references."""
    entries = []
    for row in rows:
        observation_id = row.observation.id
        references = sorted(
            (role, artifact_id)
            for owner, role, artifact_id in state.observation_artifacts
            if owner == observation_id
        )
        entries.append(
            outcome_json.observation_entry(
                row.observation.to_json(),
                _artifact(state, row.artifact_id),
                [(role, _artifact(state, artifact_id)) for role, artifact_id in references],
            )
        )
    return entries


def snapshot(state: ModelState, attempt_id: str, outcome: TerminalOutcome) -> dict[str, JSON]:
    """The ``snapshot`` object of the attempt's outcome document for ``outcome``: the
    decision, run and attempt slot of the attempt, the observation slots the slot owns,
    the observations this attempt produced and, only for accepted and censored, the
    selected observation of each owned observation slot that has a selection."""
    attempt, _ = _attempt(state, attempt_id)
    slot = state.attempt_slots[attempt.slot_id]
    run = state.runs[slot.run_id]
    decision = state.decisions[run.decision_id]
    members = state.member_slots(slot.id)
    produced = sorted(
        (row for row in state.observations.values() if row.observation.attempt_id == attempt_id),
        key=lambda row: row.observation.id,
    )
    selected = None
    if isinstance(outcome, Accepted | Censored):
        chosen = [
            state.observations[state.selections[member.id].observation_id]
            for member in members
            if member.id in state.selections
        ]
        selected = _entries(state, chosen)
    return outcome_json.snapshot_document(
        decision=decision.to_json(),
        run=run.to_json(),
        attempt_slot=slot.to_json(),
        observation_slots=[member.to_json() for member in members],
        produced=_entries(state, produced),
        selected=selected,
    )


def outcome_document(
    state: ModelState,
    attempt_id: str,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    finished_at_ns: int,
) -> bytes:
    """The canonical bytes of the attempt's ``outcome.json`` for ``outcome``, its
    dependency ``references`` and the immutable finish time
    ``finished_at_ns``, with :func:`snapshot` as its ``snapshot``."""
    attempt, finalizing_revision = _attempt(state, attempt_id)
    return outcome_json.outcome_document(
        attempt_id=attempt_id,
        slot_id=attempt.slot_id,
        retry_index=attempt.retry_index,
        finalizing_revision=finalizing_revision,
        outcome=outcome,
        started_at_ns=attempt.started_at_ns,
        finished_at_ns=finished_at_ns,
        dependencies=[(r.role, _artifact(state, r.artifact_id)) for r in references],
        snapshot=snapshot(state, attempt_id, outcome),
    )
