"""The executor interface: how the coordinator hands work to workers and gets bytes back.

Rules of this file: values and a protocol only (no processes, no store). A worker receives
a :class:`WorkOrder` (its command, environment, parameters and input file bytes) and
returns a :class:`WorkResult` (exit status, bounded logs and output file bytes). Nothing
here assumes the worker runs on the store's machine: orders and results are plain bytes,
and only the coordinator ever touches the store (SPEC.md section 15).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection
from typing import Final
from typing import Protocol

import attrs

OUTPUT_LIMIT_BYTES: Final = 64 * 1024 * 1024
"""The most output bytes (all files under the output directory together) a worker may
return; more is :attr:`WorkStatus.OUTPUT_TOO_LARGE`."""

LOG_LIMIT_BYTES: Final = 4 * 1024 * 1024
"""The most bytes kept of each of stdout and stderr; the rest is cut (the head is kept)
and the result says so."""


PLACEHOLDERS: Final = ("python", "work_dir", "output_dir")
"""The names a command argument may hold as ``{name}``, filled on the worker's side."""

_TOKEN: Final = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
"""What the placeholder scanner stops at: an escaped brace, a ``{name}``, a lone brace."""


def expand_command(command: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """``command`` with each ``{name}`` replaced by ``values[name]`` and ``{{``/``}}`` by one
    brace. Refuses (ValueError, with a one-line reason) an unknown name, a lone ``}`` or an
    unclosed ``{``, naming the argument by its position in the command, from 0. The
    campaign reader calls it to refuse a typo before anything is registered; an executor
    calls it with its machine's values."""

    def expand(argument: str, index: int) -> str:
        def replace(match: re.Match[str]) -> str:
            token, name = match.group(0), match.group(1)
            if token in ("{{", "}}"):
                return token[0]
            if name is None:
                raise ValueError(f"unmatched {token} in argument {index}")
            if name not in values:
                raise ValueError(f"unknown placeholder {token} in argument {index}")
            return values[name]

        return _TOKEN.sub(replace, argument)

    return [expand(argument, index) for index, argument in enumerate(command)]


class WorkStatus(enum.Enum):
    """How a worker's run ended, as the executor saw it."""

    EXITED = "exited"
    """The command ran and exited by itself (any exit code, or killed by a signal it did
    not get from the executor); ``exit_code`` says how."""
    TIMED_OUT = "timed_out"
    """The time limit passed; the executor killed the worker's process group."""
    START_FAILED = "start_failed"
    """The command could not be started (not found, not executable, bad placeholder)."""
    CANCELLED = "cancelled"
    """The coordinator cancelled the work (lease lost, interrupted); the worker was killed."""
    OUTPUT_TOO_LARGE = "output_too_large"
    """The command exited but its outputs exceed :data:`OUTPUT_LIMIT_BYTES`."""
    UNSAFE_OUTPUT = "unsafe_output"
    """The command exited but its output directory holds something other than regular
    files and directories (a symbolic link, a device, a socket, a FIFO)."""
    WORKER_LOST = "worker_lost"
    """No result came back: the Dask worker died, the scheduler dropped the task or ran it
    again after losing its result, or the worker's supervisor was killed (``detail`` says
    which). The worker may have run, never twice."""


@attrs.frozen(kw_only=True)
class WorkOrder:
    """Everything a worker needs, as values.

    ``command`` is the argument list with placeholders the executor fills on the worker's
    side: ``{python}`` (the worker machine's Python interpreter), ``{work_dir}`` (the
    private working directory holding the input files) and ``{output_dir}`` (the empty
    directory the worker writes its outputs into); ``{{`` and ``}}`` are literal braces.
    ``env`` is added to the worker's inherited environment (less any inherited
    ``RUNSTORE_*`` name), followed by the runner's own
    variables (``RUNSTORE_OUTPUT_DIR``, ``RUNSTORE_WORK_DIR``, ``RUNSTORE_PARAMETERS``,
    ``RUNSTORE_CANDIDATE``, ``RUNSTORE_PROBLEM``, ``RUNSTORE_ATTEMPT``). ``inputs`` are
    ``(relative POSIX path, bytes)`` pairs written under the working directory before the
    command starts. ``packages`` are the distribution names whose installed versions the
    worker side records in the result's environment document."""

    key: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    inputs: tuple[tuple[str, bytes], ...] = attrs.field(repr=False)
    timeout_ns: int
    output_limit_bytes: int = OUTPUT_LIMIT_BYTES
    log_limit_bytes: int = LOG_LIMIT_BYTES
    packages: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class WorkResult:
    """What came back. ``exit_code`` is the process's exit status (negative: killed by that
    signal) or None when it never ran to an exit the executor could observe. ``outputs``
    are the regular files under the output directory as ``(relative POSIX path, bytes)``,
    sorted by path; empty unless ``status`` is EXITED. ``detail`` is a one-line
    explanation for START_FAILED, OUTPUT_TOO_LARGE and UNSAFE_OUTPUT (else empty).
    ``environment`` is the canonical JSON environment document of the process that ran the
    order (:mod:`runstore.runner.environment`), collected on the worker's side; empty for a
    result the coordinator's side made itself (an order cancelled before it started, a lost
    Dask task) or when none could be collected."""

    status: WorkStatus
    exit_code: int | None
    stdout: bytes = attrs.field(repr=False)
    stderr: bytes = attrs.field(repr=False)
    stdout_truncated: bool
    stderr_truncated: bool
    outputs: tuple[tuple[str, bytes], ...] = attrs.field(repr=False)
    duration_ns: int
    detail: str = ""
    environment: bytes = attrs.field(default=b"", repr=False)


class WorkHandle(Protocol):
    """One submitted order."""

    def done(self) -> bool:
        """True once :meth:`result` is available (never blocks)."""
        ...

    def result(self) -> WorkResult:
        """The result; only valid once :meth:`done` is true."""
        ...

    def cancel(self) -> None:
        """Kill the worker (everything it started) if it is still running; idempotent.
        The result is then CANCELLED unless the worker had already finished."""
        ...


class Executor(Protocol):
    """Runs work orders; the coordinator owns it and closes it."""

    def submit(self, order: WorkOrder) -> WorkHandle:
        """Start (or queue) ``order``; never blocks on the work itself."""
        ...

    def wait(self, handles: Collection[WorkHandle], timeout_s: float) -> set[WorkHandle]:
        """Block until at least one of ``handles`` is done or ``timeout_s`` passes; return
        the done ones (possibly none). With no handles, sleep ``timeout_s``: the
        coordinator waits this way for a lease to expire."""
        ...

    def close(self) -> None:
        """Cancel everything still running and release resources; idempotent."""
        ...
