"""``python -m runstore.crashsim [--exhaustive] [--scenario NAME] [--seed N] [--jobs N]
[--method image|kill] [--profile] [--compare-methods] [--faults io|powerloss|all]``.

Rules of this file: argument parsing and printing only; the work is
:func:`runstore.crashsim.suite.run_suite`. Prints one line per campaign, every failure and
prefix mismatch in full, with ``--profile`` the table of where the time went, and ends
with the summary line ``scenarios=A boundaries=B crashes=C images=I failures=D seconds=E
points_per_second=F``. With ``--faults``, the fault campaigns instead, each ending with
its summary line: ``faults=io scenarios=A points=B states=C unfired=D failures=E
seconds=F`` (:mod:`runstore.crashsim.iofaults`) and ``faults=powerloss scenarios=A cuts=B
states=C failures=D seconds=E`` (:mod:`runstore.crashsim.powerloss`). Exit status: 0
when all is well, 1 on any failure, 2 when there is no failure but some crash point
changed its execution path (a prefix mismatch, which cannot count as tested).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from runstore.crashsim.campaign import METHODS, CampaignResult
from runstore.crashsim.equivalence import compare_methods
from runstore.crashsim.faulty import FAULTY_NAMES, faulty_scenarios
from runstore.crashsim.iofaults import io_failure_lines, run_io_faults, unfired_lines
from runstore.crashsim.powerloss import PowerLossResult
from runstore.crashsim.powerloss_suite import failure_lines as powerloss_failure_lines
from runstore.crashsim.powerloss_suite import run_powerloss_suite
from runstore.crashsim.scenarios import FULL_IN_SUBSET, SCENARIOS, Scenario
from runstore.crashsim.suite import (
    default_directory,
    default_jobs,
    failure_lines,
    run_suite,
    selector,
)

FAULTS = ("io", "powerloss", "all")


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
    parser.add_argument(
        "--jobs", type=int, default=None, help="trials run at once (default: the core count)"
    )
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="image",
        help="image: run each scenario once and check a copy of the store at each point "
        "(default); kill: one process killed with os._exit per point",
    )
    parser.add_argument(
        "--profile", action="store_true", help="print where the campaigns' time went"
    )
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
    with tempfile.TemporaryDirectory(prefix="runstore-crashsim-markers-") as markers:
        return _run(parser, args, markers)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace, markers: str) -> int:
    catalog = {**SCENARIOS, **faulty_scenarios(markers)}
    names = args.scenario or list(SCENARIOS)
    unknown = [name for name in names if name not in catalog]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; known: {', '.join(catalog)}")

    if args.compare_methods:
        return _compare(args, [catalog[name] for name in names])
    if args.faults is not None:
        return _faults(args, catalog)

    def report(result: CampaignResult) -> None:
        print(
            f"{result.scenario}: boundaries={result.boundaries} crashes={result.crashes} "
            f"failures={len(result.failures) + (1 if result.problem else 0)} "
            f"mismatches={len(result.mismatches)} images={result.images} "
            f"seconds={result.seconds:.1f} "
            f"points_per_second={result.crashes / max(result.seconds, 1e-9):.1f}",
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
        method=args.method,
        report=report,
    )
    if args.profile:
        for line in suite.phases.table("time by phase (trial phases summed over trials)"):
            print(line)
    if suite.mismatches:
        print(f"prefix mismatches (not counted as crashes): {suite.mismatches}")
    print(suite.summary(), flush=True)
    if suite.failures:
        return 1
    return 2 if suite.mismatches else 0


def _faults(args: argparse.Namespace, catalog: dict[str, Scenario]) -> int:
    """The fault campaigns; exit status as for process death."""
    failures = mismatches = 0
    if args.faults in ("io", "all"):

        def report_io(result: CampaignResult) -> None:
            fired = sum(r.status in ("ok", "failure") for r in result.results)
            print(
                f"{result.scenario}: boundaries={result.boundaries} "
                f"points={len(result.results)} states={fired} "
                f"failures={len(result.failures) + len(result.mismatches)} "
                f"seconds={result.seconds:.1f}",
                flush=True,
            )
            for line in [*io_failure_lines(result), *unfired_lines(result)]:
                print(line, flush=True)

        names = args.scenario
        if names and any(name not in SCENARIOS for name in names):
            print("the I/O fault campaigns run only the catalog's scenarios", file=sys.stderr)
            return 1
        io = run_io_faults(
            names,
            exhaustive=args.exhaustive,
            seed=args.seed,
            jobs=args.jobs,
            directory=args.directory,
            report=report_io,
        )
        print(io.summary(), flush=True)
        failures += io.failures
    if args.faults in ("powerloss", "all"):

        def report(result: PowerLossResult) -> None:
            print(
                f"{result.scenario}: boundaries={result.boundaries} cuts={result.cuts} "
                f"states={result.states} failures={len(result.failures)} "
                f"seconds={result.seconds:.1f}",
                flush=True,
            )
            for line in powerloss_failure_lines(result):
                print(line, flush=True)

        suite = run_powerloss_suite(
            args.scenario,
            exhaustive=args.exhaustive,
            seed=args.seed,
            jobs=args.jobs,
            directory=args.directory,
            catalog=catalog,
            report=report,
        )
        print(suite.summary(), flush=True)
        failures += suite.failures
        mismatches += suite.mismatches
    if failures:
        return 1
    return 2 if mismatches else 0


def _compare(args: argparse.Namespace, scenarios: list[Scenario]) -> int:
    started = time.monotonic()
    compared = different = 0
    for scenario in scenarios:
        comparison = compare_methods(
            scenario,
            selector(scenario, args.exhaustive, args.seed, FULL_IN_SUBSET),
            jobs=args.jobs or default_jobs(),
            directory=args.directory or default_directory(),
        )
        compared += comparison.compared
        different += len(comparison.differences)
        print(
            f"{scenario.name}: compared={comparison.compared} distinct={comparison.distinct} "
            f"differences={len(comparison.differences)}",
            flush=True,
        )
        for line in comparison.differences:
            print(f"DIFFERENCE scenario={scenario.name} {line}", flush=True)
    seconds = time.monotonic() - started
    print(
        f"scenarios={len(scenarios)} compared={compared} differences={different} "
        f"seconds={seconds:.1f}"
    )
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
