"""The Dask executor (:mod:`runstore.runner.dask_executor`, :mod:`runstore.runner.dask_task`).

Against the file's local cluster (``dask_scheduler``: two single-threaded worker
processes, ``allowed-failures`` 0), reached by address as a coordinator reaches a real
scheduler: the executor contract (outputs, logs, inputs, environment and placeholders seen
by the worker; non-zero exits; the time limit; OUTPUT_TOO_LARGE, UNSAFE_OUTPUT and
START_FAILED as statuses; ``wait``; ``submit`` after ``close``), a cancel and a close
killing the worker's process through the channel, the orphan rule killing it once the
coordinator's beat stops, and a Dask worker process dying mid-task coming back
WORKER_LOST without being run again (its command dying with it). Without Dask: the task's
admission and watcher (:func:`dask_task.run_watched`, :func:`dask_task.watch`) with a fake
cluster side (channel values and a start mark), the constructor's refusals, and the
refusals of :func:`open_dask` and :func:`open_executor` (unreachable scheduler, a scheduler
that re-runs tasks, the dask extra missing, contradictory options).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runstore.errors import ExecutorUnavailableError
from runstore.runner import dask_task
from runstore.runner.dask_task import CANCELLED_DETAIL
from runstore.runner.dask_task import Channel
from runstore.runner.dask_task import runstore_version
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.executors import open_executor
from runstore.runner.local import LocalExecutor
from runstore.runner.scratch_run import Kill

from conformance.runner.dask_world import dask_worker_of
from conformance.runner.executor_world import SLACK_S
from conformance.runner.executor_world import check_cancel_after_done
from conformance.runner.executor_world import check_exited_worker
from conformance.runner.executor_world import check_non_zero_exit
from conformance.runner.executor_world import gone
from conformance.runner.executor_world import order
from conformance.runner.executor_world import reaped
from conformance.runner.executor_world import run
from conformance.runner.executor_world import wait_for

pytest.importorskip("distributed", reason="the dask extra is not installed")

from runstore.runner.dask_executor import POLL_S
from runstore.runner.dask_executor import DaskExecutor
from runstore.runner.dask_executor import DaskHandle
from runstore.runner.dask_executor import _settled
from runstore.runner.dask_executor import open_dask

ORPHAN_S = 30.0
"""The contract tests' orphan delay: long enough never to fire by itself."""

SLEEPER = """
    import os, time
    open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
    time.sleep(60)
"""
"""A worker that writes its pid to ``$PID_FILE`` and sleeps a minute."""

KILLED_WITHIN_S = 2 * POLL_S + SLACK_S
"""How long a task's watcher may take to see the channel's news and kill its worker."""


@pytest.fixture
def executor(dask_scheduler: str) -> Iterator[DaskExecutor]:
    """A coordinator's executor on the shared cluster, closed after the test."""
    dask = open_dask(dask_scheduler, None, orphan_after_s=ORPHAN_S)
    try:
        yield dask
    finally:
        dask.close()


def results(executor: DaskExecutor, orders: list[WorkOrder]) -> list[WorkResult]:
    """Submit every order at once and wait for all their results."""
    handles = [executor.submit(work) for work in orders]
    deadline = time.monotonic() + 30
    while not all(handle.done() for handle in handles) and time.monotonic() < deadline:
        executor.wait(handles, 1)
    return [handle.result() for handle in handles]


def returned(handle: DaskHandle, within_s: float = 10.0) -> WorkResult:
    """What ``handle``'s task itself returned, once the executor fetched it (also after a
    cancel, when the handle's own result is CANCELLED whatever the task returned)."""
    deadline = time.monotonic() + within_s
    while handle.returned is None:
        assert time.monotonic() < deadline, f"{handle.key} returned nothing in {within_s} s"
        time.sleep(0.01)
    return handle.returned


def sleeper(pid_file: Path, **kwargs: Any) -> WorkOrder:
    return order(SLEEPER, env=(("PID_FILE", str(pid_file)),), **kwargs)


# --- the executor contract on a cluster ------------------------------------------------------


