"""Writer spec tests: a connection waits for a locked database up to the busy timeout from
its first statement on, then fails (SPEC.md section 8, Opening step 4).

``PRAGMA synchronous`` reads the schema, so a connection applying its settings meets
another connection's exclusive lock before ``busy_timeout`` is even set: it must wait
there (a lock released meanwhile is no failure) and give up once the timeout has passed.
The lock is another connection's ``BEGIN EXCLUSIVE`` on a database in rollback-journal
mode. No test sleeps: the first releases the lock from a timer the statement observer
starts, the second lowers the timeout and only bounds its wait with a watchdog.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore import sql

WATCHDOG_S = 20
"""How long a test waits for a connect that should have given up long before."""


@contextmanager
def exclusive_lock(path: str) -> Iterator[sqlite3.Connection]:
    """A database at ``path`` whose exclusive lock another connection holds."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        holder.execute("CREATE TABLE IF NOT EXISTS t (x)")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("INSERT INTO t VALUES (1)")
        yield holder
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("timeout_ms", [sql.BUSY_TIMEOUT_MS, 900])
def test_a_connection_waits_for_a_lock_released_while_it_applies_its_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout_ms: int
) -> None:
    """SPEC.md section 8, step 4 (``busy_timeout=5000``): the lock is released 50 ms after
    the schema-reading setting starts, within the wait (the real 5 s, and 900 ms), so
    connecting succeeds with every setting read back."""
    monkeypatch.setattr(sql, "BUSY_TIMEOUT_MS", timeout_ms)
    path = str(tmp_path / "run.sqlite3")
    with exclusive_lock(path) as holder:
        timers: list[threading.Timer] = []

        def release_when_blocked(phase: str, statement: str) -> None:
            if phase == "before" and statement.startswith("PRAGMA synchronous") and not timers:
                timers.append(threading.Timer(0.05, holder.execute, ("ROLLBACK",)))
                timers[0].start()

        previous = sql.install_observer(release_when_blocked)
        try:
            connection = sql.connect(path)
        finally:
            sql.install_observer(previous)
            for timer in timers:
                timer.join()
        assert timers, "the settings never read the schema"
        try:
            assert sql.scalar(connection, "PRAGMA busy_timeout") == 5000
        finally:
            connection.close()


def test_a_connection_gives_up_on_a_lock_held_past_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 8, step 4: the wait is bounded by the busy timeout (lowered here to
    40 ms so the test is quick); past it the statement fails as locked instead of waiting
    on."""
    monkeypatch.setattr(sql, "BUSY_TIMEOUT_MS", 40)
    path = str(tmp_path / "run.sqlite3")
    outcome: list[BaseException | sqlite3.Connection] = []

    def connect() -> None:
        try:
            outcome.append(sql.connect(path))
        except BaseException as error:
            outcome.append(error)

    with exclusive_lock(path) as holder:
        worker = threading.Thread(target=connect, daemon=True)
        worker.start()
        worker.join(WATCHDOG_S)
        gave_up = not worker.is_alive()
        holder.execute("ROLLBACK")  # lets a worker still waiting finish
    worker.join()
    assert gave_up, f"connect still waited for the lock after {WATCHDOG_S} s"
    [result] = outcome
    if isinstance(result, sqlite3.Connection):
        result.close()
    assert isinstance(result, sqlite3.OperationalError), result
    assert "locked" in str(result)
