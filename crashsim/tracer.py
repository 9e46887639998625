"""The boundary tracer: numbers every durability and SQL boundary of one process, in order.

Rules of this file: test-only. It hooks the store only through the two seams' documented test
hooks (``install_observer`` of ``runstore.durable`` and ``runstore.sql``) and adds nothing
to the runtime. A trace is a list of entries, written as JSON lines to a file descriptor
as they happen (one ``os.write`` each, so a child that leaves with ``os._exit`` loses
nothing):

* ``["b", k, phase, kind, text]``: boundary ``k`` (0, 1, ...), ``phase`` "before" or
  "after", ``kind`` "sql" (``text`` is the statement) or "fs" (``text`` is the operation
  and its target);
* ``["op", i, name]`` and ``["end", i]``: the scenario harness's marks around step ``i``.
  Marks are not boundaries and are never crash points.
* ``["p", effect, path, ...]`` (only with ``persistence=True``, for the power-loss
  simulator): a persistence effect the durability seam's recorder reported (see
  :data:`runstore.durable.Recorder`), written between the boundaries of its operation.

Targets are normalized (the store root becomes ``$ROOT``, its parent ``$PARENT``, the
random suffixes of probe directories and export temporaries ``*``)
so that traces of runs on different copies compare equal. With ``crash_at=k`` the tracer
writes boundary ``k`` and then calls ``os._exit(CRASH_EXIT)``: no destructors, no
rollback, no flushing of anything but the trace. With ``pause`` it writes each boundary in
``pause_at`` and then calls ``pause(k)``, which returns when the process may go on (the
image method's stop, :mod:`runstore.crashsim.images`); with ``persistence`` it does the
same after writing the ``n``-th persistence effect when ``effect_stop(n)`` (a negative
number) is in ``pause_at``, so a stop can fall between two effects of one operation.
With ``fault`` it calls ``fault(k, phase, kind, text)`` after writing each boundary (fault
injection; the trace is the same with or without it up to the first fault).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from collections.abc import Container
from typing import Final
from typing import Literal

from runstore import durable
from runstore import sql

Entry = list[object]
Phase = Literal["before", "after"]
Fault = Callable[[int, Phase, str, str], None]
"""``fault(k, phase, kind, text)``: called at each boundary right after it is written (the
I/O fault method's injector, :mod:`runstore.crashsim.iofaults`); raising ``OSError``
from a filesystem "before" boundary makes that operation fail."""

CRASH_EXIT: Final = 77
"""The exit status of a child that stopped at its crash point."""

_PROBE_SUFFIX: Final = re.compile(r"(\.run-store-probe-)[0-9a-f]+")


_TEMPORARY: Final = re.compile(r"(/\.[^/]+\.)[0-9a-f]{16}(\.tmp)")


def normalize(text: str, root: str) -> str:
    """``text`` with the store root (``$ROOT``) and its parent (``$PARENT``) replaced, and
    the random suffixes of probe directories and of an export's temporaries with ``*``."""
    text = text.replace(root, "$ROOT").replace(os.path.dirname(root), "$PARENT")
    return _TEMPORARY.sub(r"\1*\2", _PROBE_SUFFIX.sub(r"\1*", text))


class Tracer:
    """Numbers boundaries, writes each entry to ``fd`` at once, and stops the process at
    boundary ``crash_at`` (never when it is None). Use as a context manager: entering
    installs both observers, leaving restores the previous ones."""

    def __init__(
        self,
        fd: int,
        root: str,
        crash_at: int | None = None,
        pause: Callable[[int], None] | None = None,
        pause_at: Container[int] = (),
        persistence: bool = False,
        *,
        fault: Fault | None = None,
    ) -> None:
        self._fd = fd
        self._fault = fault
        self._persistence = persistence
        self._root = root
        self._crash_at = crash_at
        self._pause = pause
        self._pause_at = pause_at
        self._next = 0
        self._previous: tuple[durable.Observer | None, sql.Observer | None] = (None, None)
        self._previous_recorder: durable.Recorder | None = None
        self._effects = 0

    def __enter__(self) -> Tracer:
        self._previous = (
            durable.install_observer(self._on_fs),
            sql.install_observer(self._on_sql),
        )
        if self._persistence:
            self._previous_recorder = durable.install_recorder(self._on_effect)
        return self

    def __exit__(self, *exc_info: object) -> None:
        durable.install_observer(self._previous[0])
        sql.install_observer(self._previous[1])
        if self._persistence:
            durable.install_recorder(self._previous_recorder)

    def mark(self, entry: Entry) -> None:
        """Write a harness mark (or any non-boundary entry)."""
        self._write(entry)

    def _on_sql(self, phase: Phase, statement: str) -> None:
        self._boundary(phase, "sql", " ".join(statement.split()))

    def _on_fs(self, phase: Phase, operation: str, target: str) -> None:
        self._boundary(phase, "fs", f"{operation} {target}")

    def _on_effect(self, effect: str, paths: tuple[str, ...]) -> None:
        self._write(["p", effect, *(normalize(path, self._root) for path in paths)])
        stop = effect_stop(self._effects)
        self._effects += 1
        if self._pause is not None and stop in self._pause_at:
            self._pause(stop)

    def _boundary(self, phase: Phase, kind: str, text: str) -> None:
        k = self._next
        self._next += 1
        normalized = normalize(text, self._root)
        self._write(["b", k, phase, kind, normalized])
        if self._fault is not None:
            self._fault(k, phase, kind, normalized)
        if k == self._crash_at:
            os._exit(CRASH_EXIT)
        if self._pause is not None and k in self._pause_at:
            self._pause(k)

    def _write(self, entry: Entry) -> None:
        data = (json.dumps(entry) + "\n").encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


def effect_stop(n: int) -> int:
    """The stop number of the ``n``-th persistence effect (0, 1, ...) of a trace: negative,
    so it never collides with a boundary number. Its inverse is :func:`effect_number`."""
    return -(n + 1)


def effect_number(stop: int) -> int:
    return -stop - 1


def read_trace(path: str) -> list[Entry]:
    """The entries of a trace file (an incomplete last line, if any, is dropped)."""
    try:
        with open(path, "rb") as handle:
            lines = handle.read().split(b"\n")
    except FileNotFoundError:
        return []
    entries: list[Entry] = []
    for line in lines:
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            break
        entries.append(entry)
    return entries


def boundaries(trace: list[Entry]) -> list[Entry]:
    """Only the boundary entries of ``trace``, in order (entry ``i`` is boundary ``i``)."""
    return [entry for entry in trace if entry[0] == "b"]


def describe(entry: Entry) -> str:
    """A boundary entry in words: ``k=12 before sql: COMMIT``."""
    return f"k={entry[1]} {entry[2]} {entry[3]}: {entry[4]}"
