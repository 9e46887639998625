"""The words, times and tails the triage commands print (SPEC.md section 15.6, "When a slot
fails"), pinned case by case from the text; and the names the reader shares with the
runner (the log files of an attempt artifact, the failure codes) agree with the runner's.
"""

from __future__ import annotations

import pytest
from runstore.cli import wording
from runstore.inspection import attempt_logs
from runstore.runner import worker_result
from runstore.runner.attempt import attempt_files
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus


@pytest.mark.parametrize(
    ("state", "code", "details", "reason", "words"),
    [
        ("failed", "worker_failed", {"exit_code": 3}, None, "the worker exited with status 3"),
        (
            "failed",
            "worker_failed",
            {"signal": 9},
            None,
            "the worker was killed by signal 9 (SIGKILL)",
        ),
        ("failed", "time_limit", {"timeout_ns": "60000000000"}, None, "timed out after 60 s"),
        ("failed", "time_limit", {"timeout_ns": "123000000000"}, None, "timed out after 2 min 3 s"),
        (
            "failed",
            "start_failed",
            {"detail": "no such file"},
            None,
            "the worker could not be started: no such file",
        ),
        (
            "failed",
            "result_missing",
            {"detail": "no result.json in outputs"},
            None,
            "the worker left no usable result: no result.json in outputs",
        ),
        (
            "failed",
            "result_missing",
            {"checkpoints": [0, 1], "detail": "d"},
            None,
            "the worker left no usable result (checkpoints reached: 0, 1): d",
        ),
        (
            "failed",
            "input_changed",
            {"file": "a.bin", "size": 3, "registered_size": 4},
            None,
            "input file a.bin now holds 3 bytes; it was registered with 4",
        ),
        (
            "failed",
            "input_changed",
            {"file": "a.bin", "sha256": "ab" * 32},
            None,
            "input file a.bin no longer has the SHA-256 it was registered with",
        ),
        (
            "failed",
            "interrupted_attempt",
            {"cause": "claim_expired", "interrupted_state": "finalizing"},
            None,
            "recovery ended it while finalizing: its finalization claim's lease expired",
        ),
        ("censored", None, None, "budget", "censored: budget"),
        ("executing", None, None, None, ""),
        # An unknown code, or details of another shape: the code and the details' JSON.
        ("failed", "new_code", {"x": [1]}, None, 'new_code {"x": [1]}'),
        ("failed", "worker_failed", {"exit_code": "3"}, None, 'worker_failed {"exit_code": "3"}'),
        ("failed", "time_limit", {}, None, "time_limit {}"),
    ],
)
def test_an_attempts_end_in_words(
    state: str, code: str | None, details: object, reason: str | None, words: str
) -> None:
    assert wording.cause(state, code, details, reason) == words


@pytest.mark.parametrize(
    ("ns", "words"),
    [
        (0, "0 ns"),
        (850, "850 ns"),
        (12_500, "12.5 µs"),
        (999_400, "999 µs"),
        (999_600, "1 ms"),  # three significant digits never read "1e+03 µs"
        (152_000_000, "152 ms"),
        (1_520_000_000, "1.52 s"),
        (60_000_000_000, "60 s"),
        (123_000_000_000, "2 min 3 s"),
        (300_000_000_000, "5 min"),
        (3_723_000_000_000, "1 h 2 min"),
        ("60000000000", "60 s"),
        (-1_520_000_000, "-1.52 s"),
    ],
)
def test_durations_in_words(ns: int | str, words: str) -> None:
    assert wording.duration(ns) == words


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (1_000_000_000_123_456_789, "2001-09-09T01:46:40.123Z"),  # 10**9 s after the epoch
        (1_000_000_000_999_999_999, "2001-09-09T01:46:40.999Z"),  # cut, not rounded
        (None, ""),
    ],
)
def test_instants_in_iso_8601_utc(ns: int | None, text: str) -> None:
    assert wording.instant(ns) == text


def test_a_tail_is_the_last_ten_lines_made_visible() -> None:
    data = b"".join(b"line %d\n" % i for i in range(30)) + b"bell\x07 tab\t esc\x1b[0m \xff\r\n"
    assert attempt_logs.tail(data) == (
        *(f"line {i}" for i in range(21, 30)),
        "bell\\x07 tab\\t esc\\x1b[0m \\xff",
    )
    assert attempt_logs.tail(b"no newline at the end") == ("no newline at the end",)
    assert attempt_logs.tail(b"") == ()
    assert attempt_logs.tail(b"\n\n") == ("", "")
    assert attempt_logs.tail("a\u202eb\u2028c".encode()) == ("a\\u202eb\\u2028c",)


def test_a_tail_holds_at_most_2000_characters() -> None:
    long = b"x" * 1500
    shown = attempt_logs.tail(b"first\n" + long + b"\n" + long + b"\nlast\n")
    assert shown[-1] == "last" and shown[-2] == "x" * 1500
    assert shown[0] == "..." + "x" * (2000 - 3 - 1500 - 4)
    assert sum(len(line) for line in shown) == 2000
    (only,) = attempt_logs.tail(b"y" * 5000)
    assert only == "..." + "y" * 1997


def test_the_reader_names_the_runners_log_files() -> None:
    work = WorkResult(
        status=WorkStatus.EXITED,
        exit_code=3,
        stdout=b"out",
        stderr=b"err",
        stdout_truncated=False,
        stderr_truncated=False,
        outputs=(),
        duration_ns=1,
    )
    files = dict(attempt_files(work, include_outputs=False))
    assert files[attempt_logs.STDOUT_LOG] == b"out"
    assert files[attempt_logs.STDERR_LOG] == b"err"


def test_every_failure_code_the_runner_writes_has_its_words() -> None:
    written = {
        value
        for name, value in vars(worker_result).items()
        if name.isupper() and isinstance(value, str) and name != "RESULT_NAME"
    }
    assert "worker_failed" in written and "worker_lost" in written
    assert written | {"interrupted_attempt"} == wording.FAILURE_CODES
