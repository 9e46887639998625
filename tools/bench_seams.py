"""Benchmark: the cost of the two seams when no observer is installed.

Prints, measured side by side in one run, the ratio of a statement through
``runstore.sql.execute`` to the same statement through ``Connection.execute().fetchall()``,
and of ``runstore.durable.fsync_dir`` to a bare open/fsync/close. A ratio near 1.0 means
the seam costs nothing measurable. Run: ``python tools/bench_seams.py``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

from runstore import durable
from runstore import sql


def _median_ns(function: Callable[[], object], repeat: int, rounds: int = 7) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(repeat):
            function()
        samples.append((time.perf_counter_ns() - start) / repeat)
    return statistics.median(samples)


def main() -> None:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE t (x INTEGER PRIMARY KEY, y TEXT) STRICT")
    connection.execute("INSERT INTO t VALUES (1, 'a')")
    statement = "SELECT y FROM t WHERE x = ?"
    raw = _median_ns(lambda: connection.execute(statement, (1,)).fetchall(), 20000)
    seam = _median_ns(lambda: sql.execute(connection, statement, (1,)), 20000)
    print(f"sql statement: raw {raw:.0f} ns, seam {seam:.0f} ns, ratio {seam / raw:.3f}")

    directory = tempfile.mkdtemp()

    def bare_fsync_dir() -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    raw = _median_ns(bare_fsync_dir, 300)
    seam = _median_ns(lambda: durable.fsync_dir(directory), 300)
    print(f"directory fsync: raw {raw:.0f} ns, seam {seam:.0f} ns, ratio {seam / raw:.3f}")
    os.rmdir(directory)


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
