"""Judging what a worker returned: an accepted result document, or a failure with a code.

Rules of this file: pure. A :class:`~runstore.runner.executor.WorkResult` becomes either a
:class:`Success` (the observation's result object and the files to publish) or a
:class:`Failure` (a stable failure code and its details), exactly as SPEC.md section 15
("The worker protocol" and "Failure codes") says; the result document and the metrics format
are :mod:`runstore.metrics`'. Worker bytes are untrusted: every check
here fails closed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.canonical import JSON
from runstore.errors import RunStoreError
from runstore.manifest import RESERVED_NAMES
from runstore.manifest import check_entry_name
from runstore.metrics import RESULT_NAME
from runstore.metrics import parse_result_document
from runstore.metrics import result_object
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

# Stable failure codes the runner commits (SPEC.md section 15).
WORKER_FAILED: Final = "worker_failed"
TIME_LIMIT: Final = "time_limit"
START_FAILED: Final = "start_failed"
RESULT_MISSING: Final = "result_missing"
RESULT_INVALID: Final = "result_invalid"
OUTPUT_TOO_LARGE: Final = "output_too_large"
UNSAFE_OUTPUT: Final = "unsafe_output"
INPUT_CHANGED: Final = "input_changed"
CANCELLED: Final = "cancelled"
WORKER_LOST: Final = "worker_lost"


@attrs.frozen(kw_only=True)
class Produced:
    """One observation a worker produced: ``index`` is its checkpoint (None for a result),
    ``result`` the observation's result object (``{"metrics": {name: decimal string}}``),
    ``files`` the files of its observation artifact."""

    index: int | None
    result: dict[str, JSON]
    files: tuple[tuple[str, bytes], ...] = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class Success:
    """The worker succeeded: what it produced (nothing for a warm-up; for a stream, the
    checkpoints it wrote, possibly not all)."""

    produced: tuple[Produced, ...]


@attrs.frozen(kw_only=True)
class Failure:
    code: str
    details: dict[str, JSON]


def judge(
    work: WorkResult, timeout_ns: int, *, warmup: bool = False, checkpoints: int | None = None
) -> Success | Failure:
    """The verdict on one finished piece of work: a warm-up needs only exit 0; a stream's
    worker writes ``checkpoints/<i>/result.json`` (and more files there) for each
    checkpoint it reached; anything else writes one ``result.json``."""
    if work.status is WorkStatus.EXITED:
        if work.exit_code != 0:
            return Failure(code=WORKER_FAILED, details=_exit_details(work.exit_code))
        problem = output_problem(work.outputs)
        if problem is not None:
            return Failure(code=UNSAFE_OUTPUT, details={"detail": problem})
        if warmup:
            return Success(produced=())
        if checkpoints is not None:
            return _judge_checkpoints(work.outputs, checkpoints)
        return _judge_outputs(work.outputs)
    if work.status is WorkStatus.TIMED_OUT:
        return Failure(code=TIME_LIMIT, details={"timeout_ns": str(timeout_ns)})
    code = {
        WorkStatus.START_FAILED: START_FAILED,
        WorkStatus.OUTPUT_TOO_LARGE: OUTPUT_TOO_LARGE,
        WorkStatus.UNSAFE_OUTPUT: UNSAFE_OUTPUT,
        WorkStatus.CANCELLED: CANCELLED,
        WorkStatus.WORKER_LOST: WORKER_LOST,
    }[work.status]
    return Failure(code=code, details={"detail": text(work.detail or work.status.value)})


def _exit_details(exit_code: int | None) -> dict[str, JSON]:
    if exit_code is not None and exit_code < 0:
        return {"signal": -exit_code}
    return {"exit_code": exit_code}


def output_problem(outputs: Sequence[tuple[str, bytes]]) -> str | None:
    """Why ``outputs`` cannot be published as they are (a name the publisher refuses, or a
    runtime-owned name at the top), or None."""
    for path, _ in outputs:
        try:
            check_entry_name(path)
        except RunStoreError as error:
            return text(error.message)
        if path in RESERVED_NAMES:
            return f"{path} is runtime-owned"
    return None


def text(value: str) -> str:
    """``value`` made safe for canonical JSON (worker-supplied names may hold lone
    surrogates) and cut to 500 characters."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")[:500]


def _judge_outputs(outputs: Sequence[tuple[str, bytes]]) -> Success | Failure:
    produced = _produced(None, tuple(outputs))
    if produced is None:
        return Failure(code=RESULT_MISSING, details={"detail": f"no {RESULT_NAME} in outputs"})
    if isinstance(produced, Failure):
        return produced
    return Success(produced=(produced,))


def _produced(index: int | None, files: tuple[tuple[str, bytes], ...]) -> Produced | Failure | None:
    document = dict(files).get(RESULT_NAME)
    if document is None:
        return None
    try:
        metrics = parse_result_document(document)
    except ValueError as error:
        where = "" if index is None else f"checkpoint {index}: "
        return Failure(code=RESULT_INVALID, details={"detail": text(where + str(error))})
    return Produced(index=index, result=result_object(metrics), files=files)


_CHECKPOINT = re.compile(r"checkpoints/(0|[1-9][0-9]{0,8})/(.+)")


def _judge_checkpoints(outputs: Sequence[tuple[str, bytes]], count: int) -> Success | Failure:
    """Each ``checkpoints/<i>/`` directory is checkpoint ``i``'s observation artifact
    (``i`` below ``count``); it counts only with a valid ``result.json``. Other outputs
    are not observations (the attempt artifact keeps them)."""
    groups: dict[int, list[tuple[str, bytes]]] = {}
    for path, data in outputs:
        match = _CHECKPOINT.fullmatch(path)
        if match is None:
            continue
        index = int(match[1])
        if index >= count:
            detail = f"checkpoint {index} is beyond the stream's {count} checkpoints"
            return Failure(code=RESULT_INVALID, details={"detail": detail})
        groups.setdefault(index, []).append((match[2], data))
    produced: list[Produced] = []
    for index in sorted(groups):
        found = _produced(index, tuple(groups[index]))
        if found is None:
            detail = f"checkpoint {index} has no {RESULT_NAME}"
            return Failure(code=RESULT_INVALID, details={"detail": detail})
        if isinstance(found, Failure):
            return found
        produced.append(found)
    return Success(produced=tuple(produced))
