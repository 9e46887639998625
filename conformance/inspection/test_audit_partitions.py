"""The audit reads a store one attempt slot at a time (SPEC.md section 16.2, "Partitions"):
every row of every table lands in exactly one partition (decisions and runs in each slot
that leads to them), or is set aside as a stray, compared here with the whole projection
read table by table through :mod:`runstore.audit.projection`; and rows whose owner is
missing, which only an edit outside the writer leaves, are each reported.

The stores come from :mod:`corrupt_world`, as in ``test_audit.py``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from runstore import RunStore
from runstore.audit import AuditReport
from runstore.audit import audit
from runstore.audit.projection import TABLES
from runstore.audit.projection import table_rows
from runstore.audit.slot_rows import EXTRA_COLUMNS
from runstore.audit.slot_rows import SlotRows
from runstore.inspection.snapshot import Snapshot
from runstore.records import ApplicabilityDecision

from conformance.closed_store import reading
from conformance.closed_store import rows
from conformance.inspection.corrupt_world import edited


def audited(root: Path) -> AuditReport:
    with Snapshot.take(root) as snapshot:
        return audit(snapshot)


def test_every_row_lands_in_exactly_one_partition(pristine: Path) -> None:
    owned: dict[str, Counter[tuple[Any, ...]]] = {table: Counter() for table in TABLES}
    with reading(pristine) as connection:
        reader = SlotRows(connection)
        slots = []
        for slot in reader.slots():
            slots.append(slot.slot_id)
            owned["attempt_slots"][(slot.slot_id,)] += 1
            if slot.run is not None:
                owned["runs"][(slot.run[0],)] += 1
            if slot.decision is not None:
                owned["decisions"][(slot.decision[0],)] += 1
            for table, found in slot.owned.items():
                extra = EXTRA_COLUMNS.get(table, 0)
                owned[table].update(row[: len(row) - extra] for row in found)
        whole = {table: table_rows(connection, table) for table in TABLES}
    assert slots == sorted(slots) and len(slots) > 5
    assert all(not found for found in reader.strays.values()), reader.strays
    assert reader.first_stray() is None
    for table in TABLES:
        if table in ("decisions", "runs", "artifacts"):
            continue
        assert sorted(owned[table].elements()) == whole[table], table
        assert set(owned[table].values()) <= {1}, table
    # A run (and its decision) is in each of its slots' partitions (a warm-up and its
    # measurement share one).
    per_run = rows(pristine, "SELECT run_id, count(*) FROM attempt_slots GROUP BY run_id")
    assert dict(owned["runs"]) == {(run_id,): count for run_id, count in per_run}
    assert max(count for _, count in per_run) > 1
    assert set(owned["decisions"]) == set(whole["decisions"])


@pytest.mark.parametrize(
    ("table", "statement"),
    [
        (
            "attempt_artifacts",
            "INSERT INTO attempt_artifacts (attempt_id, role, artifact_id) "
            "SELECT 'run-store-v1:attempt-missing', 'log', id FROM artifacts LIMIT 1",
        ),
        (
            "events",
            "INSERT INTO events (kind, attempt_id, at_ns, payload_json) "
            "VALUES ('attempt_transition', NULL, 1, '{}')",
        ),
        (
            "observation_artifacts",
            "INSERT INTO observation_artifacts (observation_id, role, artifact_id) "
            "SELECT 'run-store-v1:observation-missing', 'log', id FROM artifacts LIMIT 1",
        ),
        (
            "selections",
            "INSERT INTO selected_observations (slot_id, observation_id, valid, "
            "selected_at_ns) SELECT 'nowhere', observation_id, 1, 5 "
            "FROM selected_observations LIMIT 1",
        ),
    ],
)
def test_a_row_whose_owner_is_missing_is_reported(copy: Path, table: str, statement: str) -> None:
    with edited(copy) as connection:
        connection.execute(statement)
    divergence = audited(copy).divergence
    assert divergence is not None and divergence.code == "projection_differs", divergence
    assert divergence.message.startswith(f"table {table}: ")
    assert divergence.message.endswith("belongs to no registered attempt slot")


def test_a_transition_naming_another_slots_event_is_caught(copy: Path) -> None:
    ((attempt_id, revision),) = rows(
        copy,
        "SELECT attempt_id, max(revision) FROM attempt_transitions GROUP BY attempt_id "
        "ORDER BY attempt_id LIMIT 1",
    )
    ((elsewhere,),) = rows(
        copy,
        "SELECT min(sequence) FROM events WHERE attempt_id != ? "
        "AND kind = 'observation_registered'",
        (attempt_id,),
    )
    with edited(copy) as connection:
        connection.execute(
            "UPDATE attempt_transitions SET event_sequence = ? "
            "WHERE attempt_id = ? AND revision = ?",
            (elsewhere, attempt_id, revision),
        )
    divergence = audited(copy).divergence
    assert divergence is not None and divergence.code == "projection_differs", divergence
    assert "table transitions" in divergence.message


def test_an_exclusion_registered_alone_belongs_to_no_slot(copy: Path) -> None:
    """A decision with ``applicable`` false resolves no run, so no slot leads to it: the
    writer's ``register_exclusion`` keeps it alone, and the audit accepts it as the model
    registers one; once it claims to be applicable it is a decision nothing explains."""
    decision = ApplicabilityDecision(
        candidate_id="demo/a",
        problem_id="demo/elsewhere",
        applicable=False,
        evidence={"applies_to": ["p"], "problem_tags": [], "rule": "applies_to"},
    )
    with RunStore.open(str(copy)) as store:
        store.register_exclusion(decision)
    report = audited(copy)
    assert report.ok, report.divergence
    with edited(copy) as connection:
        connection.execute(
            "UPDATE applicability_decisions SET applicable = 1 WHERE id = ?", (decision.id,)
        )
    divergence = audited(copy).divergence
    assert divergence is not None and divergence.code == "registration_refused", divergence
    assert divergence.message.startswith("table decisions: ")
    with edited(copy) as connection:
        connection.execute(
            "UPDATE applicability_decisions SET applicable = 0, "
            "record_json = json_set(record_json, '$.problem_id', 'demo/other') WHERE id = ?",
            (decision.id,),
        )
    divergence = audited(copy).divergence
    assert divergence is not None and divergence.code == "unreadable", divergence
