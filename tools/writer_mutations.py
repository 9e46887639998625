"""Mutation check of the writer's Python source against the default test suite.

The project promises that the writer's rules are pinned by tests: plant a bug a person could
plausibly write in ``impl/`` (a dropped clamp, a skipped conflict check, a swapped guard
check, ...) and some test of the default suite fails. This tool keeps
that promise reproducible, including for the value layer the writer shares with the model
(``rules``, ``edges``, ``payloads``, ``shapes``), where lockstep is blind and only direct
tests, vectors or the schema's triggers can see a bug. The mutants are data:
``tools/writer_mutations.toml`` holds the table of named, surgical edits (each replaces one
``old`` text, which must occur exactly once in its ``file``, by ``new``; the file's header
describes its format), and this module is only the driver, which loads and checks the
table through the one table loader, ``tools/mutation_table.py`` (:data:`MUTANTS`; a
malformed file raises :class:`TableError`), and runs it. The table keeps only mutants
cosmic-ray cannot generate (deleted statements, swapped checks, changed arguments, edits
inside SQL); one-token mutants (an inclusive expiry, a flipped boolean) are
``tools/mutate``'s, and ``tools/generated_mutants.py`` tells the two apart.

It snapshots the source tree (:data:`TREE`; never .git or .venv), so every mutant is judged
against the same text even while the real tree is edited. For every mutant (and first for
the unmutated baseline) it copies the snapshot, applies the mutant to the copy and runs the
copy's default suite (or, with ``--tests``, the modules matching the patterns) so::

    python -m pytest -x -q -p no:cacheprovider -c <copy>/pyproject.toml --rootdir <copy>
        <copy>/conformance/*/test_*.py   (fast writer and rule tests first, see ORDER)

with the copy's own pytest configuration (slow campaigns stay deselected). The editable
install's finder (last on ``sys.meta_path``) maps ``runstore`` onto the real tree, so the
driver builds a shim directory (:func:`build_shim`: ``runstore`` a directory of links to the
copy's impl/ entries, ``model`` and ``crashsim`` links to its folders) first on
``PYTHONPATH``, which forked children, ``spawn`` workers and test subprocesses inherit.
:func:`isolation_problem` first checks that a subprocess and its ``spawn`` child import every
package from the copy and that a deliberately broken copy fails to import. A mutant is killed
when a test fails (a timeout counts as killed). The real tree is only ever read.

Usage, from the repository root::

    python tools/writer_mutations.py               # all mutants, two at a time
    python tools/writer_mutations.py --list        # the table, nothing run
    python tools/writer_mutations.py --only NAME   # a subset (repeatable)
    python tools/writer_mutations.py --jobs 4      # four at a time
    python tools/writer_mutations.py --only NAME --tests writer/test_stateful.py --show

Output: one line per mutant (``killed NAME -> first failing test``, ``SURVIVED``,
``EQUIVALENT`` for a survivor the table marks equivalent, ``STALE`` when its ``old`` text is
not there exactly once or it does not compile, ``ERROR`` when pytest broke), then
``mutants=N killed=K survived=S equivalent=E stale=T seconds=X``; a killed mutant marked
equivalent counts as ``mismarked``. Exit status 1 if anything survived, went stale, errored
or was mismarked; 2 if the isolation check or the baseline fails.

``conformance/meta/test_writer_mutations.py`` checks the table itself (fast: no mutant runs).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import mutation_table
from package_map import package_dirs

ROOT = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).resolve().with_name("writer_mutations.toml")
# What the snapshot holds: everything the default suite reads.
TREE: tuple[str, ...] = ("impl", "model", "crashsim", "conformance", "vectors", "tools")
TREE += ("examples", ".ci", ".github", "SPEC.md", "README.md", "pyproject.toml")
IGNORED = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache", ".typecheck")
CONFORMANCE = Path("conformance")
ORDER = ("values/test_rules*.py", "writer/test_*.py", "meta/test_lockstep.py", "model/test_*.py")
ORDER += ("vectors/test_vectors.py", "values/test_records.py", "values/test_canonical.py")
ORDER += ("writer/test_stateful.py", "crash/test_crashes.py")
"""Test modules (paths under conformance/) that run first, in this order (fast and close to
the writer, so a mutant dies early); a module named exactly takes its own place before any
pattern's; every other ``test_*.py`` follows in path order."""
NOT_JUDGES = frozenset({"meta/test_writer_mutations.py"})
# This table's own checks read impl/ and would fail on every mutant (its old text is gone),
# killing it for the wrong reason.
JOBS = 2
TIMEOUT_SECONDS = 900

