"""What ``runstore run`` reports: the payloads of its events (SPEC.md section 15.7).

Rules of this file: pure values and formatting, no store, no clock reads and no files. The
coordinator hands every event through :class:`Stamped`, which adds the coordinator's clock
as ``time_ns`` and ``time``; the slot events name the pair by the same ids ``status --json``
and the exports use (``candidate``, ``problem``), with the short names beside them. A
failed attempt's worker stderr is reported as a bounded tail: at most
:data:`TAIL_LINES` lines and :data:`TAIL_CHARS` characters, taken from the last
:data:`TAIL_BYTES` bytes of the log the attempt published, control characters escaped.
"""

from __future__ import annotations

import datetime
import os
import unicodedata
from collections.abc import Callable
from collections.abc import Mapping
from typing import Final
from typing import Protocol
from typing import TypeAlias

from runstore.canonical import JSON
from runstore.runner.plan import SlotPlan

TAIL_BYTES: Final = 4096
"""How much of the end of a worker's stderr is looked at for its tail."""

TAIL_LINES: Final = 5
TAIL_CHARS: Final = 500
"""The tail's bounds: lines, and characters over all of them (escapes counted)."""

LOG_NAMES: Final = ("stdout.log", "stderr.log")
"""The worker's logs in an attempt artifact (SPEC.md section 15.4)."""


EventValue: TypeAlias = JSON | float
"""A value of an event's field: a JSON value or, for a duration, a float (events are
printed with ``json.dumps``, never hashed, so they are not canonical JSON)."""


class Reporter(Protocol):
    """Receives each event of a run: its name and its fields (SPEC.md section 15.7)."""

    def __call__(self, event: str, fields: Mapping[str, EventValue]) -> None: ...


class Stamped:
    """A reporter that adds ``time_ns`` (``clock()`` when the event is reported, epoch ns)
    and ``time`` (the same instant as ISO 8601 UTC with milliseconds) to every event before
    handing it on."""

    def __init__(self, inner: Reporter, clock: Callable[[], int]) -> None:
        self.inner, self.clock = inner, clock

    def __call__(self, event: str, fields: Mapping[str, EventValue]) -> None:
        self.inner(event, {**fields, **stamp(self.clock())})


def stamp(now_ns: int) -> dict[str, JSON]:
    """``{"time": iso_time(now_ns), "time_ns": now_ns}``."""
    return {"time": iso_time(now_ns), "time_ns": now_ns}


def iso_time(ns: int) -> str:
    """``ns`` (epoch nanoseconds) as ISO 8601 UTC with milliseconds, truncated:
    ``2026-12-06T00:12:03.123Z``."""
    seconds, rest = divmod(ns, 10**9)
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{rest // 10**6:03d}Z"


def slot_fields(slot: SlotPlan) -> dict[str, JSON]:
    """The fields naming a slot in every slot event: ``candidate`` and ``problem`` are the
    ids ``status --json`` and the exports use (``<campaign>/<name>``), ``candidate_name``
    and ``problem_name`` the campaign file's names, ``slot`` the attempt slot id,
    ``logical_slot`` its name in its run (``measurement-2``, ``warmup``) and ``repetition``
    which repetition of its pair it is (0 for a warm-up)."""
    assert slot.attempt_slot is not None
    return {
        "candidate": slot.decision.candidate_id,
        "candidate_name": slot.candidate.name,
        "logical_slot": slot.attempt_slot.logical_slot,
        "problem": slot.decision.problem_id,
        "problem_name": slot.problem.name,
        "repetition": slot.repetition,
        "slot": slot.attempt_slot.id,
    }


def duration_s(started_at_ns: int, finished_at_ns: int) -> float:
    """Seconds from an attempt's reservation to its committed outcome."""
    return (finished_at_ns - started_at_ns) / 1e9


def log_paths(root: str, artifact_path: str, names: tuple[str, ...]) -> dict[str, JSON]:
    """``{"stdout": path, "stderr": path}`` for each log among ``names`` (the files the
    attempt artifact holds), as absolute paths under the store root ``root``."""
    directory = os.path.join(os.path.abspath(root), *artifact_path.split("/"))
    return {
        name.removesuffix(".log"): os.path.join(directory, name)
        for name in LOG_NAMES
        if name in names
    }


def stderr_tail(data: bytes) -> tuple[str, ...]:
    """The last lines of a worker's stderr, for a failure's report: from the last
    :data:`TAIL_BYTES` bytes (a line cut at that start is dropped when a later one exists),
    decoded as UTF-8 with undecodable bytes replaced, blank lines left out, control and
    format characters escaped (:func:`visible`), at most :data:`TAIL_LINES` lines and
    :data:`TAIL_CHARS` characters together. The last line is kept first: a line that does
    not fit whole is cut at its end with an ellipsis, and earlier lines go when no room is
    left."""
    end = data[-TAIL_BYTES:]
    lines = end.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    if len(data) > TAIL_BYTES and len(lines) > 1:
        lines = lines[1:]
    shown = [visible(line.rstrip()) for line in lines if line.strip()][-TAIL_LINES:]
    kept: list[str] = []
    room = TAIL_CHARS
    for line in reversed(shown):
        if room <= 0:
            break
        if len(line) > room:
            line = line[: room - 1] + "…"
        kept.append(line)
        room -= len(line)
    return tuple(reversed(kept))


def visible(line: str) -> str:
    """``line`` with every control or format character (categories Cc and Cf: escapes,
    carriage returns, tabs, bidirectional overrides) and the line and paragraph separators
    written as a Python escape (``\\x1b``, ``\\u202e``), so a worker's bytes cannot move the
    cursor, recolour or reorder the terminal that shows them."""
    return "".join(_escape(char) for char in line)


def _escape(char: str) -> str:
    if not _hidden(char):
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


def failure_summary(code: str, details: Mapping[str, JSON]) -> str:
    """A failure's code with its main detail, for one human line: ``worker_failed (exit
    3)``, ``worker_failed (signal 9)``, ``start_failed: <detail>``."""
    if "exit_code" in details:
        return f"{code} (exit {details['exit_code']})"
    if "signal" in details:
        return f"{code} (signal {details['signal']})"
    detail = details.get("detail")
    if isinstance(detail, str) and detail:
        return f"{code}: {visible(detail)}"
    return code
