"""The test command of a mutant (cosmic-ray's ``test-command``): run, in the worker's copy,
the tests that executed the lines the mutant changed, stopping at the first failure.

Run from the copy's root by the worker cosmic-ray started there::

    python tools/mutation/run_mutant.py --module impl/canonical.py --map SESSION/map.json

It compares the module with its unmutated copy (``.mutate-pristine``) to find the changed
lines, picks the tests from the map (:meth:`mutation.selection.LineMap.tests_for`) and
exits with pytest's status: 0 means the mutant survived. Rules of this file: it never
writes anything but its output; a map that does not fit the module is an error (status 3),
never a silent full run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutation.scratch import PRISTINE
from mutation.selection import PYTEST_OPTIONS
from mutation.selection import LineMap
from mutation.selection import changed_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="the mutated module (impl/...)")
    parser.add_argument("--map", required=True, type=Path, help="the session's map.json")
    args = parser.parse_args(argv)
    current = Path(args.module).read_text(encoding="utf-8")
    original = (Path(PRISTINE) / args.module).read_text(encoding="utf-8")
    line_map = LineMap.from_json(args.map.read_text(encoding="utf-8"))
    lines = changed_lines(original, current)
    if not lines:
        print(f"run_mutant: {args.module} is not mutated in this copy", file=sys.stderr)
        return 3
    tests = line_map.tests_for(lines)
    print(f"run_mutant: lines {lines}: {len(tests)} test(s)", flush=True)
    import pytest

    os.environ["HYPOTHESIS_PROFILE"] = "mutation"

    # The tests run in the order given (the quickest first): pytest runs node ids given on
    # the command line in that order.
    return int(pytest.main([*PYTEST_OPTIONS, "-x", "-p", "no:xdist", *tests]))


if __name__ == "__main__":
    sys.exit(main())
