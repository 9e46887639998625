"""What ``runstore run`` prints while it runs (SPEC.md section 15.7, "What run reports"),
through the installed console script: a failure's line and event carry the tail of the
worker's stderr and the path of its log in the store; every ``--json`` event is stamped
and names its pair as ``status --json`` and the exports do; on a terminal a live view
names the running slots and shows an ETA; ``--resume`` after a SIGKILL says that it waits
for leases, and how long, before it waits. The live view's numbers (:class:`RunProgress`)
are checked from events alone."""

from __future__ import annotations

import calendar
import csv
import datetime
import json
import re
import signal
import statistics
import unicodedata
from pathlib import Path

import pytest
from runstore.cli.progress import RunProgress
from runstore.cli.progress import finished_lines

from conformance.cli.test_terminal import on_terminal
from conformance.cli.world import json_lines
from conformance.cli.world import runstore
from conformance.cli.world import start
from conformance.cli.world import write_campaign
from conformance.closed_store import rows as query

NOISY_WORKER = """\
import sys
for index in range(8):
    print(f"line {index}", file=sys.stderr)
print("x" * 700, file=sys.stderr)
print("bell\\a and escape \\x1b[31mred", file=sys.stderr)
print("Fatal: the cause", file=sys.stderr)
sys.exit(3)
"""

SLEEPY_WORKER = """\
import json, os, time
time.sleep(0.8)
with open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json"), "w") as out:
    json.dump({"metrics": {"t": 1}}, out)
"""

PLAIN_WIDTH = 240
"""The width of ``run``'s output when stderr is no terminal (``output.console``)."""

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def campaign_with(directory: Path, worker: str, **options: object) -> Path:
    """A campaign of the world's shape whose worker.py is ``worker``."""
    candidates = options.pop("candidates", [("noisy", "fail")])
    problems = options.pop("problems", ["p"])
    path = write_campaign(directory, candidates, problems, **options)  # type: ignore[arg-type]
    (directory / "worker.py").write_text(worker, encoding="utf-8")
    return path


def hidden(line: str) -> bool:
    return any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in line)


def epoch_ms(text: str) -> int:
    """An ISO time as ``run`` writes it, read back independently, in epoch milliseconds."""
    moment = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return calendar.timegm(moment.timetuple()) * 1000 + moment.microsecond // 1000


def test_a_failure_carries_its_stderr_tail_and_log_in_its_event_and_its_line(
    tmp_path: Path,
) -> None:
    campaign = campaign_with(tmp_path / "c", NOISY_WORKER)
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "--json")
    assert done.returncode == 1, done.stderr
    (finished,) = [e for e in json_lines(done.stdout) if e["event"] == "attempt_finished"]
    assert finished["failure_code"] == "worker_failed"
    tail = finished["stderr_tail"]
    assert isinstance(tail, list) and 1 <= len(tail) <= 5
    assert sum(len(line) for line in tail) <= 500
    assert tail[-1] == "Fatal: the cause"
    assert "bell\\x07 and escape \\x1b[31mred" in tail
    assert not any(hidden(line) for line in tail)
    logs = finished["logs"]
    assert isinstance(logs, dict) and set(logs) == {"stdout", "stderr"}
    stderr_log = Path(str(logs["stderr"]))
    ((artifact,),) = query(
        store,
        "SELECT r.path FROM attempts AS a JOIN artifacts AS r ON r.id = a.final_artifact_id "
        "WHERE a.id = ?",
        [finished["attempt"]],
    )
    assert stderr_log == store / artifact / "stderr.log" and stderr_log.is_absolute()
    written = stderr_log.read_text(encoding="utf-8")
    assert written.endswith("bell\a and escape \x1b[31mred\nFatal: the cause\n")
    assert Path(str(logs["stdout"])) == store / artifact / "stdout.log"

    # Without --json (stderr no terminal): the failure's line, its tail and its log path.
    again = runstore("run", str(campaign), "--store", str(store), "--retry-failed", "1")
    assert again.returncode == 1, again.stderr
    lines = again.stderr.splitlines()
    failure = r"noisy x p \[measurement\]: failed worker_failed \(exit 3\) after \d+\.\d\d s"
    (head,) = [index for index, line in enumerate(lines) if re.fullmatch(failure, line)]
    shown = lines[head + 1 : lines.index("  | Fatal: the cause") + 1]
    assert all(line.startswith("  | ") and len(line) <= PLAIN_WIDTH for line in shown)
    assert any(len(line) == PLAIN_WIDTH and line.endswith("…") for line in shown)  # cut
    assert "  | bell\\x07 and escape \\x1b[31mred" in shown
    assert "\x1b" not in again.stderr and "\a" not in again.stderr
    (log_line,) = [line for line in lines if line.startswith("  log: ")]
    retried = Path(log_line.removeprefix("  log: "))
    assert retried.parent.parent == store / "artifacts" and retried.name == "stderr.log"
    assert retried.read_text(encoding="utf-8") == written


