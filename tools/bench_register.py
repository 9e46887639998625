"""Benchmark: registering a campaign as ``runstore run`` does, the package before the
one-transaction-per-chunk change (one transaction per slot) against this one, side by side.

The campaign is a synthetic file as a user writes it: a candidate grid (``alpha`` x
``loss``: 25 x 4 members) on a problem grid (``seed``), ``repetitions = 10``, one-shot
slots; 10,000 slots (100 x 10 pairs) and 100,000 slots (100 x 100 pairs, the campaign
file's pair limit is 10,000). Each measurement is one child process on a fresh store in a
fresh temporary directory: it loads the campaign file and calls the package's
``runstore.runner.coordinator.register`` (read what is registered, plan every record,
register what is new), as ``run`` does before it starts anything. The child reports the
whole call's time and, separately, the planner's (``resolve`` on the empty store, which
plans every record once). "before" runs the package at ``--before`` (default
``/tmp/before-pkg``, put first on ``PYTHONPATH``), "after" the installed one; the two
alternate, the order flipping every round, and medians are printed.

Printed per size: slots/s end to end for both and their ratio (after / before), then the
after side's split: planning (slots/s of the planner alone) and the rest (the store's
reads, checks and transactions), so it shows where the time goes. The target is 20,000
slots/s at 100,000 slots. Never read the figures as absolute: the machine is shared;
compare the two sides measured together.

Run: ``python tools/bench_register.py [--rounds N] [--sizes 10000,100000]``; the before
side of 100,000 slots takes minutes (``--before-limit`` skips it above a size).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

REPETITIONS: Final = 10
CANDIDATES: Final = 100

CHILD: Final = r"""
import json, sys, time
from runstore import RunStore
from runstore.runner import coordinator
from runstore.runner.campaign_file import load_campaign
from runstore.runner.plan import candidate_id
from runstore.runner.revisions import resolve

campaign_path, store_root = sys.argv[1], sys.argv[2]
campaign = load_campaign(campaign_path)
with RunStore.open(store_root) as store:
    started = time.perf_counter()
    plans, new, _ = coordinator.register(store, campaign)
    total = time.perf_counter() - started
with RunStore.open(store_root + "-plan") as empty:
    held = empty.registered_for([candidate_id(campaign, c) for c in campaign.candidates])
started = time.perf_counter()
resolve(campaign, held, revise=False)
planning = time.perf_counter() - started
print(json.dumps({"slots": len(plans), "new": new, "total": total, "planning": planning}))
"""
"""What one measurement runs: ``register`` on a fresh store, then the planner alone."""


def campaign_text(slots: int) -> str:
    """The campaign file of ``slots`` slots (a multiple of 1,000)."""
    problems = slots // (CANDIDATES * REPETITIONS)
    alphas = ", ".join(str(n) for n in range(CANDIDATES // 4))
    seeds = ", ".join(str(n) for n in range(problems))
    return (
        "[campaign]\n"
        'name = "sweep"\n'
        f"repetitions = {REPETITIONS}\n\n"
        "[[candidates]]\n"
        'name = "sgd"\n'
        'command = ["{python}", "train.py", "{work_dir}"]\n'
        f'grid = {{ alpha = [{alphas}], loss = ["hinge", "log", "huber", "sq"] }}\n\n'
        "[[problems]]\n"
        'name = "data"\n'
        'parameters = { kind = "synthetic" }\n'
        f"grid = {{ seed = [{seeds}] }}\n"
    )


def measure(side: str, before: str, campaign: Path, work: Path) -> dict[str, float]:
    """One child process registering ``campaign`` on a fresh store with ``side``'s package."""
    root = Path(tempfile.mkdtemp(dir=work, prefix=f"{side}-"))
    os.mkdir(f"{root}-plan")
    env = dict(os.environ)
    if side == "before":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [before, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(campaign), str(root)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(f"{root}-plan", ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"the {side} child failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument(
        "--sizes", default="10000,100000", help="slot counts, multiples of 1000 (%(default)s)"
    )
    parser.add_argument("--before", default="/tmp/before-pkg", help="the before package's path")
    parser.add_argument(
        "--before-limit",
        type=int,
        default=None,
        help="measure the before side only up to this many slots (default: every size)",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="runstore-bench-register-") as directory:
        work = Path(directory)
        for slots in sizes:
            campaign = work / f"campaign-{slots}.toml"
            campaign.write_text(campaign_text(slots), encoding="utf-8")
            sides = ["before", "after"]
            if args.before_limit is not None and slots > args.before_limit:
                sides = ["after"]
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
            for round_index in range(args.rounds):
                order = sides if round_index % 2 == 0 else sides[::-1]
                for side in order:
                    runs[side].append(measure(side, args.before, campaign, work))
            report(slots, runs)


def report(slots: int, runs: dict[str, list[dict[str, float]]]) -> None:
    def median(side: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[side])

    for side, results in runs.items():
        registered = {int(run["new"]) for run in results}
        if registered != {slots}:
            raise SystemExit(f"{side} registered {registered} slots, not {slots}")
    after = slots / median("after", "total")
    print(f"{slots:,} slots ({len(runs['after'])} rounds, medians)")
    if "before" in runs:
        before = slots / median("before", "total")
        print(f"  before (one transaction per slot): {before:10,.0f} slots/s")
        print(f"  after  (one per 5,000-slot chunk): {after:10,.0f} slots/s")
        print(f"  ratio after/before: {after / before:.1f}x")
    else:
        print(f"  after  (one per 5,000-slot chunk): {after:10,.0f} slots/s (before skipped)")
    planning = median("after", "planning")
    rest = median("after", "total") - planning
    print(
        f"  after, split: planning {planning:.2f} s ({slots / planning:,.0f} slots/s), "
        f"store {rest:.2f} s ({slots / rest:,.0f} slots/s)"
    )
    print(f"  target 20,000 slots/s end to end: {'met' if after >= 20_000 else 'not met'}")


if __name__ == "__main__":
    main()
