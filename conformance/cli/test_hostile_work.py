"""Hostile workers and a full store disk, end to end through ``runstore run`` (issue 28,
observations 1-4): each is a typed outcome (the attempt failed with a stable code, or the
run stopped with the store-refused status and one line), never a traceback, never an
attempt stranded by the coordinator's own error, never a scratch directory left behind."""

from __future__ import annotations

import io
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from runstore.cli import output
from runstore.cli import progress

from conformance.cli.world import json_lines
from conformance.cli.world import runstore
from conformance.cli.world import write_campaign
from conformance.closed_store import rows

HOSTILE = {
    "deep_result": """
        with open(os.path.join(out, "result.json"), "w") as handle:
            handle.write('{"metrics": ' + "[" * 100_000 + "]" * 100_000 + "}")
    """,
    "deep_tree": """
        with open(os.path.join(out, "result.json"), "w") as handle:
            handle.write('{"metrics": {"x": 1}}')
        os.chdir(out)
        for _ in range(1_500):
            os.mkdir("d")
            os.chdir("d")
        os.chmod(".", 0o500)
    """,
    "long_path": """
        with open(os.path.join(out, "result.json"), "w") as handle:
            handle.write('{"metrics": {"x": 1}}')
        os.chdir(out)
        for _ in range(15):  # 15 x 251 bytes: fits the scratch directory, not the bound
            os.mkdir("n" * 250)
            os.chdir("n" * 250)
        open("leaf", "w").close()
    """,
    "large": """
        with open(os.path.join(out, "result.json"), "w") as handle:
            handle.write('{"metrics": {"x": 1}}')
        with open(os.path.join(out, "weights.bin"), "wb") as handle:
            handle.write(os.urandom(6 * 1024 * 1024))
    """,
    "loud": """
        import sys
        with open(os.path.join(out, "result.json"), "w") as handle:
            handle.write('{"metrics": {"x": 1}}')
        sys.stdout.buffer.write(os.urandom(3 * 1024 * 1024).hex().encode())
    """,
}


def hostile_campaign(directory: Path, mode: str) -> Path:
    """One slot whose worker does ``HOSTILE[mode]``."""
    campaign = write_campaign(directory, [("c", "ok")], ["p"], lease_seconds=5)
    body = textwrap.dedent(HOSTILE[mode])
    script = "import os\nout = os.environ['RUNSTORE_OUTPUT_DIR']\n" + body
    (directory / "worker.py").write_text(script, encoding="utf-8")
    return campaign


def run(*arguments: str, tmpdir: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``runstore`` with its temporary directory (scratch directories) at ``tmpdir``."""
    tmpdir.mkdir(exist_ok=True)
    return runstore(*arguments, timeout=timeout, env={"TMPDIR": str(tmpdir)})


@pytest.mark.parametrize(
    ("mode", "code", "detail"),
    [
        ("deep_result", "result_invalid", "result.json nests too deeply"),
        ("deep_tree", "unsafe_output", "deeper than 32 levels"),
        ("long_path", "unsafe_output", "path longer than 1024 bytes"),
    ],
)
def test_a_hostile_worker_fails_its_attempt_with_a_code(
    tmp_path: Path, mode: str, code: str, detail: str
) -> None:
    campaign = hostile_campaign(tmp_path / "c", mode)
    store, scratch = tmp_path / "store", tmp_path / "tmp"
    done = run("run", str(campaign), "--store", str(store), "--init", "--json", tmpdir=scratch)
    assert done.returncode == 1, done.stderr  # unsatisfied: its one attempt failed
    assert "Traceback" not in done.stderr + done.stdout
    assert rows(store, "SELECT state, failure_code FROM attempts") == [("failed", code)]
    (finished,) = [e for e in json_lines(done.stdout) if e["event"] == "attempt_finished"]
    assert detail in str(finished["details"])
    assert list(scratch.iterdir()) == []  # the scratch directory is gone, however deep
    again = run("validate", "--store", str(store), tmpdir=scratch)
    assert again.returncode == 0, again.stdout


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, mounted for the test (root only: skipped, with the reason, where
    mounting is refused)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize(
    ("mode", "left"),
    [("large", ("executing",)), ("loud", ("finalizing",))],  # observations: while executing
    ids=["observation", "attempt-logs"],
)
def test_a_store_disk_that_fills_while_outputs_are_written_stops_the_run_typed(
    tmp_path: Path, small_disk: Path, mode: str, left: tuple[str]
) -> None:
    """A real full disk: the store lives on a 4 MiB tmpfs, and the worker's 6 MiB output
    does not fit the observation's stage (or its 4 MiB of kept stdout the attempt
    artifact's, after the observation was registered). The run stops with the
    store-refused status (3) and one line naming durability_failed; nothing is accepted or
    failed for it; once the disk is grown, ``run --resume --retry-failed 1`` completes the
    slot and the store validates."""
    campaign = hostile_campaign(tmp_path / "c", mode)
    store, scratch = small_disk / "store", tmp_path / "tmp"
    full = run("run", str(campaign), "--store", str(store), "--init", tmpdir=scratch)
    assert full.returncode == 3, full.stderr
    assert "Traceback" not in full.stderr + full.stdout
    lines = [line for line in full.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith("error: durability_failed: "), full.stderr
    assert "No space left on device" in lines[0]
    assert rows(store, "SELECT state FROM attempts") == [left]
    grown = subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=False)
    assert grown.returncode == 0
    resumed = run(
        "run",
        str(campaign),
        "--store",
        str(store),
        "--resume",
        "--retry-failed",
        "1",
        tmpdir=scratch,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert rows(store, "SELECT state FROM attempts ORDER BY retry_index") == [
        ("failed",),
        ("accepted",),
    ]
    checked = run("validate", "--store", str(store), tmpdir=scratch)
    assert checked.returncode == 0, checked.stdout


def test_an_error_ending_a_run_on_a_terminal_stops_the_live_bar_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that ends with a store error (the full disk above) has a live bar that no
    summary will stop: ``close`` stops it, so the error's line lands below the bar instead
    of under a bar still being redrawn (seen in a terminal before)."""
    screen = io.StringIO()
    monkeypatch.setattr(
        output, "console", lambda stream: Console(file=screen, force_terminal=True, width=80)
    )
    reporter = progress.ProgressReporter()
    reporter("campaign", {"campaign": "e2e"})
    reporter("planned", {"ready": 1, "waiting": 0, "blocked": 0, "satisfied": 0})
    assert reporter.live.is_started
    reporter.close()
    assert not reporter.live.is_started
    reporter.close()  # idempotent: the app closes after a summary stopped it too
    assert "e2e" in screen.getvalue()
