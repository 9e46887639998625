"""tools/scale_store.py, the fixture of tools/bench_scale.py, makes stores the project's own
checks accept: ``runstore validate`` (every check, full and ``--quick``) and ``runstore
audit`` (the event log replayed through the model) pass on them through the console
script, and the stores hold what the builder's docstring promises, read back through a
fresh read-only connection and the artifact files themselves.

The expected counts are pinned by hand from the docstring's rule (per 100 slots in plan
order: slots 7 and 57 fail, 19 times out, 11 and 41 are accepted after one failure, 31
after two, 45 fails twice, 53 never runs), for the 40 + 20 slots of the shape below.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import scale_store
from scale_store import Shape

from conformance.cli.world import runstore


def query(root: Path, statement: str) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(f"file:{root / 'run.sqlite3'}?mode=ro", uri=True)
    try:
        return connection.execute(statement).fetchall()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def sixty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scale") / "store"
    summary = scale_store.build(str(root), Shape(candidates=4, problems=10, repetitions=1))
    assert summary.slots == 60
    return root


@pytest.mark.parametrize("shape", [Shape(4, 10, 1), Shape(2, 3, 3)], ids=["60", "reps"])
def test_validate_and_audit_pass_on_a_built_store(tmp_path: Path, shape: Shape) -> None:
    root = tmp_path / "store"
    scale_store.build(str(root), shape)
    for quick in ([], ["--quick"]):
        done = runstore("validate", "--store", str(root), "--json", *quick)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["findings"] == []
    done = runstore("audit", "--store", str(root), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["divergence"] is None


def test_a_store_holds_the_slots_and_attempts_its_rule_says(sixty: Path) -> None:
    assert query(sixty, "SELECT count(*) FROM attempt_slots") == [(60,)]
    states = query(sixty, "SELECT state, count(*) FROM attempts GROUP BY state ORDER BY state")
    assert states == [("accepted", 55), ("failed", 9)]
    codes = query(
        sixty,
        "SELECT failure_code, count(*) FROM attempts WHERE state = 'failed' GROUP BY 1 ORDER BY 1",
    )
    assert codes == [("time_limit", 2), ("worker_failed", 7)]
    retries = query(sixty, "SELECT max(retry_index) FROM attempts GROUP BY slot_id")
    by_count = Counter(index for (index,) in retries)
    assert by_count == {0: 55, 1: 3, 2: 1}  # slots 11, 41 and 45 retried once, 31 twice
    unrun = query(
        sixty, "SELECT count(*) FROM attempt_slots WHERE id NOT IN (SELECT slot_id FROM attempts)"
    )
    assert unrun == [(1,)]
    campaigns = query(
        sixty,
        "SELECT substr(candidate_id, 1, instr(candidate_id, '/') - 1), count(*) "
        "FROM resolved_runs GROUP BY 1 ORDER BY 1",
    )
    assert campaigns == [("scale", 40), ("scale-extra", 20)]


def test_failed_attempts_keep_the_workers_stderr_and_results_their_metrics(sixty: Path) -> None:
    failed = query(
        sixty,
        "SELECT a.failure_code, f.path FROM attempts AS a "
        "JOIN artifacts AS f ON f.id = a.final_artifact_id WHERE a.state = 'failed'",
    )
    assert len(failed) == 9
    for code, path in failed:
        stderr = (sixty / path / "stderr.log").read_text()
        expected = "ValueError: " if code == "worker_failed" else "still iterating"
        assert expected in stderr
    results = query(sixty, "SELECT record_json FROM observations")
    assert len(results) == 55
    for (record,) in results:
        assert sorted(json.loads(record)["result"]["metrics"]) == ["peak_mb", "ratio", "time_s"]
    (specification,) = query(sixty, "SELECT record_json FROM resolved_runs LIMIT 1")[0]
    declared = json.loads(specification)["specification"]["metrics"]
    assert declared["time_s"] == {"direction": "lower", "threshold": "0.05", "unit": "s"}
