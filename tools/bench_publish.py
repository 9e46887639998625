"""Benchmark: ``RunStore.publish_artifact`` against raw SHA-256 plus fsync of the same bytes,
the package before a change and after it measured side by side in one run.

Two workloads: one large file (``--large-mib``, default 256 MiB, named ``data.bin``; 0
skips it) and many small files (``--files``, default 10,000 files of ``--small-bytes`` each,
spread over 100 directories under ``data/``). Both payload names sort before
``manifest.json``; ``--late-names`` names the payloads ``zdata...`` instead, to measure
files that sort after it (which the publisher once read twice).

Three sides, each measured once per round (``--rounds``, default 5), in an order that
rotates from round to round so that drift and noise spread over all of them:

- raw: for every file in path order, ``os.open``, ``os.read`` in the publisher's chunk size
  (1 MiB) into one ``hashlib.sha256``, ``os.fsync``, ``os.close``; in this process.
- after: ``store.publish_artifact`` by the package this script imports (the working tree),
  in a child process that owns one store with one executing attempt.
- before: the same in a second child whose ``runstore`` is the package at ``--before``
  (default ``/tmp/before-pkg``, a snapshot of the package before the change; the column is
  left out when it does not exist).

Each side gets its own payload, prepared untimed just before it is measured: written with
new bytes (each 1 MiB block and each file starts with the round, side and index, so no
publication can reuse an object already published), ``os.sync()``, one untimed raw pass
(read, hash, fsync every file: under ``relatime`` the first read of a new file dirties its
inode, so it is done here for every side), ``os.sync()``. So the bytes are on disk and clean
in the page cache, the same state for every side, and the figures show the CPU and syscall
cost of each pipeline, not the cost of writing back dirty pages. A publisher's
``populate`` only ``os.rename``\\ s the prepared payload into its stage; that rename is
timed and subtracted, so the figure is the publisher's own work: stage and lease
transaction, scan, hash and fsync every file, fsync directories, manifest, tree hash,
no-replace rename, parent syncs and the final transaction. Everything lives in one
temporary directory (under ``--dir``, default the system temp dir), on one filesystem.

Printed per workload: the median of each side, each publisher's ratio raw/publish (1.0
means publishing costs no more than hashing and syncing the bytes by hand; the issue's
targets are >= 0.8) with the min-max of its per-round ratios, after's speed-up over
before, the publisher's overhead per file over raw, and memory: each child's peak RSS growth
over its rounds and the peak of Python allocations (``tracemalloc``) during one extra,
untimed publish, which must stay far below the payload size (chunked reads).

``--profile`` adds, for the package this script imports, a one-off ``cProfile`` of a publish
of each workload (top 12 by internal time) and, for the large file, raw pipelines over the
same bytes (read only, one SHA-256, two in sequence, two on two threads).

``--quick`` uses tiny sizes and two rounds, to check the script runs in seconds. Never read
these figures as absolute: the machine is shared; compare the sides measured together.
Run: ``python tools/bench_publish.py [--quick] [--profile] [--before DIR]``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import itertools
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from publish_child import Publisher

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "publish_child.py")
"""The store side, run in a child process per package."""

CHUNK = 1 << 20
"""The publisher's read size (``runstore.store.publication.objects.CHUNK``), used by raw."""

_LEASE_EXPIRY_NS = 2**62
_HEADER_BYTES = 24
_BEFORE_DEFAULT = "/tmp/before-pkg"
_RAW = "raw sha256+fsync"


class Child:
    """A publisher child process whose ``runstore`` is found first on ``pythonpath``."""

    def __init__(self, label: str, root: str, pythonpath: str | None) -> None:
        self.label = label
        environment = dict(os.environ)
        if pythonpath is not None:
            environment["PYTHONPATH"] = pythonpath
        else:
            environment.pop("PYTHONPATH", None)
        self._process = subprocess.Popen(
            [
                sys.executable,
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "publish_child.py"),
                root,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        self.package = str(self._ask(None)["package"])

    def _ask(self, command: dict[str, object] | None) -> dict[str, object]:
        assert self._process.stdin is not None and self._process.stdout is not None
        if command is not None:
            self._process.stdin.write(json.dumps(command) + "\n")
            self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} publisher child died")
        answer: dict[str, object] = json.loads(line)
        return answer

    def publish(self, source: str, name: str) -> int:
        return int(str(self._ask({"op": "publish", "source": source, "name": name})["ns"]))

    def traced_peak(self, source: str, name: str) -> int:
        return int(str(self._ask({"op": "traced", "source": source, "name": name})["peak"]))

    def rss_kib(self) -> int:
        return int(str(self._ask({"op": "rss"})["rss_kib"]))

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"op": "quit"}) + "\n")
        self._process.stdin.close()
        self._process.wait(timeout=60)


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
    """A payload to publish: ``prepare(tag, target)`` writes new bytes at ``target``."""

    label: str
    name: str
    total_bytes: int
    file_count: int
    prepare: Callable[[int, str], None]


def _blocks(tag: int, size: int, pattern: bytes) -> Iterator[bytes]:
    """``size`` bytes as blocks of at most ``CHUNK``, each headed by (tag, block)."""
    index = 0
    while size > 0:
        block = tag.to_bytes(16, "big") + index.to_bytes(8, "big") + pattern
        yield block[: min(size, CHUNK)]
        size -= CHUNK
        index += 1


def _write(path: str, blocks: Iterator[bytes]) -> None:
    with open(path, "wb") as handle:
        for block in blocks:
            handle.write(block)


def large_workload(size: int, name: str) -> Workload:
    pattern = os.urandom(CHUNK - _HEADER_BYTES)

    def prepare(tag: int, target: str) -> None:
        _write(target, _blocks(tag, size, pattern))

    label = f"large file ({size / 2**20:g} MiB)"
    return Workload(label=label, name=name, total_bytes=size, file_count=1, prepare=prepare)


def small_workload(count: int, size: int, name: str) -> Workload:
    pattern = os.urandom(max(size, 0))
    per_directory = max(1, -(-count // 100))

    def prepare(tag: int, target: str) -> None:
        os.mkdir(target)
        for index in range(count):
            directory = os.path.join(target, f"d{index // per_directory:03d}")
            if index % per_directory == 0:
                os.mkdir(directory)
            header = tag.to_bytes(16, "big") + index.to_bytes(8, "big")
            _write(os.path.join(directory, f"f{index:05d}.bin"), iter([(header + pattern)[:size]]))

    label = f"{count} files x {size} B"
    return Workload(
        label=label, name=name, total_bytes=count * size, file_count=count, prepare=prepare
    )


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Side:
    label: str
    child: Child | None
    """None for the raw side."""
    samples: list[int] = field(default_factory=list)


class Bench:
    def __init__(self, work: str, before: str | None) -> None:
        self.work = work
        os.mkdir(os.path.join(work, "payload"))
        self._tags = itertools.count(1)
        self.sides = [Side(_RAW, None)]
        self.sides.append(Side("publish after", self._child("after", None)))
        if before is not None:
            self.sides.append(Side("publish before", self._child("before", before)))

    def _child(self, label: str, pythonpath: str | None) -> Child:
        root = os.path.join(self.work, f"store-{label}")
        os.mkdir(root)
        child = Child(label, root, pythonpath)
        print(f"  {label}: runstore from {child.package}")
        return child

    def prepare(self, workload: Workload) -> str:
        """New payload bytes at a fresh path, synced and read once (untimed)."""
        tag = next(self._tags)
        source = os.path.join(self.work, "payload", f"{tag}")
        workload.prepare(tag, source)
        os.sync()
        raw_hash_and_sync(files_under(source))  # first read sets atime (relatime): do it here
        os.sync()
        return source

    def measure(self, side: Side, workload: Workload) -> None:
        source = self.prepare(workload)
        if side.child is None:
            start = time.perf_counter_ns()
            raw_hash_and_sync(files_under(source))
            side.samples.append(time.perf_counter_ns() - start)
            shutil.rmtree(source) if os.path.isdir(source) else os.unlink(source)
        else:
            side.samples.append(side.child.publish(source, workload.name))

    def run(self, workload: Workload, rounds: int) -> None:
        for side in self.sides:
            side.samples.clear()
        publishers = [side for side in self.sides if side.child is not None]
        rss_before = {side.label: side.child.rss_kib() for side in publishers if side.child}
        for index in range(rounds):
            shift = index % len(self.sides)
            for side in self.sides[shift:] + self.sides[:shift]:
                self.measure(side, workload)
        memory = {}
        for side in publishers:
            assert side.child is not None
            growth = side.child.rss_kib() - rss_before[side.label]
            memory[side.label] = (
                growth,
                side.child.traced_peak(self.prepare(workload), workload.name),
            )
        report(workload, self.sides, memory)

    def close(self) -> None:
        for side in self.sides:
            if side.child is not None:
                side.child.close()


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def _mbps(size: int, ns: float) -> str:
    return f"{size / 1e6 / (ns / 1e9):.0f} MB/s"


def report(workload: Workload, sides: list[Side], memory: dict[str, tuple[int, int]]) -> None:
    raw = sides[0]
    raw_median = statistics.median(raw.samples)
    size = workload.total_bytes
    print(f"{workload.label}, {len(raw.samples)} rounds, medians:")
    print(f"  {raw.label:16} {_ms(raw_median):>11} ({_mbps(size, raw_median)})")
    medians = {}
    for side in sides[1:]:
        median = statistics.median(side.samples)
        medians[side.label] = median
        ratios = [r / p for r, p in zip(raw.samples, side.samples, strict=True)]
        line = (
            f"  {side.label:16} {_ms(median):>11} ({_mbps(size, median)}),"
            f" ratio raw/publish {raw_median / median:.3f}"
            f" (per round {min(ratios):.3f}-{max(ratios):.3f})"
        )
        if workload.file_count > 1:
            line += f", overhead {(median - raw_median) / workload.file_count / 1e3:.1f} us/file"
        print(line)
    if "publish before" in medians:
        speedup = medians["publish before"] / medians["publish after"]
        print(f"  after is {speedup:.2f}x as fast as before")
    for label, (growth_kib, traced) in memory.items():
        print(
            f"  memory, {label}: peak RSS growth {growth_kib / 1024:.1f} MiB over the rounds,"
            f" Python peak {traced / 2**20:.1f} MiB in one publish (payload {size / 2**20:.1f} MiB)"
        )


# --- where the time goes (the package this script imports, in this process) ----------------


def profile_publish(work: str, workload: Workload, bench: Bench) -> None:
    root = os.path.join(work, "store-profile")
    if not os.path.exists(root):
        os.mkdir(root)
    publisher = Publisher(root)
    try:
        source = bench.prepare(workload)
        profiler = cProfile.Profile()
        profiler.enable()
        publisher.publish(source, workload.name)
        profiler.disable()
    finally:
        publisher.close()
    print(f"cProfile of one publish, {workload.label}, top 12 by internal time:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(12)


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


def breakdown(bench: Bench, workload: Workload, rounds: int) -> None:
    source = bench.prepare(workload)
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
    parser.add_argument("--large-mib", type=int, default=None, help="large file MiB (256; 0 skips)")
    parser.add_argument("--files", type=int, default=None, help="small-file count (10000)")
    parser.add_argument("--small-bytes", type=int, default=4096, help="small-file size (4096)")
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument("--profile", action="store_true", help="profile this package's publish")
    parser.add_argument(
        "--before",
        default=_BEFORE_DEFAULT,
        help=f"the package before the change, first on PYTHONPATH ({_BEFORE_DEFAULT}); '' skips",
    )
    parser.add_argument(
        "--late-names", action="store_true", help="payload names sorting after manifest.json"
    )
    options = parser.parse_args(argv)
    rounds = options.rounds if options.rounds is not None else (2 if options.quick else 5)
    large_mib = (
        options.large_mib if options.large_mib is not None else (2 if options.quick else 256)
    )
    count = options.files if options.files is not None else (200 if options.quick else 10_000)
    if rounds < 1 or large_mib < 0 or count < 1 or options.small_bytes < 0:
        parser.error("sizes and rounds must be positive")
    before = options.before or None
    if before is not None and not os.path.isdir(os.path.join(before, "runstore")):
        print(f"bench_publish: no package at {before}/runstore: the before column is left out")
        before = None
    prefix = "zdata" if options.late_names else "data"
    workloads = [small_workload(count, options.small_bytes, prefix)]
    if large_mib:
        workloads.insert(0, large_workload(large_mib * 2**20, f"{prefix}.bin"))

    work = tempfile.mkdtemp(prefix="bench-publish-", dir=options.dir)
    print(
        f"bench_publish: {work}, {os.cpu_count()} CPUs, payload names"
        f" {', '.join(repr(w.name) for w in workloads)}, sides in rotating order:"
    )
    bench = Bench(work, before)
    try:
        for workload in workloads:
            bench.run(workload, rounds)
        if options.profile:
            for workload in workloads:
                profile_publish(work, workload, bench)
            if large_mib:
                breakdown(bench, workloads[0], rounds)
    finally:
        bench.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
