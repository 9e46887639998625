"""Benchmark: the runner's per-slot lifecycle against a bare stdlib replay of its durable mix.

One **lifecycle** is what the coordinator does for one slot whose worker is a no-op, in
process, with the real clock (``time.time_ns``): its share of ``coordinator.register``
(the timed rounds register one campaign of ``--slots`` new candidates at once, as ``run``
registers a campaign: one read of what is already registered, then the slots' rows in
chunks; one-shot measurement slots, one problem, no input files), ``attempt.start`` (one
write batch: reserve, advance to executing) and ``attempt.finish`` with the ``WorkResult``
a worker that only wrote
``result.json`` gives (exit 0, empty logs, a ``result.json`` distinct per lifecycle so
that every observation artifact is a new object, and no environment document: a run
publishes its environment artifact once, at its first attempt, and a later attempt adds
only its ``environment`` reference row, which this mix leaves out; SPEC.md section 15.4,
"What one accepted result costs"): ``publish_artifact`` of the observation, one write
batch of validating, ``begin_finalization`` and ``register_observation``,
``publish_finalization`` of ``Accepted`` with the attempt artifact. ``--path
run_campaign`` instead runs each one-slot campaign through ``coordinator.run_campaign``
with an executor whose handles are done at once (adds the scheduler's progress reads and
the summary).

**The mix.** One more lifecycle (a one-slot campaign), untimed, runs with both seams'
observers installed (``runstore.sql.install_observer`` and
``runstore.durable.install_observer``, restored after) and records, in order, every
transaction (its ``BEGIN`` statement, its statement count and the WAL frames its
``COMMIT`` wrote) and every durability operation (kind,
target relative to the store root, and for a file fsync the file's size). Its
registration read is one per lifecycle, where the timed rounds have one per round: the
replay therefore does one read-only transaction per lifecycle more than the store. Every durable
operation kind ``runstore.durable`` has is counted: ``fsync_file`` (also ``fsync_fd``),
``fsync_dir``, ``rename_noreplace``, ``create_directory``, ``mkdir`` and ``unlink`` (each
with a parent fsync inside), ``remove_tree``, ``flock_shared``/``flock_exclusive``,
``funlock``, ``posix_lock``/``posix_unlock``. **WAL frames** are counted from SQLite's
own WAL index, not from the ``-wal`` file's size (the file is reused from its start after
a checkpoint, so its size says nothing once it is full): after each ``COMMIT`` the first
header of ``run.sqlite3-shm`` is read with a plain ``read`` (``mxFrame``, the last valid
frame, at offset 16, and the two salts at offset 32, native byte order); the commit wrote
``mxFrame - previous mxFrame`` frames, or ``mxFrame`` when the salts changed (the WAL was
restarted after a checkpoint, and numbering began again at 1). WAL bytes are frames x
(24 + page size). The store's settings are not touched: its ``wal_autocheckpoint`` stays
at SQLite's default, so its checkpoints (and their database-file fsyncs) are part of what
is timed, as the replay's are.

**The replay** runs that exact sequence with bare stdlib calls in a separate root on the
same filesystem (a temporary directory under ``--dir``, default the system temp dir):
one ``sqlite3`` connection (``isolation_level=None``, ``journal_mode=WAL``,
``synchronous=FULL``, default autocheckpoint) runs, for each recorded transaction, the
same ``BEGIN`` statement and a write producing the same number of WAL frames before
``COMMIT`` (none: one ``SELECT``; one or two: an ``UPDATE`` of one or two one-row
tables, one page each; ``n >= 3``: ``n - 2`` rows of 3,900 bytes appended, one leaf page
each, plus the parent and the header page); every durable operation is the syscall it
stands for: a file fsync creates the file with ``O_EXCL``, writes its recorded size and
``os.fsync``\\ s it; a directory fsync is ``os.open(O_RDONLY | O_DIRECTORY)`` + ``os.fsync``;
a rename is a plain ``os.rename`` (not ``renameat2``: the replay's destination is always
new); ``create_directory`` is ``os.mkdir``; a flock opens (creating) the lock file and
``fcntl.flock``\\ s it (a shared one closed at once, an exclusive one held until the
``remove_tree`` of its directory); ``remove_tree`` is ``shutil.rmtree``. Random names in the
targets (stage tokens, content addresses: runs of 16 or more hex digits) become fresh
names of the same length per replayed lifecycle, made before the timer starts. The
replay's own mix is measured the same way (its WAL frames from its ``-shm``) and printed
next to the store's: the frame targets are met only on average (a B-tree split adds a
page now and then, in the store as in the replay).

**Rounds** (``--rounds``, default 7) each time ``--slots`` lifecycles (default 200) of
the store and ``--slots`` replays, the store first in odd rounds (1st, 3rd, ...) and the
replay first in even ones; no observer is installed while timing. Printed per side: the
median lifecycle/s (and the CPU time of the process per lifecycle, the rest being
waits on the disk); and the ratio store/replay (lifecycle/s) as the median of the
per-round ratios with their min-max. Then the same on a store that already holds
``--big-slots`` (default 50,000) accepted slots, built untimed with
``tools/synth.py`` (the committed state the runner leaves, one in ten slots with
a failed first attempt; its mix is traced again there), against a replay root made like
that store before timing (as many entries in its ``artifacts/`` and a database file of the
same size, so that costs that grow with size on the filesystem's or SQLite's side are paid
by both sides and the ratio shows what the store itself adds), and the ratio of ratios
(big / fresh). Targets: fresh ratio >= 0.8, ratio of ratios >= 0.9;
whether each is met is printed, never asserted (exit status 0 unless the script fails).

``--profile [N]`` adds a ``cProfile`` of N more lifecycles on the fresh store (default
``--slots``): the top 25 functions by cumulative time and by own time. ``--quick``: 4
slots, 2 rounds, a 100-slot big store, for a seconds-long smoke. ``--big-store DIR`` keeps
the synthesized big store in DIR (or reuses the store already there). Never read these
figures as absolute: the machine is shared; compare the sides measured together.
Run: ``python tools/bench_lifecycle.py [--quick] [--profile] [--slots N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field

import synth
from lifecycle_mix import TRACED_REPLAYS
from lifecycle_mix import FsOp
from lifecycle_mix import Mix
from lifecycle_mix import Replay
from lifecycle_mix import Txn
from lifecycle_mix import trace_lifecycle
from lifecycle_store import StoreSide
from runstore.store import store_root

FRESH_TARGET = 0.8
BIG_TARGET = 0.9

# --- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    store_ns: int
    replay_ns: int
    store_first: bool
    store_cpu_ns: int
    replay_cpu_ns: int
    """CPU time of this process (``time.process_time_ns``) during each side."""

    @property
    def ratio(self) -> float:
        return self.replay_ns / self.store_ns  # = store lifecycle/s / replay lifecycle/s


@dataclass
class Result:
    label: str
    slots: int
    rounds: list[Round] = field(default_factory=list)

    def rate(self, values: list[int]) -> float:
        return self.slots / (statistics.median(values) / 1e9)

    @property
    def ratio(self) -> float:
        return statistics.median(r.ratio for r in self.rounds)


def measure(side: StoreSide, replay: Replay, slots: int, rounds: int, label: str) -> Result:
    result = Result(label, slots)
    for number in range(1, rounds + 1):
        store_first = number % 2 == 1
        plans = replay.prepare(slots)
        times: dict[str, tuple[int, int]] = {}
        for name in ("store", "replay") if store_first else ("replay", "store"):
            start, cpu = time.perf_counter_ns(), time.process_time_ns()
            if name == "store":
                side.lifecycles(slots)
            else:
                for plan in plans:
                    replay.run(plan)
            times[name] = (time.perf_counter_ns() - start, time.process_time_ns() - cpu)
        (store, store_cpu), (bare, bare_cpu) = times["store"], times["replay"]
        result.rounds.append(Round(store, bare, store_first, store_cpu, bare_cpu))
    return result


def print_mix(mix: Mix, replay: Replay) -> None:
    counts = mix.counts()
    kb = mix.wal_bytes() / 1024
    print(
        f"  mix per lifecycle (store): {counts.get('commits', 0)} commits"
        f" ({counts.get('commits writing WAL', 0)} writing WAL,"
        f" {counts.get('commits without WAL', 0)} without),"
        f" {counts.get('fsync_file', 0)} file fsyncs, {counts.get('fsync_dir', 0)} dir fsyncs,"
        f" {counts.get('rename_noreplace', 0)} renames,"
        f" {counts.get('WAL frames', 0)} WAL frames = {kb:.1f} KB,"
        f" {mix.statements} SQL statements (BEGIN and COMMIT included)"
    )
    others = {
        k: v
        for k, v in counts.items()
        if k
        not in (
            "commits",
            "commits writing WAL",
            "commits without WAL",
            "WAL frames",
            "fsync_file",
            "fsync_dir",
            "rename_noreplace",
        )
    }
    shown = ", ".join(f"{v} {k}" for k, v in sorted(others.items())) or "none"
    print(f"  other durable operations (store): {shown}; rollbacks {mix.other_transactions}")
    sizes = [s.size for s in mix.steps if isinstance(s, FsOp) and s.operation == "fsync_file"]
    print(f"  fsynced file sizes (bytes): {sizes}")
    frames = [s.frames for s in mix.steps if isinstance(s, Txn)]
    print(f"  WAL frames per transaction, in order: {frames}")
    seen, replay_frames = replay.traced()
    replay_kb = replay_frames * (24 + mix.page_size) / 1024
    print(
        f"  mix per lifecycle (replay, measured, mean of {TRACED_REPLAYS}):"
        f" {seen.get('txn', 0):g} commits, {seen.get('fsync_file', 0):g} file fsyncs,"
        f" {seen.get('fsync_dir', 0):g} dir fsyncs, {seen.get('rename_noreplace', 0):g} renames,"
        f" {replay_frames:.1f} WAL frames = {replay_kb:.1f} KB,"
        f" {seen.get('statements', 0):g} SQL statements"
    )


def report(result: Result, mix_line: Callable[[], None]) -> None:
    store = result.rate([r.store_ns for r in result.rounds])
    replay = result.rate([r.replay_ns for r in result.rounds])
    ratios = [r.ratio for r in result.rounds]
    print(f"{result.label}: {len(result.rounds)} rounds of {result.slots} lifecycles")
    mix_line()
    for name, rate, cpu in (
        ("store ", store, [r.store_cpu_ns for r in result.rounds]),
        ("replay", replay, [r.replay_cpu_ns for r in result.rounds]),
    ):
        print(
            f"  {name} median {rate:8.1f} lifecycle/s ({1e3 / rate:.2f} ms per lifecycle,"
            f" of which CPU {statistics.median(cpu) / 1e6 / result.slots:.2f} ms)"
        )
    print(
        f"  ratio store/replay {result.ratio:.3f}"
        f" (per round min-max {min(ratios):.3f}-{max(ratios):.3f})"
    )
    shown = ", ".join(f"{'S' if r.store_first else 'R'} {r.ratio:.3f}" for r in result.rounds)
    print(f"  per round, S = store timed first, R = replay first: {shown}")


def _verdict(value: float, target: float) -> str:
    return "met" if value >= target else "NOT met"


# --- where the time goes --------------------------------------------------------------------


def profile(side: StoreSide, count: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    side.lifecycles(count)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    print(f"cProfile of {count} lifecycles on the fresh store, top 25 by cumulative time:")
    stats.sort_stats("cumulative").print_stats(25)
    print(f"cProfile of {count} lifecycles on the fresh store, top 25 by own time:")
    stats.sort_stats("tottime").print_stats(25)


# --- main -----------------------------------------------------------------------------------


def big_store(path: str | None, work: str, slots: int) -> tuple[str, bool]:
    """A store holding ``slots`` accepted slots (synthesized; ``path`` reused when it holds
    one). Returns its root and whether this run built it."""
    root = path if path is not None else os.path.join(work, "big")
    if os.path.exists(os.path.join(root, store_root.DATABASE_NAME)):
        print(f"big store: reusing {root}")
        return root, False
    attempts = slots + -(-slots // synth.RETRY_EVERY)
    assert len(synth.slot_plans(attempts)) == slots, attempts
    summary = synth.synthesize(root, attempts)
    print(
        f"big store: synthesized {summary.slots} accepted slots ({summary.attempts} attempts,"
        f" {summary.artifacts} artifacts, {summary.events} events) in {summary.seconds:.1f} s"
    )
    return root, True


def run_side(
    label: str,
    root: str,
    work: str,
    options: argparse.Namespace,
    warmups: int,
    resemble: bool = False,
) -> tuple[Result, StoreSide]:
    side = StoreSide(root, options.path)
    for _ in range(warmups):
        side.lifecycle()  # the first publication makes artifacts/ and the recovery lock
    mix, wal = trace_lifecycle(side.root, side.lifecycle)
    side.held.append(wal)
    like = root if resemble else None
    replay = Replay(os.path.join(work, f"replay-{label.split()[0]}"), mix, like)
    if replay.resembled is not None:
        entries, size = replay.resembled
        print(
            f"  replay made like the store: {entries} entries in artifacts/, {size} byte database"
        )
    replay.run(replay.prepare(1)[0])  # its first lifecycle: page cache, table pages
    result = measure(side, replay, options.slots, options.rounds, label)
    report(result, lambda: print_mix(mix, replay))
    replay.close()
    return result, side


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--slots", type=int, default=None, help="lifecycles per round (200)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (7; 2 quick)")
    parser.add_argument("--big-slots", type=int, default=None, help="big store slots (50000)")
    parser.add_argument("--big-store", default=None, help="keep (or reuse) the big store here")
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    parser.add_argument(
        "--path",
        choices=("attempt", "run_campaign"),
        default="attempt",
        help="drive register + attempt.start/finish (default) or coordinator.run_campaign",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument(
        "--profile", type=int, nargs="?", const=0, default=None, help="profile N lifecycles"
    )
    options = parser.parse_args(argv)
    quick = options.quick
    options.slots = options.slots if options.slots is not None else (4 if quick else 200)
    options.rounds = options.rounds if options.rounds is not None else (2 if quick else 7)
    big_slots = options.big_slots if options.big_slots is not None else (100 if quick else 50_000)
    if options.slots < 1 or options.rounds < 1 or big_slots < 1:
        parser.error("slots, rounds and big slots must be positive")

    work = tempfile.mkdtemp(prefix="bench-lifecycle-", dir=options.dir)
    print(
        f"bench_lifecycle: {work}, {os.cpu_count()} CPUs, SQLite {sqlite3.sqlite_version},"
        f" path {options.path}, targets: fresh ratio >= {FRESH_TARGET},"
        f" big/fresh >= {BIG_TARGET}"
    )
    built = False
    big_root = None
    try:
        fresh, side = run_side("fresh store", os.path.join(work, "fresh"), work, options, 2)
        if options.profile is not None:
            profile(side, options.profile or options.slots)
        side.close()
        big_root, built = big_store(options.big_store, work, big_slots)
        big, side = run_side(
            f"big store ({big_slots} slots)", big_root, work, options, 1, resemble=True
        )
        side.close()
        print(
            f"fresh ratio {fresh.ratio:.3f}, target >= {FRESH_TARGET}:"
            f" {_verdict(fresh.ratio, FRESH_TARGET)}"
        )
        quotient = big.ratio / fresh.ratio
        print(
            f"big ratio {big.ratio:.3f}; big/fresh {quotient:.3f}, target >= {BIG_TARGET}:"
            f" {_verdict(quotient, BIG_TARGET)}"
        )
    finally:
        keep = options.big_store is not None and big_root is not None
        if keep and built:
            print(f"big store kept at {big_root}")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
