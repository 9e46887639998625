"""``python -m runstore.crashsim [--exhaustive] [--scenario NAME] [--seed N] [--jobs N]
[--lanes N] [--method image|kill] [--profile] [--compare-methods]
[--faults io|powerloss|all]``.

Rules of this file: argument parsing and printing only; the work is one suite of sweeps
(:func:`runstore.crashsim.suite.run_suite`, :func:`~runstore.crashsim.suite.run_sweeps`
with :data:`~runstore.crashsim.equivalence.COMPARE`,
:func:`runstore.crashsim.iofaults.run_io_faults`,
:func:`runstore.crashsim.powerloss_suite.run_powerloss_suite`). Prints one line per sweep
(:meth:`~runstore.crashsim.results.SweepResult.line`), every failure and prefix mismatch in
full, with ``--profile`` the table of where the time went, and ends with the suite's
summary line (:meth:`~runstore.crashsim.results.SuiteResult.summary`): ``scenarios=A
boundaries=B crashes=C images=I failures=D seconds=E points_per_second=F``; with
``--faults``, one per fault family: ``faults=io scenarios=A points=B states=C unfired=D
failures=E seconds=F`` and ``faults=powerloss scenarios=A cuts=B states=C sampled=D
failures=E seconds=F``; with ``--compare-methods``, ``scenarios=A compared=B
differences=C seconds=D``. Exit status: 0 when all is well, 1 on any failure, 2 when there
is no failure but some crash point changed its execution path (a prefix mismatch, which
cannot count as tested).
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from collections.abc import Callable

from runstore.crashsim.equivalence import COMPARE
from runstore.crashsim.equivalence import difference_lines
from runstore.crashsim.faulty import FAULTY_NAMES
from runstore.crashsim.faulty import faulty_scenarios
from runstore.crashsim.iofaults import run_io_faults
from runstore.crashsim.powerloss_suite import run_powerloss_suite
from runstore.crashsim.results import SuiteResult
from runstore.crashsim.results import SweepResult
from runstore.crashsim.results import exit_status
from runstore.crashsim.results import report_lines
from runstore.crashsim.scenarios import FULL_IN_SUBSET
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.suite import METHODS
from runstore.crashsim.suite import run_suite
from runstore.crashsim.suite import run_sweeps
from runstore.crashsim.suite import selector

FAULTS = ("io", "powerloss", "all")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runstore.crashsim",
        description="Sweep each scenario: crash the store at its durability and SQL "
        "boundaries (or fail a call, or cut the power there) and compare what survives with "
        "the model; one line per sweep, then the suite's summary line.",
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
    parser.add_argument(
        "--jobs", type=int, default=None, help="trials run at once (default: the core count)"
    )
    parser.add_argument(
        "--lanes",
        type=int,
        default=None,
        help="sweeps run at once, each in a process of its own with up to --jobs trials "
        "(default: the core count; 1 runs them one after another in this process)",
    )
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="image",
        help="image: run each scenario once and check a copy of the store at each point "
        "(default); kill: one process killed with os._exit per point",
    )
    parser.add_argument("--profile", action="store_true", help="print where the sweeps' time went")
    parser.add_argument(
        "--compare-methods",
        action="store_true",
        help="instead of checking, crash the chosen points by both methods and compare "
        "what each leaves (runstore.crashsim.equivalence)",
    )
    parser.add_argument(
        "--faults",
        choices=FAULTS,
        default=None,
        help="instead of process death: powerloss checks every on-disk state a power cut "
        "could leave (runstore.crashsim.powerloss); io fails each durability call with EIO "
        "and ENOSPC (runstore.crashsim.iofaults); all runs both",
    )
    parser.add_argument("--directory", default=None, help="where copies are made")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.lanes is not None and args.lanes < 1:
        parser.error("--lanes must be at least 1")
    with tempfile.TemporaryDirectory(prefix="runstore-crashsim-markers-") as markers:
        return _run(parser, args, markers)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, markers: str) -> int:
    catalog = {**SCENARIOS, **faulty_scenarios(markers)}
    names = args.scenario or list(SCENARIOS)
    unknown = [name for name in names if name not in catalog]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(catalog)}")
    if args.compare_methods:
        suite = run_sweeps(
            [catalog[name] for name in names],
            COMPARE,
            lambda scenario: selector(scenario, args.exhaustive, args.seed, FULL_IN_SUBSET),
            jobs=args.jobs,
            directory=args.directory,
            report=_printer(difference_lines),
            lanes=args.lanes,
        )
        print(suite.summary(), flush=True)
        return exit_status(suite)
    if args.faults is not None:
        return _faults(args, catalog)
    suite = run_suite(
        [catalog[name] for name in names],
        exhaustive=args.exhaustive,
        seed=args.seed,
        jobs=args.jobs,
        directory=args.directory,
        method=args.method,
        report=_printer(),
        lanes=args.lanes,
    )
    if args.profile:
        for line in suite.phases.table("time by phase (trial phases summed over trials)"):
            print(line)
    if suite.mismatches:
        print(f"prefix mismatches (not counted as crashes): {suite.mismatches}")
    print(suite.summary(), flush=True)
    return exit_status(suite)


def _faults(args: argparse.Namespace, catalog: dict[str, Scenario]) -> int:
    """The fault suites (I/O faults first with ``all``); exit status as for process death."""
    if args.faults in ("io", "all") and any(name not in SCENARIOS for name in args.scenario or ()):
        print("the I/O fault sweeps run only the catalog's scenarios", file=sys.stderr)
        return 1
    suites: dict[str, Callable[..., SuiteResult]] = {
        "io": run_io_faults,
        "powerloss": functools.partial(run_powerloss_suite, catalog=catalog),
    }
    done = []
    for family, run in suites.items():
        if args.faults in (family, "all"):
            suite = run(
                args.scenario,
                exhaustive=args.exhaustive,
                seed=args.seed,
                jobs=args.jobs,
                directory=args.directory,
                report=_printer(),
                lanes=args.lanes,
            )
            print(suite.summary(), flush=True)
            done.append(suite)
    return exit_status(*done)


def _printer(
    lines: Callable[[SweepResult], list[str]] = report_lines,
) -> Callable[[SweepResult], None]:
    """Prints a sweep's line and its report ``lines`` as the sweep ends."""

    def report(result: SweepResult) -> None:
        print(result.line(), flush=True)
        for line in lines(result):
            print(line, flush=True)

    return report


if __name__ == "__main__":
    sys.exit(main())
