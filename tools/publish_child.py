"""The store side of ``tools/bench_publish.py``: a child process that publishes datasets
with whichever ``runstore`` comes first on its ``PYTHONPATH``.

Run by the benchmark as ``python tools/publish_child.py ROOT``: it opens a fresh store in
ROOT with one owned, executing attempt, answers one JSON line with its package's
directory, then reads one JSON command per stdin line (``publish``, ``traced``, ``rss``,
``quit``) and answers each with one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sys
import time
import tracemalloc

from runstore import ArtifactKind
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import RunStore
from runstore.receipts import OwnedAttempt
from runstore.testing import fixtures as fx

_LEASE_EXPIRY_NS = 2**62


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


def _peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def serve(root: str) -> None:
    """The child's loop: one JSON command per stdin line, one JSON answer per stdout line."""
    import runstore

    publisher = Publisher(root)
    _answer({"package": os.path.dirname(runstore.__file__)})
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "publish":
            publish_ns, populate_ns, _ = publisher.publish(command["source"], command["name"])
            _answer({"ns": publish_ns - populate_ns})
        elif command["op"] == "traced":
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                publisher.publish(command["source"], command["name"])
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            _answer({"peak": peak})
        elif command["op"] == "rss":
            _answer({"rss_kib": _peak_rss_kib()})
        else:
            break
    publisher.close()


def _answer(value: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="an existing empty directory for the store")
    serve(parser.parse_args().root)
