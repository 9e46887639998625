"""``explain``, ``failures`` and ``logs`` through the console script (SPEC.md section 15.6,
"When a slot fails"): a failing worker's own words reach the human output with the path
of the log that holds them, times read as ISO 8601, failures are grouped by cause, and a
log is printed byte for byte, or refused (printing nothing) once a byte of it changed.

The campaign's ``fail`` worker (the shared world's worker with more stderr) writes 30
numbered lines and then a line with an escape sequence and rich markup to stderr, and a
byte that is not UTF-8 to stdout, then exits 3; what it wrote is this file's constants,
never read back from the code under test.
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conformance.cli.world import RUNSTORE
from conformance.cli.world import WORKER
from conformance.cli.world import runstore
from conformance.cli.world import write_campaign

CAUSE = "OverflowError: Integer exceeds 64-bit range"
LAST_LINE = "\x1b[31m" + CAUSE + " [bold]x"
"""The fail worker's last stderr line: an escape sequence and rich markup around it."""
STDERR = "to stderr\n" + "".join(f"line {i}\n" for i in range(30)) + LAST_LINE + "\n"
STDOUT_EXTRA = b"raw \xff bytes\r\n"
FAILING = """\
if mode == "fail":
    sys.stdout.flush()
    sys.stdout.buffer.write(STDOUT_EXTRA)
    sys.stdout.buffer.flush()
    for i in range(30):
        print(f"line {i}", file=sys.stderr)
    print(LAST_LINE, file=sys.stderr)
    sys.exit(3)
"""


