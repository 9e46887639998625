"""The Dask executor never runs an attempt's command twice, and its commands die with their
coordinator (issue 28, observation 10 and the Dask half of observation 5; SPEC.md 15.8).

* The Dask worker that holds an accepted attempt's result is killed while the campaign
  still runs: the scheduler must not run that attempt's command again (a worker script
  logs one line per start), and every slot ends accepted exactly once.
* A task whose lease token is gone refuses to start its command: one its coordinator
  never listed live, one whose channel cannot be read at all (fail-closed: no news, no
  start), one run again after its result was fetched, and one the scheduler runs again
  because the worker holding its result died before the coordinator fetched it.
* A Dask worker process that replaces one killed mid-order removes the dead one's scratch
  directory before its first command.
* A coordinator killed with SIGKILL while a Dask task's command runs: the command is gone
  within one lease duration (and a small margin) of the kill, on a cluster that outlives
  the coordinator.

Each runs against the file's cluster (``dask_scheduler``: a LocalCluster in the test
process, two single-threaded worker processes, ``allowed-failures`` 0).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from runstore.canonical import JSON
from runstore.runner.campaign import Campaign
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.runner.dask_task import RERUN_DETAIL
from runstore.runner.dask_task import Channel
from runstore.runner.dask_task import run_task
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.store import RunStore
from runstore.store.store_root import create_root

from conformance.cli.world import json_lines
from conformance.cli.world import start
from conformance.closed_store import rows as query
from conformance.runner.executor_world import gone
from conformance.runner.executor_world import order
from conformance.runner.executor_world import wait_for
from conformance.runner.world import campaign

pytest.importorskip("distributed", reason="the dask extra is not installed")

from runstore.runner.dask_executor import DaskExecutor
from runstore.runner.dask_executor import open_dask

STARTS_SCRIPT = (
    "import json, os, sys, time\n"
    "with open(os.environ['STARTS'], 'a') as log:\n"
    "    log.write(os.environ['RUNSTORE_ATTEMPT'] + ' ' + sys.argv[1] + '\\n')\n"
    "if sys.argv[1] == 'slow':\n"
    "    deadline = time.monotonic() + 30\n"
    "    while not os.path.exists(os.environ['GO']) and time.monotonic() < deadline:\n"
    "        time.sleep(0.02)\n"
    "with open(os.path.join(os.environ['RUNSTORE_OUTPUT_DIR'], 'result.json'), 'w') as out:\n"
    "    json.dump(dict(metrics=dict(x=1)), out)\n"
)
"""A worker that appends ``<attempt id> <candidate>`` to ``$STARTS`` when it starts; the
``slow`` candidate then waits for ``$GO`` (at most 30 s)."""


def starts_campaign(tmp_path: Path) -> tuple[Campaign, Path, Path]:
    """Candidates ``fast`` and ``slow`` x one problem, logging their starts; the start log
    and the file that lets ``slow`` finish."""
    starts, go = tmp_path / "starts.log", tmp_path / "go"
    plan = campaign(("fast", "slow"), ("p",), command=("{python}", "-c", STARTS_SCRIPT))
    env = (("STARTS", str(starts)), ("GO", str(go)))
    candidates = tuple(attrs.evolve(c, env=(*c.env, *env)) for c in plan.candidates)
    return attrs.evolve(plan, candidates=candidates), starts, go


def scheduler_tasks(dask: DaskExecutor) -> dict[str, tuple[list[str], str | None]]:
    """Every task the scheduler knows: the workers holding its result, the one running it."""

    def tasks(dask_scheduler: Any) -> dict[str, tuple[list[str], str | None]]:
        return {
            str(task.key): (
                sorted(worker.address for worker in task.who_has or ()),
                task.processing_on.address if task.processing_on else None,
            )
            for task in dask_scheduler.tasks.values()
        }

    found: dict[str, tuple[list[str], str | None]] = dask.client.run_on_scheduler(tasks)
    return found


def test_killing_the_worker_that_holds_an_accepted_result_does_not_run_its_command_again(
    tmp_path: Path, dask_scheduler: str
) -> None:
    """Issue 28, observation 10: ``fast`` is accepted while ``slow`` still runs; then the
    Dask worker that ran ``fast`` (and, before the fix, still held its result) is killed.
    Its command must not start again, and both slots end accepted by one attempt each."""
    root = str(tmp_path / "store")
    create_root(root)
    plan, starts, go = starts_campaign(tmp_path)
    events: list[tuple[str, dict[str, JSON]]] = []
    fast_accepted = threading.Event()
    outcome: list[object] = []

    def report(event: str, fields: dict[str, JSON]) -> None:
        events.append((event, fields))
        if event == "attempt_finished" and fields.get("candidate_name") == "fast":
            fast_accepted.set()

    dask = open_dask(dask_scheduler, None, orphan_after_s=30)

    def coordinate() -> None:
        try:
            with RunStore.open(root) as store:
                outcome.append(run_campaign(store, plan, dask, RunOptions(jobs=2), report))
        except BaseException as error:  # the main thread asserts on it
            outcome.append(error)
            fast_accepted.set()

    coordinator = threading.Thread(target=coordinate, name="coordinator")
    coordinator.start()
    try:
        assert fast_accepted.wait(60), "fast was never accepted"
        assert not outcome, outcome
        (fast_attempt,) = [f["attempt"] for e, f in events if e == "attempt_finished"]
        fast_key = f"runstore-{fast_attempt}-"
        # Fetched, so released: no worker holds fast's result any more (before the fix,
        # the worker that ran it held it until the run ended).
        deadline = time.monotonic() + 5
        while any(key.startswith(fast_key) for key in scheduler_tasks(dask)):
            assert time.monotonic() < deadline, "the fetched result stays in the cluster"
            time.sleep(0.05)
        (slow_worker,) = [running for _, running in scheduler_tasks(dask).values() if running]
        (fast_worker,) = set(dask.client.nthreads()) - {slow_worker}  # the one that ran fast
        pid = dask.client.run(os.getpid, workers=[fast_worker])[fast_worker]
        os.kill(pid, signal.SIGKILL)
        dask.client.wait_for_workers(2, timeout=30)  # the nanny restarted it
        time.sleep(1.5)  # time enough for a wrongful re-run to start
    finally:
        go.touch()
        coordinator.join(60)
        dask.close()
    assert not coordinator.is_alive()
    (summary,) = outcome
    assert not isinstance(summary, BaseException), summary
    counted = Counter(line.split()[0] for line in starts.read_text().splitlines())
    assert counted == dict.fromkeys(counted, 1), f"a command started twice: {counted}"
    assert len(counted) == 2
    store = Path(root)
    assert query(store, "SELECT slot_id, count(*) FROM attempts GROUP BY 1") == [
        (slot, 1) for slot, _ in query(store, "SELECT id, 0 FROM attempt_slots ORDER BY 1")
    ]
    assert query(store, "SELECT state, count(*) FROM attempts GROUP BY 1") == [("accepted", 2)]


# --- a task without a live lease token refuses to start ---------------------------------------


def marking_order(marker: Path, key: str = "slot#0") -> WorkOrder:
    return order(
        "import os; open(os.environ['MARK'], 'a').write('ran\\n')",
        env=(("MARK", str(marker)),),
        key=key,
    )


def channel_of(dask: DaskExecutor, key: str, serial: int, **changes: Any) -> Channel:
    """The channel a task of ``dask`` with Dask key ``key`` and ``serial`` would be given."""
    fields = {
        "name": dask.name,
        "key": key,
        "serial": serial,
        "orphan_after_s": dask.orphan_after_s,
        "poll_s": dask.poll_s,
        "kill_grace_s": dask.kill_grace_s,
        "version": dask.version,
        **changes,
    }
    return Channel(**fields)


@pytest.fixture
def executor(dask_scheduler: str) -> Iterator[DaskExecutor]:
    dask = open_dask(dask_scheduler, None, orphan_after_s=30)
    try:
        yield dask
    finally:
        dask.close()


def run_directly(dask: DaskExecutor, marker: Path, channel: Channel) -> WorkResult:
    """``run_task`` submitted by hand (as a scheduler's re-run would start it)."""
    future = dask.client.submit(
        run_task, marking_order(marker), channel, key=f"{channel.key}-direct", pure=False
    )
    try:
        result: WorkResult = future.result(timeout=30)
    finally:
        future.release()
    return result


@pytest.mark.parametrize("case", ["never listed", "channel unreadable"])
def test_a_task_whose_key_its_coordinator_does_not_hold_refuses_to_start(
    executor: DaskExecutor, tmp_path: Path, case: str
) -> None:
    """A serial the coordinator never gave out, or a channel no one sets: after
    ``orphan_after_s`` (1 s here) without a value that lists it live, the task refuses."""
    marker = tmp_path / "ran"
    changes: dict[str, Any] = {"orphan_after_s": 1.0}
    if case == "channel unreadable":
        changes["name"] = "runstore-channel-nobody-sets-this"
    key = f"runstore-slot#0-never-{case.replace(' ', '-')}"  # its own start mark
    channel = channel_of(executor, key, 10**6, **changes)
    result = run_directly(executor, marker, channel)
    assert (result.status, result.exit_code, result.outputs) == (
        WorkStatus.START_FAILED,
        None,
        (),
    ), result
    assert "no word of it from its coordinator" in result.detail
    assert not marker.exists(), "the command started without a live lease token"


def test_a_task_run_again_after_its_result_was_fetched_refuses_to_start(
    executor: DaskExecutor, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    handle = executor.submit(marking_order(marker))
    assert executor.wait([handle], 30) == {handle}
    assert handle.result().status is WorkStatus.EXITED
    assert marker.read_text() == "ran\n"
    # The same task as the scheduler would run it again (a lost result recomputed).
    again = run_directly(executor, marker, channel_of(executor, handle.key, handle.serial))
    assert again.status is not WorkStatus.EXITED, again
    assert again.exit_code is None and again.detail
    assert marker.read_text() == "ran\n", "the settled attempt's command ran again"


def test_a_task_run_again_before_its_result_was_fetched_refuses_to_start(
    executor: DaskExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker holding a finished task's result dies before the coordinator fetched it:
    the scheduler (the future still wanted) runs the task again, and that run finds the
    first run's start mark set: WORKER_LOST, and the command ran once."""
    marker = tmp_path / "ran"
    gate = threading.Event()
    fetch = executor._on_done

    def fetch_later(handle: Any) -> None:
        threading.Thread(target=lambda: (gate.wait(30), fetch(handle)), daemon=True).start()

    monkeypatch.setattr(executor, "_on_done", fetch_later)
    handle = executor.submit(marking_order(marker))
    try:
        holders = held_by(executor, handle.key, lambda found: bool(found))
        (holder,) = holders
        pid = executor.client.run(os.getpid, workers=[holder])[holder]
        os.kill(pid, signal.SIGKILL)
        held_by(executor, handle.key, lambda found: bool(found) and holder not in found)
        deadline = time.monotonic() + 10  # until the client too heard of the second run's end
        while handle.future.status != "finished":
            assert time.monotonic() < deadline, handle.future.status
            time.sleep(0.02)
    finally:
        gate.set()
    assert executor.wait([handle], 30) == {handle}
    result = handle.result()
    assert (result.status, result.exit_code) == (WorkStatus.WORKER_LOST, None), result
    assert result.detail == RERUN_DETAIL
    assert marker.read_text() == "ran\n", "the command ran again when its task was recomputed"
    executor.client.wait_for_workers(2, timeout=30)  # the nanny restarted it


def held_by(dask: DaskExecutor, key: str, wanted: Any, within_s: float = 30.0) -> list[str]:
    """The workers holding ``key``'s result, once ``wanted`` says they are the ones."""
    deadline = time.monotonic() + within_s
    while True:
        holders = scheduler_tasks(dask).get(key, ([], None))[0]
        if wanted(holders):
            return holders
        assert time.monotonic() < deadline, f"{key} held by {holders} after {within_s} s"
        time.sleep(0.02)


# --- scratch directories of dead Dask worker processes -----------------------------------------


def dead_owner_scratch() -> Path:
    """A scratch directory (with a file in it) named for a process that has exited, in the
    system temporary directory, where the file's Dask workers make theirs."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        text = Path(f"/proc/{sleeper.pid}/stat").read_text()
    finally:
        sleeper.kill()
        sleeper.wait()
    start_ticks = text.rsplit(")", 1)[1].split()[19]
    namespace = os.stat("/proc/self/ns/pid").st_ino
    name = f"runstore-work-{namespace}-{sleeper.pid}-{start_ticks}-deadbeef"
    path = Path(tempfile.gettempdir()) / name
    (path / "work").mkdir(parents=True)
    (path / "work" / "left.txt").write_text("left by a worker killed mid-order\n")
    return path


def test_a_new_dask_worker_process_removes_the_scratch_of_dead_ones_before_its_command(
    executor: DaskExecutor, tmp_path: Path
) -> None:
    """Issue 28, build item 3, on Dask: the order's scratch directory belongs to the Dask
    worker process, and one killed mid-order leaves it behind. The worker process the
    nanny starts instead removes it before its first command."""
    left = dead_owner_scratch()
    try:
        worker = next(iter(executor.client.nthreads()))
        pid = executor.client.run(os.getpid, workers=[worker])[worker]
        os.kill(pid, signal.SIGKILL)  # its successor is a process that never swept
        deadline = time.monotonic() + 30
        while worker in (workers := set(executor.client.nthreads())) or len(workers) < 2:
            assert time.monotonic() < deadline, "the nanny did not replace the worker"
            time.sleep(0.05)
        marker = tmp_path / "ran"
        handles = [executor.submit(marking_order(marker)) for _ in range(2)]  # one each
        for handle in handles:
            assert executor.wait([handle], 30) == {handle}
            assert handle.result().status is WorkStatus.EXITED
        assert not left.exists(), "a dead worker process's scratch directory was left"
    finally:
        shutil.rmtree(left, ignore_errors=True)


# --- the coordinator killed with SIGKILL ------------------------------------------------------

LEASE_S = 3
MARGIN_S = 1.5
"""How much later than one lease duration after the kill the command may still live: the
task's poll (0.5 s) and a loaded machine."""

SLEEPER = """\
import os, time
open(os.environ["PID_FILE"] + ".tmp", "w").write(str(os.getpid()))
os.rename(os.environ["PID_FILE"] + ".tmp", os.environ["PID_FILE"])
time.sleep(60)
"""


def write_sleeper_campaign(directory: Path, pid_file: Path) -> Path:
    """One slot whose worker writes its pid to ``pid_file`` and sleeps a minute."""
    directory.mkdir()
    (directory / "sleeper.py").write_text(SLEEPER, encoding="utf-8")
    path = directory / "campaign.toml"
    path.write_text(
        f"""\
[campaign]
name = "orphans"
timeout_seconds = 120
lease_seconds = {LEASE_S}
[[candidates]]
name = "sleeper"
command = ["{{python}}", "sleeper.py"]
files = ["sleeper.py"]
env = {{ PID_FILE = {json.dumps(str(pid_file))} }}
[[problems]]
name = "p"
""",
        encoding="utf-8",
    )
    return path


@contextlib.contextmanager
def killed_afterwards(pid_file: Path) -> Iterator[None]:
    try:
        yield
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("cluster", ["external", "own"])
def test_a_command_of_a_coordinator_killed_with_sigkill_dies_within_one_lease(
    tmp_path: Path, dask_scheduler: str, cluster: str
) -> None:
    """``external``: the file's cluster, which outlives the coordinator: its task hears no
    beat for the lease and kills the command. ``own``: the local cluster the coordinator
    makes (``--workers 1``), whose worker processes die with it: the command's supervisor
    sees its runner die and kills it (:mod:`runstore.runner.supervise`)."""
    pid_file = tmp_path / "pid"
    campaign_file = write_sleeper_campaign(tmp_path / "c", pid_file)
    store = tmp_path / "store"
    with killed_afterwards(pid_file):
        process = start(
            "run", str(campaign_file), "--store", str(store), "--init", "--json",
            "--executor", "dask", "-j", "1",
            *(("--scheduler", dask_scheduler) if cluster == "external" else ("--workers", "1")),
        )  # fmt: skip
        try:
            pid = int(wait_for(pid_file, within_s=60))
        finally:
            process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            out, _ = process.communicate()
        assert process.returncode == -signal.SIGKILL
        assert [e["event"] for e in json_lines(out)][-1] == "attempt_started"
        if cluster == "external":  # the orphan rule kills it, once the lease has passed
            assert not gone(pid, 0.2), "the command died with its coordinator at once"
        assert gone(pid, LEASE_S + MARGIN_S - (time.monotonic() - killed)), (
            "the command outlived its killed coordinator by more than one lease"
        )
