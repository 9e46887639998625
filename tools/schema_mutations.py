"""Mutation check of schema v1 against its in-memory conformance tests.

The project promises that every constraint in ``impl/store/schema/v1.sql`` is pinned by a test in
``conformance/test_schema_*.py``: remove or weaken the constraint and a test fails. This
tool keeps that promise reproducible. The mutations are data: ``tools/schema_mutations.toml``
holds the table of named, surgical edits of v1.sql (each replaces one ``old`` text, which
must occur exactly once, by ``new``; the file's header describes its format), and this
module is only the driver, which loads and checks the table (:data:`MUTATIONS`; a malformed
file raises :class:`TableError`) and runs it. For every mutation it builds a throwaway tree
in a temporary directory::

    <tmp>/impl/store/schema/v1.sql          the mutated schema
    <tmp>/conformance/schema_rows.py, conftest.py  copied (rows read ../impl/store/schema/v1.sql)
    <tmp>/conformance/test_schema_*.py  copied (all but test_schema_mutations.py)

and runs pytest on it in a subprocess, isolated from the repository's configuration
(``-c /dev/null``, ``--rootdir <tmp>``, ``-o addopts=``, no cache). A mutation is killed
when a test fails. An unmutated tree is run first and must pass. The real v1.sql is only
ever read.

Usage, from the repository root::

    python tools/schema_mutations.py               # all mutations, two at a time
    python tools/schema_mutations.py --list        # the table, nothing run
    python tools/schema_mutations.py --only NAME   # a subset (repeatable)

Output: one line per mutation, ``killed NAME -> first failing test`` or
``SURVIVED NAME -> ...`` (``STALE NAME -> why`` when its ``old`` text no longer occurs
exactly once or the mutant no longer builds, ``ERROR`` when pytest itself broke), then
``mutations=N killed=K survived=S stale=T seconds=X``. Exit status 1 if anything survived,
went stale or errored, 2 if the baseline run fails.

``conformance/test_schema_mutations.py`` checks the table itself (fast: no mutant runs).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).resolve().with_name("schema_mutations.toml")
SCHEMA = Path("impl") / "store" / "schema" / "v1.sql"
CONFORMANCE = Path("conformance")
# The schema tests' row builders and their shared fixtures (conftest.py).
HELPERS = ("schema_rows.py", "conftest.py", "cli_world.py")
TEST_GLOB = "test_schema_*.py"
# This table's own checks match the glob but are not schema tests (and would fail on any
# mutant, killing it for the wrong reason).
NOT_SCHEMA_TESTS = frozenset({"test_schema_mutations.py"})
JOBS = 2
TIMEOUT_SECONDS = 600

# The table file's layout: top-level keys, the keys of [families] and of each [[mutation]].
TABLE_KEYS = ("families", "mutation")
FAMILIES_KEYS = ("required", "extra")
MUTATION_KEYS = ("name", "family", "old", "new")
# Mutation and family names (pytest ids, --only arguments).
IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Mutation:
    name: str
    family: str
    old: str
    new: str

    def apply(self, schema: str) -> str:
        return schema.replace(self.old, self.new, 1)


@dataclass(frozen=True)
class Table:
    required_families: tuple[str, ...]  # the families the schema promises to guard
    families: tuple[str, ...]  # required_families, then the extra ones
    mutations: tuple[Mutation, ...]


class TableError(ValueError):
    """The mutation table file is malformed."""


def _exact_keys(where: str, value: object, keys: Sequence[str]) -> dict[str, Any]:
    """``value`` as a TOML table holding exactly ``keys``, else :class:`TableError`."""
    if not isinstance(value, dict):
        raise TableError(f"{where}: expected a table, found {type(value).__name__}")
    problems = []
    if missing := [key for key in keys if key not in value]:
        problems.append(f"missing key(s) {', '.join(missing)}")
    if unknown := sorted(set(value) - set(keys)):
        problems.append(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(keys)})")
    if problems:
        raise TableError(f"{where}: {'; '.join(problems)}")
    return value


def _identifiers(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(item, str) and IDENTIFIER.fullmatch(item) for item in value
    ):
        raise TableError(f"{where}: expected a list of snake_case names, found {value!r}")
    return tuple(value)


def parse_table(data: dict[str, Any], source: str = "<table>") -> Table:
    """Check the parsed table file ``data`` (named ``source`` in errors) and build it."""
    data = _exact_keys(source, data, TABLE_KEYS)
    families = _exact_keys(f"{source}: [families]", data["families"], FAMILIES_KEYS)
    required = _identifiers(f"{source}: [families] required", families["required"])
    extra = _identifiers(f"{source}: [families] extra", families["extra"])
    known = (*required, *extra)
    if not required:
        raise TableError(f"{source}: [families] required is empty")
    if twice := sorted({family for family in known if known.count(family) > 1}):
        raise TableError(f"{source}: [families] lists {', '.join(twice)} more than once")
    entries = data["mutation"]
    if not isinstance(entries, list) or not entries:
        raise TableError(f"{source}: expected a non-empty array of tables [[mutation]]")
    mutations: list[Mutation] = []
    seen: dict[str, int] = {}
    for number, entry in enumerate(entries, start=1):
        where = f"{source}: [[mutation]] #{number}"
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            where = f"{where} ({entry['name']!r})"
        fields = _exact_keys(where, entry, MUTATION_KEYS)
        if wrong := [key for key in MUTATION_KEYS if not isinstance(fields[key], str)]:
            raise TableError(f"{where}: {', '.join(wrong)} must be string(s)")
        mutation = Mutation(**{key: fields[key] for key in MUTATION_KEYS})
        if not IDENTIFIER.fullmatch(mutation.name):
            raise TableError(f"{where}: the name must be snake_case")
        if mutation.name in seen:
            raise TableError(f"{where}: the name is taken by #{seen[mutation.name]}")
        if mutation.family not in known:
            raise TableError(f"{where}: unknown family {mutation.family!r} (see [families])")
        if not mutation.old:
            raise TableError(f"{where}: old is empty")
        seen[mutation.name] = number
        mutations.append(mutation)
    return Table(required, known, tuple(mutations))


def load_table(path: Path = TABLE) -> Table:
    """Read and check the table file (:class:`TableError` if it is malformed)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise TableError(f"{path}: not a valid TOML file: {error}") from error
    return parse_table(data, str(path))


_TABLE = load_table()
# Constraint families. The first group is the list the schema promises to guard; the rest
# are further families the table also covers.
REQUIRED_FAMILIES: tuple[str, ...] = _TABLE.required_families
FAMILIES: tuple[str, ...] = _TABLE.families
MUTATIONS: tuple[Mutation, ...] = _TABLE.mutations


# --- running -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    status: str  # "killed", "SURVIVED", "STALE" or "ERROR"
    detail: str


def schema_tests(root: Path = ROOT) -> list[Path]:
    """The schema test modules a mutant is judged by (sorted, as pytest orders them)."""
    return sorted(
        path for path in (root / CONFORMANCE).glob(TEST_GLOB) if path.name not in NOT_SCHEMA_TESTS
    )


def builds(schema: str) -> str | None:
    """None if ``schema`` builds cleanly on an empty in-memory database (every foreign key
    naming a real parent key), else the error."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.executescript(schema)
        # Reports a foreign key whose parent columns are not a key ("foreign key mismatch"),
        # which would otherwise only surface, and kill, on the first insert.
        conn.execute("PRAGMA foreign_key_check").fetchall()
    except sqlite3.Error as error:
        return f"{type(error).__name__}: {error}"
    finally:
        conn.close()
    return None


def stale_reason(mutation: Mutation, schema: str) -> str | None:
    """Why ``mutation`` no longer applies to ``schema``, or None if it does."""
    occurrences = schema.count(mutation.old)
    if occurrences != 1:
        return f"old text occurs {occurrences} times in v1.sql (expected exactly once)"
    if mutation.old == mutation.new:
        return "new text equals old text"
    error = builds(mutation.apply(schema))
    if error is not None:
        return f"mutant schema does not build: {error}"
    return None


def first_failure(output: str) -> str | None:
    """The first FAILED/ERROR test id in pytest's short summary (``-rfE``)."""
    for line in output.splitlines():
        for prefix in ("FAILED ", "ERROR "):
            if line.startswith(prefix):
                test = line[len(prefix) :].split(" - ", 1)[0].strip()
                return test.removeprefix(f"{CONFORMANCE.as_posix()}/")
    return None


