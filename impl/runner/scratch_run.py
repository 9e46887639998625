"""Running one work order as a subprocess in a private scratch directory, on this machine.

Rules of this file: processes and files only; no store, no threads of its own, nothing of
attempts beyond the :class:`WorkOrder`. :func:`run_order` is the whole life of one order on
the machine that runs it: refuse what cannot start, make the scratch directory
(``work/`` holding the inputs, ``output/`` empty, unnamed log files beside them), start the
command in its own session and process group, enforce the time limit, kill the whole group
after any exit, collect the outputs as bytes and delete the scratch directory. The local
executor calls it from a pool thread; the Dask executor calls it inside a Dask task on a
worker machine. A :class:`Kill` is how another thread cancels it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import BinaryIO

import attrs
from runstore.runner.executor import PLACEHOLDERS
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.executor import expand_command
from runstore.runner.output_tree import collect
from runstore.runner.output_tree import remove_tree


class StartRefused(Exception):
    """An order that cannot be started; the message is the result's one-line detail."""


def _expand(command: tuple[str, ...], values: dict[str, str]) -> list[str]:
    try:
        return expand_command(command, values)
    except ValueError as error:
        raise StartRefused(str(error)) from None


def refusal(order: WorkOrder) -> str:
    """Why ``order`` cannot start, judged before any file is made ("" when it can)."""
    if order.timeout_ns <= 0 or order.output_limit_bytes < 0 or order.log_limit_bytes < 0:
        return "the time limit must be positive and the size limits not negative"
    if not order.command:
        return "empty command"
    for path, _ in order.inputs:  # "/x" starts with an empty segment
        if "\0" in path or any(s in ("", ".", "..") for s in path.split("/")):
            return f"input path {path!r} is not a plain relative path"
    try:
        _expand(order.command, dict.fromkeys(PLACEHOLDERS, ""))
    except StartRefused as refusal:
        return str(refusal)
    return ""


def _write_inputs(work_dir: str, inputs: tuple[tuple[str, bytes], ...]) -> None:
    for path, data in inputs:
        target = os.path.join(work_dir, *path.split("/"))
        try:
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with open(os.open(target, flags, 0o600), "wb") as file:
                file.write(data)
        except OSError as error:
            raise StartRefused(f"cannot write input {path!r}: {error.strerror}") from None