def test_every_json_event_is_stamped_and_names_its_pair_as_status_and_exports_do(
    tmp_path: Path,
) -> None:
    campaign = write_campaign(
        tmp_path / "c", [("ok", "ok"), ("fail", "fail")], ["p", "q"], settings="repetitions = 2"
    )
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "2")
    assert done.returncode == 1, done.stderr
    events = json_lines(done.stdout)
    stamps = [event["time_ns"] for event in events]
    assert all(type(stamp) is int for stamp in stamps) and stamps == sorted(stamps)
    for event in events:
        assert ISO.fullmatch(str(event["time"])), event
        assert epoch_ms(str(event["time"])) == int(str(event["time_ns"])) // 10**6

    status = json.loads(runstore("status", "--store", str(store), "--json", "--slots").stdout)
    slots = {slot["slot_id"]: slot for slot in status["slots"]}
    out = tmp_path / "export"
    assert runstore("export", "--store", str(store), "--out", str(out)).returncode == 0
    with (out / "attempts.csv").open(newline="") as handle:
        attempts = {row["attempt_id"]: row for row in csv.DictReader(handle)}
    with (out / "metrics.csv").open(newline="") as handle:
        repetitions = {row["slot_id"]: int(row["repetition"]) for row in csv.DictReader(handle)}
    started = [e for e in events if e["event"] == "attempt_started"]
    finished = [e for e in events if e["event"] == "attempt_finished"]
    assert len(started) == len(finished) == 8
    for event in started + finished:
        slot = slots[event["slot"]]
        named = (event["candidate"], event["problem"], event["logical_slot"])
        assert named == (slot["candidate_id"], slot["problem_id"], slot["logical_slot"])
        assert event["candidate"] == f"e2e/{event['candidate_name']}"
        assert event["problem"] == f"e2e/{event['problem_name']}"
    for event in finished:
        row = attempts[str(event["attempt"])]
        assert (event["candidate"], event["problem"], event["logical_slot"]) == (
            row["candidate_id"],
            row["problem_id"],
            row["logical_slot"],
        )
        span = (int(row["finished_at_ns"]) - int(row["started_at_ns"])) / 1e9
        assert isinstance(event["duration_s"], float)
        assert event["duration_s"] == pytest.approx(span, abs=1e-6) and span > 0
        if event["state"] == "accepted":
            assert event["repetition"] == repetitions[str(event["slot"])]
        suffix = "" if event["repetition"] == 0 else f"-{event['repetition']}"
        assert event["logical_slot"] == f"measurement{suffix}"
    assert {e["repetition"] for e in finished} == {0, 1}


def test_on_a_terminal_the_live_view_names_running_slots_and_shows_an_eta(
    tmp_path: Path,
) -> None:
    campaign = campaign_with(
        tmp_path / "c", SLEEPY_WORKER, candidates=[("a", "ok"), ("b", "ok")], problems=["p", "q"]
    )
    store = tmp_path / "store"
    lines = on_terminal("run", str(campaign), "--store", str(store), "--init", "-j", "2")
    joined = "\n".join(lines)
    running = re.findall(r"^ {2}([ab] x [pq] \[measurement\]) {2}\d+\.\d s$", joined, re.M)
    assert running, joined
    bars = [line for line in lines if re.search(r"\b\d/4\b", line)]
    assert any(re.search(r"ETA \d:\d\d:\d\d", line) for line in bars), joined
    # The ETA appears only once an attempt finished: never beside 0/4.
    assert not any("0/4" in line and "ETA" in line for line in bars)
    assert "4/4 slots satisfied" in joined


