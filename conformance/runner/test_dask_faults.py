"""The Dask executor under faults (SPEC.md section 15.8): the store stays the only fence.

* A result that comes back after its attempt's lease was lost is refused by the store's
  guard check and never published, and a coordinator that loses a lease while its Dask
  task runs cancels the task (the worker's process dies).
* A Dask worker process killed mid-task fails its attempt with ``worker_lost``; Dask does
  not run it again, and only ``--retry-failed`` (an explicit authorization) retries it.
* A coordinator killed mid-run (``SIGKILL``) on a cluster that outlives it: its running
  tasks kill their workers once its beat stops (the orphan rule), and ``run --resume``
  recovers and finishes; nothing accepted is lost or doubled.
* The same campaign run with the local and the Dask executor stores the same results and
  the same content-addressed observation artifacts.

The coordinator runs in process or as the installed console script; the cluster is the
file's (``dask_scheduler``) or one the console script starts (``--workers``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from runstore.errors import RunStoreError
from runstore.requests import FirstAttempt
from runstore.runner import attempt
from runstore.runner.campaign import Campaign
from runstore.runner.coordinator import LOST
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import register
from runstore.runner.coordinator import run_campaign
from runstore.runner.dask_executor import open_dask
from runstore.runner.executor import WorkStatus
from runstore.store import RunStore
from runstore.store.store_root import create_root

from conformance.cli.world import json_lines
from conformance.cli.world import runstore
from conformance.cli.world import start
from conformance.cli.world import write_campaign
from conformance.closed_store import rows as query
from conformance.runner.dask_world import dask_worker_of
from conformance.runner.executor_world import gone
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import campaign

pytest.importorskip("distributed", reason="the dask extra is not installed")

SLACK_S = 10.0
"""How long a kill that the channel delivers may take on a busy machine (a poll of 0.5 s,
the 2 s grace, start-up noise)."""


def gone_within(pids: list[int], seconds: float) -> bool:
    """Whether every process of ``pids`` is dead (a zombie counts) within ``seconds``."""
    deadline = time.monotonic() + seconds
    return all(gone(pid, max(0.05, deadline - time.monotonic())) for pid in pids)


def marks(directory: Path, count: int, within_s: float = 60.0) -> dict[str, tuple[int, int]]:
    """The stall marks (pid, parent pid) once ``count`` of them exist."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = {
            path.name: path.read_text().split()
            for path in directory.iterdir()
            if not path.name.endswith(".tmp")
        }
        if len(found) >= count:
            return {name: (int(pid), int(parent)) for name, (pid, parent) in found.items()}
        time.sleep(0.05)
    raise AssertionError(f"only {len(list(directory.iterdir()))} stall marks after {within_s} s")


@pytest.fixture
def stall_marks(tmp_path: Path) -> Iterator[Path]:
    """The stall marks' directory; afterwards every stalled worker still alive is killed
    (a test that fails must not leave a 60 s sleeper behind)."""
    directory = tmp_path / "marks"
    directory.mkdir()
    yield directory
    for path in directory.iterdir():
        if not path.name.endswith(".tmp"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(path.read_text().split()[0]), signal.SIGKILL)


def accepted(store: Path) -> dict[str, str]:
    return {
        str(slot): str(attempt_id)
        for slot, attempt_id in query(
            store, "SELECT slot_id, id FROM attempts WHERE state = 'accepted'"
        )
    }


def assert_sound(store: Path) -> None:
    """At most one accepted attempt per slot, nothing unfinished, and the store passes
    validate and audit."""
    assert query(
        store, "SELECT count(*) - count(DISTINCT slot_id) FROM attempts WHERE state = 'accepted'"
    ) == [(0,)]
    assert query(store, "SELECT count(*) FROM attempts WHERE finished_at_ns IS NULL") == [(0,)]
    for command in ("validate", "audit"):
        checked = runstore(command, "--store", str(store))
        assert checked.returncode == 0, checked.stdout + checked.stderr


# --- fencing --------------------------------------------------------------------------------

STALL_SCRIPT = (
    "import os, pathlib, time; "
    "pathlib.Path(os.environ['PID_FILE']).write_text(str(os.getpid())); "
    "time.sleep(float(os.environ['SLEEP_S'])); "
    "pathlib.Path(os.environ['RUNSTORE_OUTPUT_DIR'], 'result.json')"
    '.write_text(\'{{"metrics": {{"x": 1}}}}\')'
)


def one_stalling_slot(tmp_path: Path) -> tuple[str, Path, Campaign]:
    """A new store root, the worker's pid file and a one-slot campaign of STALL_SCRIPT."""
    root = str(tmp_path / "store")
    create_root(root)
    stalling = campaign(("a",), ("p",), command=("{python}", "-c", STALL_SCRIPT))
    return root, tmp_path / "pid", stalling