def _read_head(file: BinaryIO, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a log file and whether there was more."""
    file.seek(0)
    data = file.read(limit + 1)
    return data[:limit], len(data) > limit


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, signum)


def unrun(status: WorkStatus, detail: str = "") -> WorkResult:
    """The result of an order that never started (cancelled in the queue, refused)."""
    return WorkResult(
        status=status,
        exit_code=None,
        stdout=b"",
        stderr=b"",
        stdout_truncated=False,
        stderr_truncated=False,
        outputs=(),
        duration_ns=0,
        detail=detail,
    )


class Kill:
    """The cancellation of one order, shared by the thread that runs it and any thread that
    may cancel it. ``lock`` guards ``cancelled`` and ``process``: the runner starts the
    process under it only if not cancelled, so a cancel either sees the process (and
    signals its group) or stops its start."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.cancelled = False
        self.process: subprocess.Popen[bytes] | None = None

    def cancel(self) -> None:
        """Mark the order cancelled, wake its supervisor and send SIGTERM to its group if
        it runs (the supervisor sends SIGKILL after the grace period); idempotent."""
        with self.lock:
            if self.cancelled:
                return
            self.cancelled = True
            process = self.process
        self.signal(process)

    def signal(self, process: subprocess.Popen[bytes] | None) -> None:
        """Wake the supervisor and SIGTERM ``process``'s group if it still runs (for callers
        that set ``cancelled`` under ``lock`` themselves)."""
        self.stop.set()
        if process is not None and process.returncode is None:
            signal_group(process.pid, signal.SIGTERM)


def run_order(
    order: WorkOrder, kill: Kill, *, scratch_root: str | None, kill_grace_s: float
) -> WorkResult:
    """Run ``order`` to its result; never raises for anything the order or the worker does
    (those come back as START_FAILED, TIMED_OUT, UNSAFE_OUTPUT, OUTPUT_TOO_LARGE). The
    scratch directory is gone before this returns. A cancel makes the result CANCELLED
    with no outputs, whenever it came."""
    problem = refusal(order)
    if problem:
        return unrun(WorkStatus.START_FAILED, problem)
    try:
        scratch = tempfile.mkdtemp(prefix="runstore-work-", dir=scratch_root)
    except OSError as error:
        return unrun(WorkStatus.START_FAILED, f"no scratch: {error}")
    try:
        result = _run_in(order, kill, scratch, kill_grace_s)
    finally:
        remove_tree(scratch)
    with kill.lock:
        if kill.cancelled:
            return attrs.evolve(result, status=WorkStatus.CANCELLED, outputs=(), detail="")
    return result


def inherited_env() -> dict[str, str]:
    """The environment a worker inherits from this process: all of it but the runner's own
    ``RUNSTORE_*`` names (``RUNSTORE_STORE`` would point a worker at the coordinator's
    store); the order sets the ones a worker gets."""
    return {name: value for name, value in os.environ.items() if not name.startswith("RUNSTORE_")}


def _run_in(order: WorkOrder, kill: Kill, scratch: str, kill_grace_s: float) -> WorkResult:
    work_dir, output_dir = os.path.join(scratch, "work"), os.path.join(scratch, "output")
    values = {"python": sys.executable, "work_dir": work_dir, "output_dir": output_dir}
    env = {**inherited_env(), **dict(order.env)}
    env.update(RUNSTORE_WORK_DIR=work_dir, RUNSTORE_OUTPUT_DIR=output_dir)
    # Unnamed log files read back through our descriptors: the worker cannot swap them.
    with tempfile.TemporaryFile(dir=scratch) as out, tempfile.TemporaryFile(dir=scratch) as err:
        try:
            os.mkdir(work_dir, 0o700)
            os.mkdir(output_dir, 0o700)
            _write_inputs(work_dir, order.inputs)
            argv = _expand(order.command, values)
            # Under the lock, so a cancel either sees the process or stops its start.
            with kill.lock:
                if kill.cancelled:
                    raise StartRefused("cancelled before it started")  # run_order: CANCELLED
                begin = time.monotonic_ns()
                process = subprocess.Popen(
                    argv,
                    cwd=work_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    close_fds=True,
                )
                kill.process = process
        except (StartRefused, OSError, ValueError) as error:
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            return unrun(WorkStatus.START_FAILED, detail)
        timed_out = _supervise(kill, process, begin + order.timeout_ns, kill_grace_s)
        duration = time.monotonic_ns() - begin
        stdout, stdout_truncated = _read_head(out, order.log_limit_bytes)
        stderr, stderr_truncated = _read_head(err, order.log_limit_bytes)
    collected = collect(output_dir, order.output_limit_bytes) if not timed_out else None
    status, outputs, detail = collected or (WorkStatus.TIMED_OUT, (), "")
    return WorkResult(
        status=status,
        exit_code=process.returncode,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=stdout_truncated,
        stderr_truncated=stderr_truncated,
        outputs=outputs,
        duration_ns=duration,
        detail=detail,
    )


def _supervise(
    kill: Kill, process: subprocess.Popen[bytes], deadline_ns: int, kill_grace_s: float
) -> bool:
    """Wait for the worker's exit, the deadline or a cancel; kill the group (TERM, grace,
    KILL) unless it exited by itself, then SIGKILL the group anyway so no grandchild
    outlives the attempt. Returns whether the time limit expired."""
    timed_out = False
    delay = 0.001
    while process.poll() is None:
        remaining = (deadline_ns - time.monotonic_ns()) / 1e9
        if remaining <= 0:
            timed_out = True
            break
        if kill.stop.wait(min(delay, remaining)):
            break
        delay = min(delay * 2, 0.05)  # a cancel wakes it at once anyway
    if process.returncode is None:
        signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(kill_grace_s)
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait()
    signal_group(process.pid, signal.SIGKILL)
    return timed_out
