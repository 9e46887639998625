"""Benchmark: ``runstore run`` of trivial slots against GNU ``parallel --joblog`` running the
same command, side by side in one run.

The worker is as cheap as a valid one gets: ``/bin/sh worker.sh``, which writes
``{"metrics":{"x":1}}`` to ``$RUNSTORE_OUTPUT_DIR/result.json``. For each ``--slots`` count
(default ``300,3000``) and ``--jobs`` count (default ``2,8``), each round (``--rounds``,
default 3) times, in an order that alternates between rounds, as whole commands:

- **runstore**: ``python -m runstore.cli run campaign.toml --store <fresh> --init -j J
  --json`` (one candidate, one problem, ``repetitions`` = slots: every slot a one-shot
  measurement; over 1,000 slots, a grid of problems with 1,000 repetitions or fewer
  each), its output discarded; registration, recovery of nothing, every attempt's
  durable lifecycle and the summary included, as a user runs it;
- **old** (with ``--old PATH``): the same command with ``PATH`` first on ``PYTHONPATH`` (a
  directory holding another checkout's package as ``runstore/``), the "before" column;
- **parallel**: ``parallel -j J --joblog <log> 'RUNSTORE_OUTPUT_DIR=out/{} /bin/sh
  worker.sh' ::: 1..N``, the output directories made beforehand, untimed (what GNU parallel
  users do for a resumable batch: ``--joblog`` is what ``--resume`` reads).

Prints each side's median seconds and slots per second, and the ratio of runstore's speed
to parallel's (parallel's median time over runstore's: at least 0.7 with ``-j 2`` and 1.0
with ``-j 8`` is the target). GNU parallel is installed from Debian's packages when it is
missing (``apt-get install -y parallel``). Never read these figures as absolute: the
machine is shared; compare the sides measured together. Run:
``python tools/bench_trivial.py [--slots 300] [--jobs 2] [--rounds 3] [--old DIR]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MAX_REPETITIONS = 1000
"""A campaign's most repetitions: more slots are that many problems (a grid) of fewer."""

WORKER = 'printf \'{"metrics":{"x":1}}\' > "$RUNSTORE_OUTPUT_DIR/result.json"\n'

CAMPAIGN = """[campaign]
name = "trivial"
timeout_seconds = 60
lease_seconds = 30
repetitions = {slots}
seed = 1

[metrics]
x = {{ direction = "lower", unit = "1" }}

[[candidates]]
name = "sh"
command = ["/bin/sh", "worker.sh"]
files = ["worker.sh"]

[[problems]]
name = "p"
grid = {{ n = {grid} }}
"""


def ensure_parallel() -> str:
    found = shutil.which("parallel")
    if found:
        return found
    print("GNU parallel is missing: apt-get install -y parallel", flush=True)
    subprocess.run(["apt-get", "install", "-y", "parallel"], check=True, capture_output=True)
    found = shutil.which("parallel")
    if not found:
        raise SystemExit("GNU parallel could not be installed")
    return found


def timed(argv: list[str], cwd: str, env: dict[str, str] | None = None) -> float:
    began = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    return time.perf_counter() - began


def runstore_side(
    folder: str, slots: int, jobs: int, old: str | None, serial: int
) -> tuple[list[str], dict[str, str]]:
    store = os.path.join(folder, f"store-{'old' if old else 'new'}-{slots}-{jobs}-{serial}")
    env = dict(os.environ)
    if old:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (old, env.get("PYTHONPATH"))))
    argv = [sys.executable, "-m", "runstore.cli", "run", "campaign.toml", "--store", store]
    return [*argv, "--init", "-j", str(jobs), "--json"], env


def measure(
    folder: str, slots: int, jobs: int, rounds: int, old: str | None
) -> dict[str, list[float]]:
    problems = -(-slots // MAX_REPETITIONS)
    if slots % problems:
        raise SystemExit(f"--slots {slots}: over {MAX_REPETITIONS}, give a multiple of {problems}")
    with open(os.path.join(folder, "campaign.toml"), "w") as file:
        file.write(CAMPAIGN.format(slots=slots // problems, grid=list(range(problems))))
    parallel = ensure_parallel()
    sides = ["runstore", "parallel", *(["old"] if old else [])]
    times: dict[str, list[float]] = {side: [] for side in sides}
    for serial in range(rounds):
        order = sides if serial % 2 == 0 else list(reversed(sides))
        for side in order:
            if side == "parallel":
                out = os.path.join(folder, "out")
                shutil.rmtree(out, ignore_errors=True)
                for number in range(1, slots + 1):
                    os.makedirs(os.path.join(out, str(number)))
                log = os.path.join(folder, f"joblog-{slots}-{jobs}-{serial}")
                command = "RUNSTORE_OUTPUT_DIR=out/{} /bin/sh worker.sh"
                argv = [parallel, "-j", str(jobs), "--joblog", log, command, ":::"]
                argv += [str(n) for n in range(1, slots + 1)]
                times[side].append(timed(argv, folder))
            else:
                argv, env = runstore_side(
                    folder, slots, jobs, old if side == "old" else None, serial
                )
                times[side].append(timed(argv, folder, env))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="300,3000")
    parser.add_argument("--jobs", default="2,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", default=None, help="a directory holding an older runstore/")
    parser.add_argument("--dir", default=None, help="where the stores go (default: temp)")
    options = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    folder = tempfile.mkdtemp(prefix="runstore-bench-trivial-", dir=options.dir)
    try:
        with open(os.path.join(folder, "worker.sh"), "w") as file:
            file.write(WORKER)
        print(f"{'slots':>6} {'jobs':>4} {'side':>9} {'median s':>9} {'slots/s':>8}  ratio")
        for slots in (int(n) for n in options.slots.split(",")):
            for jobs in (int(n) for n in options.jobs.split(",")):
                times = measure(folder, slots, jobs, options.rounds, options.old)
                base = statistics.median(times["parallel"])
                for side, values in times.items():
                    median = statistics.median(values)
                    ratio = "" if side == "parallel" else f"  {base / median:.2f}x parallel"
                    rate = slots / median
                    print(f"{slots:>6} {jobs:>4} {side:>9} {median:>9.2f} {rate:>8.1f}{ratio}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