def run_tree(schema: str, tests: Sequence[Path], helpers: Sequence[Path]) -> tuple[int, str]:
    """Build a throwaway tree holding ``schema`` and copies of the tests; run pytest on it.
    Returns pytest's exit status and its combined output."""
    with tempfile.TemporaryDirectory(prefix="schema-mutant-") as tmp:
        root = Path(tmp)
        (root / SCHEMA).parent.mkdir(parents=True)
        (root / SCHEMA).write_text(schema, encoding="utf-8")
        conformance = root / CONFORMANCE
        conformance.mkdir()
        for source in (*helpers, *tests):
            shutil.copyfile(source, conformance / source.name)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(root),
            "-o",
            "addopts=",
            "-rfE",
            *(str(conformance / test.name) for test in tests),
        ]
        env = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        try:
            done = subprocess.run(
                command,
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return -1, f"timed out after {TIMEOUT_SECONDS} s"
        return done.returncode, done.stdout + done.stderr


def judge(returncode: int, output: str) -> Outcome:
    failed = first_failure(output)
    if returncode == 0:
        return Outcome("SURVIVED", "every schema test passed")
    # 1: tests failed; 2: interrupted (e.g. a collection error) after reporting a failure.
    if returncode in (1, 2) and failed is not None:
        return Outcome("killed", failed)
    tail = " | ".join(output.strip().splitlines()[-3:])
    return Outcome("ERROR", f"pytest exit status {returncode}: {tail}")


def run_mutant(job: tuple[str, Sequence[Path], Sequence[Path]]) -> Outcome:
    schema, tests, helpers = job
    return judge(*run_tree(schema, tests, helpers))


def select(names: Sequence[str]) -> list[Mutation]:
    if not names:
        return list(MUTATIONS)
    known = {mutation.name: mutation for mutation in MUTATIONS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"unknown mutation(s): {', '.join(unknown)}")
    return [known[name] for name in names]


def say(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = say) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    parser.add_argument("--jobs", type=int, default=JOBS)
    args = parser.parse_args(argv)
    mutations = select(args.only)
    if args.list:
        for mutation in mutations:
            out(f"{mutation.family:32} {mutation.name}")
        return 0

    started = time.monotonic()
    schema = (ROOT / SCHEMA).read_text(encoding="utf-8")
    tests = schema_tests()
    helpers = tuple(ROOT / CONFORMANCE / name for name in HELPERS)

    code, output = run_tree(schema, tests, helpers)
    if code != 0:
        failed = first_failure(output) or " | ".join(output.strip().splitlines()[-3:])
        out(f"baseline FAILED (pytest exit status {code}) -> {failed}")
        return 2

    stale = {m.name: reason for m in mutations if (reason := stale_reason(m, schema)) is not None}
    runnable = [m for m in mutations if m.name not in stale]
    jobs = [(m.apply(schema), tests, helpers) for m in runnable]
    counts = {"killed": 0, "SURVIVED": 0, "STALE": 0, "ERROR": 0}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = pool.map(run_mutant, jobs)  # in table order, as each completes
        for mutation in mutations:
            reason = stale.get(mutation.name)
            outcome = next(results) if reason is None else Outcome("STALE", reason)
            counts[outcome.status] += 1
            out(f"{outcome.status} {mutation.name} -> {outcome.detail}")
    summary = (
        f"mutations={len(mutations)} killed={counts['killed']} survived={counts['SURVIVED']} "
        f"stale={counts['STALE']} seconds={time.monotonic() - started:.1f}"
    )
    if counts["ERROR"]:
        summary += f" errors={counts['ERROR']}"
    out(summary)
    return 0 if counts["killed"] == len(mutations) else 1


if __name__ == "__main__":
    sys.exit(main())
