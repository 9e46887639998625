"""``python -m runstore.crashsim [--exhaustive] [--scenario NAME] [--seed N]``.

Rules of this file: argument parsing and printing only; the work is
:func:`runstore.crashsim.suite.run_suite`. Prints one line per campaign, every failure and
prefix mismatch in full, and ends with the summary line
``scenarios=A boundaries=B crashes=C failures=D seconds=E``. Exit status: 0 when all is
well, 1 on any failure, 2 when there is no failure but some crash point changed its
execution path (a prefix mismatch, which cannot count as tested).
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from runstore.crashsim.campaign import CampaignResult
from runstore.crashsim.faulty import FAULTY_NAMES, faulty_scenarios
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.suite import failure_lines, run_suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runstore.crashsim",
        description="Crash the store at its durability and SQL boundaries and compare what "
        "survives with the model.",
    )
    parser.add_argument(
        "--exhaustive", action="store_true", help="crash at every boundary of every scenario"
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="run only this scenario (repeatable); the deliberately faulty ones "
        f"({', '.join(FAULTY_NAMES)}) are available only by name",
    )
    parser.add_argument("--seed", type=int, default=0, help="the subset's sampling seed")
    parser.add_argument("--jobs", type=int, default=None, help="trials run at once")
    parser.add_argument("--directory", default=None, help="where copies are made")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="runstore-crashsim-markers-") as markers:
        return _run(parser, args, markers)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, markers: str) -> int:
    catalog = {**SCENARIOS, **faulty_scenarios(markers)}
    names = args.scenario or list(SCENARIOS)
    unknown = [name for name in names if name not in catalog]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(catalog)}")

    def report(result: CampaignResult) -> None:
        print(
            f"{result.scenario}: boundaries={result.boundaries} crashes={result.crashes} "
            f"failures={len(result.failures) + (1 if result.problem else 0)} "
            f"mismatches={len(result.mismatches)} seconds={result.seconds:.1f}",
            flush=True,
        )
        for line in failure_lines(result):
            print(line, flush=True)

    suite = run_suite(
        [catalog[name] for name in names],
        exhaustive=args.exhaustive,
        seed=args.seed,
        jobs=args.jobs,
        directory=args.directory,
        report=report,
    )
    if suite.mismatches:
        print(f"prefix mismatches (not counted as crashes): {suite.mismatches}")
    print(suite.summary(), flush=True)
    if suite.failures:
        return 1
    return 2 if suite.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
