"""Benchmark: crash points per second of the crash laboratory, side by side in one run.

By default, the campaigns: the default campaign (``python -m runstore.crashsim``, the
sampled one the test command runs) and, with ``--exhaustive``, the exhaustive one
(``--exhaustive``), each run as a user runs it, in a subprocess, by two sides in
alternating order across ``--rounds`` (default 3): this checkout (``new``) and, with
``--old PATH``, another checkout's package (a directory holding ``runstore/`` importable
as the package, e.g. ``/tmp/before-pkg``: ``PYTHONPATH`` puts it first), else this
checkout with its sweeps one after another (``--lanes 1``, what the laboratory did before
it ran sweeps side by side). Each run's summary line gives its points (``crashes=``) and
seconds; the tool prints per campaign and side the median points per second and seconds,
and the median of the per-round ratios new / other with their min-max. Any run that exits
non-zero (a failure or mismatch) stops the benchmark with exit status 1.

``--methods`` instead times the two crash methods per scenario (``--scenario``,
repeatable; default: one of each kind, a writer operation, a publication and a recovery):
each scenario's sweep over every step boundary by the kill method (a process killed per
point) and by the image method (one execution, photographed at each point, each distinct
photograph checked once), alternating, and prints the ratio image / kill; with ``--old``
also the other checkout's kill method, as a "before" column. The old checkout may predate
the sweep driver (``runstore.crashsim.sweep``): its
``runstore.crashsim.campaign.run_campaign`` is called then, with its default method.

Never read these figures as absolute: the machine is shared; compare the sides measured
together. Run: ``python tools/bench_crashsim.py [--old PATH] [--exhaustive] [--rounds N]``
or ``python tools/bench_crashsim.py --methods [--scenario NAME] [--old PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.suite import METHODS
from runstore.crashsim.suite import default_directory
from runstore.crashsim.suite import default_jobs
from runstore.crashsim.suite import steps_only
from runstore.crashsim.sweep import run_sweep

DEFAULT_SCENARIOS = ("commit_accepted", "publish_finalization_accepted", "recover_expired_claim")

_OLD = """
import json, os, sys
import runstore.crashsim
from runstore.crashsim.scenarios import SCENARIOS
scenario, jobs, directory = SCENARIOS[sys.argv[1]], int(sys.argv[2]), sys.argv[3] or None
steps = lambda ps: [p.k for p in ps if p.op_index > 0]
# Before the sweep driver (by the package's own files: an editable install of this checkout
# would supply runstore.crashsim.sweep to any package on the path).
folders = runstore.crashsim.__path__
if any(os.path.isfile(os.path.join(folder, "campaign.py")) for folder in folders):
    from runstore.crashsim.campaign import run_campaign
    result = run_campaign(scenario, steps, jobs=jobs, directory=directory)
    checked = result.crashes
else:
    from runstore.crashsim.kill import KILL
    from runstore.crashsim.sweep import run_sweep
    result = run_sweep(scenario, steps, method=KILL, jobs=jobs, directory=directory)
    checked = result.checked
