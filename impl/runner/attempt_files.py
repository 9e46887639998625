"""The files of an attempt artifact and the ``populate`` callback that writes files into a
stage (SPEC.md section 15.4, "One attempt").

Rules of this file: no store and no clock. :func:`attempt_files` says what the attempt
artifact holds for a worker's result; :func:`write_files` writes given bytes under a
stage's object directory and tells a name the filesystem refuses
(:class:`OutputUnwritable`) from the store refusing the write (``durability_failed``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from runstore.canonical import JSON
from runstore.canonical import encode
from runstore.errors import DurabilityError
from runstore.runner.executor import WorkResult
from runstore.runner.worker_result import output_problem
from runstore.runner.worker_result import text


def attempt_files(
    work: WorkResult, *, include_outputs: bool, omitted: str | None = None
) -> tuple[tuple[str, bytes], ...]:
    """The attempt artifact's files: ``worker.json`` (how the worker ended), its logs and,
    when asked, its outputs under ``outputs/``; ``omitted`` says why outputs that exist are
    left out (``outputs_omitted`` in ``worker.json``)."""
    summary: dict[str, JSON] = {
        "detail": text(work.detail),
        "duration_ns": str(work.duration_ns),
        "exit_code": work.exit_code,
        "status": work.status.value,
        "stderr_truncated": work.stderr_truncated,
        "stdout_truncated": work.stdout_truncated,
    }
    files = [
        ("stderr.log", work.stderr),
        ("stdout.log", work.stdout),
        ("worker.json", encode(summary)),
    ]
    if include_outputs and work.outputs:
        problem = output_problem(work.outputs)
        if problem is None:
            files.extend(
                (f"outputs/{path}", data)
                for path, data in work.outputs
                if not path.startswith("checkpoints/")
            )
        else:
            omitted = problem
    if omitted is not None and work.outputs:
        summary["outputs_omitted"] = omitted
        files[2] = ("worker.json", encode(summary))
    return tuple(files)


class OutputUnwritable(Exception):
    """A worker's output that the store's stage cannot hold as named (a path too long for
    the store's filesystem, a name it refuses): the attempt fails with ``unsafe_output``.
    The message is the one-line detail."""


UNWRITABLE_NAMES: Final = frozenset({errno.ENAMETOOLONG, errno.EILSEQ, errno.EINVAL})
"""Errors of writing one output that are about its name, not the store: any other
(no space, quota, I/O error, read-only filesystem) is the store refusing the write."""


def write_files(files: Sequence[tuple[str, bytes]]) -> Callable[[str], None]:
    """A ``populate`` callback writing ``files`` (relative POSIX path, bytes) under its
    directory and closing each before returning. A name the filesystem refuses raises
    :class:`OutputUnwritable`; any other failure to write is ``durability_failed``
    (the stage stays registered for recovery, nothing is accepted)."""

    def populate(directory: str) -> None:
        for path, data in files:
            target = os.path.join(directory, *path.split("/"))
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "xb") as handle:
                    handle.write(data)
            except OSError as error:
                if error.errno in UNWRITABLE_NAMES:
                    raise OutputUnwritable(
                        text(f"{path[:80]}: cannot be written to the store ({error.strerror})")
                    ) from None
                raise DurabilityError(
                    f"writing output {path[:80]!r} into the store failed: {error.strerror}"
                ) from None

    return populate
