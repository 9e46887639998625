"""Benchmark: ``export`` and ``validate`` take time linear in the store's size and memory
bounded by it (streamed, never loaded whole).

The issue's target: a store of 100,000 attempts against one of 10,000, each operation's
median time ratio at most 12 (10x the work, with room for noise); the peak-RSS ratio is
printed beside it (bounded memory keeps it near 1).

Fixtures: synthetic stores from ``synth.synthesize`` (tools/synth.py) (one-shot slots
run to ``Accepted``, every tenth after a failed attempt; the rows the runner writes and
real artifact directories), one per ``--sizes`` entry (default ``10000,100000`` attempts),
built untimed under ``--cache DIR`` as ``DIR/attempts-<n>`` and reused by later runs (a
store counts as built once ``DIR/attempts-<n>.json``, its summary, exists beside it);
without ``--cache`` they go to a temporary directory removed at the end.

Measured, each in a fresh subprocess (its peak RSS is its ``VmHWM``; the time is of the
operation alone, imports excluded): ``export`` (``Snapshot.take`` and
``runstore.inspection.export.export`` into a new directory, removed afterwards),
``validate`` (``validate_store(root, quick=False)``: every artifact byte hashed) and
``validate-quick`` (``quick=True``). ``--rounds`` (default 3) rounds, the order of the sizes
flipping every round. Printed: one line per operation and size (median seconds with
min-max, median peak RSS in MiB), then per operation ``ratio_<large>_vs_<small>`` and
``rss_ratio``. Validate must find nothing on a synthetic store: any finding is printed in
full and makes the exit status 1 (either the synthesizer or validate is wrong).

Run: ``python tools/bench_inspect.py [--cache DIR] [--sizes 10000,100000] [--rounds 3]``;
``--sizes 200,2000`` is a quick check. Never read the figures as absolute: the machine is
shared; compare the sides measured together.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import attrs
from runstore.inspection.export import export
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.validate import validate_store
from synth import synthesize

OPERATIONS = ("export", "validate", "validate-quick")


# --- the child: one operation, measured ----------------------------------------------------


def peak_rss_kib() -> int:
    """This process's peak resident set size (``VmHWM``), in KiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_operation(operation: str, root: str, scratch: str) -> dict[str, object]:
    """Run ``operation`` on the store at ``root`` (an export goes to a new directory under
    ``scratch``); its seconds, findings (validate) and summary."""
    findings: list[object] = []
    started = time.perf_counter()
    if operation == "export":
        with Snapshot.take(root) as snapshot:
            summary = export(snapshot, os.path.join(scratch, "export")).to_json()
    else:
        report = validate_store(root, quick=operation == "validate-quick")
        findings = [finding.to_json() for finding in report.findings]
        summary = {"ok": report.ok, "findings": len(findings)}
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "findings": findings, "summary": summary}


