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
from rich.table import Table
from runstore.canonical import JSON

if TYPE_CHECKING:
    from runstore.runner.coordinator import Reporter
    from runstore.runner.run_events import EventValue

REMEDIES: Mapping[str, str] = {
    "busy": "another process holds the lock; retry when it is done",
    "campaign_invalid": "fix the campaign file",
    "registration_conflict": (
        "the campaign changed since it was registered: run --revise registers the changed "
        "pairs as a new revision (or restore the file)"
    ),
    "unknown_campaign": "runstore campaigns --store S lists the store's campaigns",
    "unknown_revision": "runstore campaigns --store S lists each campaign's revisions",
    "unsafe_path": "check --store (run --init creates a missing store root)",
    "inspection_unstable": (
        "retry if a writer kept changing the database; if it is damaged, runstore validate says how"
    ),
    "inspection_unsafe": "inspect from a process that does not hold the store open",
    "unknown_slot": (
        "pass an attempt slot id, an attempt id, CAMPAIGN/CANDIDATE/PROBLEM or"
        " CAMPAIGN/CANDIDATE/PROBLEM/SLOT (runstore status lists the pairs)"
    ),
    "log_unavailable": "runstore explain SLOT lists the slot's attempts and their artifacts",
    "artifact_corrupt": "runstore validate --store DIR lists every artifact that does not verify",
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


def print_error(code: str, message: str, *, as_json: bool, option: str | None = None) -> None:
    """``error: <code>: <message>`` and a hint on stderr (``--json``: the error document on
    stdout). ``option`` is the command's option the refusal concerns, when the error says
    which one: the hint is then "check <option>", else its code's remedy (REMEDIES)."""
    if as_json:
        print_json({"error": code, "message": message})
        return
    remedy = f"check {option}" if option is not None else REMEDIES.get(code)
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

    def __call__(self, event: str, fields: Mapping[str, EventValue]) -> None:
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
    """A run reporter printing each event as one JSON line (``run --json``; the run's
    progress for a person is :class:`runstore.cli.progress.ProgressReporter`)."""

    def __call__(self, event: str, fields: Mapping[str, EventValue]) -> None:
        print_json({"event": event, **fields})

    def close(self) -> None:
        """Nothing to put away: every line is whole once printed."""


def summary_line(fields: Mapping[str, EventValue]) -> str:
    """The ``summary`` event in words: counts, the unsatisfied slots and a hint per reason
    they were left (:data:`LEFT_HINTS`)."""
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
    "interrupted_not_resumed": "their attempts were cut off (run --resume retries them)",
    "resume_bound_reached": (
        "their attempts were cut off more often than --resume-retries allows"
        " (--retry-failed N retries them)"
    ),
    "retry_bound_reached": "their retries reached the --retry-failed bound",
    "warmup_unsatisfied": "their warm-up slot is not accepted",
}


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
