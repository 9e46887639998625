"""One process-wide lock per database file, taken around every write transaction of every
handle on it (SPEC.md section 8, "The writer").

Rules of this file: no SQLite and no I/O. Handles of one process on one database (the
coordinator's, the lease keeper's, the finishers') would otherwise meet each other only
in SQLite's busy handler, which sleeps and polls: a thread that finds the write lock taken
sleeps 1, 2, 5, 10 ms... while the transaction it waits for takes a fraction of that.
Taking this lock first makes them queue and wake at once. Other processes still meet in
SQLite's lock, under its busy timeout. Reentrant, so a nested ``BEGIN`` is refused by
SQLite as before rather than deadlocking here.
"""

from __future__ import annotations

import threading

_locks: dict[tuple[int, int], threading.RLock] = {}
_guard = threading.Lock()


def writer_lock(key: tuple[int, int]) -> threading.RLock:
    """The lock of the database file whose ``(st_dev, st_ino)`` is ``key``."""
    with _guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock
