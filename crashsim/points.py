"""Crash points: the boundaries of a reference trace, the model states acceptable at each,
and how a sweep chooses among them.

Rules of this file: pure data and pure functions over traces and model states; no process,
file or store is touched here. The acceptable states follow the rules in
:mod:`runstore.crashsim.sweep`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Final
from typing import TypeVar

import attrs
from runstore.crashsim.harness import ModelRun
from runstore.crashsim.scenarios import RECOVER_STEP
from runstore.crashsim.tracer import CRASH_EXIT
from runstore.crashsim.tracer import Entry
from runstore.crashsim.verify import Acceptable
from runstore.model.state import ModelState

BEFORE_COMMIT: Final = ["before", "sql", "COMMIT"]
AFTER_COMMIT: Final = ["after", "sql", "COMMIT"]


@attrs.frozen
class Point:
    """Boundary ``k`` of the reference trace, inside step ``op_index`` (0 is opening);
    ``committed`` when a COMMIT of that step completed at or before it, ``commits`` how
    many did."""

    k: int
    entry: Entry
    op_index: int
    op_name: str
    committed: bool
    commits: int = 0

    def choices(self, transactions: Sequence[Sequence[ModelState]]) -> list[tuple[str, int]]:
        """The acceptable states as (label, transactions done) pairs, where
        ``transactions[op_index]`` is the state before the step followed by the state after
        each of its committed transactions (see the module docstring)."""
        states = transactions[self.op_index]
        count = len(states) - 1
        if self.op_name.startswith(RECOVER_STEP):
            return [(_label(done, count), done) for done in range(count + 1)]
        if count <= 1:
            return [("after", 1)] if self.committed else [("before", 0), ("after", 1)]
        done = min(self.commits, count)
        chosen = [(_label(done, count), done)]
        if self.entry[2:] == BEFORE_COMMIT and done < count:
            chosen.append((_label(done + 1, count), done + 1))
        return chosen

    def acceptable(self, transactions: Sequence[Sequence[ModelState]]) -> Acceptable:
        states = transactions[self.op_index]
        return [(label, states[done]) for label, done in self.choices(transactions)]


def _label(done: int, count: int) -> str:
    if done == 0:
        return "before"
    return "after" if done == count else f"after transaction {done} of {count}"


C = TypeVar("C")
Selector = Callable[[Sequence[Point]], Sequence[C]]
"""Chooses a sweep's points from its reference points: boundary numbers (``Selector[int]``)
for the methods that crash, cut or photograph at boundaries, the faults to inject
(``Selector[Fault]``) for I/O faults."""


def every_boundary(points: Sequence[Point]) -> list[int]:
    """Every boundary of the reference."""
    return [p.k for p in points]


def points_of(trace: Sequence[Entry]) -> list[Point]:
    """The boundaries of a reference trace with the step each belongs to."""
    points: list[Point] = []
    op_index, op_name, commits = 0, "open", 0
    for entry in trace:
        if entry[0] == "op":
            op_index, op_name, commits = int(str(entry[1])), str(entry[2]), 0
        elif entry[0] == "b":
            if entry[2:] == AFTER_COMMIT:
                commits += 1
            points.append(Point(len(points), entry, op_index, op_name, commits > 0, commits))
    return points


def commit_problem(points: Sequence[Point], run: ModelRun) -> str:
    """Why the reference's COMMITs do not line up with the model's transactions in a
    multi-transaction step (empty when they do)."""
    for index, states in enumerate(run.transactions):
        expected = len(states) - 1
        if index == 0 or expected <= 1 or run.names[index].startswith(RECOVER_STEP):
            continue
        found = max((p.commits for p in points if p.op_index == index), default=0)
        if found != expected:
            return (
                f"step {index} commits {found} transactions in the reference, the model {expected}"
            )
    return ""


def off_reference(reference: Sequence[Entry], index: int, entry: Entry) -> str:
    """Why trace entry ``index`` (``entry``) leaves the reference (empty when it does not)."""
    if index < len(reference) and entry == reference[index]:
        return ""
    expected = reference[index] if index < len(reference) else "the end"
    return f"trace entry {index} is {entry}, the reference has {expected}"


def check_prefix(reference: Sequence[Entry], trace: Sequence[Entry], k: int, status: int) -> str:
    """Why a child's ``trace`` is not the reference prefix ending at boundary ``k`` (empty
    when it is)."""
    for index, entry in enumerate(trace):
        difference = off_reference(reference, index, entry)
        if difference:
            return difference
    if status != CRASH_EXIT or not trace or trace[-1][:2] != ["b", k]:
        last = trace[-1] if trace else "nothing"
        return f"the child exited with status {status} after {last}, not at boundary {k}"
    return ""


def brief(state: ModelState) -> str:
    """A model state in a few words."""
    attempts = ",".join(
        f"{row.retry_index}:{row.state.value}@{row.revision}"
        for row in sorted(state.attempts.values(), key=lambda row: row.id)
    )
    return (
        f"slots={len(state.attempt_slots)} attempts=[{attempts}] leases={len(state.leases)} "
        f"claims={len(state.claims)} selections={len(state.selections)} "
        f"events={len(state.events)}"
    )