def test_a_result_returned_after_the_lease_was_lost_is_refused_by_the_guard(
    tmp_path: Path, dask_scheduler: str
) -> None:
    root, pid_file, plan = one_stalling_slot(tmp_path)
    clock = Clock()
    with RunStore.open(root) as store, open_dask(dask_scheduler, None, orphan_after_s=30) as dask:
        plans, _, _ = register(store, plan)
        started = attempt.start(store, plans[0], FirstAttempt(), plan.lease_ns, clock)
        assert isinstance(started, attempt.Started)
        extra = (("PID_FILE", str(pid_file)), ("SLEEP_S", "1"))
        handle = dask.submit(attrs.evolve(started.order, env=(*started.order.env, *extra)))
        # Meanwhile the lease expires and recovery (another coordinator) settles the attempt.
        clock.advance(plan.lease_ns + SECOND)
        settled = store.recover(clock)
        assert [t.attempt_id for t in settled.terminals] == [started.guard.attempt_id]
        assert dask.wait([handle], 60) == {handle}
        late = handle.result()
        assert late.status is WorkStatus.EXITED and late.exit_code == 0
        assert [path for path, _ in late.outputs] == ["result.json"]
        with pytest.raises(RunStoreError) as refused:
            attempt.finish(store, started, late, plan.lease_ns, clock)
    assert isinstance(refused.value, LOST) or refused.value.code == "attempt_terminal"
    store_path = Path(root)
    assert query(store_path, "SELECT state, failure_code FROM attempts") == [
        ("failed", "interrupted_attempt")
    ]
    assert query(store_path, "SELECT count(*) FROM observations") == [(0,)]
    assert query(store_path, "SELECT count(*) FROM artifacts WHERE kind = 'observation'") == [(0,)]
    assert_sound(store_path)


class JumpingClock(Clock):
    """A clock that jumps two leases ahead once ``trigger`` exists (the worker started):
    the coordinator's next renewal finds its lease expired."""

    def __init__(self, trigger: Path, jump_ns: int) -> None:
        super().__init__()
        self.trigger, self.jump_ns, self.jumped = trigger, jump_ns, False

    def __call__(self) -> int:
        if not self.jumped and self.trigger.exists():
            self.jumped = True
            self.advance(self.jump_ns)
        return super().__call__()


def test_a_coordinator_that_loses_its_lease_cancels_the_dask_task(
    tmp_path: Path, dask_scheduler: str
) -> None:
    root, pid_file, plan = one_stalling_slot(tmp_path)
    (candidate,) = plan.candidates
    env = (("PID_FILE", str(pid_file)), ("SLEEP_S", "60"))
    stalling = attrs.evolve(plan, candidates=(attrs.evolve(candidate, env=env),))
    events: list[tuple[str, dict[str, object]]] = []
    clock = JumpingClock(pid_file, 2 * plan.lease_ns)
    with RunStore.open(root) as store, open_dask(dask_scheduler, None, orphan_after_s=30) as dask:
        summary = run_campaign(
            store,
            stalling,
            dask,
            RunOptions(jobs=1),
            lambda event, fields: events.append((event, fields)),
            clock=clock,
        )
    assert [fields["reason"] for event, fields in events if event == "lease_lost"] == [
        "lease_expired"
    ]
    assert summary.accepted == 0
    assert gone_within([int(pid_file.read_text())], SLACK_S), "the cancelled worker still runs"
    store_path = Path(root)
    assert query(store_path, "SELECT state FROM attempts") == [("executing",)]
    assert query(store_path, "SELECT count(*) FROM observations") == [(0,)]


# --- a Dask worker killed mid-task ----------------------------------------------------------


