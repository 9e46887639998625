"""The local executor (:mod:`runstore.runner.local`) against real subprocesses.

Each worker is ``{python} -c SCRIPT``; the tests read back what the worker saw (argument
list, environment, working directory, input bytes) from the outputs it returned, and check
the executor's refusals (START_FAILED, UNSAFE_OUTPUT, OUTPUT_TOO_LARGE), its kills (time
limit, ignored SIGTERM, cancel, close, stray grandchildren) and its bookkeeping (at most
``jobs`` workers at once, no scratch directory left behind). Grace periods are short so
the whole file runs in a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore.runner.executor import WorkStatus
from runstore.runner.local import LocalExecutor

from conformance.runner.executor_world import SLACK_S
from conformance.runner.executor_world import check_cancel_after_done
from conformance.runner.executor_world import check_exited_worker
from conformance.runner.executor_world import check_non_zero_exit
from conformance.runner.executor_world import gone
from conformance.runner.executor_world import order
from conformance.runner.executor_world import reaped
from conformance.runner.executor_world import run
from conformance.runner.executor_world import wait_for

GRACE_S = 0.5


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    root = tmp_path / "scratch"
    root.mkdir()
    return root


@pytest.fixture
def executor(scratch: Path) -> Iterator[LocalExecutor]:
    """Two jobs; after the test, every scratch directory must be gone."""
    with LocalExecutor(2, scratch_root=str(scratch), kill_grace_s=GRACE_S) as local:
        yield local
    assert list(scratch.iterdir()) == []


SPAWN_GRANDCHILD = """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open(os.environ["PID_FILE"], "w").write(str(child.pid))
"""


# --- a worker that exits by itself ------------------------------------------------------------


def test_exited_worker_returns_outputs_logs_and_saw_inputs_env_and_placeholders(
    executor: LocalExecutor, scratch: Path
) -> None:
    seen = check_exited_worker(executor)
    assert seen["executable"] == sys.executable
    assert Path(str(seen["work_dir"])).parent.parent == scratch


def test_the_worker_inherits_no_runstore_variable_of_the_coordinator(
    executor: LocalExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RUNSTORE_STORE`` (the coordinator's store) and any other inherited ``RUNSTORE_*``
    name stay out of the worker's environment; the order's own variables arrive."""
    monkeypatch.setenv("RUNSTORE_STORE", "/the/coordinators/store")
    monkeypatch.setenv("RUNSTORE_ANYTHING", "inherited")
    monkeypatch.setenv("UNRELATED_VARIABLE", "kept")
    script = """
        import json, os
        names = sorted(n for n in os.environ if n.startswith(("RUNSTORE_", "UNRELATED_")))
        print(json.dumps(names))
    """
    result = run(executor, order(script, env=(("RUNSTORE_ATTEMPT", "attempt-1"),)))
    assert json.loads(result.stdout) == [
        "RUNSTORE_ATTEMPT",
        "RUNSTORE_OUTPUT_DIR",
        "RUNSTORE_WORK_DIR",
        "UNRELATED_VARIABLE",
    ]


def test_non_zero_exit_still_returns_its_outputs(executor: LocalExecutor) -> None:
    check_non_zero_exit(executor)


