"""``runstore run`` end to end, through the installed console script (SPEC.md section 15):
completion, each failing worker's outcome, a second run, SIGKILL and --resume, SIGINT,
conflicts, bad files and bad stores, exit statuses."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conformance.cli.world import RUNSTORE
from conformance.cli.world import json_lines
from conformance.cli.world import kill_after_acceptances
from conformance.cli.world import runstore
from conformance.cli.world import start
from conformance.cli.world import write_campaign
from conformance.closed_store import rows as query


def test_a_campaign_runs_to_completion_and_a_second_run_runs_nothing(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("ok", "ok"), ("slow", "slow")], ["p", "q"])
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "2")
    assert done.returncode == 0, done.stderr
    events = json_lines(done.stdout)
    finished = [e for e in events if e["event"] == "attempt_finished"]
    assert sorted(e["state"] for e in finished) == ["accepted"] * 4
    assert events[-1]["event"] == "summary" and events[-1]["unsatisfied"] == []
    assert query(store, "SELECT count(*), count(DISTINCT slot_id) FROM attempts") == [(4, 4)]
    # Its logs are in the attempt artifact.
    (path,) = query(
        store,
        "SELECT r.path FROM attempts AS a JOIN artifacts AS r ON r.id = a.final_artifact_id "
        "LIMIT 1",
    )[0:1]
    assert (store / str(path[0]) / "stdout.log").read_text().startswith("running ")
    again = runstore("run", str(campaign), "--store", str(store), "--json")
    assert again.returncode == 0, again.stderr
    assert [e["event"] for e in json_lines(again.stdout)] == ["campaign", "planned", "summary"]
    assert query(store, "SELECT count(*) FROM attempts") == [(4,)]
    plain = runstore("run", str(campaign), "--store", str(store))
    assert plain.returncode == 0 and "4/4 slots satisfied" in plain.stderr


def test_a_stream_campaign_with_warmups_runs_to_completion(tmp_path: Path) -> None:
    settings = 'slot_kind = "stream"\ncheckpoints = 3\nwarmup = true'
    campaign = write_campaign(tmp_path / "c", [("s", "stream")], ["p", "q"], settings=settings)
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "--json")
    assert done.returncode == 0, done.stderr
    assert (
        query(
            store,
            "SELECT s.role, s.execution_kind, a.state FROM attempts AS a "
            "JOIN attempt_slots AS s ON s.id = a.slot_id ORDER BY s.role",
        )
        == [("measurement", "stream", "accepted")] * 2 + [("warmup", "one_shot", "accepted")] * 2
    )
    assert query(store, "SELECT count(*) FROM selected_observations") == [(6,)]
    shown = runstore("status", "--store", str(store)).stdout
    results = shown.split("results (median ± MAD)")[1].split("total")[0]
    assert results.count(" s ") == 2  # one row per pair, the warm-ups not counted
    assert " 1/1 " in results


def test_failing_hanging_invalid_and_silent_workers_get_their_outcomes(tmp_path: Path) -> None:
    modes = ["fail", "hang", "invalid", "missing"]
    campaign = write_campaign(tmp_path / "c", [(m, m) for m in modes], ["p"])
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "4")
    assert done.returncode == 1, done.stderr
    codes = dict(
        query(
            store,
            "SELECT json_extract(d.record_json, '$.candidate_id'), a.failure_code "
            "FROM attempts AS a JOIN attempt_slots AS s ON s.id = a.slot_id "
            "JOIN resolved_runs AS r ON r.id = s.run_id "
            "JOIN applicability_decisions AS d ON d.id = r.decision_id",
        )
    )
    assert codes == {
        "e2e/fail": "worker_failed",
        "e2e/hang": "time_limit",
        "e2e/invalid": "result_invalid",
        "e2e/missing": "result_missing",
    }
    summary = json_lines(done.stdout)[-1]
    assert sorted(summary["unsatisfied"]) == [f"{m} x p" for m in sorted(modes)]
    # Nothing is left live, and a run without --retry-failed does not retry them.
    assert query(store, "SELECT count(*) FROM leases WHERE released_at_ns IS NULL") == [(0,)]
    again = runstore("run", str(campaign), "--store", str(store), "--json")
    assert again.returncode == 1
    assert query(store, "SELECT count(*) FROM attempts") == [(4,)]
    left = json_lines(again.stdout)[-1]["left"]
    assert left == {f"{m} x p": "failed_not_retried" for m in modes}
    plain = runstore("run", str(campaign), "--store", str(store))
    assert "4 left unsatisfied: their attempts failed (run --retry-failed N" in plain.stderr


def test_resume_after_sigkill_finishes_every_slot_and_loses_nothing(tmp_path: Path) -> None:
    candidates = [(f"c{i}", "slow") for i in range(4)]
    campaign = write_campaign(tmp_path / "c", candidates, ["p", "q", "r"], lease_seconds=3)
    store = tmp_path / "store"
    process = start("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "3")
    acknowledged = kill_after_acceptances(process, 3)
    assert process.returncode == -signal.SIGKILL
    accepted_at_kill = dict(
        query(store, "SELECT slot_id, id FROM attempts WHERE state = 'accepted'")
    )
    assert acknowledged.items() <= accepted_at_kill.items()
    stranded = query(store, "SELECT id FROM attempts WHERE finished_at_ns IS NULL")
    assert stranded
    # `runstore recover` once the 3 s leases expired: each stranded attempt is settled.
    time.sleep(3.2)
    recovered = runstore("recover", "--store", str(store), "--json")
    assert recovered.returncode == 0, recovered.stderr
    terminals = json_lines(recovered.stdout)[0]["terminals"]
    assert isinstance(terminals, list)
    assert sorted(t["attempt"] for t in terminals) == sorted(str(a) for (a,) in stranded)
    assert {t["state"] for t in terminals} == {"failed"}
    began = time.monotonic()
    resumed = runstore(
        "run", str(campaign), "--store", str(store), "--resume", "--retry-failed", "3", "--json"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert time.monotonic() - began < 60
    accepted = dict(query(store, "SELECT slot_id, id FROM attempts WHERE state = 'accepted'"))
    assert len(accepted) == 12
    assert accepted_at_kill.items() <= accepted.items()
    assert query(store, "SELECT count(*) FROM attempts WHERE finished_at_ns IS NULL") == [(0,)]
    interrupted = query(
        store, "SELECT count(*) FROM attempts WHERE failure_code = 'interrupted_attempt'"
    )[0][0]
    assert isinstance(interrupted, int) and interrupted > 0
    assert query(store, "PRAGMA integrity_check") == [("ok",)]


def test_sigint_stops_cleanly_and_commits_cancelled_failures(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("hang", "hang")], ["p", "q"], timeout_seconds=60)
    text = campaign.read_text().replace("timeout_seconds = 1\n", "")
    campaign.write_text(text)
    store = tmp_path / "store"
    process = start("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "2")
    assert process.stdout is not None
    started = 0
    for line in process.stdout:
        if json_lines(line)[0]["event"] == "attempt_started":
            started += 1
            if started == 2:
                break
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 130
    assert json_lines(out)[-1]["stopped"] is True
    assert query(store, "SELECT DISTINCT state, failure_code FROM attempts") == [
        ("failed", "cancelled")
    ]
    assert query(store, "SELECT count(*) FROM leases WHERE released_at_ns IS NULL") == [(0,)]


@pytest.mark.parametrize("as_json", [True, False], ids=["json-stdout", "progress-stderr"])
def test_a_closed_output_stops_the_run_as_ctrl_c_does(tmp_path: Path, as_json: bool) -> None:
    """``run --json | head -1``: the reader of the run's output goes away while workers run.
    The run stops cleanly (its workers killed, their attempts committed ``cancelled``, no
    lease left live) and exits 141, not silently with 1 and slots left running."""
    campaign = write_campaign(tmp_path / "c", [("hang", "hang")], ["p", "q"], timeout_seconds=60)
    campaign.write_text(campaign.read_text().replace("timeout_seconds = 1\n", ""))
    store = tmp_path / "store"
    arguments = [RUNSTORE, "run", str(campaign), "--store", str(store), "--init", "-j", "2"]
    process = subprocess.Popen(
        [*arguments, "--json"] if as_json else arguments,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    read, kept = (process.stdout, process.stderr) if as_json else (process.stderr, process.stdout)
    deadline = time.monotonic() + 60
    while query_or_none(store, "SELECT count(*) FROM attempts WHERE state = 'executing'") != [(2,)]:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    read.close()  # the reader goes away (as head does after its line)
    process.wait(timeout=60)
    note = kept.read()
    assert process.returncode == 141, note
    if as_json:
        assert "error: output_closed: " in note
    assert "Traceback" not in note
    assert query(store, "SELECT DISTINCT state, failure_code FROM attempts") == [
        ("failed", "cancelled")
    ]
    assert query(store, "SELECT count(*) FROM leases WHERE released_at_ns IS NULL") == [(0,)]


def query_or_none(store: Path, statement: str) -> list[tuple[object, ...]] | None:
    """``query`` once the store's database exists and answers (None before)."""
    try:
        return query(store, statement)
    except sqlite3.Error:
        return None


