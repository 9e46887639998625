"""Workers die with their attempt and with their coordinator (SPEC.md section 15.3,
"Lifetime of a worker"; issue 28, observation 5).

A worker here starts a daemon: it forks, the child calls ``setsid`` (a session, and so a
process group, of its own), forks again and leaves, so the grandchild belongs to no group
the executor knows and its parent is gone. The daemon appends to a file outside the
scratch directory every 10 ms. Checked: when the attempt ends (the worker's own exit, its
time limit, a cancel) the daemon is dead before the result is visible and the file stops
growing; a worker that kills its supervisor is ``worker_lost`` and dies with it; a
``runstore run`` killed with SIGKILL has every worker, daemon and supervisor dead well
within one lease; and the next run removes the dead coordinator's scratch directories and
nothing else: not a live executor's, not entries that merely look like one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore.runner.executor import WorkStatus
from runstore.runner.local import LocalExecutor

from conformance.cli.world import RUNSTORE
from conformance.runner.executor_world import gone
from conformance.runner.executor_world import order
from conformance.runner.executor_world import wait_for

GRACE_S = 0.3

LEASE_S = 3
"""The campaigns' lease (the least a campaign may ask for)."""

KILL_BOUND_S = 1.0
"""How soon after its coordinator's SIGKILL every worker must be dead: well within the
lease, so nothing a worker does after it could still be published."""

DAEMON = """
    import os, sys, time
    def daemon():
        os.setsid()
        if os.fork():
            os._exit(0)  # the session leader leaves: its child has no parent of the worker's
        path = os.environ["DAEMON_PID"]
        with open(path + ".tmp", "w") as mark:
            mark.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        while True:
            with open(os.environ["BEAT"], "a") as beat:
                beat.write("x")
            time.sleep(0.01)
    if os.fork() == 0:
        try:
            daemon()
        finally:
            os._exit(0)
    while not os.path.exists(os.environ["DAEMON_PID"]):
        time.sleep(0.005)
    open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json"), "w").write("{}")
    if sys.argv[1] == "hang":
        time.sleep(60)
"""


@contextlib.contextmanager
def killed_afterwards(*pid_files: Path) -> Iterator[None]:
    """SIGKILL whatever the pid files name once the test is over (a failing test must not
    leave a daemon behind)."""
    try:
        yield
    finally:
        for path in pid_files:
            if path.exists() and path.read_text():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(path.read_text()), signal.SIGKILL)


def still(path: Path, for_s: float = 0.3) -> bool:
    """Whether ``path`` keeps its size for ``for_s`` (nothing appends to it any more)."""
    size = path.stat().st_size
    time.sleep(for_s)
    return path.stat().st_size == size


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("exit", WorkStatus.EXITED),
        ("time_limit", WorkStatus.TIMED_OUT),
        ("cancel", WorkStatus.CANCELLED),
    ],
)
def test_a_daemon_the_worker_started_dies_when_its_attempt_ends(
    tmp_path: Path, ending: str, status: WorkStatus
) -> None:
    beat, pid_file, scratch = tmp_path / "beat", tmp_path / "daemon.pid", tmp_path / "scratch"
    scratch.mkdir()
    env = (("BEAT", str(beat)), ("DAEMON_PID", str(pid_file)))
    mode = "exit" if ending == "exit" else "hang"
    work = order(DAEMON, mode, env=env, timeout_s=1.0 if ending == "time_limit" else 20.0)
    with (
        killed_afterwards(pid_file),
        LocalExecutor(1, scratch_root=str(scratch), kill_grace_s=GRACE_S) as local,
    ):
        handle = local.submit(work)
        if ending == "cancel":
            wait_for(pid_file)
            handle.cancel()
        assert local.wait([handle], 30) == {handle}
        assert handle.result().status is status
        daemon = int(wait_for(pid_file))
        # Dead before the result was visible: reaped by the attempt's supervisor.
        assert gone(daemon, within_s=0.05), f"the daemon outlived its attempt ({ending})"
        assert still(beat), "the daemon still writes after its attempt ended"
    assert list(scratch.iterdir()) == []


KILL_THE_SUPERVISOR = """
    import os, signal, time
    parent = os.getppid()
    with open(f"/proc/{parent}/cmdline", "rb") as cmdline:
        named = b"supervise" in cmdline.read()
    open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
    if named:  # never the coordinator itself: that is the test process
        os.kill(parent, signal.SIGKILL)
    time.sleep(60)
"""