def failing_campaign(directory: Path, candidates: list[tuple[str, str]], name: str) -> Path:
    campaign = write_campaign(directory, candidates, ["p", "q"], name=name)
    marker = 'print("to stderr", file=sys.stderr)\n'
    assert marker in WORKER
    constants = f"STDOUT_EXTRA = {STDOUT_EXTRA!r}\nLAST_LINE = {LAST_LINE!r}\n"
    (directory / "worker.py").write_text(
        constants + WORKER.replace(marker, marker + FAILING), encoding="utf-8"
    )
    return campaign


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Campaign ``e2e``: ``ok`` accepted, ``fail`` failed worker_failed and ``bad``
    failed result_invalid, on problems p and q; campaign ``clean``: ``ok`` accepted."""
    directory = tmp_path_factory.mktemp("triage")
    root = directory / "store"
    failing = failing_campaign(
        directory / "e2e", [("ok", "ok"), ("fail", "fail"), ("bad", "invalid")], "e2e"
    )
    done = runstore("run", str(failing), "--store", str(root), "--init", "-j", "2")
    assert done.returncode == 1, done.stderr
    clean = write_campaign(directory / "clean", [("ok", "ok")], ["p"], name="clean")
    done = runstore("run", str(clean), "--store", str(root))
    assert done.returncode == 0, done.stderr
    return root


def raw(*arguments: str) -> subprocess.CompletedProcess[bytes]:
    """The console script with its output as bytes (``logs`` prints a log as it is)."""
    return subprocess.run(
        [RUNSTORE, *arguments], capture_output=True, timeout=120, stdin=subprocess.DEVNULL
    )


def field(output: str, name: str) -> str:
    """The value of the row ``name`` of a human ``field value`` table."""
    (value,) = [
        line.split(None, 1)[1].strip()
        for line in output.splitlines()
        if line.split(None, 1)[:1] == [name]
    ]
    return value


def iso(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns // 10**9, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns // 10**6 % 1000:03d}Z"


# --- explain ------------------------------------------------------------------------------


def test_explain_says_the_cause_in_words_with_the_log_and_its_last_lines(store: Path) -> None:
    shown = runstore("explain", "e2e/fail/p", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert field(shown.stdout, "cause") == "the worker exited with status 3"
    log = Path(field(shown.stdout, "stderr.log"))
    assert log.is_absolute() and log.is_relative_to(store)
    assert log.read_text(encoding="utf-8") == STDERR
    assert Path(field(shown.stdout, "stdout.log")).read_bytes().endswith(STDOUT_EXTRA)
    # The worker's words, its escape made visible and its markup kept as written ...
    assert "\\x1b[31m" + CAUSE + " [bold]x" in shown.stdout
    assert "\x1b" not in shown.stdout
    # ... and only the last 10 lines of its stderr.
    assert re.search(r"\bline 21\b", shown.stdout) and re.search(r"\bline 29\b", shown.stdout)
    assert not re.search(r"\bline 20\b", shown.stdout)


def test_explain_json_keeps_nanoseconds_and_gains_the_log_paths_and_tail(store: Path) -> None:
    shown = runstore("explain", "e2e/fail/p", "--store", str(store), "--json")
    assert shown.returncode == 0, shown.stderr
    (attempt,) = json.loads(shown.stdout)["attempts"]
    assert isinstance(attempt["started_at_ns"], int) and attempt["started_at_ns"] > 10**18
    logs = attempt["logs"]
    assert logs["problem"] is None
    expected = [f"line {i}" for i in range(21, 30)] + [LAST_LINE.replace("\x1b", "\\x1b")]
    assert logs["stderr_tail"] == expected
    assert Path(logs["stderr"]).read_text(encoding="utf-8") == STDERR
    assert Path(logs["stdout"]).name == "stdout.log"


def test_explain_shows_instants_as_iso_8601_and_no_epoch_nanoseconds(store: Path) -> None:
    document = json.loads(runstore("explain", "e2e/fail/q", "--store", str(store), "--json").stdout)
    shown = runstore("explain", "e2e/fail/q", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert not re.search(r"\b\d{16,}\b", shown.stdout), "an epoch-nanosecond value is shown"
    (attempt,) = document["attempts"]
    instants = [attempt["started_at_ns"], attempt["finished_at_ns"]]
    instants += [t["at_ns"] for t in attempt["transitions"]]
    instants += [e["at_ns"] for e in attempt["events"]]
    instants += [lease["acquired_at_ns"] for lease in attempt["leases"]]
    for ns in instants:
        assert iso(ns) in shown.stdout
    assert field(shown.stdout, "started_at") == iso(attempt["started_at_ns"])
    assert re.fullmatch(r"[\d.]+ (ms|s)", field(shown.stdout, "duration"))


def test_explain_of_an_accepted_slot_names_its_logs_too(store: Path) -> None:
    shown = runstore("explain", "e2e/ok/p", "--store", str(store), "--json")
    (attempt,) = json.loads(shown.stdout)["attempts"]
    assert attempt["logs"]["stderr_tail"] == ["to stderr"]
    assert Path(attempt["logs"]["stdout"]).read_text(encoding="utf-8") == "running ok/p\n"


# --- failures ----------------------------------------------------------------------------


def test_failures_groups_by_code_with_counts_and_excerpts(store: Path) -> None:
    shown = runstore("failures", "--store", str(store), "--json")
    assert shown.returncode == 1, shown.stderr
    document = json.loads(shown.stdout)
    assert document["slots"] == 7 and document["unsatisfied"] == 4
    groups = {group["code"]: group for group in document["groups"]}
    assert set(groups) == {"worker_failed", "result_invalid"}
    assert groups["worker_failed"]["count"] == 2
    assert groups["worker_failed"]["slots"] == ["e2e/fail/p/measurement", "e2e/fail/q/measurement"]
    assert groups["result_invalid"]["slots"] == ["e2e/bad/p/measurement", "e2e/bad/q/measurement"]
    excerpt = groups["worker_failed"]["excerpt"]
    assert excerpt["slot"] == "e2e/fail/p/measurement" and excerpt["details"] == {"exit_code": 3}
    assert excerpt["logs"]["stderr_tail"][-1] == LAST_LINE.replace("\x1b", "\\x1b")
    assert Path(excerpt["logs"]["stderr"]).read_text(encoding="utf-8") == STDERR
    assert groups["result_invalid"]["excerpt"]["logs"]["stderr_tail"] == ["to stderr"]
    # The ready command lines run as they are.
    for key in ("explain_command", "logs_command"):
        words = shlex.split(excerpt[key])
        assert words[0] == "runstore"
        assert runstore(*words[1:]).returncode == 0


def test_failures_text_fits_80_columns_and_names_each_cause(store: Path) -> None:
    shown = runstore("failures", "--store", str(store))
    assert shown.returncode == 1, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "4 of 7 slots unsatisfied, 2 causes:"
    assert "worker_failed: 2 slots failed" in lines
    assert "result_invalid: 2 slots failed" in lines
    assert "  e2e/fail/p/measurement, attempt 0: the worker exited with status 3" in lines
    assert "  e2e/fail/p/measurement, e2e/fail/q/measurement" in lines
    assert f"    runstore logs e2e/fail/p/measurement --store {store}" in lines
    assert f"    runstore explain e2e/fail/p/measurement --store {store}" in lines
    assert any(line.startswith("    | ") and CAUSE in line for line in lines)
    for line in lines:
        # A path or a command line stands alone, indented; everything else fits.
        alone = line.startswith("    ") and str(store) in line and " | " not in line
        assert alone or len(line) <= 80, line


def test_failures_names_the_first_ten_slots_and_counts_the_rest(tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("fail", "fail")], [f"p{i:02d}" for i in range(12)])
    root = tmp_path / "store"
    assert runstore("run", str(campaign), "--store", str(root), "--init").returncode == 1
    shown = runstore("failures", "--store", str(root))
    assert shown.returncode == 1, shown.stderr
    assert "worker_failed: 12 slots failed" in shown.stdout
    named = " ".join(shown.stdout.split())
    assert "e2e/fail/p09/measurement and 2 more" in named
    assert "e2e/fail/p10/measurement," not in named
    document = json.loads(runstore("failures", "--store", str(root), "--json").stdout)
    (group,) = document["groups"]
    assert group["slots"] == [f"e2e/fail/p{i:02d}/measurement" for i in range(12)]


def test_failures_exits_0_when_no_slot_in_view_is_unsatisfied(store: Path, tmp_path: Path) -> None:
    campaign = write_campaign(tmp_path / "c", [("ok", "ok")], ["p"], name="clean")
    clean = tmp_path / "store"
    assert runstore("run", str(campaign), "--store", str(clean), "--init").returncode == 0
    empty = runstore("failures", "--store", str(clean))
    assert empty.returncode == 0, empty.stdout + empty.stderr
    assert empty.stdout == "no failures: 1 slot, each accepted, running or pending\n"
    shown = runstore("failures", "--store", str(store), "--campaign", "clean")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith("no failures in campaign clean: 1 slot, each accepted")
    document = json.loads(
        runstore("failures", "--store", str(store), "--campaign", "clean", "--json").stdout
    )
    assert document["groups"] == [] and document["slots"] == 1
    only_e2e = json.loads(
        runstore("failures", "--store", str(store), "--campaign", "e2e", "--json").stdout
    )
    assert only_e2e["slots"] == 6 and only_e2e["unsatisfied"] == 4


# --- logs --------------------------------------------------------------------------------


def test_logs_prints_the_exact_bytes_of_stderr_and_stdout(store: Path) -> None:
    stderr = raw("logs", "e2e/fail/p/measurement", "--store", str(store))
    assert stderr.returncode == 0, stderr.stderr
    assert stderr.stdout == STDERR.encode()
    also = raw(
        "logs", "e2e/fail/p/measurement", "--store", str(store), "--stderr", "--attempt", "0"
    )
    assert also.stdout == STDERR.encode()
    stdout = raw("logs", "e2e/fail/p/measurement", "--store", str(store), "--stdout")
    assert stdout.returncode == 0, stdout.stderr
    assert stdout.stdout == b"running fail/p\n" + STDOUT_EXTRA
    shown = runstore("logs", "e2e/fail/p", "--store", str(store), "--stdout", "--json")
    document = json.loads(shown.stdout)
    assert document["slot"] == "e2e/fail/p/measurement" and document["attempt"] == 0
    assert document["stream"] == "stdout"
    assert document["text"] == "running fail/p\nraw \\xff bytes\r\n"
    assert Path(document["path"]).read_bytes() == b"running fail/p\n" + STDOUT_EXTRA


@pytest.mark.parametrize(
    ("arguments", "code", "status"),
    [
        (("e2e/nothing/here/measurement",), "unknown_slot", 3),
        (("e2e/fail/p", "--attempt", "1"), "log_unavailable", 3),
        (("e2e/fail/p", "--attempt", "-1"), None, 2),
        (("e2e/fail/p", "--stdout", "--stderr"), None, 2),
    ],
)
def test_logs_refuses_what_it_cannot_show_and_prints_nothing(
    store: Path, arguments: tuple[str, ...], code: str | None, status: int
) -> None:
    refused = raw("logs", *arguments, "--store", str(store))
    assert refused.returncode == status
    assert refused.stdout == b""
    if code is not None:
        assert refused.stderr.decode().startswith(f"error: {code}: ")
        as_json = runstore("logs", *arguments, "--store", str(store), "--json")
        assert json.loads(as_json.stdout)["error"] == code


def flip_a_byte(path: Path) -> None:
    for directory in (path.parent, path):
        directory.chmod(directory.stat().st_mode | stat.S_IWUSR)
    data = bytearray(path.read_bytes())
    data[data.index(b"Integer")] ^= 0x20  # "Integer" -> "integer": same size, other bytes
    path.write_bytes(bytes(data))


def test_a_tampered_log_is_refused_and_shown_as_the_reason(store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(store, copy, symlinks=True)
    document = json.loads(runstore("explain", "e2e/fail/p", "--store", str(copy), "--json").stdout)
    (attempt,) = document["attempts"]
    log = Path(attempt["logs"]["stderr"].replace(str(store), str(copy), 1))
    flip_a_byte(log)

    refused = raw("logs", "e2e/fail/p/measurement", "--store", str(copy))
    assert refused.returncode == 3 and refused.stdout == b""
    assert refused.stderr.decode().startswith("error: artifact_corrupt: ")
    assert raw("logs", "e2e/fail/q/measurement", "--store", str(copy)).returncode == 0

    shown: Any = json.loads(
        runstore("explain", "e2e/fail/p", "--store", str(copy), "--json").stdout
    )["attempts"][0]["logs"]
    assert shown["stderr_tail"] is None and shown["problem"].startswith("artifact_corrupt: ")
    assert shown["stderr"] == str(log)  # the file is still there, and named
    text = runstore("explain", "e2e/fail/p", "--store", str(copy))
    assert text.returncode == 0 and "artifact_corrupt" in text.stdout
    assert CAUSE.lower() not in text.stdout.lower()
    failures = runstore("failures", "--store", str(copy))
    assert failures.returncode == 1 and "stderr.log not shown: artifact_corrupt" in failures.stdout