def test_death_by_its_own_signal_is_exited_with_a_negative_code(executor: LocalExecutor) -> None:
    result = run(executor, order("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert (result.status, result.exit_code) == (WorkStatus.EXITED, -signal.SIGKILL)


def test_a_grandchild_left_behind_by_an_exited_worker_is_killed(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    with reaped(pid_file):
        result = run(executor, order(SPAWN_GRANDCHILD, env=(("PID_FILE", str(pid_file)),)))
        assert (result.status, result.exit_code) == (WorkStatus.EXITED, 0)
        assert gone(int(pid_file.read_text()))


# --- time limit ----------------------------------------------------------------------------


def test_time_limit_kills_the_worker_and_its_grandchild(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    script = SPAWN_GRANDCHILD + "    time.sleep(60)\n"
    with reaped(pid_file):
        began = time.monotonic()
        work = order(script, env=(("PID_FILE", str(pid_file)),), timeout_s=1.0)
        result = run(executor, work)
        elapsed = time.monotonic() - began
        assert result.status is WorkStatus.TIMED_OUT
        assert result.exit_code == -signal.SIGTERM  # it died of the first signal
        assert result.outputs == ()
        assert 1.0 <= elapsed < 1.0 + GRACE_S + SLACK_S
        assert gone(int(wait_for(pid_file)))


def test_a_worker_ignoring_sigterm_is_killed_after_the_grace_period(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    script = """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(os.environ["READY"], "w").write("1")
        time.sleep(60)
    """
    began = time.monotonic()
    result = run(executor, order(script, env=(("READY", str(ready)),), timeout_s=1.0))
    elapsed = time.monotonic() - began
    assert ready.exists(), "the worker did not install its handler in time"
    assert (result.status, result.exit_code) == (WorkStatus.TIMED_OUT, -signal.SIGKILL)
    assert 1.0 + GRACE_S * 0.9 <= elapsed < 1.0 + GRACE_S + SLACK_S


# --- cancel and close ---------------------------------------------------------------------


def test_cancel_of_a_running_and_of_a_queued_order(scratch: Path, tmp_path: Path) -> None:
    started, ran = tmp_path / "started", tmp_path / "ran"
    sleeper = 'import os, time; open(os.environ["MARK"], "w").write("1"); time.sleep(60)'
    with LocalExecutor(1, scratch_root=str(scratch), kill_grace_s=GRACE_S) as local:
        running = local.submit(order(sleeper, env=(("MARK", str(started)),)))
        queued = local.submit(order(sleeper, env=(("MARK", str(ran)),)))
        wait_for(started)
        assert not queued.done() and not running.done()
        queued.cancel()
        assert queued.done()
        assert (queued.result().status, queued.result().exit_code) == (WorkStatus.CANCELLED, None)
        began = time.monotonic()
        running.cancel()
        running.cancel()
        assert time.monotonic() - began < 0.5, "cancel blocked"
        assert local.wait([running], 10) == {running}
        assert running.result().status is WorkStatus.CANCELLED
        assert running.result().exit_code == -signal.SIGTERM
    assert not ran.exists(), "the cancelled queued order ran"
    assert list(scratch.iterdir()) == []


def test_cancel_after_the_result_is_built_changes_nothing(executor: LocalExecutor) -> None:
    check_cancel_after_done(executor)


def test_close_kills_running_workers_and_cancels_queued_ones(scratch: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    sleeper = 'import os, time; open(os.environ["PID_FILE"], "w").write(str(os.getpid()))\n'
    local = LocalExecutor(1, scratch_root=str(scratch), kill_grace_s=GRACE_S)
    with reaped(pid_file):
        running = local.submit(
            order(sleeper + "time.sleep(60)", env=(("PID_FILE", str(pid_file)),))
        )
        queued = local.submit(order("print('never')"))
        pid = int(wait_for(pid_file))
        began = time.monotonic()
        local.close()
        assert time.monotonic() - began < GRACE_S + SLACK_S
        assert running.done() and queued.done()
        assert running.result().status is WorkStatus.CANCELLED
        assert queued.result().status is WorkStatus.CANCELLED
        assert gone(pid)
    local.close()  # idempotent
    with pytest.raises(RuntimeError):
        local.submit(order("pass"))
    assert list(scratch.iterdir()) == []


def test_wait_returns_the_done_ones_or_none_after_the_timeout(executor: LocalExecutor) -> None:
    slow = executor.submit(order("import time; time.sleep(60)"))
    assert executor.wait([slow], 0.2) == set()
    quick = executor.submit(order("pass"))
    assert executor.wait([slow, quick], 30) == {quick}
    assert not slow.done()
    slow.cancel()


def test_constructor_and_wait_refuse_bad_arguments(executor: LocalExecutor) -> None:
    with pytest.raises(ValueError):
        LocalExecutor(0)
    with pytest.raises(ValueError):
        LocalExecutor(1, kill_grace_s=-1)
    with pytest.raises(TypeError):
        executor.wait([object()], 0)  # type: ignore[list-item]


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "detail"),
    [
        (("/nonexistent/program",), "No such file or directory"),
        (("no-such-program-runstore-test",), "No such file or directory"),
        (("{python}", "-c", "pass", "{nope}"), "unknown placeholder {nope} in argument 3"),
        (("{python}", "{work_dir"), "unmatched { in argument 1"),
        (("{python}", "x}"), "unmatched } in argument 1"),
        ((), "empty command"),
    ],
)
def test_start_failed_for_a_command_that_cannot_start(
    executor: LocalExecutor, command: tuple[str, ...], detail: str
) -> None:
    result = run(executor, order("", command=command))
    assert (result.status, result.exit_code, result.outputs) == (WorkStatus.START_FAILED, None, ())
    assert detail in result.detail and "\n" not in result.detail


def test_start_failed_for_a_file_that_is_not_executable(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    program = tmp_path / "program"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o644)
    result = run(executor, order("", command=(str(program),)))
    assert result.status is WorkStatus.START_FAILED
    assert "Permission denied" in result.detail


def test_start_failed_when_no_scratch_directory_can_be_made(tmp_path: Path) -> None:
    with LocalExecutor(1, scratch_root=str(tmp_path / "missing")) as local:
        result = run(local, order("print('ran')"))
    assert (result.status, result.stdout) == (WorkStatus.START_FAILED, b"")
    assert "no scratch" in result.detail


def test_start_failed_for_a_non_positive_time_limit(executor: LocalExecutor) -> None:
    result = run(executor, order("pass", timeout_s=0))
    assert result.status is WorkStatus.START_FAILED and "time limit" in result.detail


@pytest.mark.parametrize(
    "inputs",
    [
        (("../x", b"1"),),
        (("/etc/x", b"1"),),
        (("a/../../x", b"1"),),
        (("a//x", b"1"),),
        (("./x", b"1"),),
        (("a/", b"1"),),
        (("", b"1"),),
        (("x\0y", b"1"),),
    ],
)
def test_start_failed_for_a_hostile_input_path(
    executor: LocalExecutor, tmp_path: Path, inputs: tuple[tuple[str, bytes], ...]
) -> None:
    result = run(executor, order("print('ran')", inputs=inputs))
    assert (result.status, result.stdout) == (WorkStatus.START_FAILED, b"")
    assert repr(inputs[0][0]) in result.detail
    assert not (tmp_path / "x").exists()


def test_start_failed_for_a_duplicate_input_path(executor: LocalExecutor) -> None:
    result = run(executor, order("print('ran')", inputs=(("a", b"1"), ("a", b"2"))))
    assert result.status is WorkStatus.START_FAILED and "'a'" in result.detail


@pytest.mark.parametrize(
    ("script", "named"),
    [
        ("os.symlink('/etc/passwd', 'link')", "link"),
        ("os.mkdir('d'); os.symlink('..', 'd/loop')", "d/loop"),
        ("os.mkfifo('pipe')", "pipe"),
        ("import socket; socket.socket(socket.AF_UNIX).bind('sock')", "sock"),
        (
            "import shutil; os.chdir('..'); shutil.rmtree('output'); os.symlink('work', 'output')",
            "replaced",
        ),
        ("import shutil; os.chdir('..'); shutil.rmtree('output')", "output: unreadable"),
    ],
)
def test_unsafe_output_names_the_entry(executor: LocalExecutor, script: str, named: str) -> None:
    prologue = "import os; os.chdir(os.environ['RUNSTORE_OUTPUT_DIR']); open('ok', 'w').write('1')"
    result = run(executor, order(f"{prologue}\n{script}"))
    assert (result.status, result.exit_code, result.outputs) == (WorkStatus.UNSAFE_OUTPUT, 0, ())
    assert named in result.detail


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory whatever its mode")
def test_unsafe_output_for_an_unreadable_directory(executor: LocalExecutor) -> None:
    script = "import os; d = os.environ['RUNSTORE_OUTPUT_DIR'] + '/shut'; os.mkdir(d, 0)"
    result = run(executor, order(script))
    assert result.status is WorkStatus.UNSAFE_OUTPUT and "shut" in result.detail


@pytest.mark.parametrize(("limit", "status"), [(99, "output_too_large"), (100, "exited")])
def test_output_limit_counts_all_files_together(
    executor: LocalExecutor, limit: int, status: str
) -> None:
    script = """
        import os
        os.chdir(os.environ["RUNSTORE_OUTPUT_DIR"]); os.mkdir("sub"); os.mkdir("empty")
        open("a.bin", "wb").write(b"a" * 60); open("sub/b.bin", "wb").write(b"b" * 40)
    """
    result = run(executor, order(script, output_limit_bytes=limit))
    assert result.status is WorkStatus(status)
    if result.status is WorkStatus.EXITED:
        assert result.outputs == (("a.bin", b"a" * 60), ("sub/b.bin", b"b" * 40))
    else:
        assert result.outputs == () and "100" in result.detail


@pytest.mark.parametrize("limit", [4, 10])
def test_logs_keep_their_head_and_say_when_cut(executor: LocalExecutor, limit: int) -> None:
    script = "import sys; sys.stdout.write('0123456789'); sys.stderr.write('abcd')"
    result = run(executor, order(script, log_limit_bytes=limit))
    assert (result.stdout, result.stdout_truncated) == (b"0123456789"[:limit], limit < 10)
    assert (result.stderr, result.stderr_truncated) == (b"abcd", False)


# --- bookkeeping ------------------------------------------------------------------------------


def test_at_most_jobs_workers_run_at_once(executor: LocalExecutor, tmp_path: Path) -> None:
    events = tmp_path / "events"
    script = """
        import os, time
        def note(sign):
            with open(os.environ["EVENTS"], "a") as log:
                log.write(f"{time.monotonic()} {sign}\\n")
        note(1); time.sleep(0.4); note(-1)
    """
    handles = [executor.submit(order(script, env=(("EVENTS", str(events)),))) for _ in range(4)]
    while not all(handle.done() for handle in handles):
        executor.wait(handles, 30)
    assert [handle.result().status for handle in handles] == [WorkStatus.EXITED] * 4
    moments = sorted(
        (float(t), int(sign))
        for t, sign in (line.split() for line in events.read_text().splitlines())
    )
    assert len(moments) == 8
    running, most = 0, 0
    for _, sign in moments:
        running += sign
        most = max(most, running)
    assert most == 2


def test_scratch_is_removed_even_when_the_worker_locked_it(
    executor: LocalExecutor, scratch: Path
) -> None:
    script = """
        import os
        os.makedirs("locked/inner"); open("locked/inner/f", "w").write("x")
        os.chmod("locked/inner", 0o500); os.chmod("locked", 0); os.chmod(".", 0o500)
        out = os.environ["RUNSTORE_OUTPUT_DIR"]
        os.mkdir(out + "/ro"); open(out + "/ro/f", "w").write("y"); os.chmod(out + "/ro", 0o500)
    """
    result = run(executor, order(script))
    assert (result.status, result.outputs) == (WorkStatus.EXITED, (("ro/f", b"y"),))
    assert list(scratch.iterdir()) == []


def test_waiting_on_no_handles_sleeps_the_timeout(executor: LocalExecutor) -> None:
    """The coordinator waits for a lease to expire this way: it must not spin."""
    began = time.monotonic()
    assert executor.wait([], 0.2) == set()
    assert time.monotonic() - began >= 0.2
