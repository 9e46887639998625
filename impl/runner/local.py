"""The local executor: run each work order as a subprocess on this machine.

Rules of this file: processes, files and threads only; it never touches a run store (no
store, no SQLite) and knows nothing of attempts beyond the :class:`WorkOrder` it is given.
Each order gets a private scratch directory (``work/`` holding the inputs, ``output/``
empty, unnamed log files beside them), its own session and process group, and a thread of
a pool sized ``jobs`` that starts it, enforces its time limit, kills its whole group after
any exit, collects its outputs as bytes and deletes the scratch directory. A handle's
future is settled once, under its lock, so a cancel and a finished result never both win.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, BinaryIO

import attrs
from runstore.runner.executor import (
    PLACEHOLDERS,
    Executor,
    WorkHandle,
    WorkOrder,
    WorkResult,
    WorkStatus,
    expand_command,
)


class StartRefused(Exception):
    """An order that cannot be started; the message is the result's one-line detail."""


def _expand(command: tuple[str, ...], values: dict[str, str]) -> list[str]:
    try:
        return expand_command(command, values)
    except ValueError as error:
        raise StartRefused(str(error)) from None


def _refusal(order: WorkOrder) -> str:
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


def _collect(output_dir: str, limit: int) -> tuple[WorkStatus, tuple[tuple[str, bytes], ...], str]:
    """Walk ``output_dir`` following no link: only regular files and directories, the files
    at most ``limit`` bytes together (lstat sizes, checked before any read). Returns the
    status (EXITED, UNSAFE_OUTPUT, OUTPUT_TOO_LARGE), the sorted outputs and a detail."""
    files: list[tuple[str, int]] = []

    def refuse(error: OSError) -> None:
        raise error

    try:
        if not stat.S_ISDIR(os.lstat(output_dir).st_mode):
            return WorkStatus.UNSAFE_OUTPUT, (), "the output directory was replaced"
        for dirpath, dirnames, filenames in os.walk(output_dir, onerror=refuse):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                full = os.path.join(dirpath, name)
                relative = os.path.relpath(full, output_dir).replace(os.sep, "/")
                try:
                    relative.encode("utf-8")
                except UnicodeEncodeError:
                    return WorkStatus.UNSAFE_OUTPUT, (), f"{relative!r}: name is not UTF-8"
                info = os.lstat(full)
                if stat.S_ISREG(info.st_mode):
                    files.append((relative, info.st_size))
                elif not stat.S_ISDIR(info.st_mode):
                    kind = "symbolic link" if stat.S_ISLNK(info.st_mode) else "special file"
                    return WorkStatus.UNSAFE_OUTPUT, (), f"{relative}: {kind} in output"
    except OSError as error:
        where = os.path.relpath(error.filename or output_dir, os.path.dirname(output_dir))
        return WorkStatus.UNSAFE_OUTPUT, (), f"{where}: unreadable ({error.strerror})"
    total = sum(size for _, size in files)
    if total > limit:
        return WorkStatus.OUTPUT_TOO_LARGE, (), f"outputs hold {total} bytes, limit {limit}"
    outputs: list[tuple[str, bytes]] = []
    for relative, size in sorted(files):
        full = os.path.join(output_dir, *relative.split("/"))
        try:
            with open(os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as file:
                data = file.read(size + 1)
        except OSError as error:
            return WorkStatus.UNSAFE_OUTPUT, (), f"{relative}: unreadable ({error.strerror})"
        if len(data) != size:  # something outside the killed group still writes to it
            return WorkStatus.UNSAFE_OUTPUT, (), f"{relative}: changed while being collected"
        outputs.append((relative, data))
    return WorkStatus.EXITED, tuple(outputs), ""


def _remove_tree(root: str) -> None:
    """Delete a scratch directory even where the worker made directories read-only: on a
    first failure, make every directory (top-down, links not followed) ours again."""
    with contextlib.suppress(OSError):
        return shutil.rmtree(root)
    with contextlib.suppress(OSError):
        os.chmod(root, 0o700)
        for dirpath, dirnames, _ in os.walk(root):
            for path in (os.path.join(dirpath, name) for name in dirnames):
                if not os.path.islink(path):
                    os.chmod(path, 0o700)
    shutil.rmtree(root, ignore_errors=True)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, signum)