def child(operation: str, root: str) -> None:
    scratch = tempfile.mkdtemp(prefix="bench-inspect-")
    try:
        measured = run_operation(operation, root, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    measured["peak_rss_kib"] = peak_rss_kib()
    print(json.dumps(measured))


# --- the parent: fixtures, rounds, report --------------------------------------------------


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_rss_mib: float


def measure(operation: str, root: str) -> tuple[Sample, list[object]]:
    """One fresh subprocess running ``operation`` on ``root``."""
    command = [sys.executable, os.path.abspath(__file__), "--child", operation, root]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{operation} on {root} failed:\n{done.stderr}")
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    sample = Sample(measured["seconds"], measured["peak_rss_kib"] / 1024)
    return sample, measured["findings"]


def build(cache: str, attempts: int) -> str:
    """The store of ``attempts`` attempts under ``cache``, synthesized unless already built."""
    root = os.path.join(cache, f"attempts-{attempts}")
    marker = f"{root}.json"
    if os.path.exists(marker) and os.path.isdir(root):
        print(f"reusing {root}", flush=True)
        return root
    shutil.rmtree(root, ignore_errors=True)
    print(f"synthesizing {attempts} attempts into {root} ...", flush=True)
    summary = synthesize(root, attempts)
    with open(marker, "w", encoding="utf-8") as handle:
        json.dump(attrs.asdict(summary), handle)
    print(
        f"synthesized {summary.attempts} attempts ({summary.slots} slots, "
        f"{summary.artifacts} artifacts, {summary.events} events) in {summary.seconds:.1f} s",
        flush=True,
    )
    return root


def label(attempts: int) -> str:
    """``100000`` -> ``100k``; sizes that are not whole thousands stay as they are."""
    return f"{attempts // 1000}k" if attempts % 1000 == 0 else str(attempts)


def median(runs: Sequence[Sample], field: str) -> float:
    return float(statistics.median(getattr(run, field) for run in runs))


def report(samples: dict[tuple[str, int], list[Sample]], sizes: Sequence[int]) -> None:
    for operation in OPERATIONS:
        for attempts in sizes:
            runs = samples[operation, attempts]
            seconds = [run.seconds for run in runs]
            rss = statistics.median(run.peak_rss_mib for run in runs)
            print(
                f"{operation:<15} {attempts:>7} attempts: {statistics.median(seconds):8.2f} s "
                f"(min {min(seconds):.2f}, max {max(seconds):.2f}, {len(runs)} runs), "
                f"peak RSS {rss:7.1f} MiB"
            )
    small, large = min(sizes), max(sizes)
    name = f"ratio_{label(large)}_vs_{label(small)}"
    target = 12 * large / small / 10
    for operation in OPERATIONS:
        ratio = median(samples[operation, large], "seconds") / median(
            samples[operation, small], "seconds"
        )
        rss_ratio = median(samples[operation, large], "peak_rss_mib") / median(
            samples[operation, small], "peak_rss_mib"
        )
        verdict = "ok" if ratio <= target else "OVER TARGET"
        print(
            f"{operation:<15} {name}={ratio:.2f} (target <= {target:g}: {verdict}) "
            f"rss_ratio={rss_ratio:.2f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", help="build (or reuse) the stores here")
    parser.add_argument("--sizes", default="10000,100000", help="attempts per store")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("OPERATION", "ROOT"), help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child is not None:
        child(*arguments.child)
        return 0
    sizes = sorted({int(size) for size in arguments.sizes.split(",")})
    if len(sizes) != 2 or arguments.rounds < 1:
        parser.error("--sizes takes two different sizes and --rounds at least 1")
    cache = arguments.cache or tempfile.mkdtemp(prefix="bench-inspect-")
    os.makedirs(cache, exist_ok=True)
    try:
        roots = {attempts: build(cache, attempts) for attempts in sizes}
        return run_rounds(roots, sizes, arguments.rounds)
    finally:
        if arguments.cache is None:
            shutil.rmtree(cache, ignore_errors=True)


def run_rounds(roots: dict[int, str], sizes: Sequence[int], rounds: int) -> int:
    """Measure every operation on every store, ``rounds`` times; 1 when validate found
    anything on a synthetic store."""
    samples: dict[tuple[str, int], list[Sample]] = {}
    failed = False
    for number, operation in itertools.product(range(rounds), OPERATIONS):
        for attempts in sizes if number % 2 == 0 else list(reversed(sizes)):
            sample, findings = measure(operation, roots[attempts])
            samples.setdefault((operation, attempts), []).append(sample)
            print(
                f"  round {number + 1} {operation} {attempts}: {sample.seconds:.2f} s, "
                f"{sample.peak_rss_mib:.1f} MiB",
                flush=True,
            )
            if findings:
                failed = True
                print(
                    f"!!! {operation} found {len(findings)} findings on the synthetic store "
                    f"of {attempts} attempts (the synthesizer or validate is wrong):"
                )
                for finding in findings:
                    print(f"!!!   {json.dumps(finding)}")
    report(samples, sizes)
    if failed:
        print("!!! validate reported findings on a synthetic store: see above")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
