"""What ``runstore run`` shows on stderr without ``--json`` (SPEC.md section 15.7).

Rules of this file: rendering only, from the run's events (no store, no decisions). On a
terminal a live view is redrawn: the bar with its counts and ETA, a countdown while a
``--resume`` waits for leases, and the running slots by name with their elapsed time.
Elsewhere plain lines: one per finished attempt, one per wait for leases, a progress line
at most every :data:`PLAIN_EVERY_S` seconds (only when an event comes) and the summary.
A failure's line always carries the tail of the worker's stderr and the path of its log.
:class:`RunProgress` holds the state and every number shown, and reads no clock itself.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Final

import attrs
from rich.console import Console
from rich.console import ConsoleOptions
from rich.console import RenderResult
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from runstore.cli import output
from runstore.runner.run_events import EventValue
from runstore.runner.run_events import failure_summary
from runstore.runner.run_events import iso_time

PLAIN_EVERY_S: Final = 10.0
"""The least time between two progress lines when stderr is no terminal."""

PLAIN_RUNNING_NAMED: Final = 5
"""How many running slots a plain progress line names."""


@attrs.define
class Running:
    label: str
    since_s: float
    """The monotonic clock when its ``attempt_started`` came."""


@attrs.define
class RunProgress:
    """The run as its events tell it. ``total`` slots (from ``planned``), ``completed``
    (satisfied before the run or accepted in it), ``failed`` attempts, the ``running``
    slots, the ``durations`` of the attempts finished in this run, and the slots waiting
    for leases (``waiting``: slots, until in epoch ns). Times are passed in (monotonic
    seconds), so every number here follows from the events alone."""

    campaign: str = ""
    total: int | None = None
    completed: int = 0
    failed: int = 0
    jobs: int = 1
    running: dict[str, Running] = attrs.Factory(dict)
    settled: set[str] = attrs.Factory(set)
    """Slots whose last attempt in this run ended without acceptance (not running again)."""
    durations: list[float] = attrs.Factory(list)
    waiting: tuple[int, int] | None = None
    eta: tuple[float, float] | None = None
    """The estimate (seconds left) and the monotonic time it was made."""

    def apply(self, event: str, fields: Mapping[str, EventValue], now_s: float) -> None:
        if event == "campaign":
            self.campaign = str(fields.get("campaign", ""))
        elif event == "planned":
            satisfied = _int(fields.get("satisfied"))
            counted = ("ready", "waiting", "blocked")
            self.total = satisfied + sum(_int(fields.get(name)) for name in counted)
            self.completed = satisfied
            self.jobs = max(1, _int(fields.get("jobs")))
        elif event == "waiting_for_leases":
            self.waiting = (_int(fields.get("slots")), _int(fields.get("until_ns")))
        elif event == "recovered":
            self.waiting = None
        elif event == "attempt_started":
            slot = str(fields.get("slot"))
            self.settled.discard(slot)
            self.running[slot] = Running(label=label(fields), since_s=now_s)
        elif event in ("attempt_finished", "lease_lost"):
            slot = str(fields.get("slot"))
            self.running.pop(slot, None)
            if fields.get("state") == "accepted":
                self.completed += 1
            else:
                self.failed += 1
                self.settled.add(slot)
            duration = fields.get("duration_s")
            if isinstance(duration, (int, float)):
                self.durations.append(float(duration))
            self._estimate(now_s)

    def remaining(self) -> int:
        """Slots neither satisfied nor settled by a failure in this run (running included)."""
        if self.total is None:
            return 0
        return max(0, self.total - self.completed - len(self.settled))

    def _estimate(self, now_s: float) -> None:
        """The median duration of this run's finished attempts times the slots remaining,
        over the workers at once (no more than the slots remaining)."""
        left = self.remaining()
        if not self.durations or not left:
            self.eta = None
            return
        at_once = max(1, min(self.jobs, left))
        self.eta = (statistics.median(self.durations) * left / at_once, now_s)

    def eta_s(self, now_s: float) -> float | None:
        """Seconds left: the last estimate counted down since it was made (never below 0);
        None before any attempt finished or once nothing remains."""
        if self.eta is None or not self.remaining():
            return None
        estimate, made = self.eta
        return max(0.0, estimate - (now_s - made))

    def running_lines(self, now_s: float, room: int) -> list[str]:
        """``label  12 s`` per running slot, longest running first, at most ``room`` lines
        (the last one ``... and N more`` when they do not all fit)."""
        ordered = sorted(self.running.values(), key=lambda r: r.since_s)
        lines = [f"{r.label}  {seconds(now_s - r.since_s)}" for r in ordered]
        room = max(1, room)
        if len(lines) <= room:
            return lines
        return [*lines[: room - 1], f"... and {len(lines) - room + 1} more"]

    def counts(self, now_s: float) -> str:
        eta = self.eta_s(now_s)
        shown = "" if eta is None else f"  ETA {clock_time(eta)}"
        return f"running {len(self.running)}  failed {self.failed}{shown}"


def label(fields: Mapping[str, EventValue]) -> str:
    """``candidate x problem [slot]`` by the campaign file's names."""
    candidate = fields.get("candidate_name", fields.get("candidate"))
    problem = fields.get("problem_name", fields.get("problem"))
    slot = fields.get("logical_slot")
    return f"{candidate} x {problem}" + ("" if slot is None else f" [{slot}]")