class LocalHandle:
    """One order submitted to a :class:`LocalExecutor` (a :class:`WorkHandle`)."""

    def __init__(self, order: WorkOrder) -> None:
        self.order = order
        self.future: concurrent.futures.Future[WorkResult] = concurrent.futures.Future()
        self.task: concurrent.futures.Future[None] | None = None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.cancelled = False
        self.started = False
        self.process: subprocess.Popen[bytes] | None = None

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> WorkResult:
        """The result; raises ``concurrent.futures.InvalidStateError`` if not done yet."""
        if not self.future.done():
            raise concurrent.futures.InvalidStateError(f"order {self.order.key} is not done")
        return self.future.result()

    def cancel(self) -> None:
        """Kill the worker's process group if it runs (SIGTERM now; its task thread sends
        SIGKILL after the grace period); a queued order never starts and is CANCELLED at
        once. Does nothing once the result is settled or after a first cancel."""
        with self.lock:
            if self.cancelled or self.future.done():
                return
            self.cancelled = True
            process = self.process
            if not self.started:
                self.future.set_result(_unrun(WorkStatus.CANCELLED))
        self.stop.set()
        if process is None and self.task is not None:
            self.task.cancel()  # best effort: drop it from the pool's queue
        if process is not None and process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)

    def settle(self, result: WorkResult) -> None:
        """Set the result once, as CANCELLED (outputs dropped) if a cancel came first."""
        with self.lock:
            if self.cancelled:
                result = attrs.evolve(result, status=WorkStatus.CANCELLED, outputs=(), detail="")
            if not self.future.done():
                self.future.set_result(result)


def _unrun(status: WorkStatus, detail: str = "") -> WorkResult:
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