bad = len(result.failures) + len(result.mismatches) + (1 if result.problem else 0)
print(json.dumps([checked, result.seconds, bad]))
"""


def _old(path: str, scenario: str, jobs: int, directory: str | None) -> tuple[int, float]:
    env = {**os.environ, "PYTHONPATH": path}
    completed = subprocess.run(
        [sys.executable, "-c", _OLD, scenario, str(jobs), directory or ""],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    crashes, seconds, bad = json.loads(completed.stdout.strip().splitlines()[-1])
    if bad:
        raise SystemExit(f"the old kill method found {bad} problems in {scenario}")
    return int(crashes), float(seconds)


SUMMARY = re.compile(r"crashes=(\d+) .*seconds=([\d.]+) points_per_second=([\d.]+)$")
CAMPAIGNS: dict[str, tuple[str, ...]] = {"default": (), "exhaustive": ("--exhaustive",)}


def campaign(arguments: tuple[str, ...], env: dict[str, str]) -> tuple[int, float]:
    """Run ``python -m runstore.crashsim ARGUMENTS`` with ``env``; its points and seconds."""
    completed = subprocess.run(
        [sys.executable, "-m", "runstore.crashsim", *arguments],
        env={**os.environ, **env},
        cwd="/",
        capture_output=True,
        text=True,
    )
    lines = completed.stdout.strip().splitlines()
    found = SUMMARY.search(lines[-1]) if lines else None
    if completed.returncode != 0 or found is None:
        tail = "\n".join([*lines[-5:], *completed.stderr.strip().splitlines()[-5:]])
        raise SystemExit(f"{' '.join(arguments) or 'the default campaign'} failed:\n{tail}")
    return int(found.group(1)), float(found.group(2))


def campaigns(args: argparse.Namespace) -> int:
    """Each campaign by both sides, alternating, and the ratios (the default mode)."""
    jobs = ("--jobs", str(args.jobs))
    if args.old:
        other = ("old", jobs, {"PYTHONPATH": args.old})
    else:
        other = ("1 lane", (*jobs, "--lanes", "1"), {})
    sides = (other, ("new", jobs, {}))
    for name in ["default", *(["exhaustive"] if args.exhaustive else [])]:
        rates: dict[str, list[float]] = {side[0]: [] for side in sides}
        seconds: dict[str, list[float]] = {side[0]: [] for side in sides}
        points: dict[str, int] = {}
        for round_ in range(args.rounds):
            for label, extra, env in sides if round_ % 2 == 0 else sides[::-1]:
                crashes, spent = campaign((*CAMPAIGNS[name], *extra), env)
                points[label] = crashes
                rates[label].append(crashes / spent)
                seconds[label].append(spent)
        print(f"{name} campaign: jobs={args.jobs}, rounds={args.rounds}")
        for label, _, _ in sides:
            rate, spent = statistics.median(rates[label]), statistics.median(seconds[label])
            print(
                f"  {label:<6} points {points[label]:5d} points/s {rate:7.1f} seconds {spent:6.1f}"
            )
        ratios = [n / o for n, o in zip(rates["new"], rates[other[0]], strict=True)]
        print(
            f"  new/{other[0]} points/s ratio {statistics.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", action="store_true", help="time the two crash methods")
    parser.add_argument("--exhaustive", action="store_true", help="also the exhaustive campaign")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--old", default=None, help="a directory holding an older runstore/")
    args = parser.parse_args()
    return methods(args) if args.methods else campaigns(args)


def methods(args: argparse.Namespace) -> int:
    """The two crash methods per scenario (``--methods``)."""
    directory = default_directory()
    for name in args.scenario or DEFAULT_SCENARIOS:
        rates: dict[str, list[float]] = {method: [] for method in METHODS}
        checks: dict[str, list[float]] = {method: [] for method in METHODS}
        old: list[float] = []
        points = 0
        for round_ in range(args.rounds):
            order = tuple(METHODS) if round_ % 2 == 0 else tuple(reversed(METHODS))
            for method in order:
                result = run_sweep(
                    SCENARIOS[name],
                    steps_only,
                    method=METHODS[method],
                    jobs=args.jobs,
                    directory=directory,
                )
                if result.problem or result.failures or result.mismatches:
                    print(f"{name} ({method}) found problems: {result.problem}", file=sys.stderr)
                    return 1
                points = result.checked
                rates[method].append(result.checked / result.seconds)
                checks[method].append(result.images / result.seconds)
            if args.old:
                crashes, seconds = _old(args.old, name, args.jobs, directory)
                old.append(crashes / seconds)
        ratios = [i / k for i, k in zip(rates["image"], rates["kill"], strict=True)]
        print(f"{name}: {points} step boundaries, jobs={args.jobs}, rounds={args.rounds}")
        for method in METHODS:
            print(
                f"  {method:<5} points/s {statistics.median(rates[method]):7.1f}  "
                f"checks/s {statistics.median(checks[method]):6.1f}"
            )
        print(
            f"  image/kill ratio {statistics.median(ratios):.2f} "
            f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
        )
        if old:
            versus = [i / o for i, o in zip(rates["image"], old, strict=True)]
            print(
                f"  old   points/s {statistics.median(old):7.1f}  image/old ratio "
                f"{statistics.median(versus):.2f} (min {min(versus):.2f}, max {max(versus):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