def test_exited_worker_returns_outputs_logs_and_saw_inputs_env_and_placeholders(
    executor: DaskExecutor,
) -> None:
    seen = check_exited_worker(executor)
    assert not Path(str(seen["work_dir"])).parent.exists(), "the scratch directory was left"
    assert seen["parent"] != os.getpid(), "the order ran in the coordinator, not on a worker"


def test_non_zero_exit_still_returns_its_outputs(executor: DaskExecutor) -> None:
    check_non_zero_exit(executor)


def test_time_limit_kills_the_worker(executor: DaskExecutor, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with reaped(pid_file):
        began = time.monotonic()
        result = run(executor, sleeper(pid_file, timeout_s=1.0))
        elapsed = time.monotonic() - began
        assert (result.status, result.exit_code) == (WorkStatus.TIMED_OUT, -signal.SIGTERM)
        assert result.outputs == ()
        assert 1.0 <= elapsed < 1.0 + 2.0 + SLACK_S  # the executor's default grace is 2 s
        assert gone(int(wait_for(pid_file)))


def test_refusals_come_back_as_statuses(executor: DaskExecutor) -> None:
    big = "import os; open(os.environ['RUNSTORE_OUTPUT_DIR'] + '/big', 'wb').write(b'x' * 100)"
    link = "import os; os.symlink('/etc/passwd', os.environ['RUNSTORE_OUTPUT_DIR'] + '/link')"
    orders = [
        order(big, output_limit_bytes=99),
        order(link),
        order("", command=("{python}", "-c", "pass", "{nope}")),
        order("", command=("/nonexistent/program",)),
        order("pass", timeout_s=0),
    ]
    found = [(r.status, r.exit_code, r.outputs, r.detail) for r in results(executor, orders)]
    assert [status for status, *_ in found] == [
        WorkStatus.OUTPUT_TOO_LARGE,
        WorkStatus.UNSAFE_OUTPUT,
        WorkStatus.START_FAILED,
        WorkStatus.START_FAILED,
        WorkStatus.START_FAILED,
    ]
    assert [exit_code for _, exit_code, _, _ in found] == [0, 0, None, None, None]
    assert all(outputs == () for _, _, outputs, _ in found)
    details = [detail for *_, detail in found]
    assert "100" in details[0] and "link" in details[1]
    assert "unknown placeholder {nope} in argument 3" in details[2]
    assert "No such file or directory" in details[3] and "time limit" in details[4]


def test_wait_returns_the_done_ones_or_none_after_the_timeout(
    executor: DaskExecutor, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    with reaped(pid_file):
        slow = executor.submit(sleeper(pid_file))
        began = time.monotonic()
        assert executor.wait([slow], 0.3) == set()
        assert time.monotonic() - began >= 0.3
        quick = executor.submit(order("pass"))
        assert executor.wait([slow, quick], 30) == {quick}
        assert quick.result().status is WorkStatus.EXITED and not slow.done()
        slow.cancel()
        assert executor.wait([slow, quick], 0) == {slow, quick}
        assert gone(int(wait_for(pid_file)), KILLED_WITHIN_S)


def test_waiting_on_no_handles_sleeps_the_timeout(executor: DaskExecutor) -> None:
    began = time.monotonic()
    assert executor.wait([], 0.3) == set()
    assert time.monotonic() - began >= 0.3


def test_wait_refuses_a_handle_of_another_executor(
    executor: DaskExecutor, dask_scheduler: str
) -> None:
    with LocalExecutor(1) as local:
        local_handle = local.submit(order("pass"))
        with pytest.raises(TypeError):
            executor.wait([local_handle], 0)
    with open_dask(dask_scheduler, None, orphan_after_s=ORPHAN_S) as other:
        other_handle = other.submit(order("pass"))
        with pytest.raises(TypeError):
            executor.wait([other_handle], 0)
        assert other.wait([other_handle], 30) == {other_handle}
    with pytest.raises(TypeError):
        executor.wait([object()], 0)  # type: ignore[list-item]


def test_submit_after_close_is_refused_and_close_is_idempotent(dask_scheduler: str) -> None:
    dask = open_dask(dask_scheduler, None, orphan_after_s=ORPHAN_S)
    assert run(dask, order("pass")).status is WorkStatus.EXITED
    dask.close()
    assert dask.client.status == "closed"
    began = time.monotonic()
    dask.close()
    assert time.monotonic() - began < 0.5
    with pytest.raises(RuntimeError):
        dask.submit(order("pass"))


def test_open_executor_connects_to_a_scheduler_and_sizes_by_its_threads(
    dask_scheduler: str,
) -> None:
    opened = open_executor(
        "dask", jobs=None, scheduler=dask_scheduler, workers=None, lease_ns=7_000_000_000
    )
    with opened as (dask, count):
        assert isinstance(dask, DaskExecutor)
        assert (count, dask.orphan_after_s) == (2, 7.0)
        assert run(dask, order("print('hi')")).stdout == b"hi\n"
    assert dask.client.status == "closed"


# --- cancel, close and the orphan rule kill the worker's process -----------------------------


def test_cancel_of_a_running_and_of_a_queued_order(executor: DaskExecutor, tmp_path: Path) -> None:
    """The two workers each run a sleeper; a third order waits in the queue. Cancelling it
    and then the sleepers: every handle is done at once, both sleepers are killed and the
    queued order, started once a worker is free, sees its cancel and never runs."""
    first, second, ran = tmp_path / "first", tmp_path / "second", tmp_path / "ran"
    with reaped(first), reaped(second):
        running = [executor.submit(sleeper(first)), executor.submit(sleeper(second))]
        pids = [int(wait_for(first)), int(wait_for(second))]
        queued = executor.submit(order(SLEEPER, env=(("PID_FILE", str(ran)),)))
        began = time.monotonic()
        for handle in [queued, *running]:
            handle.cancel()
            handle.cancel()
        assert time.monotonic() - began < 0.5, "cancel blocked"
        for handle in [queued, *running]:
            assert handle.done()
            assert (handle.result().status, handle.result().exit_code) == (
                WorkStatus.CANCELLED,
                None,
            )
        assert executor.wait([queued, *running], 0) == {queued, *running}
        assert all(gone(pid, KILLED_WITHIN_S) for pid in pids)
        # What the tasks themselves returned: they saw the cancel on the channel.
        for handle in running:
            task_result = returned(handle)
            assert (task_result.status, task_result.exit_code) == (
                WorkStatus.CANCELLED,
                -signal.SIGTERM,
            )
        task_result = returned(queued)
        assert (task_result.status, task_result.detail) == (WorkStatus.CANCELLED, CANCELLED_DETAIL)
        assert not ran.exists(), "the queued order ran although cancelled"


def test_cancel_after_the_task_finished_changes_nothing(executor: DaskExecutor) -> None:
    check_cancel_after_done(executor)


def test_close_kills_a_running_order(dask_scheduler: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    dask = open_dask(dask_scheduler, None, orphan_after_s=ORPHAN_S)
    with reaped(pid_file):
        handle = dask.submit(sleeper(pid_file))
        pid = int(wait_for(pid_file))
        began = time.monotonic()
        dask.close()
        assert time.monotonic() - began < 2 * POLL_S + dask.kill_grace_s + 2.0 + SLACK_S
        assert gone(pid, KILLED_WITHIN_S)
        assert handle.done()


def test_a_handle_running_at_close_is_cancelled(dask_scheduler: str, tmp_path: Path) -> None:
    """Executor.close cancels what still runs: as with the local executor, the handle then
    says CANCELLED (not WORKER_LOST: no worker was lost, the coordinator stopped it)."""
    pid_file = tmp_path / "pid"
    dask = open_dask(dask_scheduler, None, orphan_after_s=ORPHAN_S)
    with reaped(pid_file):
        handle = dask.submit(sleeper(pid_file))
        wait_for(pid_file)
        dask.close()
        assert handle.done()
        assert handle.result().status is WorkStatus.CANCELLED, handle.result().detail


def test_close_keeps_the_result_of_a_finished_order(dask_scheduler: str) -> None:
    """close cancels only what still runs: an order that finished before it keeps its
    result, read after the close (the local executor's handles do)."""
    dask = open_dask(dask_scheduler, None, orphan_after_s=ORPHAN_S)
    handle = dask.submit(order("print('hi')"))
    assert dask.wait([handle], 30) == {handle}
    dask.close()
    result = handle.result()
    assert (result.status, result.stdout) == (WorkStatus.EXITED, b"hi\n"), result.detail


def test_a_task_whose_coordinator_stops_beating_kills_its_worker(
    dask_scheduler: str, tmp_path: Path
) -> None:
    """The coordinator vanishes without a word: its beat thread stops and nothing more is
    published. The task's watcher sees the beat unchanged for ``orphan_after_s`` and kills
    the worker's process group."""
    orphan_after_s = 2.0
    pid_file = tmp_path / "pid"
    dask = open_dask(dask_scheduler, None, orphan_after_s=orphan_after_s)
    try:
        with reaped(pid_file):
            handle = dask.submit(sleeper(pid_file))
            pid = int(wait_for(pid_file))
            dask._stop.set()
            dask._publish_now.set()
            dask._beater.join()
            assert not gone(pid, 0.5), "killed before the beat was silent for long"
            assert gone(pid, orphan_after_s + 2 * POLL_S + SLACK_S)
            task_result = returned(handle)
            assert task_result.status is WorkStatus.CANCELLED
            assert not handle.cancelled and not dask._closed
    finally:
        dask.close()


# --- the task's admission and watcher, without Dask -------------------------------------------

SERIAL = 3
"""The fake channel's serial for the task under test."""


def channel(*, orphan_after_s: float = 0.3, version: str | None = None) -> Channel:
    return Channel(
        name="runstore-channel-test",
        key="runstore-slot#0-abcd",
        serial=SERIAL,
        orphan_after_s=orphan_after_s,
        poll_s=0.02,
        kill_grace_s=0.5,
        version=runstore_version() if version is None else version,
    )


def state(
    beat: int = 0, live: tuple[int, ...] = (SERIAL,), closed: bool = False, listed: int = 10
) -> dict[str, object]:
    return {"beat": beat, "listed": listed, "live": list(live), "closed": closed}


class FakeSide:
    """A task's view of the cluster: ``read`` gives the channel's values; the start mark is
    a flag (``marked`` set to raise makes every mark call fail)."""

    def __init__(self, read: Callable[[float], object], marked: bool = False) -> None:
        self.reader = read
        self.flag = marked
        self.broken = False
        self.calls: list[str] = []

    def read(self, timeout: float) -> object:
        return self.reader(timeout)

    def marked(self) -> bool:
        self.calls.append("marked")
        if self.broken:
            raise OSError("scheduler unreachable")
        return self.flag

    def mark(self) -> None:
        self.calls.append("mark")
        self.flag = True

    def unmark(self) -> None:
        self.calls.append("unmark")
        self.flag = False


def marker_order(marker: Path) -> WorkOrder:
    return order(
        "import os; open(os.environ['MARK'], 'w').write('1')", env=(("MARK", str(marker)),)
    )


@pytest.mark.parametrize(
    ("news", "detail"),
    [
        (state(live=(1, 2)), CANCELLED_DETAIL),
        (state(closed=True), dask_task.CLOSED_DETAIL),
        ({"beat": 0, "listed": 10, "live": [SERIAL]}, dask_task.CLOSED_DETAIL),
    ],
    ids=["not live", "closed", "no closed flag"],
)
def test_run_watched_refuses_to_start_an_order_not_live(
    tmp_path: Path, news: object, detail: str
) -> None:
    marker = tmp_path / "ran"
    side = FakeSide(lambda _: news)
    result = dask_task.run_watched(marker_order(marker), channel(), side)
    assert (result.status, result.exit_code, result.detail) == (WorkStatus.CANCELLED, None, detail)
    assert not marker.exists(), "the cancelled order ran"
    assert side.calls == ["marked", "mark", "unmark"]  # its serial can never be live again


def test_run_watched_refuses_an_order_whose_start_mark_is_set(tmp_path: Path) -> None:
    """The scheduler runs a task again once the worker holding its unfetched result died:
    the first run set the mark, so this run never starts the command."""
    marker = tmp_path / "ran"
    side = FakeSide(lambda _: state(), marked=True)
    result = dask_task.run_watched(marker_order(marker), channel(), side)
    assert (result.status, result.exit_code) == (WorkStatus.WORKER_LOST, None)
    assert result.detail == dask_task.RERUN_DETAIL
    assert not marker.exists(), "a task run again started its command a second time"
    assert side.calls == ["marked"]


def test_run_watched_refuses_an_order_whose_start_mark_cannot_be_read(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    side = FakeSide(lambda _: state())
    side.broken = True
    result = dask_task.run_watched(marker_order(marker), channel(), side)
    assert (result.status, result.exit_code) == (WorkStatus.START_FAILED, None)
    assert result.detail == "cannot mark its start: OSError: scheduler unreachable"
    assert not marker.exists()


@pytest.mark.parametrize(
    "read",
    [
        lambda _: state(listed=SERIAL),
        lambda _: state(listed=None),  # type: ignore[arg-type]
        lambda _: {"beat": 0, "listed": 10, "closed": False},
        lambda _: "not a dict",
        lambda _: None,
    ],
    ids=["not listed yet", "no listed count", "no live list", "a strange value", "no value"],
)
def test_run_watched_refuses_an_order_no_channel_value_lists(
    tmp_path: Path, read: Callable[[float], object]
) -> None:
    """Fail-closed: no value that says the serial is live, within ``orphan_after_s``, is no
    start."""
    marker = tmp_path / "ran"
    began = time.monotonic()
    result = dask_task.run_watched(
        marker_order(marker), channel(orphan_after_s=0.3), FakeSide(read)
    )
    assert (result.status, result.exit_code) == (WorkStatus.START_FAILED, None)
    assert result.detail.startswith("no word of it from its coordinator for 0.3 s")
    assert 0.3 <= time.monotonic() - began < 0.3 + SLACK_S
    assert not marker.exists()


def test_run_watched_refuses_an_order_whose_channel_cannot_be_read(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = dask_task.run_watched(marker_order(marker), channel(), FakeSide(failing_read))
    assert (result.status, result.exit_code) == (WorkStatus.START_FAILED, None)
    assert not marker.exists(), "an unreadable channel let the command start"


def test_run_watched_waits_for_the_publication_that_lists_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    reads = itertools.count()
    side = FakeSide(lambda _: state(next(reads), listed=10 if next(reads) > 6 else SERIAL))
    result = dask_task.run_watched(marker_order(marker), channel(orphan_after_s=5), side)
    assert (result.status, result.exit_code) == (WorkStatus.EXITED, 0)
    assert marker.read_text() == "1"
    assert side.calls == ["marked", "mark"]  # the coordinator clears the mark


def test_run_watched_runs_an_order_whose_coordinator_beats(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    beats = itertools.count()
    side = FakeSide(lambda _: state(next(beats), live=(1, SERIAL)))
    result = dask_task.run_watched(marker_order(marker), channel(), side)
    assert (result.status, result.exit_code) == (WorkStatus.EXITED, 0)
    assert marker.read_text() == "1"


def test_run_watched_refuses_a_version_mismatch(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    reads: list[float] = []

    def read(timeout: float) -> object:
        reads.append(timeout)
        return state()

    side = FakeSide(read)
    result = dask_task.run_watched(marker_order(marker), channel(version="0.0.0+elsewhere"), side)
    assert (result.status, result.exit_code) == (WorkStatus.START_FAILED, None)
    assert "0.0.0+elsewhere" in result.detail and runstore_version() in result.detail
    assert reads == [] and side.calls == [] and not marker.exists()


def test_run_watched_kills_a_running_order_once_the_coordinator_is_silent(
    tmp_path: Path,
) -> None:
    """The first read (before the start) succeeds, every later one fails: the order's
    process is killed about ``orphan_after_s`` later and the result is CANCELLED."""
    pid_file = tmp_path / "pid"
    reads = itertools.count()

    def read(_: float) -> object:
        if next(reads) == 0:
            return state()
        raise OSError("scheduler unreachable")

    with reaped(pid_file):
        began = time.monotonic()
        result = dask_task.run_watched(
            sleeper(pid_file), channel(orphan_after_s=0.3), FakeSide(read)
        )
        elapsed = time.monotonic() - began
        assert (result.status, result.exit_code) == (WorkStatus.CANCELLED, -signal.SIGTERM)
        assert 0.3 <= elapsed < 0.3 + SLACK_S
        assert gone(int(wait_for(pid_file)))


def watching(
    read: Callable[[float], object], orphan_after_s: float = 0.3
) -> tuple[str, Kill, float]:
    """Run :func:`dask_task.watch` to its end: its verdict, the kill and the seconds taken."""
    kill, finished = Kill(), threading.Event()
    began = time.monotonic()
    verdict = dask_task.watch(
        channel(orphan_after_s=orphan_after_s), FakeSide(read), kill, finished
    )
    return verdict, kill, time.monotonic() - began


@pytest.mark.parametrize(
    ("news", "verdict"),
    [(state(live=(1,)), "cancelled"), (state(closed=True), "closed")],
)
def test_watch_stops_at_a_cancel_or_a_close(news: object, verdict: str) -> None:
    beats = itertools.count()

    def read(_: float) -> object:
        return state(next(beats)) if next(beats) < 6 else news  # a few beats first

    found, kill, elapsed = watching(read)
    assert (found, kill.cancelled, kill.stop.is_set()) == (verdict, True, True)
    assert elapsed < 0.3, "it waited for the orphan rule instead"


def failing_read(_: float) -> object:
    raise OSError("scheduler unreachable")


@pytest.mark.parametrize(
    "read",
    [lambda _: state(beat=7), failing_read, lambda _: "not a dict", lambda _: None],
    ids=["a beat that never changes", "a read that raises", "a strange value", "no value"],
)
def test_watch_stops_a_task_whose_coordinator_is_silent(read: Callable[[float], object]) -> None:
    found, kill, elapsed = watching(read, orphan_after_s=0.3)
    assert (found, kill.cancelled) == ("orphaned", True)
    assert 0.3 <= elapsed < 0.3 + SLACK_S


def test_watch_keeps_a_beating_task_running_until_it_finishes() -> None:
    beats = itertools.count()
    kill, finished = Kill(), threading.Event()
    verdicts: list[str] = []
    side = FakeSide(lambda _: state(next(beats), live=(SERIAL, SERIAL + 1)))

    watcher = threading.Thread(
        target=lambda: verdicts.append(dask_task.watch(channel(), side, kill, finished))
    )
    watcher.start()
    time.sleep(1.0)  # more than three times orphan_after_s
    assert watcher.is_alive() and not kill.cancelled
    finished.set()
    watcher.join(5)
    assert (verdicts, kill.cancelled) == (["finished"], False)


# --- Dask's own failures: WORKER_LOST -----------------------------------------------------------


def test_a_task_that_raises_or_returns_no_result_is_worker_lost(executor: DaskExecutor) -> None:
    from distributed import wait

    raised = executor.client.submit(int, "not a number", pure=False)
    other = executor.client.submit(len, "abc", pure=False)
    dropped = executor.client.submit(time.sleep, 0.5, pure=False)
    dropped.cancel()
    wait([raised, other], timeout=30)
    lost = [_settled(future) for future in (raised, other, dropped)]
    assert [result.status for result in lost] == [WorkStatus.WORKER_LOST] * 3
    assert all(result.exit_code is None and result.outputs == () for result in lost)
    assert lost[0].detail.startswith("the Dask task failed: ValueError: invalid literal")
    assert lost[1].detail == "the task returned a int"
    assert lost[2].detail == "the Dask scheduler dropped the task (cancelled)"
    assert all("\n" not in result.detail for result in lost)


def test_a_task_whose_dask_worker_dies_is_worker_lost_and_not_run_again(
    executor: DaskExecutor, dask_scheduler: str, tmp_path: Path
) -> None:
    """Killing the Dask worker process that runs the order loses the task. The scheduler
    (allowed-failures 0) must not run it again, on the restarted worker or the other one;
    and the order's process dies with the worker (its supervisor sees its runner die)."""
    starts = tmp_path / "starts"
    script = """
        import os, time
        with open(os.environ["STARTS"], "a") as log:
            log.write(f"{os.getpid()} {os.environ['RUNSTORE_WORK_DIR']}\\n")
        time.sleep(60)
    """
    handle = executor.submit(order(script, env=(("STARTS", str(starts)),)))
    try:
        command = int(wait_for(starts).split()[0])
        worker = dask_worker_of(dask_scheduler, command)
        assert worker != os.getpid()
        os.kill(worker, signal.SIGKILL)
        assert executor.wait([handle], 30) == {handle}
        result = handle.result()
        assert (result.status, result.exit_code, result.outputs) == (
            WorkStatus.WORKER_LOST,
            None,
            (),
        )
        assert result.detail == "the Dask worker running it died"
        assert gone(command, SLACK_S), "the command outlived its Dask worker"
        executor.client.wait_for_workers(2, timeout=30)  # the nanny restarted it
        time.sleep(1.0)  # time enough for a wrongful re-run to start
        assert len(starts.read_text().splitlines()) == 1, "the lost task was run again"
    finally:
        for line in starts.read_text().splitlines() if starts.exists() else []:
            pid, work_dir = line.split(" ", 1)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
            shutil.rmtree(Path(work_dir).parent, ignore_errors=True)
        with contextlib.suppress(Exception):
            executor.client.wait_for_workers(2, timeout=30)


# --- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"orphan_after_s": 0},
        {"orphan_after_s": -1},
        {"orphan_after_s": float("nan")},
        {"orphan_after_s": 5, "poll_s": 0},
        {"orphan_after_s": 5, "kill_grace_s": -0.1},
    ],
)
def test_constructor_refuses_bad_periods(arguments: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        DaskExecutor(object(), **arguments)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_open_dask_refuses_a_scheduler_nobody_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runstore.runner.dask_executor.CONNECT_TIMEOUT_S", 1.0)
    address = f"tcp://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(ExecutorUnavailableError) as refusal:
        open_dask(address, None, orphan_after_s=ORPHAN_S)
    assert refusal.value.code == "executor_unavailable"
    assert address in str(refusal.value)
    assert time.monotonic() - began < 1.0 + SLACK_S


def test_open_dask_refuses_a_scheduler_that_reruns_tasks() -> None:
    from conformance.runner.dask_world import local_cluster

    with (
        local_cluster(0, allowed_failures=3) as cluster,  # refused before any worker counts
        pytest.raises(ExecutorUnavailableError) as refusal,
    ):
        open_dask(cluster.scheduler_address, None, orphan_after_s=ORPHAN_S)
    assert refusal.value.code == "executor_unavailable"
    assert "allowed-failures is 3" in str(refusal.value)


def test_open_dask_and_open_executor_refuse_without_the_dask_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed: ImportError
    with pytest.raises(ExecutorUnavailableError, match=r"runstore\[dask\]") as refusal:
        open_dask(None, 1, orphan_after_s=ORPHAN_S)
    assert refusal.value.code == "executor_unavailable"
    with (
        pytest.raises(ExecutorUnavailableError, match=r"runstore\[dask\]"),
        open_executor("dask", jobs=None, scheduler=None, workers=1, lease_ns=30_000_000_000),
    ):
        pass


@pytest.mark.parametrize(
    ("kind", "scheduler", "workers", "named"),
    [
        ("local", "tcp://127.0.0.1:8786", None, "--executor dask"),
        ("local", None, 2, "--executor dask"),
        ("dask", "tcp://127.0.0.1:8786", 2, "--workers"),
        ("threads", None, None, "unknown executor 'threads'"),
    ],
)
def test_open_executor_refuses_contradictory_options(
    kind: str, scheduler: str | None, workers: int | None, named: str
) -> None:
    with pytest.raises(ExecutorUnavailableError) as refusal:  # noqa: SIM117
        with open_executor(
            kind, jobs=None, scheduler=scheduler, workers=workers, lease_ns=30_000_000_000
        ):
            pytest.fail("the executor opened")
    assert refusal.value.code == "executor_unavailable"
    assert named in str(refusal.value)