class LocalExecutor:
    """Runs at most ``jobs`` orders at once as subprocesses (the rest queue), each in a
    fresh scratch directory under ``scratch_root`` (default: the system temporary
    directory), killed with SIGTERM then, ``kill_grace_s`` later, SIGKILL to its process
    group on time-out, cancel or close. Refuses (ValueError) ``jobs < 1`` or a negative
    grace; :meth:`submit` after :meth:`close` raises RuntimeError. An order that cannot
    start (bad placeholder, hostile input path, missing program, non-positive time limit)
    comes back START_FAILED with a one-line detail, never as an exception."""

    def __init__(
        self, jobs: int, *, scratch_root: str | None = None, kill_grace_s: float = 2.0
    ) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        if kill_grace_s < 0:
            raise ValueError(f"kill_grace_s must not be negative, got {kill_grace_s}")
        self.scratch_root, self.kill_grace_s = scratch_root, kill_grace_s
        self._pool = concurrent.futures.ThreadPoolExecutor(jobs, "runstore-local")
        self._lock = threading.Lock()
        self._handles: set[LocalHandle] = set()
        self._closed = False

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def submit(self, order: WorkOrder) -> LocalHandle:
        """Queue ``order`` and return its handle at once."""
        handle = LocalHandle(order)
        with self._lock:
            if self._closed:
                raise RuntimeError("submit on a closed LocalExecutor")
            self._handles.add(handle)
            handle.future.add_done_callback(lambda _: self._forget(handle))
            handle.task = self._pool.submit(self._run, handle)
        return handle

    def wait(self, handles: Collection[WorkHandle], timeout_s: float) -> set[WorkHandle]:
        """The done ones among ``handles`` once one is done or ``timeout_s`` passed.
        Refuses (TypeError) a handle this class did not make."""
        by_future: dict[concurrent.futures.Future[WorkResult], WorkHandle] = {}
        for handle in handles:
            if not isinstance(handle, LocalHandle):
                raise TypeError(f"not a LocalExecutor handle: {handle!r}")
            by_future[handle.future] = handle
        if not by_future:
            time.sleep(timeout_s)
            return set()
        done, _ = concurrent.futures.wait(
            by_future, timeout=timeout_s, return_when=concurrent.futures.FIRST_COMPLETED
        )
        return {by_future[future] for future in done}

    def close(self) -> None:
        """Cancel every running and queued order and wait for the task threads (at most
        about the kill grace period); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handles = list(self._handles)
        for handle in handles:
            handle.cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _forget(self, handle: LocalHandle) -> None:
        with self._lock:
            self._handles.discard(handle)

    def _run(self, handle: LocalHandle) -> None:
        """One pool task: run the order and settle its handle, whatever happens; the scratch
        directory is gone before the result is visible."""
        with handle.lock:
            if handle.cancelled:
                return  # cancel settled it
            handle.started = True
        try:
            refusal = _refusal(handle.order)
            if refusal:
                return handle.settle(_unrun(WorkStatus.START_FAILED, refusal))
            try:
                scratch = tempfile.mkdtemp(prefix="runstore-work-", dir=self.scratch_root)
            except OSError as error:
                return handle.settle(_unrun(WorkStatus.START_FAILED, f"no scratch: {error}"))
            try:
                result = self._run_in(handle, scratch)
            finally:
                _remove_tree(scratch)
            handle.settle(result)
        except BaseException as error:  # a bug here must not leave the handle pending
            with handle.lock:
                if not handle.future.done():
                    handle.future.set_exception(error)

    def _run_in(self, handle: LocalHandle, scratch: str) -> WorkResult:
        order = handle.order
        work_dir, output_dir = os.path.join(scratch, "work"), os.path.join(scratch, "output")
        values = {"python": sys.executable, "work_dir": work_dir, "output_dir": output_dir}
        env = {**os.environ, **dict(order.env)}
        env.update(RUNSTORE_WORK_DIR=work_dir, RUNSTORE_OUTPUT_DIR=output_dir)
        # Unnamed log files read back through our descriptors: the worker cannot swap them.
        with tempfile.TemporaryFile(dir=scratch) as out, tempfile.TemporaryFile(dir=scratch) as err:
            try:
                os.mkdir(work_dir, 0o700)
                os.mkdir(output_dir, 0o700)
                _write_inputs(work_dir, order.inputs)
                argv = _expand(order.command, values)
                # Under the lock, so a cancel either sees the process or stops its start.
                with handle.lock:
                    if handle.cancelled:
                        raise StartRefused("cancelled before it started")  # settles CANCELLED
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
                    handle.process = process
            except (StartRefused, OSError, ValueError) as error:
                detail = str(error).splitlines()[0] if str(error) else type(error).__name__
                return _unrun(WorkStatus.START_FAILED, detail)
            timed_out = self._supervise(handle, process, begin + order.timeout_ns)
            duration = time.monotonic_ns() - begin
            stdout, stdout_truncated = _read_head(out, order.log_limit_bytes)
            stderr, stderr_truncated = _read_head(err, order.log_limit_bytes)
        collected = _collect(output_dir, order.output_limit_bytes) if not timed_out else None
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
        self, handle: LocalHandle, process: subprocess.Popen[bytes], deadline_ns: int
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
            if handle.stop.wait(min(delay, remaining)):
                break
            delay = min(delay * 2, 0.05)  # a cancel wakes it at once anyway
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(self.kill_grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        _signal_group(process.pid, signal.SIGKILL)
        return timed_out


if TYPE_CHECKING:
    _IS_AN_EXECUTOR: type[Executor] = LocalExecutor
