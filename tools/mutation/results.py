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

import sqlite3
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from mutation.settings import Equivalent


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


def read_result(
    module: str,
    database: Path,
    seconds: float,
    equivalents: Mapping[tuple[str, str, str, str], Equivalent],
) -> ModuleResult:
    query = """
        SELECT s.operator_name, s.occurrence, s.start_pos_row,
               r.worker_outcome, r.test_outcome, coalesce(r.diff, ''), coalesce(r.output, '')
        FROM mutation_specs AS s LEFT JOIN work_results AS r ON r.job_id = s.job_id
        ORDER BY s.start_pos_row, s.operator_name, s.occurrence"""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(query).fetchall()
    mutants = []
    timeouts = 0
    for operator, occurrence, line, worker, test, diff, output in rows:
        if worker is None:
            continue  # not run yet (an interrupted session)
        fate = fate_of(worker, test)
        original, mutated = changed_text(diff)
        note = output.strip().splitlines()[0] if fate in ("skipped", "error") and output else ""
        if fate == "survived" and (module, operator, original, mutated) in equivalents:
            fate = "equivalent"
            note = equivalents[(module, operator, original, mutated)].reason
        if fate == "killed" and output.strip() == "timeout":
            timeouts += 1
        mutants.append(
            Mutant(operator, occurrence, line, fate, original, mutated, diff, note[:300])
        )
    fates = Counter(m.fate for m in mutants)
    return ModuleResult(module, tuple(mutants), seconds, timeouts, fates)
