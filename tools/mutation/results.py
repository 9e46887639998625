"""A module's result, read from its session: each mutant's fate and the module's score.

Fates: ``killed`` (a test failed, or the run passed its time limit: cosmic-ray counts a
timeout as a kill, and the report counts them apart), ``survived``, ``equivalent`` (a
survivor listed in ``tools/mutation_equivalents.toml``), ``skipped`` (a filtered operator,
or outside ``--changed-since``'s lines) and ``error`` (the worker could not mutate or run:
never counted as a kill). The score is killed / (killed + survived): equivalents and
skipped mutants are out of it, errors make the run fail. Rules of this file: pure reading;
stdlib ``sqlite3`` read-only on cosmic-ray's session.
"""

from __future__ import annotations

import ast
import sqlite3
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from mutation.settings import Equivalent
from mutation.settings import Equivalents


@dataclass(frozen=True)
class Mutant:
    operator: str
    occurrence: int
    line: int
    fate: str
    original: str
    mutated: str
    diff: str
    note: str


@dataclass(frozen=True)
class ModuleResult:
    module: str
    mutants: tuple[Mutant, ...]
    seconds: float
    timeouts: int = 0
    fates: Counter[str] = field(default_factory=Counter)

    @property
    def killed(self) -> int:
        return self.fates["killed"]

    @property
    def scored(self) -> int:
        return self.fates["killed"] + self.fates["survived"]

    @property
    def score(self) -> float | None:
        return self.killed / self.scored if self.scored else None

    def survivors(self) -> list[Mutant]:
        return [m for m in self.mutants if m.fate == "survived"]


def changed_text(diff: str) -> tuple[str, str]:
    """The lines a unified diff removes and adds, each stripped, joined by newlines."""
    removed = [
        line[1:].strip()
        for line in diff.splitlines()
        if line.startswith("-") and not line.startswith("---")
    ]
    added = [
        line[1:].strip()
        for line in diff.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    return "\n".join(removed), "\n".join(added)


def fate_of(worker: str | None, test: str | None) -> str:
    """A run mutant's fate from cosmic-ray's outcomes (before equivalents are applied)."""
    if worker == "SKIPPED":
        return "skipped"
    if worker != "NORMAL" or test == "INCOMPETENT":
        return "error"
    return "survived" if test == "SURVIVED" else "killed"


def enclosing_names(source: str) -> dict[int, tuple[str, ...]]:
    """For each line of ``source``, the names of the functions and classes around it,
    innermost last (module-level lines are absent)."""
    found: dict[int, tuple[str, ...]] = {}

    def visit(node: ast.AST, names: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = names
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = (*names, child.name)
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                for line in range(first, (child.end_lineno or child.lineno) + 1):
                    found[line] = inner
            visit(child, inner)

    visit(ast.parse(source), ())
    return found


TIMED_OUT = "run_mutant: timeout"
"""How :mod:`mutation.run_mutant` says a mutant's tests ran past its own limit (a kill)."""

STALE = "argued equivalent when its session was made, but no entry matches it now: run with --fresh"
ARGUED = "argued equivalent: "
"""How a session marks a mutant it never ran because an entry of the equivalents file
matched it when the session was made."""


def equivalent_of(
    equivalents: Equivalents, key: tuple[str, str, str, str], enclosing: tuple[str, ...]
) -> Equivalent | None:
    """The entry arguing the mutant ``key`` (module, operator, original, mutated) inside
    the functions and classes ``enclosing`` equivalent, or None."""
    return next((e for e in equivalents.get(key, ()) if e.covers(enclosing)), None)


def read_result(
    module: str,
    database: Path,
    seconds: float,
    equivalents: Equivalents,
    source: str | None = None,
) -> ModuleResult:
    """The module's result from its session; ``source`` (the module as mutated, unmutated)
    places each mutant in its functions for equivalents that name one."""
    query = """
        SELECT s.operator_name, s.occurrence, s.start_pos_row,
               r.worker_outcome, r.test_outcome, coalesce(r.diff, ''), coalesce(r.output, '')
        FROM mutation_specs AS s LEFT JOIN work_results AS r ON r.job_id = s.job_id
        ORDER BY s.start_pos_row, s.operator_name, s.occurrence"""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(query).fetchall()
    mutants = []
    timeouts = 0
    places = enclosing_names(source) if source is not None else {}
    for operator, occurrence, line, worker, test, diff, output in rows:
        if worker is None:
            continue  # not run yet (an interrupted session)
        fate = fate_of(worker, test)
        original, mutated = changed_text(diff)
        note = output.strip().splitlines()[0] if fate in ("skipped", "error") and output else ""
        argued = equivalent_of(
            equivalents, (module, operator, original, mutated), places.get(line, ())
        )
        if fate == "survived" and argued is not None:
            fate = "equivalent"
            note = argued.reason
        elif fate == "skipped" and output.startswith(ARGUED):
            fate = "equivalent" if argued is not None else "error"
            note = argued.reason if argued is not None else STALE
        if fate == "killed" and (output.strip() == "timeout" or TIMED_OUT in output):
            timeouts += 1
        mutants.append(
            Mutant(operator, occurrence, line, fate, original, mutated, diff, note[:300])
        )
    fates = Counter(m.fate for m in mutants)
    return ModuleResult(module, tuple(mutants), seconds, timeouts, fates)
