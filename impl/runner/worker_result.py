"""Judging what a worker returned: an accepted result document, or a failure with a code.

Rules of this file: pure. A :class:`~runstore.runner.executor.WorkResult` becomes either a
:class:`Success` (the observation's result object and the files to publish) or a
:class:`Failure` (a stable failure code and its details), exactly as SPEC.md section 15
("The worker protocol" and "Failure codes") says. Worker bytes are untrusted: every check
here fails closed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.canonical import JSON
from runstore.errors import RunStoreError
from runstore.manifest import RESERVED_NAMES, check_entry_name
from runstore.runner.executor import WorkResult, WorkStatus
from runstore.validation import check_text

RESULT_NAME: Final = "result.json"
MAX_SAFE: Final = 2**53 - 1

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


@attrs.frozen(kw_only=True)
class Success:
    """A valid result: ``result`` is the observation's result object
    (``{"metrics": {name: decimal string}}``); ``outputs`` are the files to publish."""

    result: dict[str, JSON]
    outputs: tuple[tuple[str, bytes], ...] = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class Failure:
    code: str
    details: dict[str, JSON]


def judge(work: WorkResult, timeout_ns: int) -> Success | Failure:
    """The verdict on one finished piece of work."""
    if work.status is WorkStatus.EXITED:
        if work.exit_code != 0:
            return Failure(code=WORKER_FAILED, details=_exit_details(work.exit_code))
        return _judge_outputs(work.outputs)
    if work.status is WorkStatus.TIMED_OUT:
        return Failure(code=TIME_LIMIT, details={"timeout_ns": str(timeout_ns)})
    code = {
        WorkStatus.START_FAILED: START_FAILED,
        WorkStatus.OUTPUT_TOO_LARGE: OUTPUT_TOO_LARGE,
        WorkStatus.UNSAFE_OUTPUT: UNSAFE_OUTPUT,
        WorkStatus.CANCELLED: CANCELLED,
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
    problem = output_problem(outputs)
    if problem is not None:
        return Failure(code=UNSAFE_OUTPUT, details={"detail": problem})
    document = dict(outputs).get(RESULT_NAME)
    if document is None:
        return Failure(code=RESULT_MISSING, details={"detail": f"no {RESULT_NAME} in outputs"})
    try:
        metrics = parse_metrics(document)
    except ValueError as error:
        return Failure(code=RESULT_INVALID, details={"detail": text(str(error))})
    return Success(result={"metrics": dict(metrics)}, outputs=tuple(outputs))


def parse_metrics(document: bytes) -> list[tuple[str, str]]:
    """The metrics of a result document as ``(name, decimal string)`` pairs, sorted by name;
    ValueError (with a one-line reason) when the document is not acceptable."""
    try:
        value = json.loads(
            document.decode("utf-8"),
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
        )
    except UnicodeDecodeError:
        raise ValueError(f"{RESULT_NAME} is not UTF-8") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{RESULT_NAME} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{RESULT_NAME} must hold a JSON object")
    metrics = value.get("metrics")
    if not isinstance(metrics, dict):
        raise ValueError(f"{RESULT_NAME} needs an object 'metrics'")
    pairs: list[tuple[str, str]] = []
    for name, number in sorted(metrics.items()):
        try:
            check_text(name, "metric name")
        except RunStoreError as error:
            raise ValueError(f"metric name {name!r:.80}: {error.message}") from None
        pairs.append((name, decimal(name, number)))
    return pairs


def decimal(name: str, number: object) -> str:
    """A metric value as the decimal string the store keeps: an integer in +/-(2**53-1)
    as its digits, a finite float as its shortest round-trip form (Python's ``repr``)."""
    if type(number) is int:
        if abs(number) > MAX_SAFE:
            raise ValueError(f"metric {name!r}: integer {number} is out of range")
        return str(number)
    if type(number) is float:
        if not math.isfinite(number):
            raise ValueError(f"metric {name!r}: {number} is not finite")
        return repr(number)
    raise ValueError(f"metric {name!r}: {type(number).__name__} is not a number")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r:.80} in {RESULT_NAME}")
        result[key] = value
    return result


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number")
