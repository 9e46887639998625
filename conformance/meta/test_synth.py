"""The synthetic large store (tools/synth.py) against the real runner: a small
synthesized store must hold exactly the rows and files the runner's own attempt path
(runstore.runner.attempt, through RunStore) writes for the same slots, on the same clock.

Lease ids, owner tokens and stage tokens are random in the runner and seeded in the
synthesizer, so they are matched up by fencing token (the order leases were taken) before
the two projections are compared; everything else (ids, records, payload bytes, times,
artifact digests, files on disk) must be equal as it is.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import synth
from runstore import RunStore
from runstore.audit.projection import Projection
from runstore.audit.projection import store_projection
from runstore.inspection import reader
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.validate import validate_store
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.runner import attempt
from runstore.runner.coordinator import register
from runstore.runner.executor import WorkStatus
from runstore.store.publication import objects
from runstore.testing.publishing import read_tree

from conformance.closed_store import rows
from conformance.runner.world import Clock
from conformance.runner.world import campaign
from conformance.runner.world import result

TOKEN = "[0-9a-f]{32}"


def run_real(root: Path, plans: list[synth.SlotPlan]) -> None:
    """The slots run by the runner's attempt path, one after another, on the test clock."""
    candidates = tuple(dict.fromkeys(plan.candidate for plan in plans))
    problems = tuple(dict.fromkeys(plan.problem for plan in plans))
    clock = Clock()
    with RunStore.open(str(root)) as store:
        slots, _, _ = register(store, campaign(candidates, problems, name=synth.CAMPAIGN))
        assert len(slots) == len(plans)
        for plan, slot in zip(plans, slots, strict=True):
            authorization: FirstAttempt | Next = FirstAttempt()
            if plan.failed_first:
                started = attempt.start(store, slot, authorization, synth.LEASE_NS, clock)
                assert isinstance(started, attempt.Started)
                attempt.finish(store, started, result(WorkStatus.EXITED, 1), synth.LEASE_NS, clock)
                authorization = Next(retry=True)
            started = attempt.start(store, slot, authorization, synth.LEASE_NS, clock)
            assert isinstance(started, attempt.Started)
            outputs = (("result.json", synth.worker_result(plan.index)[0]),)
            work = result(WorkStatus.EXITED, 0, outputs=outputs)
            finished = attempt.finish(store, started, work, synth.LEASE_NS, clock)
            assert finished.terminal.state.value == "accepted"


def token_map(real: Projection, synthetic: Projection) -> dict[str, str]:
    """Real lease id, owner token and staging path -> the synthesizer's, pairing leases
    by fencing token."""
    mapping: dict[str, str] = {}
    pairs = zip(
        sorted(real["leases"], key=lambda row: row[1]),
        sorted(synthetic["leases"], key=lambda row: row[1]),
        strict=True,
    )
    for ours, theirs in pairs:
        for index in (0, 2, 8):  # id, owner_token, staging_path
            if ours[index] is not None:
                assert mapping.setdefault(ours[index], theirs[index]) == theirs[index]
    return mapping


def renamed(projection: Projection, mapping: dict[str, str]) -> Projection:
    def value(item: Any) -> Any:
        return mapping.get(item, item) if isinstance(item, str) else item

    return {
        table: sorted(tuple(value(item) for item in row) for row in rows)
        for table, rows in projection.items()
    }


def sqlite_sequence(root: Path) -> list[tuple[Any, ...]]:
    return rows(root, "SELECT name, seq FROM sqlite_sequence")


@pytest.mark.parametrize("attempts", [3, 13])
def test_a_synthesized_store_is_what_the_runner_writes(tmp_path: Path, attempts: int) -> None:
    plans = synth.slot_plans(attempts)
    real_root, synthetic_root = tmp_path / "real", tmp_path / "synthetic"
    real_root.mkdir()
    run_real(real_root, plans)
    summary = synth.synthesize(str(synthetic_root), attempts, seed=7)
    assert (summary.attempts, summary.slots) == (attempts, len(plans))

    real = store_projection(str(real_root / "run.sqlite3"))
    synthetic = store_projection(str(synthetic_root / "run.sqlite3"))
    assert renamed(real, token_map(real, synthetic)) == synthetic
    assert sqlite_sequence(real_root) == sqlite_sequence(synthetic_root)
    for lease_id, _, owner, *_, path in synthetic["leases"]:
        assert re.fullmatch(f"(lease|staging)-{TOKEN}", lease_id)
        assert re.fullmatch(TOKEN, owner)
        assert path is None or re.fullmatch(f"artifacts/\\.staging-{TOKEN}", path)

    def store_files(root: Path) -> list[str]:
        return sorted(
            os.path.relpath(os.path.join(directory, name), root)
            for directory, subdirectories, files in os.walk(root)
            for name in subdirectories + files
            if not name.startswith("run.sqlite3-")
        )

    assert store_files(real_root) == store_files(synthetic_root)
    for _, _, path, content, *_ in synthetic["artifacts"]:
        assert read_tree(str(real_root / path)) == read_tree(str(synthetic_root / path))
        assert objects.verify(str(synthetic_root / path), sync=False).tree_sha256 == content


def test_a_slot_plan_holds_exactly_the_attempts_asked_for() -> None:
    for attempts in [*range(1, 40), 1000, 10_001]:
        plans = synth.slot_plans(attempts)
        assert len(plans) + sum(plan.failed_first for plan in plans) == attempts
        assert plans[0].failed_first == (attempts >= 2)
        assert all(plan.failed_first <= (plan.index % synth.RETRY_EVERY == 0) for plan in plans)
        pairs = {(plan.candidate, plan.problem) for plan in plans}
        assert len(pairs) == len(plans)
    with pytest.raises(ValueError):
        synth.slot_plans(0)


def test_inspection_accepts_a_synthesized_store(tmp_path: Path) -> None:
    summary = synth.synthesize(str(tmp_path / "store"), 250)
    assert (summary.slots, summary.failed, summary.artifacts) == (227, 23, 477)
    for quick in (True, False):
        assert validate_store(summary.root, quick=quick).findings == ()
    with Snapshot.take(summary.root) as snapshot:
        report = reader.status(snapshot)
    assert report.totals["accepted"] == summary.slots
    assert sum(report.totals.values()) == summary.slots
    assert report.attempts_by_state == {"accepted": 227, "failed": 23}
    assert sorted(report.by_candidate) == ["synth/c00000", "synth/c00001", "synth/c00002"]
    first = next(slot for slot in report.slots if slot.problem_id == "synth/p000")
    assert first.metrics == (("score", "0"), ("seconds", "0.5"))


def test_a_root_that_holds_a_store_is_refused(tmp_path: Path) -> None:
    synth.synthesize(str(tmp_path), 1)
    with pytest.raises(FileExistsError):
        synth.synthesize(str(tmp_path), 1)