def test_a_changed_campaign_is_refused_and_says_what_differs(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("ok", "ok")], ["p"])
    store = tmp_path / "store"
    assert runstore("run", str(campaign), "--store", str(store), "--init").returncode == 0
    before = query(store, "SELECT count(*) FROM events")
    campaign.write_text(campaign.read_text().replace('"worker.py", "ok"', '"worker.py", "slow"'))
    refused = runstore("run", str(campaign), "--store", str(store))
    assert refused.returncode == 4
    assert "error: registration_conflict: " in refused.stderr
    assert "ok x p" in refused.stderr and "command" in refused.stderr
    assert query(store, "SELECT count(*) FROM events") == before
    as_json = runstore("run", str(campaign), "--store", str(store), "--json")
    assert json_lines(as_json.stdout)[0]["error"] == "registration_conflict"


def test_a_bad_campaign_file_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    campaign = tmp_path / "bad.toml"
    campaign.write_text('[campaign]\nname = "x"\n[[candidates]\n')
    store = tmp_path / "store"
    refused = runstore("run", str(campaign), "--store", str(store), "--init")
    assert refused.returncode == 2
    assert f"error: campaign_invalid: {campaign}" in refused.stderr and "line 3" in refused.stderr
    assert not store.exists()


def test_a_missing_store_is_refused_without_init(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("ok", "ok")], ["p"])
    refused = runstore("run", str(campaign), "--store", str(tmp_path / "absent"))
    assert refused.returncode == 3
    assert "error: unsafe_path: " in refused.stderr and "--init" in refused.stderr
    assert not (tmp_path / "absent").exists()
    deeper = runstore("run", str(campaign), "--store", str(tmp_path / "a" / "b"), "--init")
    assert deeper.returncode == 3 and "parent of the store root does not exist" in deeper.stderr
    assert not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("")
    not_a_directory = runstore("run", str(campaign), "--store", str(tmp_path / "file"), "--init")
    assert not_a_directory.returncode == 3 and "not a directory" in not_a_directory.stderr


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (("--scheduler", "tcp://127.0.0.1:8786"), "need --executor dask"),
        (("--workers", "2"), "need --executor dask"),
        (("--executor", "dask", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"), "sized"),
        (("--executor", "threads"), "unknown executor 'threads'"),
    ],
)
def test_contradictory_executor_options_are_refused_before_the_store_is_made(
    tmp_path: Path, options: tuple[str, ...], named: str
) -> None:
    campaign = write_campaign(tmp_path / "c", [("ok", "ok")], ["p"])
    store = tmp_path / "store"
    refused = runstore("run", str(campaign), "--store", str(store), "--init", "--json", *options)
    assert refused.returncode == 2, refused.stderr
    (error,) = json_lines(refused.stdout)
    assert error["error"] == "executor_unavailable"
    assert named in str(error["message"])
    assert not store.exists()
