"""Mutation check of schema v1 against its in-memory conformance tests.

The project promises that every constraint in ``impl/store/schema/v1.sql`` is pinned by a
test in ``conformance/schema/``: remove or weaken the constraint and a test fails. This
tool keeps that promise reproducible. The mutations are data: ``tools/schema_mutations.toml``
holds the table of named, surgical edits of v1.sql (each replaces one ``old`` text, which
must occur exactly once, by ``new``; the file's header describes its format), and this
module is only the driver, which loads and checks the table (:data:`MUTATIONS`; a malformed
file raises :class:`TableError`) and runs it. For every mutation it builds a throwaway tree
in a temporary directory::

    <tmp>/impl/store/schema/v1.sql      the mutated schema
    <tmp>/conformance/{__init__,conftest,contract}.py, schema/{__init__,conftest,rows}.py
                                        copied (rows.py reads ../../impl/store/schema/v1.sql)
    <tmp>/conformance/schema/test_*.py  copied

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

``conformance/meta/test_schema_mutations.py`` checks the table itself (fast: no mutant runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import mutation_table

ROOT = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).resolve().with_name("schema_mutations.toml")
SCHEMA = Path("impl") / "store" / "schema" / "v1.sql"
CONFORMANCE = Path("conformance")
# The schema group's row builders, its fixtures and the packages above them, relative to
# conformance/.
HELPERS = (
    "__init__.py",
    "conftest.py",
    "contract.py",
    "schema/__init__.py",
    "schema/conftest.py",
    "schema/rows.py",
)
TESTS = Path("schema")
JOBS = 2
TIMEOUT_SECONDS = 600

# The table file's layout: the keys of each [[mutation]].
MUTATION_KEYS = ("name", "family", "old", "new")
LAYOUT = mutation_table.Layout("mutation", MUTATION_KEYS)
TableError = mutation_table.TableError
Table = mutation_table.Table


@dataclass(frozen=True)
class Mutation:
    name: str
    family: str
    old: str
    new: str

    def apply(self, schema: str) -> str:
        return schema.replace(self.old, self.new, 1)


def _mutation(_where: str, fields: dict[str, str]) -> Mutation:
    return Mutation(**fields)


LOADER = mutation_table.Loader(TABLE, LAYOUT, _mutation)
parse_table = LOADER.parse
load_table = LOADER.load

_TABLE = load_table()
# Constraint families. The first group is the list the schema promises to guard; the rest
# are further families the table also covers.
REQUIRED_FAMILIES: tuple[str, ...] = _TABLE.required_families
FAMILIES: tuple[str, ...] = _TABLE.families
MUTATIONS: tuple[Mutation, ...] = _TABLE.entries


# --- running -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    status: str  # "killed", "SURVIVED", "STALE" or "ERROR"
    detail: str


# Schema test modules that read the installed package's embedded schema, not the tree's
# v1.sql: a mutant of the copy cannot reach them (test_freeze pins the package's statements
# and opens committed stores with it; it also needs conformance/cli's helpers).
PACKAGE_SCHEMA_TESTS = ("test_freeze.py",)


def schema_tests(root: Path = ROOT) -> list[Path]:
    """The schema test modules a mutant is judged by (sorted, as pytest orders them)."""
    found = sorted((root / CONFORMANCE / TESTS).glob("test_*.py"))
    return [path for path in found if path.name not in PACKAGE_SCHEMA_TESTS]


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


def run_tree(schema: str, tests: Sequence[Path], helpers: Sequence[Path]) -> tuple[int, str]:
    """Build a throwaway tree holding ``schema`` and copies of the tests; run pytest on it.
    Returns pytest's exit status and its combined output."""
    with tempfile.TemporaryDirectory(prefix="schema-mutant-") as tmp:
        root = Path(tmp)
        (root / SCHEMA).parent.mkdir(parents=True)
        (root / SCHEMA).write_text(schema, encoding="utf-8")
        conformance = root / CONFORMANCE
        for source in (*helpers, *tests):
            copy = conformance / source.relative_to(ROOT / CONFORMANCE)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, copy)
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
            *(str(conformance / test.relative_to(ROOT / CONFORMANCE)) for test in tests),
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
    status, detail = mutation_table.verdict(returncode, output)
    if status == "survived":
        return Outcome("SURVIVED", "every schema test passed")
    return Outcome("killed" if status == "killed" else "ERROR", detail)


def run_mutant(job: tuple[str, Sequence[Path], Sequence[Path]]) -> Outcome:
    schema, tests, helpers = job
    return judge(*run_tree(schema, tests, helpers))


def select(names: Sequence[str]) -> list[Mutation]:
    return mutation_table.select(MUTATIONS, names, "mutation")


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = mutation_table.say) -> int:
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
        failed = mutation_table.first_failure(output) or " | ".join(
            output.strip().splitlines()[-3:]
        )
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
