"""Which tests run for a mutant: the module's candidate tests, narrowed to the ones that
execute the mutated lines.

The candidates of a module are named in ``tools/mutation.toml`` (``[[tests]]``, kept
current by conformance/meta/test_mutation_tool.py). Before a module's session runs, its
candidates run once, unmutated, in a scratch copy under coverage with a context per test
(pytest-cov's ``--cov-context=test``): that run must pass (a failing test would "kill"
every mutant), and it gives, for each line of the module, the tests that executed it.
A mutant then runs only the tests that executed a line it changes, the quickest first (as
timed in that run: the run stops at the first failure, so a mutant a quick test kills never
waits for the long stateful ones), under the ``mutation`` Hypothesis profile
(conformance/conftest.py: no shrinking, a fixed seed). When a changed line was executed by
no test, or only while modules were imported (a constant, a decorator, a default), the
mutant runs every candidate test, quickest first: a test may read a constant without
executing any line of the module (the kernel-constant tests read ``durable._AT_FDCWD``),
so the tests that executed the module's lines are not enough. A line executed only by a
subprocess a test starts is not seen by the map: its mutants may survive where the whole
candidate set would kill them, and are then reported as survivors to look at, never
counted as killed. Rules of this file: the map is a pure function of the copy's tree and
the candidates, stored as JSON beside the session.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from mutation.scratch import copy_environment

PYTEST_OPTIONS = ("-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--no-header")


class BaselineFailed(Exception):
    """The candidate tests do not pass on the unmutated copy."""


@dataclass(frozen=True)
class LineMap:
    """The candidate tests, the seconds they take unmutated, and per line of the module
    the tests that executed it (``[]``: reached only while importing)."""

    candidates: tuple[str, ...]
    seconds: float
    lines: dict[int, tuple[str, ...]]
    durations: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        lines = {str(k): list(v) for k, v in sorted(self.lines.items())}
        document = {
            "candidates": list(self.candidates),
            "seconds": self.seconds,
            "lines": lines,
            "durations": dict(sorted(self.durations.items())),
        }
        return json.dumps(document, indent=0, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LineMap:
        data = json.loads(text)
        return cls(
            candidates=tuple(data["candidates"]),
            seconds=float(data["seconds"]),
            lines={int(k): tuple(v) for k, v in data["lines"].items()},
            durations={k: float(v) for k, v in data.get("durations", {}).items()},
        )

    def ranked(self) -> tuple[str, ...]:
        """Every test that executed a line of the module, quickest first (ties by name; a
        test without a timing last)."""
        tests = {test for line_tests in self.lines.values() for test in line_tests}
        return tuple(sorted(tests, key=lambda test: (self.durations.get(test, float("inf")), test)))

    def every_test(self) -> tuple[str, ...]:
        """Every candidate test, quickest first (the candidates' paths when the map run
        timed none)."""
        timed = sorted(self.durations, key=lambda test: (self.durations[test], test))
        return tuple(timed) or self.candidates

    def seconds_of(self, tests: Iterable[str]) -> float | None:
        """How long ``tests`` took in the map run, or None when one of them was not timed
        (a candidate path, when the map run timed nothing)."""
        timed = [self.durations.get(test) for test in tests]
        return None if any(t is None for t in timed) else sum(t for t in timed if t is not None)

    def all_seconds(self) -> float:
        """How long every candidate took in the map run: the larger of its wall time and
        the sum of the tests' times (module fixtures count once in the first, per test in
        the second)."""
        return max(self.seconds, sum(self.durations.values()))

    def tests_for(
        self, changed: Iterable[int], statements: Sequence[range] = ()
    ) -> tuple[str, ...]:
        """The tests a mutant changing ``changed`` (line numbers of the unmutated module)
        runs, in the order they run (see above). A changed line inside one of
        ``statements`` (line spans of the statements around it, from
        :func:`statement_spans`) takes the tests of every line of that statement: a
        changed operator can make a test that stopped at an earlier line of a condition
        (``a and`` / ``b`` over two lines) go on to the later one."""
        ranked = self.ranked()
        chosen: set[str] = set()
        for line in changed:
            span = next((s for s in statements if line in s), range(line, line + 1))
            tests = {test for each in span for test in self.lines.get(each, ())}
            if not tests:
                return self.every_test()
            chosen.update(tests)
        return tuple(test for test in ranked if test in chosen)


def statement_spans(source: str) -> list[range]:
    """The line spans of ``source``'s statements, innermost first when they nest: a simple
    statement whole, a compound one's header only (its ``if``/``while`` condition, a
    ``for``'s target and iterable, a ``with``'s items, a ``def``'s signature), never its
    body."""
    spans: list[range] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            spans.append(range(first, max(body[0].lineno, node.lineno + 1)))
        else:
            spans.append(range(node.lineno, node.end_lineno + 1))
    return sorted(spans, key=len)


def build_maps(
    copy: Path, modules: Sequence[str], candidates: Sequence[str], jobs: int
) -> dict[str, LineMap]:
    """Run ``candidates`` once in ``copy`` under coverage and return each module's map."""
    data_file = copy / ".mutate-coverage"
    data_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS]
    command += ["--cov=runstore", "--cov-context=test", "--cov-report="]
    command += ["--durations=0", "--durations-min=0", "-vv"]
    command += ["-n", str(jobs)] if jobs > 1 else ["-p", "no:xdist"]
    env = copy_environment(copy)
    env["COVERAGE_FILE"] = str(data_file)
    started = time.monotonic()
    done = subprocess.run(
        [*command, *candidates], cwd=copy, env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise BaselineFailed(
            f"the candidate tests fail on the unmutated tree ({' '.join(candidates)}):\n"
            + "\n".join(tail)
        )
    import coverage  # the mutation extra

    data = coverage.CoverageData(str(data_file))
    data.read()
    measured = {Path(name).resolve(): name for name in data.measured_files()}
    maps = {}
    for module in modules:
        name = measured.get((copy / module).resolve())
        by_line = data.contexts_by_lineno(name) if name else {}
        lines = {
            line: tuple(sorted({c.rsplit("|", 1)[0] for c in contexts if c}))
            for line, contexts in by_line.items()
        }
        maps[module] = LineMap(tuple(candidates), seconds, lines, durations(done.stdout))
    return maps


DURATION = re.compile(r"^([0-9.]+)s (?:setup|call|teardown) +(\S.*?)\s*$", re.MULTILINE)


def durations(report: str) -> dict[str, float]:
    """Each test's seconds (setup, call and teardown) from pytest's ``--durations=0``."""
    found: dict[str, float] = {}
    for match in DURATION.finditer(report):
        found[match.group(2)] = found.get(match.group(2), 0.0) + float(match.group(1))
    return found


def changed_lines(original: str, mutated: str) -> list[int]:
    """The lines (1-based, of ``original``) a mutant replaced or deleted; an insertion
    counts as a change of the line before it."""
    before = original.splitlines()
    after = mutated.splitlines()
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        changed.update(range(i1 + 1, i2 + 1) if i2 > i1 else [max(i1, 1)])
    return sorted(changed)
