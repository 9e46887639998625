"""tools/mutate's per-mutant time limit (tools/mutation/run_mutant.py): a mutant whose tests
hang is stopped at its own limit, the floor plus the factor times its tests' mapped
seconds, not at the whole candidate set's, and counted as a killed timeout."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mutation import results
from mutation import run_mutant
from mutation import selection
from mutation import session as sessions
from mutation import settings

from conformance.runner.executor_world import gone

SETTINGS = settings.load_settings()


def test_a_mutant_past_its_own_limit_is_killed_with_everything_its_tests_started(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A hanging test is stopped at the limit: the mutant counts as killed (status 1), the
    output says ``run_mutant: timeout``, and the test's process group is gone, including a
    process the test started."""
    pids = tmp_path / "pids"
    (tmp_path / "test_hangs.py").write_text(
        "import os, subprocess, time\n\n"
        "def test_hangs():\n"
        "    child = subprocess.Popen(['sleep', '300'])\n"
        f"    open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "    time.sleep(300)\n"
    )
    began = time.monotonic()
    assert run_mutant.run_tests(["test_hangs.py"], tmp_path, limit_s=8) == 1
    assert time.monotonic() - began < 60
    assert results.TIMED_OUT in capfd.readouterr().out
    assert all(gone(pid) for pid in map(int, pids.read_text().split()))


def test_the_tests_of_a_mutant_die_with_its_command(tmp_path: Path) -> None:
    """cosmic-ray's own timeout, a backstop, kills the mutant's command with its process
    group; the child pytest has a group of its own, so it must die with the command
    (``PR_SET_PDEATHSIG``), not run on unsupervised: the first whole run of the
    coordinator left such orphans spinning for minutes."""
    pids = tmp_path / "pids"
    (tmp_path / "test_hangs.py").write_text(
        "import os, time\n\n"
        "def test_hangs():\n"
        f"    open({str(pids)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(300)\n"
    )
    tools = Path(__file__).resolve().parents[2] / "tools"
    code = "from mutation import run_mutant; run_mutant.run_tests(['test_hangs.py'], {!r})"
    code = code.format(str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(tools))
    command = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not pids.exists() or not pids.read_text():
            assert time.monotonic() < deadline, "the hanging test never started"
            time.sleep(0.05)
        os.killpg(command.pid, signal.SIGKILL)  # as cosmic-ray's timeout does
        command.wait()
        assert gone(int(pids.read_text()))
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()


def test_a_mutant_within_its_limit_keeps_its_verdict(tmp_path: Path) -> None:
    """The limit only ends runs that pass it: a quick passing run survives (0), a quick
    failing one is killed (1)."""
    (tmp_path / "test_quick.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "test_fails.py").write_text("def test_b():\n    assert False\n")
    assert run_mutant.run_tests(["test_quick.py"], tmp_path, limit_s=60) == 0
    assert run_mutant.run_tests(["test_fails.py"], tmp_path, limit_s=60) == 1


def test_the_limit_is_the_floor_plus_the_factor_times_the_tests_mapped_seconds() -> None:
    """The map's seconds of a mutant's tests add up; a test the map did not time leaves the
    mutant without a limit of its own (None), never with a guessed one."""
    line_map = selection.LineMap(
        candidates=("conformance/a",),
        lines={3: ("t::a", "t::b")},
        durations={"t::a": 1.5, "t::b": 2.0},
        seconds=3.5,
    )
    assert line_map.seconds_of(["t::a", "t::b"]) == 3.5
    assert line_map.seconds_of(["t::a", "t::c"]) is None
    assert line_map.seconds_of(["conformance/a"]) is None


def test_the_session_passes_the_configured_limit_to_each_mutant(tmp_path: Path) -> None:
    """The test command cosmic-ray runs carries ``mutant_floor_seconds`` and ``factor`` from
    tools/mutation.toml, and cosmic-ray's own timeout is longer than the longest limit a
    mutant can have (floor + factor x every candidate's seconds), so it stays a backstop."""
    session = sessions.session_for("impl/canonical.py", None, tmp_path)
    session.directory.mkdir(parents=True)
    config = sessions.write_config(session, ["http://127.0.0.1:1"], 10.0, SETTINGS)
    text = config.read_text()
    floor, factor = SETTINGS.mutant_floor, SETTINGS.timeout_factor
    assert f"--floor {floor:g} --factor {factor:g}" in text
    assert (floor, factor) == (20.0, 3.0)
    (timeout,) = [line for line in text.splitlines() if line.startswith("timeout = ")]
    assert float(timeout.split(" = ")[1]) > floor + factor * 10.0  # the longest mutant limit


def test_a_timeout_of_its_own_counts_among_the_timeouts(tmp_path: Path) -> None:
    """The report counts a mutant killed by its own limit among the timeouts, like one
    cosmic-ray timed out, and still as killed."""
    database = tmp_path / "session.sqlite"
    with sqlite3.connect(database) as connection:
        connection.executescript(
            "CREATE TABLE mutation_specs (operator_name, occurrence, start_pos_row, job_id);"
            "CREATE TABLE work_results (worker_outcome, test_outcome, diff, output, job_id);"
            "INSERT INTO mutation_specs VALUES ('core/NumberReplacer', 0, 1, 'a'),"
            " ('core/NumberReplacer', 1, 1, 'b'), ('core/NumberReplacer', 2, 1, 'c');"
            "INSERT INTO work_results VALUES ('NORMAL', 'KILLED', '', 'timeout', 'a'),"
            f" ('NORMAL', 'KILLED', '', '{results.TIMED_OUT}: past 23 s', 'b'),"
            " ('NORMAL', 'KILLED', '', '1 failed', 'c');"
        )
    connection.close()
    result = results.read_result("impl/x.py", database, 1.0, {})
    assert result.timeouts == 2
    assert [m.fate for m in result.mutants] == ["killed"] * 3


def test_the_parent_death_signal_option_is_the_kernels() -> None:
    """tools/mutate's ``PR_SET_PDEATHSIG`` is the value impl/runner/supervise.py uses, which
    conformance/opening/test_kernel_constants.py pins against <linux/prctl.h> and a table
    citing the kernel source (issue 34: every kernel constant the code uses is pinned)."""
    from runstore.runner import supervise

    assert run_mutant.PR_SET_PDEATHSIG == supervise._PR_SET_PDEATHSIG == 1
