"""How the reading commands word values for a human: a failure's cause, an instant, a
duration (SPEC.md section 15.6, "When a slot fails").

Rules of this file: pure functions of the JSON values the readers' documents hold (the
same ones ``--json`` prints), never raising on a value of an unexpected shape: a failure
code this file does not know, or details of another shape than the runner writes, are
shown as the code with its details' JSON. The failure codes and their details are the
runner's (SPEC.md section 15.3, "Failure codes") and recovery's ``interrupted_attempt``
(section 14).
"""

from __future__ import annotations

import datetime
import json
import signal
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_NS_PER_S: Final = 1_000_000_000
_UNITS: Final = (
    ("µs", 1_000, 999_500),
    ("ms", 1_000_000, 999_500_000),
    ("s", _NS_PER_S, 99_950_000_000),
)
"""(unit, its nanoseconds, the first duration too long for it): three significant digits
never round up to 1000 of a unit, and seconds are used below 100 s."""


def instant(ns: object) -> str:
    """An instant in epoch nanoseconds as ISO 8601 UTC with milliseconds (cut, not rounded),
    ``2026-12-06T00:12:03.123Z``; ``""`` for None; anything else but an int as itself."""
    if ns is None:
        return ""
    if isinstance(ns, bool) or not isinstance(ns, int):
        return str(ns)
    try:
        moment = _EPOCH + datetime.timedelta(microseconds=ns // 1000)
    except OverflowError:
        return str(ns)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns // 1_000_000 % 1000:03d}Z"


def duration(ns: object) -> str:
    """A duration in nanoseconds (an int, or its decimal digits as the runner's details
    write it) in words: ``850 ns``, ``12.5 µs``, ``152 ms``, ``1.52 s``, ``60 s`` (three
    significant digits below 100 s), ``2 min 3 s``, ``5 min``, ``1 h 2 min`` (rounded to
    the last unit shown); anything else as itself."""
    if isinstance(ns, str) and ns.lstrip("-").isdigit():
        ns = int(ns)
    if isinstance(ns, bool) or not isinstance(ns, int):
        return "" if ns is None else str(ns)
    if ns < 0:
        return "-" + duration(-ns)
    if ns < 1000:
        return f"{ns} ns"
    for unit, scale, below in _UNITS:
        if ns < below:
            return f"{ns / scale:.3g} {unit}"
    seconds = (ns + _NS_PER_S // 2) // _NS_PER_S
    if seconds < 3600:
        return f"{seconds // 60} min" + (f" {seconds % 60} s" if seconds % 60 else "")
    minutes = (seconds + 30) // 60
    return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def _signal_name(number: object) -> str:
    try:
        return f" ({signal.Signals(number).name})" if isinstance(number, int) else ""
    except ValueError:
        return ""


def _exited(details: Mapping[str, Any]) -> str | None:
    if set(details) == {"exit_code"} and isinstance(details["exit_code"], int):
        return f"the worker exited with status {details['exit_code']}"
    number = details.get("signal")
    if set(details) == {"signal"} and isinstance(number, int):
        return f"the worker was killed by signal {number}{_signal_name(number)}"
    return None


def _timed_out(details: Mapping[str, Any]) -> str | None:
    if set(details) != {"timeout_ns"}:
        return None
    shown = duration(details["timeout_ns"])
    return f"timed out after {shown}" if shown != str(details["timeout_ns"]) else None


def _input_changed(details: Mapping[str, Any]) -> str | None:
    file = details.get("file")
    if not isinstance(file, str):
        return None
    rest = {key: value for key, value in details.items() if key != "file"}
    if set(rest) == {"error"}:
        return f"input file {file} can no longer be read as registered: {rest['error']}"
    if set(rest) == {"size", "registered_size"}:
        return (
            f"input file {file} now holds {rest['size']} bytes; "
            f"it was registered with {rest['registered_size']}"
        )
    if set(rest) == {"sha256"}:
        return f"input file {file} no longer has the SHA-256 it was registered with"
    return None


def _interrupted(details: Mapping[str, Any]) -> str | None:
    cause, state = details.get("cause"), details.get("interrupted_state")
    if set(details) != {"cause", "interrupted_state"}:
        return None
    why = _RECOVERY_CAUSES.get(str(cause), str(cause))
    return f"recovery ended it while {state}: {why}"


def _result_missing(details: Mapping[str, Any]) -> str | None:
    detail = details.get("detail")
    if not isinstance(detail, str) or not set(details) <= {"detail", "checkpoints"}:
        return None
    reached = details.get("checkpoints")
    if isinstance(reached, list):
        shown = ", ".join(str(index) for index in reached) or "none"
        return f"the worker left no usable result (checkpoints reached: {shown}): {detail}"
    return f"the worker left no usable result: {detail}"


def _detail(lead: str) -> Callable[[Mapping[str, Any]], str | None]:
    def word(details: Mapping[str, Any]) -> str | None:
        detail = details.get("detail")
        if set(details) == {"detail"} and isinstance(detail, str):
            return f"{lead}: {detail}"
        return None

    return word


_RECOVERY_CAUSES: Final = {
    "reservation_released": "its reservation lease was released",
    "reservation_expired": "its owner's reservation lease expired (the coordinator died?)",
    "claim_released": "its finalization claim's lease was released",
    "claim_expired": "its finalization claim's lease expired",
}

_FAILURES: Final[Mapping[str, Callable[[Mapping[str, Any]], str | None]]] = {
    "worker_failed": _exited,
    "time_limit": _timed_out,
    "start_failed": _detail("the worker could not be started"),
    "result_missing": _result_missing,
    "result_invalid": _detail("the worker's result is invalid"),
    "output_too_large": _detail("the worker's outputs are too large"),
    "unsafe_output": _detail("the worker's outputs cannot be kept"),
    "input_changed": _input_changed,
    "cancelled": _detail("cancelled"),
    "worker_lost": _detail("no result came back"),
    "interrupted_attempt": _interrupted,
}
FAILURE_CODES: Final = frozenset(_FAILURES)
"""The failure codes worded here (a test checks that the runner writes no other)."""


def cause(state: object, code: object, details: object, reason: object = None) -> str:
    """An attempt's end in words: a failure by its code and details (``the worker exited
    with status 3``, ``timed out after 60 s``, ``the worker was killed by signal 9
    (SIGKILL)``), a censored attempt by its reason, ``superseded`` and ``accepted`` by
    what they mean; ``""`` for an attempt still in progress. An unknown code, or details
    of another shape, give ``<code> <details as JSON>``."""
    if state == "censored":
        return f"censored: {reason}"
    if state == "superseded":
        return "superseded: another attempt holds the slot's result"
    if state == "accepted":
        return "accepted"
    if state != "failed" and code is None:
        return ""
    word = _FAILURES.get(str(code))
    if isinstance(details, Mapping) and word is not None:
        found = word(details)
        if found is not None:
            return found
    shown = json.dumps(details, sort_keys=True, ensure_ascii=False)
    return f"{code} {shown}"
