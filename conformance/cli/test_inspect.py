"""``runstore status`` and ``runstore explain`` through the console script, checked against
the database read directly; and the README's first command's campaign (examples/codecs)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conformance.cli.world import RUNSTORE
from conformance.cli.world import json_lines
from conformance.cli.world import runstore
from conformance.cli.world import write_campaign
from conformance.closed_store import rows as query


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store where one candidate succeeded on two problems and one failed on both."""
    directory = tmp_path_factory.mktemp("inspect")
    campaign = write_campaign(directory / "c", [("ok", "ok"), ("fail", "fail")], ["p", "q"])
    store = directory / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "-j", "2")
    assert done.returncode == 1, done.stderr
    return store


def test_status_json_matches_the_database(finished: Path) -> None:
    shown = runstore("status", "--store", str(finished), "--json", "--slots")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    expected: dict[str, dict[str, int]] = {}
    for candidate, state in query(
        finished,
        "SELECT d.candidate_id, a.state FROM attempts AS a "
        "JOIN attempt_slots AS s ON s.id = a.slot_id JOIN resolved_runs AS r ON r.id = s.run_id "
        "JOIN applicability_decisions AS d ON d.id = r.decision_id",
    ):
        counts = expected.setdefault(str(candidate), {})
        counts[str(state)] = counts.get(str(state), 0) + 1
    shown_counts = {
        candidate: {state: n for state, n in by_state.items() if n}
        for candidate, by_state in document["by_candidate"].items()
    }
    assert shown_counts == expected == {"e2e/fail": {"failed": 2}, "e2e/ok": {"accepted": 2}}
    metrics = {slot["slot_id"]: slot["metrics"] for slot in document["slots"] if slot["metrics"]}
    stored = query(
        finished,
        "SELECT a.slot_id, json_extract(o.record_json, '$.result.metrics') "
        "FROM attempts AS a JOIN observations AS o ON o.attempt_id = a.id "
        "WHERE a.state = 'accepted'",
    )
    assert metrics == {str(slot): json.loads(str(values)) for slot, values in stored}
    assert document["totals"]["accepted"] == 2 and document["totals"]["failed"] == 2


def test_explain_json_matches_the_database(finished: Path) -> None:
    ((attempt_id, slot_id),) = query(
        finished, "SELECT id, slot_id FROM attempts WHERE failure_code = 'worker_failed' LIMIT 1"
    )
    shown = runstore("explain", str(attempt_id), "--store", str(finished), "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["slot"]["slot_id"] == slot_id
    assert document["highlighted_attempt_id"] == attempt_id
    (explained,) = document["attempts"]
    transitions = query(
        finished,
        "SELECT revision, to_state FROM attempt_transitions WHERE attempt_id = ? ORDER BY revision",
        (attempt_id,),
    )
    assert [(t["revision"], t["to_state"]) for t in explained["transitions"]] == [
        (revision, state) for revision, state in transitions
    ]
    events = query(
        finished,
        "SELECT sequence, kind, payload_json FROM events WHERE attempt_id = ? ORDER BY sequence",
        (attempt_id,),
    )
    assert [(e["sequence"], e["kind"], e["payload"]) for e in explained["events"]] == [
        (sequence, kind, json.loads(str(payload))) for sequence, kind, payload in events
    ]
    assert explained["details"] == {"exit_code": 3}
    by_name = runstore("explain", "e2e/fail/p", "--store", str(finished), "--json")
    assert json.loads(by_name.stdout)["slot"]["logical_spec_id"] == "e2e/fail/p"
    plain = runstore("explain", "e2e/fail/p", "--store", str(finished))
    assert plain.returncode == 0 and "worker_failed" in plain.stdout


def test_status_and_explain_refuse_cleanly_and_change_nothing(
    finished: Path, tmp_path: Path
) -> None:
    before = sorted(path.name for path in finished.iterdir())
    unknown = runstore("explain", "e2e/nothing/here", "--store", str(finished))
    assert unknown.returncode == 3 and "error: unknown_slot: " in unknown.stderr
    as_json = runstore("explain", "attempt:v1:" + "0" * 64, "--store", str(finished), "--json")
    assert json_lines(as_json.stdout) == [
        {"error": "unknown_slot", "message": json_lines(as_json.stdout)[0]["message"]}
    ]
    missing = runstore("status", "--store", str(tmp_path / "absent"))
    assert missing.returncode == 3 and "error: unsafe_path: " in missing.stderr
    assert not (tmp_path / "absent").exists()
    assert sorted(path.name for path in finished.iterdir()) == before
    plain = runstore("status", "--store", str(finished))
    assert "by candidate" in plain.stdout and "results (median ± MAD)" in plain.stdout


def test_status_reads_a_store_while_a_campaign_runs(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [(f"c{i}", "ok") for i in range(6)], ["p", "q"])
    store = tmp_path / "store"
    assert (
        runstore("run", str(campaign), "--store", str(store), "--init", "-j", "1").returncode == 0
    )
    more = write_campaign(tmp_path / "d", [(f"d{i}", "slow") for i in range(8)], ["p"], name="more")
    running = subprocess.Popen(
        [RUNSTORE, "run", str(more), "--store", str(store), "--json", "-j", "4"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        seen = []
        while running.poll() is None:
            shown = runstore("status", "--store", str(store), "--json")
            assert shown.returncode == 0, shown.stderr
            seen.append(json.loads(shown.stdout)["totals"]["accepted"])
    finally:
        running.wait(timeout=60)
    assert seen == sorted(seen) and seen[0] >= 12
    final = json.loads(runstore("status", "--store", str(store), "--json").stdout)
    assert final["totals"]["accepted"] == 20
    only = json.loads(
        runstore("status", "--store", str(store), "--campaign", "more", "--json").stdout
    )
    assert only["totals"]["accepted"] == 8


def test_the_demo_campaign_runs_to_completion_and_shows_its_status(
    demo_store: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """The README's first command, minus the install: examples/codecs end to end."""
    store, done = demo_store
    assert done.returncode == 0, done.stderr
    assert "140/140 slots satisfied" in done.stderr  # 7 x 4 pairs x 5 repetitions
    shown = runstore("status", "--store", str(store))
    assert shown.returncode == 0
    assert "ratio" in shown.stdout and "lzma-6" in shown.stdout and "json-1m" in shown.stdout
    assert re.search(r"\d\.\d{5}", shown.stdout) is None  # tables round; --json is exact
    document = json.loads(runstore("status", "--store", str(store), "--json", "--slots").stdout)
    assert any(len(slot["metrics"]["ratio"]) > 8 for slot in document["slots"])
    ratios = {
        (slot["candidate_id"], slot["problem_id"]): float(slot["metrics"]["ratio"])
        for slot in document["slots"]
    }
    assert len(ratios) == 28
    # Real measurements: repetitive data compresses far better than random data.
    assert ratios[("codecs/zlib-6", "codecs/repetitive-1m")] > 20
    assert ratios[("codecs/zlib-6", "codecs/random-1m")] < 1.01