MUTANT_KEYS = ("name", "family", "file", "old", "new")
OPTIONAL_KEYS = ("equivalent",)
SOURCE_FILE = re.compile(r"impl/[a-z0-9_/]+\.py")


@dataclass(frozen=True)
class Mutant:
    name: str
    family: str
    file: str  # a path under impl/, relative to the repository root
    old: str
    new: str
    equivalent: str | None = None  # why it is behaviourally identical, if it is

    def apply(self, source: str) -> str:
        return source.replace(self.old, self.new, 1)


TableError = mutation_table.TableError
LAYOUT = mutation_table.Layout("mutant", MUTANT_KEYS, OPTIONAL_KEYS)
Table = mutation_table.Table


def _mutant(where: str, fields: dict[str, str]) -> Mutant:
    """A checked entry of the table as a :class:`Mutant` (the shared loader checked its
    keys, name, family and ``old``)."""
    mutant = Mutant(**fields)
    if not SOURCE_FILE.fullmatch(mutant.file):
        raise TableError(f"{where}: file must be a .py path under impl/")
    if mutant.equivalent is not None and not mutant.equivalent.strip():
        raise TableError(f"{where}: equivalent must give the reason")
    return mutant


LOADER = mutation_table.Loader(TABLE, LAYOUT, _mutant)
parse_table = LOADER.parse
load_table = LOADER.load

_TABLE = load_table()
REQUIRED_FAMILIES: tuple[str, ...] = _TABLE.required_families
FAMILIES: tuple[str, ...] = _TABLE.families
MUTANTS: tuple[Mutant, ...] = _TABLE.entries


# --- the throwaway trees -----------------------------------------------------------------


def snapshot(source: Path, target: Path) -> Path:
    """Copy the :data:`TREE` entries of ``source`` into ``target`` (created); returns it."""
    target.mkdir(parents=True)
    for name in TREE:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, symlinks=True, ignore=IGNORED)
        elif (source / name).is_file():
            shutil.copy2(source / name, target / name)
    return target


def build_shim(tree: Path, shim: Path) -> Path:
    """A ``PYTHONPATH`` directory under which the package-dir map of ``tree``'s
    pyproject.toml resolves into ``tree``: the top-level package is a real directory of
    links to its folder's entries, and each subpackage mapped elsewhere a link to its
    folder. Returns ``shim``."""
    for package, folder in package_dirs(tree):
        target = shim.joinpath(*package.split("."))
        if "." in package:  # a subpackage mapped onto its own folder
            if target.is_symlink() or target.exists():
                target.unlink()  # a top-level entry of the same name (none today)
            target.symlink_to(folder, target_is_directory=True)
            continue
        target.mkdir(parents=True)
        for entry in sorted(folder.iterdir()):
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
    return shim


def environment(shim: Path) -> dict[str, str]:
    """The subprocess environment: ``shim`` first on PYTHONPATH, no PYTEST_ADDOPTS."""
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
    return env


# Run in the copy's environment: where each package comes from, in this process and in a
# ``spawn`` child (which re-imports everything), as resolved paths.
PROBE = """\
import multiprocessing, os, sys

def where(_=None):
    import runstore, runstore.model, runstore.crashsim, runstore.store.schema, runstore.testing
    import runstore.rules
    return [os.path.realpath(m.__file__) for m in (runstore, runstore.model,
            runstore.crashsim, runstore.store.schema, runstore.testing, runstore.rules)]

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        child = pool.apply(where)
    print("\\n".join(where() + child))
"""


