"""Running one work order as a subprocess in a private scratch directory, on this machine.

Rules of this file: processes and files only; no store, no threads of its own, nothing of
attempts beyond the :class:`WorkOrder`. :func:`run_order` is the whole life of one order on
the machine that runs it: refuse what cannot start, make the scratch directory (named for
this process, :mod:`runstore.runner.scratch_dirs`; ``work/`` holding the inputs,
``output/`` empty, unnamed log files beside them), hand the command to a supervisor process
(:mod:`runstore.runner.supervise`: the time limit, the kill grace period, and every
descendant killed and reaped before it reports), collect the outputs as bytes once it has
reported and delete the scratch directory. The local executor calls it from a pool thread;
the Dask executor calls it inside a Dask task on a worker machine. A :class:`Kill` is how
another thread cancels it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import BinaryIO

import attrs
from runstore.runner import scratch_dirs
from runstore.runner import supervise
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


class Supervised:
    """The runner's end of one supervisor process (:mod:`runstore.runner.supervise`): its
    control pipe, written by any thread that stops it, and its report, read by the thread
    that runs the order. A lock keeps a stop from writing to a descriptor :meth:`report`
    has closed (and the system may have reused)."""

    def __init__(self, process: subprocess.Popen[bytes], control: int) -> None:
        self.process = process
        self._control: int | None = control
        self._lock = threading.Lock()

    def stop(self) -> None:
        """Ask for a stop (SIGTERM to the command's group now, SIGKILL to every descendant
        after the grace period); does nothing once the supervisor has reported."""
        with self._lock, contextlib.suppress(OSError):  # it is gone: nothing left to stop
            if self._control is not None:
                os.write(self._control, supervise.STOP)

    def report(self) -> tuple[int | None, str | None, tuple[int, bool, int] | None]:
        """Block until the supervisor exits; its report (:func:`supervise.parse_report`).
        The control pipe stays open until then: its end of file would mean "the runner
        died, kill everything now"."""
        assert self.process.stdout is not None
        with self.process.stdout as stream:
            data = stream.read()
        self.process.wait()
        with self._lock:
            if self._control is not None:
                os.close(self._control)
                self._control = None
        return supervise.parse_report(data)


class Kill:
    """The cancellation of one order, shared by the thread that runs it and any thread that
    may cancel it. ``lock`` guards ``cancelled`` and ``process``: the runner starts the
    supervisor under it only if not cancelled, so a cancel either sees it (and stops it)
    or stops its start."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.cancelled = False
        self.process: Supervised | None = None

    def cancel(self) -> None:
        """Mark the order cancelled and stop its supervisor if it runs (SIGTERM to the
        command's group now, SIGKILL to every descendant after the grace period);
        idempotent."""
        with self.lock:
            if self.cancelled:
                return
            self.cancelled = True
            process = self.process
        self.signal(process)

    def signal(self, process: Supervised | None) -> None:
        """Set ``stop`` and stop ``process`` if it still runs (for callers that set
        ``cancelled`` under ``lock`` themselves)."""
        self.stop.set()
        if process is not None:
            process.stop()


def run_order(
    order: WorkOrder, kill: Kill, *, scratch_root: str | None, kill_grace_s: float
) -> WorkResult:
    """Run ``order`` to its result; never raises for anything the order or the worker does
    (those come back as START_FAILED, TIMED_OUT, UNSAFE_OUTPUT, OUTPUT_TOO_LARGE, and
    WORKER_LOST when the supervisor was killed from outside). When it returns, the
    scratch directory is gone and, unless the result is WORKER_LOST, every process the
    command started is dead. A cancel makes the result CANCELLED with no outputs, whenever
    it came."""
    problem = refusal(order)
    if problem:
        return unrun(WorkStatus.START_FAILED, problem)
    try:
        scratch = scratch_dirs.make(scratch_root)
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


def _start_supervisor(spec: BinaryIO, out: BinaryIO, err: BinaryIO) -> Supervised:
    """Start the supervisor on ``spec`` in a session of its own (a terminal's Ctrl-C goes
    to the coordinator, which stops its workers itself), its stderr the command's."""
    control, ours = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", supervise.__file__, str(spec.fileno())],
            cwd="/",
            env=inherited_env(),
            stdin=control,
            stdout=subprocess.PIPE,
            stderr=err,
            pass_fds=(spec.fileno(), out.fileno()),
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        os.close(ours)
        raise
    finally:
        os.close(control)
    return Supervised(process, ours)


def _run_in(order: WorkOrder, kill: Kill, scratch: str, kill_grace_s: float) -> WorkResult:
    work_dir, output_dir = os.path.join(scratch, "work"), os.path.join(scratch, "output")
    values = {"python": sys.executable, "work_dir": work_dir, "output_dir": output_dir}
    env = {**inherited_env(), **dict(order.env)}
    env.update(RUNSTORE_WORK_DIR=work_dir, RUNSTORE_OUTPUT_DIR=output_dir)
    # Unnamed files read back through our descriptors: the worker cannot swap them.
    with (
        tempfile.TemporaryFile(dir=scratch) as out,
        tempfile.TemporaryFile(dir=scratch) as err,
        tempfile.TemporaryFile(dir=scratch) as spec,
    ):
        try:
            os.mkdir(work_dir, 0o700)
            os.mkdir(output_dir, 0o700)
            _write_inputs(work_dir, order.inputs)
            argv = _expand(order.command, values)
            grace_ns = int(kill_grace_s * 1e9)
            spec.write(
                supervise.encode_spec(
                    argv,
                    env,
                    work_dir,
                    timeout_ns=order.timeout_ns,
                    grace_ns=grace_ns,
                    stdout_fd=out.fileno(),
                )
            )
            spec.flush()
            spec.seek(0)
            # Under the lock, so a cancel either sees the supervisor or stops its start.
            with kill.lock:
                if kill.cancelled:
                    raise StartRefused("cancelled before it started")  # run_order: CANCELLED
                supervised = _start_supervisor(spec, out, err)
                kill.process = supervised
        except (StartRefused, OSError, ValueError) as error:
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            return unrun(WorkStatus.START_FAILED, detail)
        started, refused, ended = supervised.report()
        stdout, stdout_truncated = _read_head(out, order.log_limit_bytes)
        stderr, stderr_truncated = _read_head(err, order.log_limit_bytes)
    if ended is None:
        if started is None:
            code = supervised.process.returncode
            return unrun(WorkStatus.START_FAILED, refused or f"the supervisor exited ({code})")
        # The command died with it (its death signal); its group's pid stays taken while
        # any member lives, so this reaches only what is left of that group.
        signal_group(started, signal.SIGKILL)
        detail = f"the worker's supervisor died ({_how(supervised.process.returncode)})"
        return attrs.evolve(
            unrun(WorkStatus.WORKER_LOST, detail + "; what the worker started may outlive it"),
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=stdout_truncated,
            stderr_truncated=stderr_truncated,
        )
    exit_code, timed_out, duration = ended
    collected = collect(output_dir, order.output_limit_bytes) if not timed_out else None
    status, outputs, detail = collected or (WorkStatus.TIMED_OUT, (), "")
    return WorkResult(
        status=status,
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=stdout_truncated,
        stderr_truncated=stderr_truncated,
        outputs=outputs,
        duration_ns=duration,
        detail=detail,
    )


def _how(returncode: int) -> str:
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit status {returncode}"
