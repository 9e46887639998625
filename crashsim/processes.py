"""Forking children that leave with ``os._exit``, and waiting for several at once.

Rules of this file: a child runs one function and always leaves with ``os._exit`` (no
destructors, no atexit handlers, no flushing of inherited stdio buffers); an exception in
a child is written to ``error_path`` (when given) and becomes exit status
:data:`ERROR_EXIT`. The parent flushes its stdio before forking. Waiting uses pidfds, so
only our own children are ever reaped.
"""

from __future__ import annotations

import os
import select
import sys
import traceback
from collections.abc import Callable
from typing import Final
from typing import Generic
from typing import TypeVar

ERROR_EXIT: Final = 70
"""A child's exit status when its function raised."""
T = TypeVar("T")


def fork(function: Callable[[], int], error_path: str | None = None) -> int:
    """Run ``function`` in a new child; returns its pid. The child exits with the function's
    return value, or :data:`ERROR_EXIT` when it raises."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        return pid
    status = ERROR_EXIT
    try:
        status = function()
    except BaseException:
        if error_path is not None:
            try:
                with open(error_path, "w", encoding="utf-8") as handle:
                    handle.write(traceback.format_exc())
            except BaseException:
                pass
    finally:
        os._exit(status)


def exit_status(wait_status: int) -> int:
    """The exit code, or minus the signal number for a child killed by a signal."""
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def wait(pid: int) -> int:
    """Wait for one child; returns :func:`exit_status`."""
    _, wait_status = os.waitpid(pid, 0)
    return exit_status(wait_status)


def run(function: Callable[[], int], error_path: str | None = None) -> int:
    """Run ``function`` in a child and wait for it; returns its exit status."""
    return wait(fork(function, error_path))


class Pool(Generic[T]):
    """Runs at most ``jobs`` children at a time, each known by its tag; :meth:`wait_any`
    and :meth:`reap` reap one of them."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._fds: dict[int, tuple[int, T]] = {}  # pidfd -> (pid, tag)
        self._poll = select.poll()

    def __len__(self) -> int:
        return len(self._fds)

    def full(self) -> bool:
        return len(self._fds) >= self.jobs

    def start(self, function: Callable[[], int], tag: T, error_path: str | None = None) -> None:
        pid = fork(function, error_path)
        fd = os.pidfd_open(pid)
        self._fds[fd] = (pid, tag)
        self._poll.register(fd, select.POLLIN)

    def wait_any(self) -> tuple[T, int]:
        """Block until a child ends; returns its tag and exit status."""
        while True:
            ended = self.reap(None)
            if ended is not None:
                return ended

    def reap(self, timeout_ms: int | None = 0) -> tuple[T, int] | None:
        """One ended child's tag and exit status, waiting at most ``timeout_ms`` (forever
        when None); None when none ended by then."""
        for fd, _ in self._poll.poll(timeout_ms):
            pid, tag = self._fds.pop(fd)
            self._poll.unregister(fd)
            os.close(fd)
            return tag, wait(pid)
        return None
