"""Benchmark: ``RunStore.publish_artifact`` against raw SHA-256 plus fsync of the same bytes.

Two workloads: one large file (``--large-mib``, default 256 MiB, named ``data.bin``) and many
small files (``--files``, default 10,000 files of ``--small-bytes`` each, spread over 100
directories under ``data/``). Both payload names sort before ``manifest.json``, so the
publisher reads each byte once (a file sorting after it is read twice; ``--late-names``
renames the payloads ``zdata...`` to measure that path instead).

Method, per round (``--rounds``, default 5), in one process and one temporary directory
(under ``--dir``, default the system temp dir) that holds both the store and the payloads,
so everything is on one filesystem:

1. Prepare, untimed: write the payload with *new* bytes (each 1 MiB block starts with the
   round and block numbers, so no round can reuse an identical object already published),
   ``os.sync()``, one untimed baseline pass (read, hash, fsync every file), ``os.sync()``:
   the bytes are on disk and clean in the page cache, the same state for both sides. The
   untimed pass matters: under ``relatime`` the first read of a new file updates its atime,
   dirtying the inode, and whichever side read first would pay a journal commit in every
   file's fsync. Timings therefore show the CPU and syscall cost of the pipeline (where
   its overhead is most visible), not the cost of writing back dirty pages.
2. Two measurements of the *same files*, in alternating order across rounds (even rounds
   publish first) to spread drift and noise over both sides:

   - publish: ``store.publish_artifact`` whose ``populate`` only ``os.rename``\\ s the prepared
     file or directory into the stage. The callback's own time (a single rename) is
     measured too and subtracted, so the figure is the publisher's work alone: stage and
     lease transaction, scan, hash and fsync every file, fsync directories, manifest, tree
     hash, no-replace rename, parent syncs and the final transaction.
   - baseline: for every file in path order, ``os.open``, ``os.read`` in the publisher's
     chunk size (``runstore.store.publication.objects.CHUNK``) into one ``hashlib.sha256``,
     ``os.fsync``, ``os.close``; on the prepared file before the publish or on the published copy
     after it (a rename moves the inode, so the bytes and their cache state are the same).

The ratio is baseline time / publish time (1.0 means publishing costs no more than hashing
and syncing the bytes by hand; the target for the large file is >= 0.8). Printed per
workload: medians of both sides, the ratio of the medians and the min-max of the per-round
ratios, MB/s (10^6 bytes per second of payload), and memory: the growth of the process's
peak RSS (``ru_maxrss``) over the timed rounds, and the peak of Python allocations
(``tracemalloc``) during one extra, untimed publish, both of which must stay far below the
payload size (chunked reads, no whole-file reads).

``--profile`` adds, for the large file, a one-off ``cProfile`` of a publish (top 10 by
cumulative time) and a side-by-side breakdown of raw pipelines over the same bytes (read
only, read + one SHA-256, read + two SHA-256 in sequence as the publisher does for the file
digest and the tree transcript, read + two SHA-256 overlapped on two threads).

``--quick`` uses tiny sizes and two rounds, to check the script runs in seconds. Never read
these figures as absolute: the machine is shared; compare the sides measured together.
Run: ``python tools/bench_publish.py [--quick] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import itertools
import os
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass

from runstore import ArtifactKind
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import RunStore
from runstore.receipts import OwnedAttempt
from runstore.store.publication.objects import CHUNK
from runstore.testing import fixtures as fx

_LEASE_EXPIRY_NS = 2**62
_HEADER_BYTES = 16


# --- the store side -------------------------------------------------------------------------


class Publisher:
    """A fresh store with one owned, executing attempt that publishes datasets."""

    def __init__(self, root: str) -> None:
        self.store = RunStore.open(root)
        self._ticks = itertools.count(1_000)
        slots = fx.slot_fixture(name="bench")
        self.store.register_one_shot(
            decision=slots.decision,
            run=slots.run,
            attempt_slot=slots.attempt_slot,
            observation_slot=slots.observation_slots[0],
        )
        lease = fx.lease("bench", _LEASE_EXPIRY_NS, fx.OWNER)
        guard = self.store.reserve(slots.slot_id, FirstAttempt(), lease, self.clock())
        for phase in fx.EXECUTION_PATH:
            guard = self.store.advance(guard, phase, self.clock())
        assert guard.state is AttemptState.EXECUTING, guard
        self.guard: OwnedAttempt = guard

    def clock(self) -> int:
        """A strictly increasing fake clock, far below the lease expiry."""
        return next(self._ticks)

    def publish(self, source: str, name: str) -> tuple[int, int, str]:
        """Publish the prepared ``source`` as ``<object>/name`` (moved in by ``populate``).
        Returns (publish ns, populate ns, absolute path of the published object)."""
        populate_ns = 0

        def populate(path: str) -> None:
            nonlocal populate_ns
            start = time.perf_counter_ns()
            os.rename(source, os.path.join(path, name))
            populate_ns += time.perf_counter_ns() - start

        start = time.perf_counter_ns()
        receipt = self.store.publish_artifact(
            self.guard, ArtifactKind.DATASET, populate, self.clock
        )
        elapsed = time.perf_counter_ns() - start
        self.guard = receipt.attempt
        return elapsed, populate_ns, os.path.join(self.store.root, receipt.artifact.path)

    def close(self) -> None:
        self.store.close()


# --- the raw side ---------------------------------------------------------------------------


def raw_hash_and_sync(paths: list[str]) -> str:
    """The baseline: each file read in ``CHUNK`` reads into one SHA-256, then fsynced."""
    digest = hashlib.sha256()
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            while chunk := os.read(fd, CHUNK):
                digest.update(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
    return digest.hexdigest()


def files_under(path: str) -> list[str]:
    """The regular files at or under ``path``, sorted by path."""
    if not os.path.isdir(path):
        return [path]
    found = [
        os.path.join(directory, name) for directory, _, names in os.walk(path) for name in names
    ]
    return sorted(found)


# --- workloads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A payload to publish: ``prepare(round, target)`` writes new bytes at ``target``."""

    label: str
    name: str
    total_bytes: int
    file_count: int
    prepare: Callable[[int, str], None]


