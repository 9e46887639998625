"""The test command of a mutant (cosmic-ray's ``test-command``): run, in the worker's copy,
the tests that executed the lines the mutant changed, stopping at the first failure.

Run from the copy's root by the worker cosmic-ray started there::

    python tools/mutation/run_mutant.py --module impl/canonical.py --map SESSION/map.json

It compares the module with its unmutated copy (``.mutate-pristine``) to find the changed
lines, picks the tests from the map (:meth:`mutation.selection.LineMap.tests_for`), runs
pytest on them in a child process and exits with pytest's status: 0 means the mutant
survived. A child that ends with status 0 before its session finished (no marker from
:mod:`mutation.session_marker`: the mutant made pytest's own process exit) counts as a
kill, status 1. So does a child still running at the mutant's own limit, ``--floor``
seconds plus ``--factor`` times the map run's seconds of its tests: its process group is
killed and ``run_mutant: timeout`` said (a hang, which the report counts among the
timeouts). A mutant whose tests were not all timed has no limit of its own (cosmic-ray's
session timeout still holds). The child pytest dies with this process, so cosmic-ray's
timeout, which kills this command's process group, leaves no pytest running.

Rules of this file: it writes nothing but its output and the marker's
temporary file; a map that does not fit the module is an error (status 3), never a silent
full run.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutation.results import TIMED_OUT
from mutation.scratch import PRISTINE
from mutation.selection import PYTEST_OPTIONS
from mutation.selection import LineMap
from mutation.selection import changed_lines
from mutation.selection import statement_spans
from mutation.session_marker import MARKER_VARIABLE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="the mutated module (impl/...)")
    parser.add_argument("--map", required=True, type=Path, help="the session's map.json")
    parser.add_argument("--floor", type=float, default=20.0, help="seconds any mutant may take")
    parser.add_argument("--factor", type=float, default=3.0, help="x its tests' mapped seconds")
    args = parser.parse_args(argv)
    current = Path(args.module).read_text(encoding="utf-8")
    original = (Path(PRISTINE) / args.module).read_text(encoding="utf-8")
    line_map = LineMap.from_json(args.map.read_text(encoding="utf-8"))
    lines = changed_lines(original, current)
    if not lines:
        print(f"run_mutant: {args.module} is not mutated in this copy", file=sys.stderr)
        return 3
    tests = line_map.tests_for(lines, statement_spans(original))
    seconds = line_map.seconds_of(tests)
    limit = None if seconds is None else args.floor + args.factor * seconds
    print(f"run_mutant: lines {lines}: {len(tests)} test(s)", flush=True)
    return run_tests(tests, limit_s=limit)


def run_tests(tests: Sequence[str], cwd: Path | None = None, limit_s: float | None = None) -> int:
    """Run ``tests`` (pytest node ids or paths, in this order) in a child pytest under the
    ``mutation`` Hypothesis profile, stopping at the first failure; its :func:`verdict`,
    or 1 when it is still running after ``limit_s`` seconds (then its process group is
    killed)."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="mutation")
    tools = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), tools]))
    with tempfile.TemporaryDirectory(prefix="mutate-marker-") as directory:
        marker = Path(directory) / "finished"
        env[MARKER_VARIABLE] = str(marker)
        # The tests run in the order given (the quickest first): pytest runs node ids given
        # on the command line in that order.
        command = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, "-x", "-p", "no:xdist"]
        command += ["-p", "mutation.session_marker", *tests]
        # A process group of its own, so a timeout kills what the tests started too, and
        # death with this process: cosmic-ray's backstop timeout kills this command's group,
        # which the child has left.
        child = subprocess.Popen(
            command, env=env, cwd=cwd, start_new_session=True, preexec_fn=_die_with_parent
        )
        try:
            status = child.wait(limit_s)
        except subprocess.TimeoutExpired:
            _kill_group(child)
            print(f"{TIMED_OUT}: the tests ran past {limit_s:.0f} s", flush=True)
            return 1
        finally:
            if child.returncode is None:  # interrupted: leave no pytest behind
                _kill_group(child)
        return verdict(status, marker.exists())


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``child``'s process group (gone already if the child and everything it
    started ended just now) and reap the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _die_with_parent() -> None:
    """In the child, before it runs pytest: be killed when this process dies (Linux's
    ``PR_SET_PDEATHSIG``; elsewhere nothing)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""


def verdict(status: int, finished: bool) -> int:
    """The mutant's status from pytest's: a pass only counts when the session finished."""
    if status == 0 and not finished:
        print("run_mutant: the test process ended before its session finished", flush=True)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