def isolation_problem(tree: Path, work: Path) -> str | None:
    """None if a subprocess run as the mutants' are imports every package of ``tree`` from
    ``tree`` (also in a ``spawn`` child), and a copy whose impl/__init__.py raises fails to
    import; else what went wrong. ``work`` is an empty scratch directory."""
    work.mkdir(parents=True, exist_ok=True)
    shim = build_shim(tree, work / "shim")
    probe = work / "probe.py"  # a file: a ``spawn`` child re-imports its parent's main module
    probe.write_text(PROBE, encoding="utf-8")
    done = _python([str(probe)], tree, environment(shim))
    paths = done.stdout.split()
    if done.returncode != 0 or len(paths) != 12:
        return f"the import probe failed: {(done.stdout + done.stderr).strip()[-400:]}"
    outside = [path for path in paths if not Path(path).is_relative_to(tree.resolve())]
    if outside:
        return f"imported from outside the copy: {', '.join(sorted(set(outside)))}"
    broken = snapshot(tree, work / "broken")
    init = broken / "impl" / "__init__.py"
    init.write_text("raise ImportError('deliberately broken copy')\n", encoding="utf-8")
    shim = build_shim(broken, work / "broken-shim")
    done = _python(["-c", "import runstore"], broken, environment(shim))
    if done.returncode == 0 or "deliberately broken copy" not in done.stderr:
        return "a deliberately broken copy imported cleanly: the override does not hold"
    return None


