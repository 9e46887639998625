"""tools/mutate end to end on a small module (impl/edges.py, judged by one test file through
a configuration written here): it never edits the working tree, not even when stopped with
SIGTERM mid-run (a run of cosmic-ray's own local distributor, stopped so, left a mutant in
the tree), and stops its workers; the next run resumes where it stopped, prints a score
line per module and writes both reports."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mutation.workers import working_in

from conformance.needs import missing

ROOT = Path(__file__).resolve().parents[2]
MODULE = "impl/edges.py"
CONFIG = f"""
core = ["{MODULE}"]

[[tests]]
modules = "{MODULE}"
run = ["conformance/writer/test_phases.py"]

[[tests]]
modules = "impl/*"
run = ["conformance/writer/test_phases.py"]

[[operator_filter]]
operator = "core/ReplaceBinaryOperator_.*"
reason = "not the subject of this test: fewer mutants keep the end-to-end run short"
"""


@pytest.fixture(scope="module")
def tool() -> None:
    for name in ("cosmic_ray", "coverage", "pytest_cov"):
        if importlib.util.find_spec(name) is None:
            missing(f"{name} is not installed (pip install -e '.[dev,mutation]')")


def _digest() -> str:
    return hashlib.sha256((ROOT / MODULE).read_bytes()).hexdigest()


def _command(tmp_path: Path, *extra: str) -> list[str]:
    config = tmp_path / "mutation.toml"
    config.write_text(CONFIG, encoding="utf-8")
    return [
        sys.executable,
        str(ROOT / "tools" / "mutate"),
        MODULE,
        "--config",
        str(config),
        "--work",
        str(tmp_path / "work"),
        "--jobs",
        "2",
        *extra,
    ]


def test_sigterm_mid_run_leaves_the_tree_alone_and_the_next_run_resumes(
    tool: None, tmp_path: Path
) -> None:
    before = _digest()
    process = subprocess.Popen(
        _command(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
    )
    database = tmp_path / "work" / "sessions" / "whole" / "impl__edges.py" / "session.sqlite"
    deadline = time.monotonic() + 600

    def results() -> int:
        if not database.exists():
            return 0
        try:
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
                return int(
                    connection.execute(
                        "SELECT count(*) FROM work_results WHERE worker_outcome = 'NORMAL'"
                    ).fetchone()[0]
                )
        except sqlite3.OperationalError:
            return 0

    while results() < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before it could be interrupted"
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=60) != 0
    assert _digest() == before
    assert working_in(tmp_path / "work") == []  # the workers were stopped too
    # Every worker copy is gone or rebuilt at the next start; the next run resumes.
    done = subprocess.run(
        _command(tmp_path), capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert f"{MODULE}: resuming, " in done.stdout, done.stdout
    assert _digest() == before
    _check_reports(done.stdout, tmp_path / "work" / "report")


def _check_reports(stdout: str, reports: Path) -> None:
    (line,) = [x for x in stdout.splitlines() if x.startswith(f"{MODULE}: ") and "%" in x]
    assert "% killed (" in line and "survived" in line and "skipped" in line, line
    document = json.loads((reports / "mutation.json").read_text())
    result = document["modules"][MODULE]
    fates = result["fates"]
    assert fates.get("error", 0) == 0, result
    assert fates.get("skipped", 0) > 0  # the filtered operator's mutants
    assert result["killed"] > 0
    assert result["scored"] == fates.get("killed", 0) + fates.get("survived", 0)
    for mutant in result["mutants"]:
        assert mutant["fate"] != "skipped" or "filtered operator" in mutant["note"], mutant
        assert mutant["fate"] != "survived" or mutant["diff"], mutant
    assert "<table>" in (reports / "mutation.html").read_text()