def clock_time(seconds: float) -> str:
    """``h:mm:ss``, rounded up to the second."""
    whole = int(-(-seconds // 1))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def seconds(elapsed: float) -> str:
    """``0.4 s`` below ten seconds, ``12 s`` from there."""
    elapsed = max(0.0, elapsed)
    return f"{elapsed:.1f} s" if elapsed < 10 else f"{elapsed:.0f} s"


def cut(line: str, width: int) -> str:
    """``line`` no wider than ``width`` characters, an ellipsis marking a cut."""
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def finished_lines(fields: Mapping[str, EventValue], width: int) -> list[str]:
    """A finished (or lost) attempt's lines: ``label: state code after 0.4 s``; for a
    failure, the tail of its worker's stderr (each line cut to ``width``) and its log."""
    state = fields.get("state", "lease lost")
    if state == "accepted" or state == "superseded":
        what = str(state)
    elif "failure_code" in fields:
        details = fields.get("details")
        code = str(fields["failure_code"])
        what = f"{state} {failure_summary(code, details if isinstance(details, dict) else {})}"
    else:
        what = f"{state} {fields.get('reason', '')}".rstrip()
    duration = fields.get("duration_s")
    after = f" after {duration:.2f} s" if isinstance(duration, (int, float)) else ""
    lines = [cut(f"{label(fields)}: {what}{after}", width)]
    tail = fields.get("stderr_tail")
    if isinstance(tail, list):
        lines += [cut(f"  | {line}", width) for line in tail]
    logs = fields.get("logs")
    if state != "accepted" and isinstance(logs, dict) and "stderr" in logs:
        lines.append(f"  log: {logs['stderr']}")  # whole: a cut path is no path
    return lines


class ProgressReporter:
    """A run reporter for a person: a live view on a terminal (stderr), plain lines
    elsewhere. ``clock``: monotonic seconds (elapsed times and the ETA's countdown)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = output.console(sys.stderr)
        self.terminal = self.console.is_terminal
        self.clock = clock
        self.state = RunProgress()
        self._lock = threading.Lock()
        self.live = Live(
            console=self.console,
            get_renderable=self._view,
            refresh_per_second=4,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._plain_at = clock()

    def __call__(self, event: str, fields: Mapping[str, EventValue]) -> None:
        now = self.clock()
        with self._lock:
            self.state.apply(event, fields, now)
        if event == "planned" and self.terminal:
            self.live.start()
        elif event in ("attempt_finished", "lease_lost"):
            if not self.terminal or fields.get("state") != "accepted":
                self._print(finished_lines(fields, self.console.width))
        elif event == "waiting_for_leases" and not self.terminal:
            self._print([waiting_line(fields)])
        elif event == "stopping":
            self._print(["stopping: cancelling running workers (Ctrl-C again to abandon)"])
        elif event == "summary":
            self.close()
            self._print(output.summary_line(fields).split("\n"))
            return
        if not self.terminal and event in ("attempt_started", "attempt_finished"):
            self._plain_progress(now)

    def close(self) -> None:
        """Stop the live view (idempotent), so that a run ended by an error prints its one
        line below the view, not under a view still being redrawn."""
        self.live.stop()

    def _print(self, lines: list[str]) -> None:
        for line in lines:
            self.console.print(Text(line), soft_wrap=True)

    def _plain_progress(self, now: float) -> None:
        if now - self._plain_at < PLAIN_EVERY_S:
            return
        self._plain_at = now
        with self._lock:
            line = plain_progress(self.state, now)
        self._print([line])

    def _view(self) -> _View:
        return _View(self, self.clock())


def plain_progress(state: RunProgress, now_s: float) -> str:
    """One line: ``progress: 12/140 satisfied, 1 failed; running: a x p [measurement] 3 s,
    ...; ETA 0:01:02``."""
    named = state.running_lines(now_s, PLAIN_RUNNING_NAMED)
    eta = state.eta_s(now_s)
    return (
        f"progress: {state.completed}/{state.total} satisfied, {state.failed} failed; "
        f"running: {', '.join(named) or 'none'}"
        + ("" if eta is None else f"; ETA {clock_time(eta)}")
    )


def waiting_line(fields: Mapping[str, EventValue], now_ns: int | None = None) -> str:
    """The wait for leases in words: how many slots, until when, and how long from now."""
    until = _int(fields.get("until_ns"))
    left = max(0, until - (time.time_ns() if now_ns is None else now_ns)) / 1e9
    return (
        f"waiting {left:.0f} s (until {iso_time(until)}) for the leases of "
        f"{_int(fields.get('slots'))} attempts in progress to expire, "
        "so that recovery can judge them"
    )


class _View:
    """One frame of the live view, drawn to the console's width and height."""

    def __init__(self, reporter: ProgressReporter, now_s: float) -> None:
        self.reporter, self.now_s = reporter, now_s

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        with self.reporter._lock:
            yield from self._lines(console, options)

    def _lines(self, console: Console, options: ConsoleOptions) -> Iterator[Table | Text]:
        state, width = self.reporter.state, options.max_width
        bar = Table.grid(padding=(0, 1), expand=True)
        bar.add_column(no_wrap=True)
        bar.add_column(ratio=1)
        bar.add_column(no_wrap=True)
        bar.add_column(no_wrap=True)
        bar.add_row(
            Text(state.campaign, style="bold"),
            ProgressBar(total=state.total, completed=state.completed),
            Text(f"{state.completed}/{state.total}"),
            Text(state.counts(self.now_s)),
        )
        yield bar
        used = 1
        if state.waiting is not None:
            slots, until = state.waiting
            left = max(0, until - time.time_ns()) / 1e9
            text = f"waiting for the leases of {slots} attempts in progress to expire: {left:.0f} s"
            yield Text(cut(text, width), style="yellow")
            used += 1
        room = console.size.height - used - 1
        for line in state.running_lines(self.now_s, room):
            yield Text(cut(f"  {line}", width))


def _int(value: EventValue | None) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