def test_a_worker_that_kills_its_supervisor_is_lost_and_dies_with_it(tmp_path: Path) -> None:
    pid_file, scratch = tmp_path / "pid", tmp_path / "scratch"
    scratch.mkdir()
    with (
        killed_afterwards(pid_file),
        LocalExecutor(1, scratch_root=str(scratch), kill_grace_s=GRACE_S) as local,
    ):
        handle = local.submit(order(KILL_THE_SUPERVISOR, env=(("PID_FILE", str(pid_file)),)))
        assert local.wait([handle], 30) == {handle}
        result = handle.result()
        assert (result.status, result.exit_code, result.outputs) == (
            WorkStatus.WORKER_LOST,
            None,
            (),
        )
        assert "supervisor" in result.detail and "\n" not in result.detail
        assert gone(int(wait_for(pid_file)), within_s=1.0)
    assert list(scratch.iterdir()) == []


def test_this_machine_gives_the_supervisor_what_it_needs() -> None:
    """A child subreaper and per-thread children lists in /proc: the supervisor refuses to
    run any command without them (section 15.3), so on this machine nothing may be missing.
    Probed in a throwaway process: the probe makes its caller a subreaper for good."""
    probe = "from runstore.runner.supervise import become_subreaper as b; print(repr(b()))"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert (found.returncode, found.stdout, found.stderr) == (0, "''\n", "")


# --- a coordinator killed with SIGKILL ----------------------------------------------------------

CAMPAIGN_WORKER = """
    import os, sys, time
    marks, name = os.environ["MARKS"], os.environ["RUNSTORE_CANDIDATE"]
    def mark(kind):
        path = os.path.join(marks, f"{name}-{kind}")
        with open(path + ".tmp", "w") as handle:
            handle.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
    if os.fork() == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                mark("daemon")
                time.sleep(60)
        finally:
            os._exit(0)
    mark("worker")
    time.sleep(60)
"""


def sleeping_campaign(directory: Path, marks: Path) -> Path:
    """Two candidates whose workers each start a daemon and sleep 60 s."""
    directory.mkdir()
    (directory / "worker.py").write_text(textwrap.dedent(CAMPAIGN_WORKER), encoding="utf-8")
    candidates = "".join(
        f'[[candidates]]\nname = "{name}"\ncommand = ["{{python}}", "worker.py"]\n'
        f'files = ["worker.py"]\nenv = {{ MARKS = "{marks}" }}\n'
        for name in ("a", "b")
    )
    text = (
        f'[campaign]\nname = "lifetime"\ntimeout_seconds = 30\nlease_seconds = {LEASE_S}\n'
        f'{candidates}[[problems]]\nname = "p"\n'
    )
    (directory / "campaign.toml").write_text(text, encoding="utf-8")
    return directory / "campaign.toml"


def identity(pid: int) -> str:
    """A process's owner tag as SPEC section 15.3 names scratch directories: its pid
    namespace's inode, its pid and its start time in clock ticks since boot."""
    namespace = os.stat(f"/proc/{pid}/ns/pid").st_ino
    start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return f"{namespace}-{pid}-{start}"


def children(pid: int) -> list[int]:
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def all_gone_after(pids: list[int], bound_s: float) -> float:
    """Seconds until every one of ``pids`` is dead (a zombie counts), at most ``bound_s``."""
    began = time.monotonic()
    for pid in pids:
        gone(pid, within_s=max(0.01, bound_s - (time.monotonic() - began)))
    return time.monotonic() - began