@pytest.mark.parametrize("mode", ["json", "plain", "terminal"])
def test_resume_after_sigkill_says_it_waits_for_leases_before_it_waits(
    tmp_path: Path, mode: str
) -> None:
    candidates = [(f"c{index}", "slow") for index in range(3)]
    campaign = write_campaign(tmp_path / "c", candidates, ["p", "q"], lease_seconds=5)
    store = tmp_path / "store"
    process = start("run", str(campaign), "--store", str(store), "--init", "--json", "-j", "2")
    assert process.stdout is not None and process.stderr is not None
    begun = 0
    for line in process.stdout:  # kill while two workers run
        begun += json_lines(line)[0]["event"] == "attempt_started"
        if begun == 2:
            process.send_signal(signal.SIGKILL)
            break
    process.wait()
    process.stdout.close()
    process.stderr.close()
    ((stranded, until_ns),) = query(
        store,
        "SELECT count(DISTINCT a.id), max(l.expires_at_ns) FROM attempts AS a "
        "JOIN leases AS l ON l.attempt_id = a.id "
        "WHERE a.finished_at_ns IS NULL AND l.released_at_ns IS NULL",
    )
    assert stranded >= 1
    resume = ("run", str(campaign), "--store", str(store), "--resume", "--retry-failed", "1")
    if mode == "json":
        resumed = runstore(*resume, "--json")
        assert resumed.returncode == 0, resumed.stderr
        events = json_lines(resumed.stdout)
        names = [event["event"] for event in events]
        at = names.index("waiting_for_leases")
        waiting = events[at]
        assert (waiting["slots"], waiting["until_ns"]) == (stranded, until_ns)
        assert epoch_ms(str(waiting["until"])) == until_ns // 10**6
        # Said before the wait: every event up to it came before the leases expired, and
        # the recovery pass the wait is for comes after.
        assert all(int(str(event["time_ns"])) < until_ns for event in events[: at + 1])
        recovered = [e for e in events[at:] if e["event"] == "recovered"]
        assert recovered and int(str(recovered[-1]["time_ns"])) >= until_ns
    elif mode == "plain":
        resumed = runstore(*resume)
        assert resumed.returncode == 0, resumed.stderr
        lines = resumed.stderr.splitlines()
        said = [
            index
            for index, line in enumerate(lines)
            if re.fullmatch(
                rf"waiting \d+ s \(until [0-9T:.Z-]+\) for the leases of {stranded} attempts in "
                r"progress "
                r"to expire, so that recovery can judge them",
                line,
            )
        ]
        assert said == [0], lines
        until = re.search(r"until (\S+)\)", lines[0])
        assert until and epoch_ms(until[1]) == until_ns // 10**6
    else:
        joined = "\n".join(on_terminal(*resume))
        left = re.findall(r"leases of \d+ attempts in progress to expire: (\d+) s", joined)
        assert len(set(left)) >= 2, joined  # a countdown, redrawn as the wait goes on
        assert [int(value) for value in left] == sorted((int(v) for v in left), reverse=True)
        assert "6/6 slots satisfied" in joined


def test_the_eta_is_the_median_duration_times_the_slots_left_over_the_jobs() -> None:
    """Events alone (times passed in): no ETA before an attempt finished; then the median
    of the finished attempts' durations times the slots left over the jobs, counted down
    between events, never from the rate of completions."""
    state = RunProgress()
    state.apply("planned", {"satisfied": 2, "ready": 8, "waiting": 0, "blocked": 0, "jobs": 2}, 0)
    for index in range(3):
        state.apply("attempt_started", started(index), 0.0)
    assert state.eta_s(5.0) is None and "ETA" not in state.counts(5.0)
    durations = [4.0, 1.0, 10.0]
    for index, duration in enumerate(durations):
        state.apply("attempt_finished", finished(index, duration), 10.0 + index)
    left = 10 - 2 - 3  # slots neither satisfied before nor accepted in the run
    expected = statistics.median(durations) * left / 2
    assert state.eta_s(12.0) == pytest.approx(expected)
    assert state.eta_s(13.5) == pytest.approx(expected - 1.5)  # counted down, steady
    assert state.eta_s(12.0 + expected + 60) == 0.0
    # A failure settles its slot (it is not counted as left) and its duration counts.
    state.apply("attempt_started", started(3), 20.0)
    state.apply(
        "attempt_finished", {**finished(3, 7.0), "state": "failed", "failure_code": "x"}, 21.0
    )
    expected = statistics.median([*durations, 7.0]) * (left - 1) / 2
    assert state.eta_s(21.0) == pytest.approx(expected)
    assert state.failed == 1 and state.completed == 5


def test_the_running_lines_fit_the_room_and_say_how_many_more() -> None:
    state = RunProgress()
    for index in range(6):
        state.apply("attempt_started", started(index), float(index))
    lines = state.running_lines(10.0, 4)
    assert lines[:3] == [
        "a0 x p [measurement]  10 s",
        "a1 x p [measurement]  9.0 s",
        "a2 x p [measurement]  8.0 s",
    ]
    assert lines[3] == "... and 3 more"
    assert len(state.running_lines(10.0, 6)) == 6


def test_a_failure_line_cuts_each_tail_line_to_the_width_but_never_the_log_path() -> None:
    path = "/store/" + "d" * 100 + "/stderr.log"
    fields = {
        **finished(0, 1.5),
        "state": "failed",
        "failure_code": "worker_failed",
        "details": {"signal": 9},
        "stderr_tail": ["short", "y" * 100],
        "logs": {"stderr": path, "stdout": "/elsewhere"},
    }
    lines = finished_lines(fields, 40)
    assert lines[0] == "a0 x p [measurement]: failed worker_fai…"
    assert lines[1:3] == ["  | short", "  | " + "y" * 35 + "…"]
    assert lines[3] == f"  log: {path}"


def started(index: int) -> dict[str, object]:
    return {
        "slot": f"slot-{index}",
        "candidate_name": f"a{index}",
        "problem_name": "p",
        "logical_slot": "measurement",
    }


def finished(index: int, duration: float) -> dict[str, object]:
    return {**started(index), "state": "accepted", "duration_s": duration}