def test_a_killed_dask_worker_fails_its_attempt_once_and_only_an_authorized_retry_reruns_it(
    tmp_path: Path, stall_marks: Path, dask_scheduler: str
) -> None:
    folder = tmp_path / "c"
    env = {"STALL_MARKS": str(stall_marks)}
    campaign_file = write_campaign(folder, [("ok", "ok"), ("st", "stall")], ["p"], env=env)
    store = tmp_path / "store"
    # The file's cluster: its nanny restarts the killed worker for the later runs.
    dask = ("--executor", "dask", "--scheduler", dask_scheduler, "-j", "2")
    process = start("run", str(campaign_file), "--store", str(store), "--init", "--json", *dask)
    ((_, (command, _)),) = marks(stall_marks, 1).items()
    # The Dask worker process running the stalled task (the command's parent is its supervisor).
    os.kill(dask_worker_of(dask_scheduler, command), signal.SIGKILL)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    finished = {
        str(event["candidate_name"]): event
        for event in json_lines(out)
        if event["event"] == "attempt_finished"
    }
    assert finished["ok"]["state"] == "accepted"
    assert finished["st"]["state"] == "failed"
    assert finished["st"]["failure_code"] == "worker_lost"
    assert query(store, "SELECT failure_code, count(*) FROM attempts GROUP BY 1 ORDER BY 1") == [
        (None, 1),
        ("worker_lost", 1),
    ]
    # Without an authorization nothing runs again (a lost worker is a cut-off, which
    # --resume would retry); with --retry-failed 1 the retry does.
    again = runstore("run", str(campaign_file), "--store", str(store), "--json", *dask)
    assert again.returncode == 1, again.stderr
    assert json_lines(again.stdout)[-1]["left"] == {"st x p": "interrupted_not_resumed"}
    assert query(store, "SELECT count(*) FROM attempts") == [(2,)]
    retried = runstore(
        "run", str(campaign_file), "--store", str(store), "--retry-failed", "1", *dask
    )
    assert retried.returncode == 0, retried.stderr
    histories: dict[object, list[tuple[object, ...]]] = {}
    for slot, *row in query(
        store, "SELECT slot_id, retry_index, state, failure_code FROM attempts ORDER BY 1, 2"
    ):
        histories.setdefault(slot, []).append(tuple(row))
    assert sorted(histories.values()) == [
        [(0, "accepted", None)],
        [(0, "failed", "worker_lost"), (1, "accepted", None)],
    ]
    assert len(accepted(store)) == 2
    assert_sound(store)


# --- the coordinator killed mid-run -----------------------------------------------------------


def test_a_killed_coordinator_leaves_orphans_that_stop_and_resume_finishes_without_loss(
    tmp_path: Path, stall_marks: Path, dask_scheduler: str
) -> None:
    env = {"STALL_MARKS": str(stall_marks)}
    candidates = [("ok", "ok"), ("st", "stall")]
    campaign_file = write_campaign(tmp_path / "c", candidates, ["p", "q"], lease_seconds=3, env=env)
    store = tmp_path / "store"
    remote = ("--executor", "dask", "--scheduler", dask_scheduler, "-j", "2")
    process = start("run", str(campaign_file), "--store", str(store), "--init", "--json", *remote)
    acknowledged: dict[str, str] = {}
    assert process.stdout is not None
    for line in process.stdout:  # both ok slots acknowledged, then both stalls started
        event = json_lines(line)[0]
        if event["event"] == "attempt_finished" and event["state"] == "accepted":
            acknowledged[str(event["slot"])] = str(event["attempt"])
        if len(acknowledged) == 2:
            break
    stalled = marks(stall_marks, 2)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    at_kill = accepted(store)
    assert acknowledged.items() <= at_kill.items()
    # The cluster outlives the coordinator; its tasks stop once the beat has been silent
    # for the lease (3 s).
    pids = [pid for pid, _ in stalled.values()]
    assert gone_within(pids, 3 + SLACK_S), "orphaned workers outlived the orphan rule"
    resumed = runstore(
        "run",
        str(campaign_file),
        "--store",
        str(store),
        "--resume",
        "--retry-failed",
        "1",
        "--json",
        *remote,
    )
    assert resumed.returncode == 0, resumed.stderr
    final = accepted(store)
    assert len(final) == 4
    assert at_kill.items() <= final.items()
    assert query(
        store, "SELECT failure_code, count(*) FROM attempts WHERE state = 'failed' GROUP BY 1"
    ) == [("interrupted_attempt", 2)]
    assert_sound(store)


# --- the same results through either executor -------------------------------------------------


def test_local_and_dask_executors_store_the_same_results_and_artifacts(tmp_path: Path) -> None:
    campaign_file = write_campaign(tmp_path / "c", [("a", "ok"), ("b", "ok")], ["p", "q", "r"])
    stored = {}
    for name, options in {
        "local": ("-j", "2"),
        "dask": ("--executor", "dask", "--workers", "1"),  # a local cluster the run makes
    }.items():
        store = tmp_path / name
        done = runstore("run", str(campaign_file), "--store", str(store), "--init", *options)
        assert done.returncode == 0, done.stderr
        stored[name] = query(
            store,
            "SELECT o.attempt_slot_id, o.artifact_id, json_extract(o.record_json, '$.result') "
            "FROM observations AS o JOIN selected_observations AS s ON s.observation_id = o.id "
            "ORDER BY 1",
        )
    assert len(stored["local"]) == 6
    assert stored["dask"] == stored["local"]
