"""What the ``runstore`` command prints: JSON documents and lines, or rich progress and tables.

Rules of this file: rendering only (no store, no decisions). With ``--json`` every command
writes JSON to stdout (one line per event for ``run``, one document for the others).
Otherwise progress bars and colour appear only when stdout is a terminal; elsewhere the
same tables print as plain aligned text. Errors go to stderr as ``error: <code>: <message>``
with a remedy (or, with ``--json``, as ``{"error": code, "message": ...}`` on stdout).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import stat
import sys
import textwrap
import threading
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import TextIO

from rich import box
from rich.console import Console
from rich.progress import BarColumn
from rich.progress import MofNCompleteColumn
from rich.progress import Progress
from rich.progress import TextColumn
from rich.progress import TimeRemainingColumn
from rich.table import Table
from runstore.canonical import JSON

if TYPE_CHECKING:
    from runstore.runner.coordinator import Reporter

REMEDIES: Mapping[str, str] = {
    "busy": "another process holds the lock; retry when it is done",
    "campaign_invalid": "fix the campaign file",
    "registration_conflict": (
        "the campaign changed since it was registered: restore it, rename the campaign, "
        "or use another store"
    ),
    "unsafe_path": "check --store (run --init creates a missing store root)",
    "inspection_unstable": (
        "retry if a writer kept changing the database; if it is damaged, runstore validate says how"
    ),
    "inspection_unsafe": "inspect from a process that does not hold the store open",
    "unknown_slot": (
        "pass an attempt slot id, an attempt id, CAMPAIGN/CANDIDATE/PROBLEM or"
        " CAMPAIGN/CANDIDATE/PROBLEM/SLOT (runstore status lists the pairs)"
    ),
}


def console(stream: TextIO) -> Console:
    """A console that is plain (no colour, no cursor control) unless ``stream`` is a TTY."""
    plain = Console(file=stream)
    if plain.is_terminal:
        return Console(file=stream, highlight=False)
    return Console(file=stream, highlight=False, width=240, no_color=True)


def print_json(document: JSON | Mapping[str, Any], stream: TextIO = sys.stdout) -> None:
    stream.write(json.dumps(document, sort_keys=True, ensure_ascii=False) + "\n")
    stream.flush()


def print_error(code: str, message: str, *, as_json: bool) -> None:
    if as_json:
        print_json({"error": code, "message": message})
        return
    remedy = REMEDIES.get(code)
    sys.stderr.write(f"error: {code}: {message}\n")
    if remedy is not None:
        sys.stderr.write(f"hint: {remedy}\n")


class StopWhenClosed:
    """A run reporter that turns a closed output into a clean stop. ``stream`` is the one
    ``inner`` writes to; it has lost its reader (``run --json | head -1``) when writing
    raises BrokenPipeError or, while nothing is written, when the pipe or socket reports
    an error or hang-up (:meth:`watching` polls it). Then the stream's descriptor is
    pointed at ``/dev/null`` (nothing later, the interpreter's last flush included, fails
    on it), ``stop`` is set as Ctrl-C sets it (the run cancels its workers and commits
    their ``cancelled`` failures), and every later event is dropped. ``closed`` tells the
    command to exit with its own status."""

    def __init__(self, inner: Reporter, stream: TextIO, stop: threading.Event) -> None:
        self.inner, self.stream, self.stop = inner, stream, stop
        self.closed = False
        self._lock = threading.Lock()

    def __call__(self, event: str, fields: dict[str, JSON]) -> None:
        if self.closed:
            return
        try:
            self.inner(event, fields)
        except BrokenPipeError:
            self._close()

    def _close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            silence(self.stream)
        self.stop.set()

    @contextlib.contextmanager
    def watching(self, interval_s: float = 0.2) -> Iterator[None]:
        """For the ``with`` block, a daemon thread polls the stream's descriptor when it is
        a pipe or a socket (a file or a terminal is left alone) and closes as a failed
        write would, within ``interval_s`` of the reader going away."""
        try:
            mode = os.fstat(self.stream.fileno()).st_mode
        except (OSError, ValueError):
            mode = 0
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            yield
            return
        done = threading.Event()
        poller = select.poll()
        poller.register(self.stream.fileno(), select.POLLERR | select.POLLHUP)

        def watch() -> None:
            while not done.is_set() and not self.closed:
                if poller.poll(int(interval_s * 1000)):
                    self._close()
                    return

        thread = threading.Thread(target=watch, name="runstore-output-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()


def silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null (its reader is gone)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


class JsonLines:
    """A run reporter printing each event as one JSON line."""

    def __call__(self, event: str, fields: dict[str, JSON]) -> None:
        print_json({"event": event, **fields})

    def close(self) -> None:
        """Nothing to put away: every line is whole once printed."""


class ProgressReporter:
    """A run reporter with a live progress bar on a terminal; elsewhere one plain line per
    finished attempt and the summary."""

    def __init__(self) -> None:
        self.console = console(sys.stderr)
        self.live = self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("running {task.fields[running]}  failed {task.fields[failed]}"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.live,
        )
        self.task = self.progress.add_task("slots", total=None, running=0, failed=0)
        self.running = 0
        self.failed = 0

    def __call__(self, event: str, fields: dict[str, JSON]) -> None:
        if event == "campaign":
            self.progress.update(self.task, description=str(fields["campaign"]))
        elif event == "planned":
            self.progress.start()
            ready = _int(fields["ready"]) + _int(fields["waiting"]) + _int(fields["blocked"])
            self.progress.update(self.task, total=_int(fields["satisfied"]) + ready)
            self.progress.update(self.task, completed=_int(fields["satisfied"]))
        elif event == "attempt_started":
            self.running += 1
        elif event in ("attempt_finished", "lease_lost"):
            self.running = max(0, self.running - 1)
            self._finished(fields)
        elif event == "summary":
            self.progress.stop()
            self.console.print(_summary_line(fields))
        elif event == "stopping":
            self.console.print("stopping: cancelling running workers (Ctrl-C again to abandon)")
        self.progress.update(self.task, running=self.running, failed=self.failed)

    def close(self) -> None:
        """Stop the live bar (idempotent), so that a run ended by an error prints its one
        line below the bar, not under a bar still being redrawn."""
        self.progress.stop()

    def _finished(self, fields: dict[str, JSON]) -> None:
        state = fields.get("state", "lease lost")
        if state == "accepted":
            self.progress.advance(self.task)
        else:
            self.failed += 1
        if not self.live or state != "accepted":
            code = fields.get("failure_code") or fields.get("reason") or ""
            self.console.print(f"{fields['candidate']} x {fields['problem']}: {state} {code}")


def _summary_line(fields: Mapping[str, JSON]) -> str:
    unsatisfied = fields["unsatisfied"]
    assert isinstance(unsatisfied, list)
    line = (
        f"{fields['satisfied']}/{fields['slots']} slots satisfied "
        f"({fields['accepted']} accepted and {fields['failed']} failed in this run"
        f"{', stopped' if fields['stopped'] else ''})"
    )
    if unsatisfied:
        line += "; unsatisfied: " + ", ".join(str(label) for label in unsatisfied[:10])
        if len(unsatisfied) > 10:
            line += f" and {len(unsatisfied) - 10} more"
    left = fields.get("left")
    assert isinstance(left, dict)
    for reason, hint in LEFT_HINTS.items():
        count = sum(1 for why in left.values() if why == reason)
        if count:
            line += f"\n{count} left unsatisfied: {hint}"
    return line


LEFT_HINTS: Mapping[str, str] = {
    "attempt_in_progress": "an attempt is in progress or was interrupted (run --resume)",
    "failed_not_retried": "their attempts failed (run --retry-failed N to retry them)",
    "retry_bound_reached": "their retries reached the --retry-failed bound",
    "warmup_unsatisfied": "their warm-up slot is not accepted",
}


def _int(value: JSON) -> int:
    assert isinstance(value, int)
    return value


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A table that renders with box drawing on a terminal and plain columns elsewhere."""
    out = console(sys.stdout)
    grid = Table(
        title=title,
        box=box.SIMPLE_HEAD if out.is_terminal else None,
        title_justify="left",
        show_edge=False,
    )
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(str(cell) for cell in row))
    return grid


def print_tables(tables: Sequence[Table]) -> None:
    out = console(sys.stdout)
    for grid in tables:
        out.print(grid)
        out.print()


def print_lines(lines: Sequence[str]) -> None:
    """Each line, wrapped at word boundaries to the console's width (a continuation indented
    by two spaces), so a terminal never breaks a word in two."""
    width = console(sys.stdout).width
    for line in lines:
        wrapped = textwrap.wrap(
            line, width=max(width, 20), subsequent_indent="  ", break_on_hyphens=False
        )
        sys.stdout.write("\n".join(wrapped or [""]) + "\n")
    sys.stdout.flush()
