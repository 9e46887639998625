"""The streamed readers against the ones that hold every row (SPEC.md section 15.6,
"Streaming"): ``status_summary``'s counts and per-slot lines equal what
:func:`runstore.inspection.reader.status` derives from one summary per slot, and
``iter_groups`` yields exactly :func:`measurement_groups`' pairs in their documented
order, a limit taking the first ones.

The store is ``tools/scale_store.py``'s, with two campaigns whose names make the pair
order differ from the order of the candidate ids (``scale`` sorts before ``scale-extra``,
but ``scale-extra/c000`` before ``scale/c000``), repetitions, failures and slots never run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import scale_store
from runstore.inspection import status_summary
from runstore.inspection.measurements import iter_groups
from runstore.inspection.measurements import measurement_groups
from runstore.inspection.reader import status
from runstore.inspection.results import iter_pair_results
from runstore.inspection.results import pair_results
from runstore.inspection.snapshot import Snapshot
from scale_store import Shape


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("streamed") / "store"
    scale_store.build(str(root), Shape(candidates=5, problems=12, repetitions=3))
    return root


@pytest.fixture
def snapshot(root: Path) -> Iterator[Snapshot]:
    with Snapshot.take(root) as taken:
        yield taken


@pytest.mark.parametrize("campaign", [None, "scale", "scale-extra"])
def test_counts_equal_the_per_slot_report(snapshot: Snapshot, campaign: str | None) -> None:
    report = status(snapshot, campaign=campaign)
    counts = status_summary.status_counts(snapshot.connection, campaign=campaign)
    assert counts.by_candidate == report.by_candidate
    assert counts.by_problem == report.by_problem
    assert counts.totals == report.totals
    assert counts.attempts_by_state == report.attempts_by_state
    assert counts.excluded == report.excluded
    unsatisfied = [s for s in report.slots if s.state.value not in ("accepted", "pending")]
    assert sum(count for *_, count in counts.failures) == len(unsatisfied)
    assert unsatisfied or campaign == "scale-extra"  # its 20 slots all run to acceptance
    assert {(state, code) for state, code, _ in counts.failures} == {
        (s.state.value, s.latest_failure_code) for s in unsatisfied
    }
    measured = {s.run_id for s in report.slots if s.role == "measurement"}
    incomplete = {s.run_id for s in report.slots if s.state.value != "accepted"}
    assert (counts.pairs, counts.incomplete_pairs) == (len(measured), len(incomplete))


def test_slot_lines_are_the_reports_slots_in_its_order(snapshot: Snapshot) -> None:
    report = status(snapshot)
    lines = list(status_summary.slot_lines(snapshot.connection, metrics=True))
    assert [line.to_json() for line in lines] == [
        {**slot.to_json(), "latest_censor_reason": None} for slot in report.slots
    ]
    bare = list(status_summary.slot_lines(snapshot.connection))
    assert [line.slot_id for line in bare] == [slot.slot_id for slot in report.slots]
    assert all(line.metrics == () for line in bare)


def test_pairs_stream_in_the_documented_order(snapshot: Snapshot) -> None:
    connection = snapshot.connection
    held = measurement_groups(connection)
    streamed = list(iter_groups(connection))
    assert streamed == list(held)
    keys = [(g.campaign, g.candidate, g.problem, g.run_id) for g in streamed]
    assert keys == sorted(keys) and {g.campaign for g in streamed} == {"scale", "scale-extra"}
    assert streamed[0].candidate_id.startswith("scale/")  # though "scale-extra/" sorts first
    assert list(iter_groups(connection, limit=7)) == streamed[:7]
    with_values = [g for g in streamed if g.values]
    accepted = list(iter_groups(connection, limit=7, accepted=True))
    assert accepted == with_values[:7]
    assert list(iter_pair_results(connection, campaign="scale-extra")) == list(
        pair_results(connection, campaign="scale-extra")
    )