def _blocks(round_number: int, size: int, pattern: bytes) -> Iterator[bytes]:
    """``size`` bytes as blocks of at most ``CHUNK``, each headed by (round, block)."""
    index = 0
    while size > 0:
        block = round_number.to_bytes(8, "big") + index.to_bytes(8, "big") + pattern
        yield block[: min(size, CHUNK)]
        size -= CHUNK
        index += 1


def _write(path: str, blocks: Iterator[bytes]) -> None:
    with open(path, "wb") as handle:
        for block in blocks:
            handle.write(block)


def large_workload(size: int, name: str) -> Workload:
    pattern = os.urandom(CHUNK - _HEADER_BYTES)

    def prepare(round_number: int, target: str) -> None:
        _write(target, _blocks(round_number, size, pattern))

    label = f"large file ({size / 2**20:g} MiB)"
    return Workload(label=label, name=name, total_bytes=size, file_count=1, prepare=prepare)


def small_workload(count: int, size: int, name: str) -> Workload:
    pattern = os.urandom(max(size, 0))
    per_directory = max(1, -(-count // 100))

    def prepare(round_number: int, target: str) -> None:
        os.mkdir(target)
        for index in range(count):
            directory = os.path.join(target, f"d{index // per_directory:03d}")
            if index % per_directory == 0:
                os.mkdir(directory)
            header = round_number.to_bytes(8, "big") + index.to_bytes(8, "big")
            _write(os.path.join(directory, f"f{index:05d}.bin"), iter([(header + pattern)[:size]]))

    label = f"{count} files x {size} B"
    return Workload(
        label=label, name=name, total_bytes=count * size, file_count=count, prepare=prepare
    )


# --- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    publish_ns: int
    baseline_ns: int
    publish_first: bool

    @property
    def ratio(self) -> float:
        return self.baseline_ns / self.publish_ns


def _peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Bench:
    def __init__(self, work: str) -> None:
        self.work = work
        os.mkdir(os.path.join(work, "store"))
        os.mkdir(os.path.join(work, "payload"))
        self.publisher = Publisher(os.path.join(work, "store"))
        self._sources = itertools.count()

    def prepare(self, workload: Workload, round_number: int) -> str:
        """New payload bytes at a fresh path, synced to disk (untimed)."""
        source = os.path.join(self.work, "payload", f"{next(self._sources)}")
        workload.prepare(round_number, source)
        os.sync()
        raw_hash_and_sync(files_under(source))  # first read sets atime (relatime): do it here
        os.sync()
        return source

    def one_round(self, workload: Workload, round_number: int, publish_first: bool) -> Round:
        source = self.prepare(workload, round_number)
        baseline_ns = 0
        if not publish_first:
            baseline_ns = self._baseline(files_under(source))
        publish_ns, populate_ns, published = self.publisher.publish(source, workload.name)
        if publish_first:
            baseline_ns = self._baseline(files_under(os.path.join(published, workload.name)))
        publish_ns -= populate_ns
        return Round(publish_ns=publish_ns, baseline_ns=baseline_ns, publish_first=publish_first)

    @staticmethod
    def _baseline(paths: list[str]) -> int:
        start = time.perf_counter_ns()
        raw_hash_and_sync(paths)
        return time.perf_counter_ns() - start

    def traced_publish(self, workload: Workload, round_number: int) -> int:
        """Peak bytes of Python allocations during one untimed publish."""
        source = self.prepare(workload, round_number)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            self.publisher.publish(source, workload.name)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return peak

    def run(self, workload: Workload, rounds: int, first_round: int) -> int:
        rss_before = _peak_rss_kib()
        results = [
            self.one_round(workload, first_round + index, publish_first=index % 2 == 0)
            for index in range(rounds)
        ]
        rss_growth_kib = _peak_rss_kib() - rss_before
        traced_peak = self.traced_publish(workload, first_round + rounds)
        report(workload, results, rss_growth_kib, traced_peak)
        return first_round + rounds + 1


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def _mbps(size: int, ns: float) -> str:
    return f"{size / 1e6 / (ns / 1e9):.0f} MB/s"


def report(workload: Workload, results: list[Round], rss_growth_kib: int, traced: int) -> None:
    publish = statistics.median(r.publish_ns for r in results)
    baseline = statistics.median(r.baseline_ns for r in results)
    ratios = [r.ratio for r in results]
    size = workload.total_bytes
    print(f"{workload.label}, {len(results)} rounds:")
    print(f"  publish  median {_ms(publish)} ({_mbps(size, publish)})")
    print(f"  baseline median {_ms(baseline)} ({_mbps(size, baseline)})")
    print(
        f"  ratio baseline/publish {baseline / publish:.3f}"
        f" (per round {min(ratios):.3f}-{max(ratios):.3f})"
    )
    shown = ", ".join(f"{'P' if r.publish_first else 'B'} {r.ratio:.3f}" for r in results)
    print(f"  per round, P = publish measured first, B = baseline first: {shown}")
    if workload.file_count > 1:
        per_file = (publish - baseline) / workload.file_count
        print(f"  publish overhead per file {per_file / 1e3:.1f} us")
    print(
        f"  memory: peak RSS growth {rss_growth_kib / 1024:.1f} MiB over the rounds,"
        f" Python peak {traced / 2**20:.1f} MiB in one publish (payload {size / 2**20:.1f} MiB)"
    )


# --- where the time goes --------------------------------------------------------------------


def profile_publish(bench: Bench, workload: Workload, round_number: int) -> None:
    source = bench.prepare(workload, round_number)
    profiler = cProfile.Profile()
    profiler.enable()
    bench.publisher.publish(source, workload.name)
    profiler.disable()
    print(f"cProfile of one publish, {workload.label}, top 10 by cumulative time:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(10)


def _pipeline(path: str, hashes: int, threaded: bool) -> None:
    """Read ``path`` in ``CHUNK`` reads feeding ``hashes`` SHA-256 objects (in sequence,
    or the second on a helper thread overlapping the first), then fsync."""
    digests = [hashlib.sha256() for _ in range(hashes)]
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if not threaded:
            while chunk := os.read(fd, CHUNK):
                for digest in digests:
                    digest.update(chunk)
        else:
            _overlapped(fd, digests[0], digests[1])
        os.fsync(fd)
    finally:
        os.close(fd)


def _overlapped(fd: int, first: hashlib._Hash, second: hashlib._Hash) -> None:
    """Feed ``second`` on a helper thread while this thread feeds ``first``: hashlib drops
    the GIL for large updates, so the two digests run on two cores. One chunk in flight."""
    ready = threading.Semaphore(0)
    done = threading.Semaphore(0)
    box: list[bytes] = [b""]

    def helper() -> None:
        while True:
            ready.acquire()
            if not box[0]:
                return
            second.update(box[0])
            done.release()

    worker = threading.Thread(target=helper)
    worker.start()
    try:
        while chunk := os.read(fd, CHUNK):
            box[0] = chunk
            ready.release()
            first.update(chunk)
            done.acquire()
    finally:
        box[0] = b""
        ready.release()
        worker.join()


def breakdown(bench: Bench, workload: Workload, rounds: int, round_number: int) -> None:
    source = bench.prepare(workload, round_number)
    cases: dict[str, Callable[[], None]] = {
        "read + fsync": lambda: _pipeline(source, 0, False),
        "read + 1 sha256 + fsync (baseline)": lambda: _pipeline(source, 1, False),
        "read + 2 sha256 in sequence + fsync": lambda: _pipeline(source, 2, False),
        "read + 2 sha256 on 2 threads + fsync": lambda: _pipeline(source, 2, True),
    }
    samples: dict[str, list[int]] = {label: [] for label in cases}
    for _ in range(rounds):
        for label, case in cases.items():
            start = time.perf_counter_ns()
            case()
            samples[label].append(time.perf_counter_ns() - start)
    reference = statistics.median(samples["read + 1 sha256 + fsync (baseline)"])
    print(f"raw pipelines over the same {workload.label}, median of {rounds}:")
    for label, values in samples.items():
        median = statistics.median(values)
        print(
            f"  {label:38} {_ms(median):>10} ({_mbps(workload.total_bytes, median)}),"
            f" baseline/this {reference / median:.3f}"
        )
    os.unlink(source)


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5; 2 quick)")
    parser.add_argument("--large-mib", type=int, default=None, help="large file MiB (256)")
    parser.add_argument("--files", type=int, default=None, help="small-file count (10000)")
    parser.add_argument("--small-bytes", type=int, default=4096, help="small-file size (4096)")
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument("--profile", action="store_true", help="profile the large file")
    parser.add_argument(
        "--late-names", action="store_true", help="payload names sorting after manifest.json"
    )
    options = parser.parse_args(argv)
    rounds = options.rounds if options.rounds is not None else (2 if options.quick else 5)
    large_mib = (
        options.large_mib if options.large_mib is not None else (2 if options.quick else 256)
    )
    count = options.files if options.files is not None else (200 if options.quick else 10_000)
    if rounds < 1 or large_mib < 1 or count < 1 or options.small_bytes < 0:
        parser.error("sizes and rounds must be positive")
    prefix = "zdata" if options.late_names else "data"
    large = large_workload(large_mib * 2**20, f"{prefix}.bin")
    small = small_workload(count, options.small_bytes, prefix)

    work = tempfile.mkdtemp(prefix="bench-publish-", dir=options.dir)
    print(
        f"bench_publish: {work}, chunk {CHUNK} B, {os.cpu_count()} CPUs,"
        f" payload names {large.name!r} and {small.name!r}/..."
    )
    bench = Bench(work)
    try:
        next_round = bench.run(large, rounds, 0)
        next_round = bench.run(small, rounds, next_round)
        if options.profile:
            profile_publish(bench, large, next_round)
            breakdown(bench, large, rounds, next_round + 1)
    finally:
        bench.publisher.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
