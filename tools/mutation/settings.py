"""The committed configuration of mutation testing, and where a run keeps its files.

``tools/mutation.toml`` names the core modules, the candidate tests of every module of
``impl/`` (the map :mod:`mutation.selection` narrows per line), the operators left out
(each with its reason) and the time limits. ``tools/mutation_baseline.toml`` holds each
module's last accepted score; ``tools/mutation_equivalents.toml`` the surviving mutants
argued equivalent, one sentence each. Rules of this file: reading and validating only; a
malformed file is a :class:`ConfigError` naming the file and the entry.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parents[1]
ROOT = TOOLS.parent
CONFIG = TOOLS / "mutation.toml"
BASELINE = TOOLS / "mutation_baseline.toml"
EQUIVALENTS = TOOLS / "mutation_equivalents.toml"
WORK = ROOT / ".mutate"
"""Sessions, scratch copies and reports (ignored by git)."""


class ConfigError(Exception):
    """A committed mutation file is malformed."""


@dataclass(frozen=True)
class OperatorFilter:
    """Operators (a regular expression over cosmic-ray's names) never run, and why."""

    pattern: str
    reason: str

    def matches(self, operator: str) -> bool:
        return re.fullmatch(self.pattern, operator) is not None


@dataclass(frozen=True)
class Candidates:
    """The candidate tests of the modules matching ``glob`` (``fnmatch``, plus one level of
    ``{a,b}`` alternatives)."""

    glob: str
    tests: tuple[str, ...]

    def matches(self, module: str) -> bool:
        head, brace, rest = self.glob.partition("{")
        if not brace:
            return fnmatch.fnmatchcase(module, self.glob)
        choices, _, tail = rest.partition("}")
        return any(
            fnmatch.fnmatchcase(module, head + choice + tail) for choice in choices.split(",")
        )


@dataclass(frozen=True)
class Settings:
    core: tuple[str, ...]
    candidates: tuple[Candidates, ...]
    filters: tuple[OperatorFilter, ...]
    timeout_floor: float
    timeout_factor: float
    mutant_floor: float = 20.0
    baseline_pending: tuple[str, ...] = ()
    annotations_evaluated: tuple[str, ...] = ()
    annotation_reason: str = ""
    marker_reason: str = ""

    def tests_of(self, module: str) -> tuple[str, ...]:
        """The candidate tests of ``module`` (the first matching entry's)."""
        for entry in self.candidates:
            if entry.matches(module):
                return entry.tests
        raise ConfigError(f"{CONFIG.name}: no [[tests]] entry matches {module}")

    def skips_annotations(self, module: str) -> bool:
        """Whether mutants inside ``module``'s annotations are skipped (a module whose
        annotations something evaluates at run time keeps them)."""
        return bool(self.annotation_reason) and not any(
            fnmatch.fnmatchcase(module, glob) for glob in self.annotations_evaluated
        )

    def is_core(self, module: str) -> bool:
        return module in self.core


def _table(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path.name}: {exc}") from exc


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: expected a list of non-empty strings")
    return tuple(value)


def _text(entry: Mapping[str, object], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key!r} must be a non-empty string")
    return value


def load_settings(path: Path = CONFIG) -> Settings:
    data = _table(path)
    core = _strings(data.get("core"), f"{path.name} core")
    candidates = []
    for index, entry in enumerate(data.get("tests", [])):
        where = f"{path.name} [[tests]] #{index + 1}"
        candidates.append(
            Candidates(_text(entry, "modules", where), _strings(entry.get("run"), where))
        )
    filters = []
    for index, entry in enumerate(data.get("operator_filter", [])):
        where = f"{path.name} [[operator_filter]] #{index + 1}"
        pattern = _text(entry, "operator", where)
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        filters.append(OperatorFilter(pattern, _text(entry, "reason", where)))
    limits = data.get("timeout", {})
    annotations = data.get("annotations", {})
    where = f"{path.name} [annotations]"
    return Settings(
        core=core,
        candidates=tuple(candidates),
        filters=tuple(filters),
        timeout_floor=float(limits.get("floor_seconds", 60)),
        timeout_factor=float(limits.get("factor", 3)),
        mutant_floor=float(limits.get("mutant_floor_seconds", 20)),
        baseline_pending=_strings(data["baseline_pending"], f"{path.name} baseline_pending")
        if data.get("baseline_pending")
        else (),
        annotations_evaluated=_strings(annotations.get("evaluated_in", []), where)
        if annotations.get("evaluated_in")
        else (),
        annotation_reason=_text(annotations, "skip_reason", where) if annotations else "",
        marker_reason=_text(annotations, "keyword_marker_reason", where) if annotations else "",
    )


def impl_modules() -> list[str]:
    """Every module of ``impl/`` that cosmic-ray can mutate, relative to the root."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "impl").rglob("*.py")
        if "__pycache__" not in path.parts
    )


@dataclass(frozen=True)
class Baseline:
    """A module's accepted score: killed / scored, measured on ``measured`` (a date)."""

    score: float
    killed: int
    scored: int
    measured: str
    seconds: float


def load_baseline(path: Path = BASELINE) -> dict[str, Baseline]:
    if not path.exists():
        return {}
    result = {}
    for module, entry in _table(path).items():
        where = f"{path.name} [{module!r}]"
        try:
            result[module] = Baseline(
                score=float(entry["score"]),
                killed=int(entry["killed"]),
                scored=int(entry["scored"]),
                measured=str(entry["measured"]),
                seconds=float(entry["seconds"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc!r}") from exc
    return result


def write_baseline(entries: Mapping[str, Baseline], path: Path = BASELINE) -> None:
    lines = [
        "# Each module's accepted mutation score (killed / scored, scored = every mutant run",
        "# except the filtered, the out-of-scope and the argued equivalents), written by",
        "# `tools/mutate --update-baseline`. The nightly `mutation` step fails when a module's",
        "# score drops below its line here. `seconds` is the run's wall time on two workers.",
        "",
    ]
    for module in sorted(entries):
        entry = entries[module]
        lines += [
            f'["{module}"]',
            f"score = {entry.score:.4f}",
            f"killed = {entry.killed}",
            f"scored = {entry.scored}",
            f'measured = "{entry.measured}"',
            f"seconds = {entry.seconds:.0f}",
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")


def drop_pending(module: str, path: Path = CONFIG) -> bool:
    """Remove ``module`` from the configuration's ``baseline_pending`` list, editing only
    that list's lines (comments and layout elsewhere stay); True when it was listed."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("baseline_pending")), None)
    if start is None or lines[start].rstrip().endswith("]"):
        return False
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("]"))
    kept = [line for line in lines[start + 1 : end] if line.strip().rstrip(",") != f'"{module}"']
    if len(kept) == end - start - 1:
        return False
    block = [lines[start], *kept, lines[end]] if kept else ["baseline_pending = []\n"]
    path.write_text("".join(lines[:start] + block + lines[end + 1 :]), encoding="utf-8")
    return True


@dataclass(frozen=True)
class Equivalent:
    """A surviving mutant argued equivalent: the module, cosmic-ray's operator, the source
    line(s) it changes and what they become (each stripped), and the one-sentence reason.

    The text may occur in more than one place of the module; then the entry must say which:
    ``where``, the name of a function or class that encloses the mutant (the entry covers
    that place only), or ``every`` (its reason covers every place)."""

    module: str
    operator: str
    original: str
    mutated: str
    reason: str
    where: str = ""
    every: bool = False

    def key(self) -> tuple[str, str, str, str]:
        return (self.module, self.operator, self.original, self.mutated)

    def covers(self, enclosing: Sequence[str]) -> bool:
        """Whether the entry covers a mutant inside the named functions and classes."""
        return not self.where or self.where in enclosing


Equivalents = Mapping[tuple[str, str, str, str], Sequence[Equivalent]]


def load_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[str, str, str, str], list[Equivalent]]:
    if not path.exists():
        return {}
    result: dict[tuple[str, str, str, str], list[Equivalent]] = {}
    for index, entry in enumerate(_table(path).get("equivalent", [])):
        where = f"{path.name} [[equivalent]] #{index + 1}"
        every = entry.get("every", False)
        if type(every) is not bool:
            raise ConfigError(f"{where}: every must be true or false")
        item = Equivalent(
            module=_text(entry, "module", where),
            operator=_text(entry, "operator", where),
            original=_text(entry, "original", where),
            mutated=_text(entry, "mutated", where),
            reason=_text(entry, "reason", where),
            where=_text(entry, "where", where) if "where" in entry else "",
            every=every,
        )
        if item.where and item.every:
            raise ConfigError(f"{where}: give where or every, not both")
        listed = result.setdefault(item.key(), [])
        if any(other.where == item.where for other in listed):
            raise ConfigError(f"{where}: the same mutant is listed twice")
        listed.append(item)
    return result


def select_modules(names: Sequence[str]) -> list[str]:
    """Resolve the command line's modules: a path (``impl/canonical.py``), a dotted name
    (``runstore.canonical``) or a glob over the paths (``impl/store/recovery/*``)."""
    known = impl_modules()
    chosen: list[str] = []
    for name in names:
        path = name
        if name.startswith("runstore.") or name == "runstore":
            path = "impl/" + name.removeprefix("runstore").lstrip(".").replace(".", "/") + ".py"
        matches = [m for m in known if fnmatch.fnmatchcase(m, path)] or (
            [path] if path in known else []
        )
        if not matches:
            raise ConfigError(f"no module of impl/ is {name!r}")
        chosen += [m for m in matches if m not in chosen]
    return chosen