def _python(
    args: Sequence[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def judged_tests(tree: Path, only: Sequence[str] = ()) -> list[Path]:
    """The test modules a mutant is judged by, in the order they run (:data:`ORDER`);
    with ``only`` (patterns of paths under conformance/, or of file names), just the modules
    matching one of them."""
    base = tree / CONFORMANCE

    def relative(path: Path) -> str:
        return path.relative_to(base).as_posix()

    def chosen(path: Path) -> bool:
        names = (relative(path), path.name)
        return not only or any(fnmatch.fnmatch(n, pattern) for n in names for pattern in only)

    def rank(path: Path) -> int:
        name = relative(path)
        if name in ORDER:
            return ORDER.index(name)
        return next((i for i, p in enumerate(ORDER) if fnmatch.fnmatch(name, p)), len(ORDER))

    tests = sorted(
        (p for p in base.glob("*/test_*.py") if relative(p) not in NOT_JUDGES and chosen(p)),
        key=relative,
    )
    return sorted(tests, key=rank)


@dataclass(frozen=True)
class Outcome:
    status: str  # "killed", "SURVIVED", "EQUIVALENT", "STALE" or "ERROR"
    detail: str
    mismarked: bool = False


def stale_reason(mutant: Mutant, tree: Path) -> str | None:
    """Why ``mutant`` no longer applies to the snapshot ``tree``, or None if it does."""
    path = tree / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    source = path.read_text(encoding="utf-8")
    if (occurrences := source.count(mutant.old)) != 1:
        return f"old text occurs {occurrences} times in {mutant.file} (expected exactly once)"
    if mutant.old == mutant.new:
        return "new text equals old text"
    try:
        compile(mutant.apply(source), mutant.file, "exec")
    except SyntaxError as error:
        return f"the mutant does not compile: {error}"
    return None


_RUNNING: set[int] = set()  # the process groups of the suites running now
_LOCK = threading.Lock()
_STOPPING = threading.Event()


def stop_all() -> None:
    """End every running suite's process group and start no more: they run in sessions of
    their own, so the terminal's interrupt does not reach them."""
    with _LOCK:
        _STOPPING.set()
        for pid in _RUNNING:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def run_tree(base: Path, mutant: Mutant | None, only: Sequence[str] = ()) -> tuple[int, str]:
    """Copy the snapshot ``base``, apply ``mutant`` (None: the baseline), run the copy's
    default suite (or its modules matching ``only``). Returns pytest's exit status (-1:
    timed out) and its output."""
    with tempfile.TemporaryDirectory(prefix="writer-mutant-") as tmp:
        tree = snapshot(base, Path(tmp) / "tree")
        if mutant is not None:
            path = tree / mutant.file
            path.write_text(mutant.apply(path.read_text(encoding="utf-8")), encoding="utf-8")
        shim = build_shim(tree, Path(tmp) / "shim")
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        command += ["-c", str(tree / "pyproject.toml"), "--rootdir", str(tree), "-rfE"]
        command += [str(path) for path in judged_tests(tree, only)]
        with _LOCK:
            if _STOPPING.is_set():
                return -2, "interrupted"
            # A session of its own, so a timeout ends forked and spawned children too.
            process = subprocess.Popen(
                command,
                cwd=tree,
                env=environment(shim),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            _RUNNING.add(process.pid)
        try:
            output, _ = process.communicate(timeout=TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return -1, f"timed out after {TIMEOUT_SECONDS} s"
        except BaseException:  # an interrupt: the terminal's signal does not reach it
            os.killpg(process.pid, signal.SIGKILL)
            raise
        finally:
            with _LOCK:
                _RUNNING.discard(process.pid)
        return process.returncode, output


def judge(mutant: Mutant, returncode: int, output: str) -> Outcome:
    status, detail = mutation_table.verdict(returncode, output)
    if status == "survived":
        if mutant.equivalent is not None:
            return Outcome("EQUIVALENT", mutant.equivalent)
        return Outcome("SURVIVED", "every test of the default suite passed")
    if status == "killed" and mutant.equivalent is not None:
        return Outcome("killed", f"{detail} (marked equivalent: drop the mark)", True)
    return Outcome("killed" if status == "killed" else "ERROR", detail)


def report(
    mutant: Mutant, code: int, output: str, show: bool, out: Callable[[str], None]
) -> Outcome:
    """:func:`judge`, first printing the failure report (pytest's output from its first
    failure on, the shrunk Hypothesis program included) when ``show`` asks for it."""
    outcome, lines = judge(mutant, code, output), output.splitlines()
    if show and outcome.status == "killed":
        start = next((i for i, line in enumerate(lines) if line.startswith("=" * 10)), 0)
        out("\n    ".join([f"--- {mutant.name}: failure report", *lines[start:]]))
    return outcome


def select(names: Sequence[str]) -> list[Mutant]:
    return mutation_table.select(MUTANTS, names, "mutant")


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = mutation_table.say) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--tests", action="append", default=[], metavar="PATTERN")
    parser.add_argument("--show", action="store_true", help="print killed mutants' reports")
    args = parser.parse_args(argv)
    mutants = select(args.only)
    if args.list:
        for mutant in mutants:
            mark = "  (equivalent)" if mutant.equivalent is not None else ""
            out(f"{mutant.family:24} {mutant.name:44} {mutant.file}{mark}")
        return 0

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="writer-mutations-") as tmp:
        base = snapshot(ROOT, Path(tmp) / "snapshot")
        problem = isolation_problem(base, Path(tmp) / "probe")
        if problem is not None:
            out(f"isolation FAILED -> {problem}")
            return 2
        code, output = run_tree(base, None, args.tests)
        if code != 0:
            _, failed = mutation_table.verdict(code, output)
            out(f"baseline FAILED (pytest exit status {code}) -> {failed}")
            return 2
        stale = {m.name: why for m in mutants if (why := stale_reason(m, base)) is not None}
        runnable = [m for m in mutants if m.name not in stale]
        counts = dict.fromkeys(("killed", "SURVIVED", "EQUIVALENT", "STALE", "ERROR"), 0)
        mismarked = 0
        pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
        try:
            runs = pool.map(lambda m: (m, *run_tree(base, m, args.tests)), runnable)
            results = (report(m, code, output, args.show, out) for m, code, output in runs)
            for mutant in mutants:  # in table order, as each completes
                reason = stale.get(mutant.name)
                outcome = next(results) if reason is None else Outcome("STALE", reason)
                counts[outcome.status] += 1
                mismarked += outcome.mismarked
                out(f"{outcome.status} {mutant.name} -> {outcome.detail}")
        except BaseException:  # an interrupt: leave no suite running behind
            stop_all()
            raise
        finally:
            pool.shutdown(cancel_futures=True)
    summary = (
        f"mutants={len(mutants)} killed={counts['killed']} survived={counts['SURVIVED']} "
        f"equivalent={counts['EQUIVALENT']} stale={counts['STALE']} "
        f"seconds={time.monotonic() - started:.1f}"
    )
    if counts["ERROR"]:
        summary += f" errors={counts['ERROR']}"
    if mismarked:
        summary += f" mismarked={mismarked}"
    out(summary)
    failing = counts["SURVIVED"] + counts["STALE"] + counts["ERROR"] + mismarked
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