@contextlib.contextmanager
def killed_coordinator(tmp_path: Path) -> Iterator[tuple[Path, str, float, list[int]]]:
    """``runstore run -j 2`` of :func:`sleeping_campaign` (its scratch directories under a
    ``TMPDIR`` of the test's), killed with SIGKILL once both workers and both daemons run.
    Yields that ``TMPDIR``, the dead coordinator's owner tag, the seconds until its
    workers, daemons and supervisors were all dead, and their pids."""
    marks, tmp = tmp_path / "marks", tmp_path / "tmp"
    marks.mkdir()
    tmp.mkdir()
    campaign = sleeping_campaign(tmp_path / "c", marks)
    store = tmp_path / "store"
    arguments = [RUNSTORE, "run", str(campaign), "--store", str(store), "--init", "-j", "2"]
    env = {**os.environ, "TMPDIR": str(tmp)}
    process = subprocess.Popen(
        [*arguments, "--json"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    names = [f"{c}-{k}" for c in ("a", "b") for k in ("worker", "daemon")]
    try:
        pids = [int(wait_for(marks / name, within_s=30)) for name in names]
        owner = identity(process.pid)
        pids += children(process.pid)  # the supervisors (before this change: the workers)
        process.send_signal(signal.SIGKILL)
        took = all_gone_after(pids, bound_s=5.0)
        process.wait()
        yield tmp, owner, took, pids
    finally:
        process.kill()
        process.wait()
        for name in names:
            if (marks / name).exists():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int((marks / name).read_text()), signal.SIGKILL)


def test_workers_of_a_coordinator_killed_with_sigkill_die_within_the_lease(
    tmp_path: Path,
) -> None:
    with killed_coordinator(tmp_path) as (_, _, took, pids):
        print(f"coordinator SIGKILL to all {len(pids)} processes dead: {took * 1000:.1f} ms")
        assert all(gone(pid, within_s=0.01) for pid in pids), "a worker outlived the kill"
        assert took < KILL_BOUND_S


def test_the_next_run_removes_a_dead_coordinators_scratch_and_nothing_else(
    tmp_path: Path,
) -> None:
    with killed_coordinator(tmp_path) as (tmp, owner, _, _):
        dead = sorted(path.name for path in tmp.iterdir())
        assert len(dead) == 2 and all(name.startswith("runstore-work-") for name in dead)
        namespace, pid, start = owner.split("-")
        target = tmp_path / "target"
        target.mkdir()
        (target / "kept").write_text("kept")
        kept = {
            f"runstore-work-{owner}-afile123": "file",
            f"runstore-work-{owner}-alink123": "link",
            f"runstore-work-{int(namespace) + 1}-{pid}-{start}-otherns1": "dir",
            f"runstore-work-{owner}-short": "dir",
            f"runstore-work-{owner}-1234567890": "dir",
            "runstore-work-abcd1234": "dir",  # no owner tag: nobody can say it is dead
            f"other-{owner}-abcd1234": "dir",
        }
        if os.geteuid() == 0:
            kept[f"runstore-work-{owner}-nobody12"] = "foreign"
        # The test process is alive, but this start time is not its own: a reused pid.
        reused = f"runstore-work-{identity(os.getpid()).rsplit('-', 1)[0]}-1-reused12"
        (tmp / reused).mkdir()
        for name, kind in kept.items():
            if kind == "file":
                (tmp / name).write_text("x")
            elif kind == "link":
                (tmp / name).symlink_to(target)
            else:
                (tmp / name).mkdir()
                (tmp / name / "inside").write_text("x")
                if kind == "foreign":
                    os.chown(tmp / name, 65534, 65534)
        go, beat = tmp_path / "go", tmp_path / "live-beat"
        live_script = """
            import os, time
            open(os.environ["BEAT"], "w").write("1")
            while not os.path.exists(os.environ["GO"]):
                time.sleep(0.01)
            open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "late"), "w").write("late")
        """
        live_env = (("GO", str(go)), ("BEAT", str(beat)))
        with LocalExecutor(1, scratch_root=str(tmp), kill_grace_s=GRACE_S) as live:
            running = live.submit(order(live_script, env=live_env))
            wait_for(beat)
            (live_scratch,) = set(os.listdir(tmp)) - set(dead) - set(kept) - {reused}
            # The next run: a new coordinator (a fresh store), same temporary directory.
            (tmp_path / "next").mkdir()
            (tmp_path / "next" / "campaign.toml").write_text(
                '[campaign]\nname = "next"\n[[candidates]]\nname = "x"\n'
                'command = ["{python}", "-c", "pass"]\n[[problems]]\nname = "p"\n'
            )
            env = {**os.environ, "TMPDIR": str(tmp)}
            store = str(tmp_path / "next-store")
            campaign = str(tmp_path / "next" / "campaign.toml")
            done = subprocess.run(
                [RUNSTORE, "run", campaign, "--store", store, "--init"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 1, done.stderr  # no result.json: failed, as meant
            left = set(os.listdir(tmp))
            assert not left & set(dead), "the dead coordinator's scratch is still there"
            assert reused not in left, "a directory whose owner's pid was reused is kept"
            assert left == set(kept) | {live_scratch}
            go.write_text("1")
            assert live.wait([running], 30) == {running}
            assert running.result().outputs == (("late", b"late"),)
        assert (target / "kept").read_text() == "kept"
        assert (tmp / f"runstore-work-{owner}-alink123").is_symlink()
        assert sorted(os.listdir(tmp)) == sorted(kept)
