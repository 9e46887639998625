"""The mutation tables' one loader, and the verdict both mutation drivers give.

Rules of this file: reading and checking a table file (``tools/writer_mutations.toml``,
``tools/schema_mutations.toml``) and judging one pytest run; no mutant is applied or run
here. A table is ``[families]`` (``required``: each must have an entry; ``extra``: further
families) and a non-empty array of tables named by its :class:`Layout` (``[[mutant]]``,
``[[mutation]]``), each entry a set of string keys with a unique snake_case ``name``, a
known ``family`` and a non-empty ``old``. What a driver checks beyond that (a mutant's
``file`` under ``impl/``, an ``equivalent`` reason) it checks in the ``build`` function it
passes. A malformed file raises :class:`TableError`, naming the file and the entry.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Generic
from typing import Protocol
from typing import TypeVar

IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")
"""Entry and family names (pytest ids, ``--only`` arguments)."""
FAMILIES_KEYS = ("required", "extra")
CONFORMANCE = "conformance/"

E = TypeVar("E")


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


class TableError(ValueError):
    """The mutation table file is malformed."""


@dataclass(frozen=True)
class Layout:
    entry: str  # the array of tables' name: "mutant" or "mutation"
    keys: tuple[str, ...]  # the string keys every entry holds
    optional: tuple[str, ...] = ()  # the string keys an entry may hold


@dataclass(frozen=True)
class Table(Generic[E]):
    required_families: tuple[str, ...]  # each must have an entry
    families: tuple[str, ...]  # required_families, then the extra ones
    entries: tuple[E, ...]


def keys_of(where: str, value: object, keys: Sequence[str], optional: Sequence[str] = ()) -> Any:
    """``value`` as a TOML table holding ``keys`` (and maybe ``optional``), else TableError."""
    if not isinstance(value, dict):
        raise TableError(f"{where}: expected a table, found {type(value).__name__}")
    problems = []
    if missing := [key for key in keys if key not in value]:
        problems.append(f"missing key(s) {', '.join(missing)}")
    if unknown := sorted(set(value) - {*keys, *optional}):
        known = ", ".join((*keys, *optional))
        problems.append(f"unknown key(s) {', '.join(unknown)} (known: {known})")
    if problems:
        raise TableError(f"{where}: {'; '.join(problems)}")
    return value


def _identifiers(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, str) and IDENTIFIER.fullmatch(item) for item in value
    ):
        raise TableError(f"{where}: expected a list of snake_case names, found {value!r}")
    return tuple(value)


def parse_table(
    data: dict[str, Any],
    layout: Layout,
    build: Callable[[str, dict[str, str]], E],
    source: str = "<table>",
) -> Table[E]:
    """Check the parsed table file ``data`` (named ``source`` in errors) against ``layout``
    and build each entry with ``build(where, fields)``, which may refuse it with
    :class:`TableError` (``where`` names the entry)."""
    data = keys_of(source, data, ("families", layout.entry))
    families = keys_of(f"{source}: [families]", data["families"], FAMILIES_KEYS)
    required = _identifiers(f"{source}: [families] required", families["required"])
    known = (*required, *_identifiers(f"{source}: [families] extra", families["extra"]))
    if not required:
        raise TableError(f"{source}: [families] required is empty")
    if twice := sorted({family for family in known if known.count(family) > 1}):
        raise TableError(f"{source}: [families] lists {', '.join(twice)} more than once")
    entries = data[layout.entry]
    if not isinstance(entries, list) or not entries:
        raise TableError(f"{source}: expected a non-empty array of tables [[{layout.entry}]]")
    built: list[E] = []
    seen: dict[str, int] = {}
    for number, entry in enumerate(entries, start=1):
        where = f"{source}: [[{layout.entry}]] #{number}"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            where = f"{where} ({entry['name']!r})"
        fields = keys_of(where, entry, layout.keys, layout.optional)
        if wrong := [key for key in fields if not isinstance(fields[key], str)]:
            raise TableError(f"{where}: {', '.join(wrong)} must be string(s)")
        if not IDENTIFIER.fullmatch(fields["name"]):
            raise TableError(f"{where}: the name must be snake_case")
        if fields["name"] in seen:
            raise TableError(f"{where}: the name is taken by #{seen[fields['name']]}")
        if fields["family"] not in known:
            raise TableError(f"{where}: unknown family {fields['family']!r} (see [families])")
        if not fields["old"]:
            raise TableError(f"{where}: old is empty")
        seen[fields["name"]] = number
        built.append(build(where, fields))
    return Table(required, known, tuple(built))


def load_table(path: Path, layout: Layout, build: Callable[[str, dict[str, str]], E]) -> Table[E]:
    """Read and check the table file at ``path`` (:class:`TableError` if it is malformed)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise TableError(f"{path}: not a valid TOML file: {error}") from error
    return parse_table(data, layout, build, str(path))


@dataclass(frozen=True)
class Loader(Generic[E]):
    """One driver's table: its file, its layout and how it builds an entry."""

    path: Path
    layout: Layout
    build: Callable[[str, dict[str, str]], E]

    def parse(self, data: dict[str, Any], source: str = "<table>") -> Table[E]:
        """Check the parsed table file ``data`` (named ``source`` in errors) and build it."""
        return parse_table(data, self.layout, self.build, source)

    def load(self, path: Path | None = None) -> Table[E]:
        """Read and check the table file (the driver's own when ``path`` is None)."""
        return load_table(self.path if path is None else path, self.layout, self.build)


def select(entries: Sequence[N], names: Sequence[str], noun: str) -> list[N]:
    """The entries named (all of them when ``names`` is empty), in the order named; an
    unknown name ends the program with a usage message."""
    if not names:
        return list(entries)
    known = {entry.name: entry for entry in entries}
    if unknown := [name for name in names if name not in known]:
        raise SystemExit(f"unknown {noun}(s): {', '.join(unknown)}")
    return [known[name] for name in names]


def first_failure(output: str) -> str | None:
    """The first FAILED/ERROR test id in pytest's short summary (``-rfE``), relative to
    the conformance folder."""
    for line in output.splitlines():
        for prefix in ("FAILED ", "ERROR "):
            if line.startswith(prefix):
                test = line[len(prefix) :].split(" - ", 1)[0].strip()
                return test.removeprefix(CONFORMANCE)
    return None


def verdict(returncode: int, output: str) -> tuple[str, str]:
    """One pytest run of a mutant judged: ``("survived", "")`` when every test passed,
    ``("killed", the first failing test)`` when a test failed (exit status 1, or 2: a
    collection error after a reported failure) or ``("killed", output)`` when the run
    timed out (exit status -1), else ``("error", why)``."""
    if returncode == 0:
        return "survived", ""
    if returncode == -1:
        return "killed", output
    failed = first_failure(output)
    if returncode in (1, 2) and failed is not None:
        return "killed", failed
    tail = " | ".join(output.strip().splitlines()[-3:])
    return "error", f"pytest exit status {returncode}: {tail}"


def say(line: str) -> None:
    print(line, flush=True)
