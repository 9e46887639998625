"""Interruptions resume themselves (SPEC.md section 15.5): an attempt cut off by Ctrl-C, a
kill -9 or a lost worker is retried by ``run --resume`` under its own bound, explicitly
authorized and visible in ``explain``; deterministic failures still wait for
``--retry-failed``, which ``--retry-code`` can limit to chosen failure codes.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from conformance.cli.world import json_lines
from conformance.cli.world import kill_after_acceptances
from conformance.cli.world import runstore
from conformance.cli.world import start
from conformance.cli.world import write_campaign
from conformance.closed_store import rows as query


def _left(output: str) -> dict[str, object]:
    summary = json_lines(output)[-1]
    assert summary["event"] == "summary"
    left = summary["left"]
    assert isinstance(left, dict)
    return left


def _stopped_with_cancelled_attempts(tmp_path: Path) -> tuple[Path, Path]:
    """A campaign with a stalling candidate (``st``: its first attempt on each problem
    sleeps) and a failing one; the run is stopped with SIGINT while the stalls execute."""
    marks = tmp_path / "marks"
    marks.mkdir()
    campaign = write_campaign(
        tmp_path / "c", [("st", "stall"), ("bad", "fail")], ["p"], env={"STALL_MARKS": str(marks)}
    )
    store = tmp_path / "store"
    process = start("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "2")
    deadline = time.monotonic() + 60
    while len(list(marks.iterdir())) < 1:
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    codes = query(store, "SELECT failure_code, count(*) FROM attempts GROUP BY 1 ORDER BY 1")
    assert ("cancelled", 1) in codes, codes
    return campaign, store


def test_resume_retries_a_cancelled_attempt_but_not_a_deterministic_failure(
    tmp_path: Path,
) -> None:
    campaign, store = _stopped_with_cancelled_attempts(tmp_path)
    plain = runstore("run", str(campaign), "--store", str(store), "--json")
    assert plain.returncode == 1, plain.stderr
    assert _left(plain.stdout)["st x p"] == "interrupted_not_resumed"
    human = runstore("run", str(campaign), "--store", str(store))
    assert "were cut off (run --resume retries them)" in human.stderr

    resumed = runstore("run", str(campaign), "--store", str(store), "--resume", "--json")
    assert resumed.returncode == 1, resumed.stderr
    events = json_lines(resumed.stdout)
    (planned,) = [event for event in events if event["event"] == "planned"]
    assert planned["resumed"] == 1
    assert _left(resumed.stdout) == {"bad x p": "failed_not_retried"}
    history = query(
        store,
        "SELECT r.candidate_id, a.retry_index, a.state, a.failure_code FROM attempts AS a "
        "JOIN attempt_slots AS s ON s.id = a.slot_id JOIN resolved_runs AS r ON r.id = s.run_id "
        "WHERE r.candidate_id = 'e2e/st' ORDER BY a.retry_index",
    )
    assert history == [
        ("e2e/st", 0, "failed", "cancelled"),
        ("e2e/st", 1, "accepted", None),
    ]
    explained = runstore("explain", "e2e/st/p", "--store", str(store), "--json")
    assert explained.returncode == 0, explained.stderr
    attempts = json.loads(explained.stdout)["attempts"]
    assert [item["retry_index"] for item in attempts] == [0, 1]


def test_the_resume_bound_leaves_a_slot_that_was_cut_off_too_often(tmp_path: Path) -> None:
    campaign, store = _stopped_with_cancelled_attempts(tmp_path)
    bounded = runstore(
        "run", str(campaign), "--store", str(store), "--resume", "--resume-retries", "0", "--json"
    )
    assert bounded.returncode == 1, bounded.stderr
    assert _left(bounded.stdout)["st x p"] == "resume_bound_reached"
    assert query(store, "SELECT count(*) FROM attempts") == [(2,)]


def test_resume_after_sigkill_needs_no_retry_authorization_of_its_own(tmp_path: Path) -> None:
    """Every attempt a kill -9 strands ends on ``--resume`` (SPEC.md sections 14, 15.5):
    recovery imports the outcome the killed run had already published (the kill may land
    between publication and commit) or fails it ``interrupted_attempt``, and each failed
    slot is retried under the resume bound, without ``--retry-failed``."""
    candidates = [(f"c{i}", "slow") for i in range(3)]
    campaign = write_campaign(tmp_path / "c", candidates, ["p", "q"], lease_seconds=3)
    store = tmp_path / "store"
    process = start("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "2")
    assert len(kill_after_acceptances(process, 1)) == 1
    assert process.returncode == -signal.SIGKILL
    stranded = query(store, "SELECT id, slot_id FROM attempts WHERE finished_at_ns IS NULL")
    assert stranded
    resumed = runstore("run", str(campaign), "--store", str(store), "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert query(store, "SELECT count(*) FROM attempts WHERE state = 'accepted'") == [(6,)]
    ends = dict(query(store, "SELECT id, coalesce(failure_code, state) FROM attempts"))
    interrupted = [slot for attempt, slot in stranded if ends[attempt] == "interrupted_attempt"]
    imported = [slot for attempt, slot in stranded if ends[attempt] == "accepted"]
    assert len(interrupted) + len(imported) == len(stranded)
    retried = query(store, "SELECT slot_id FROM attempts WHERE retry_index = 1 ORDER BY slot_id")
    assert retried == [(slot,) for slot in sorted(interrupted)]


def test_retry_codes_limit_retry_failed_to_the_chosen_failures(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("bad", "fail"), ("junk", "invalid")], ["p"])
    store = tmp_path / "store"
    first = runstore("run", str(campaign), "--store", str(store), "--init")
    assert first.returncode == 1, first.stderr
    before = query(store, "SELECT count(*) FROM events")
    for options, code in (
        (["--retry-code", "result_invalid"], "option_invalid"),
        (["--retry-failed", "1", "--retry-code", "no_such_code"], "option_invalid"),
    ):
        refused = runstore("run", str(campaign), "--store", str(store), *options, "--json")
        assert refused.returncode == 2, refused.stderr
        assert json.loads(refused.stdout)["error"] == code
    assert query(store, "SELECT count(*) FROM events") == before
    chosen = runstore(
        "run",
        str(campaign),
        *("--store", str(store), "--retry-failed", "1", "--retry-code", "result_invalid"),
        "--json",
    )
    assert chosen.returncode == 1, chosen.stderr
    assert _left(chosen.stdout) == {
        "bad x p": "failed_not_retried",
        "junk x p": "retry_bound_reached",
    }
    attempts = query(
        store,
        "SELECT r.candidate_id, count(*) FROM attempts AS a JOIN attempt_slots AS s "
        "ON s.id = a.slot_id JOIN resolved_runs AS r ON r.id = s.run_id GROUP BY 1 ORDER BY 1",
    )
    assert attempts == [("e2e/bad", 1), ("e2e/junk", 2)]
