"""The WAL probe of SPEC section 8, step 3, against rules the fake-kernel table of
test_probes.py does not reach: the other connection sees exactly the committed rows, and a
rollback discards its own transaction and nothing more, so the row committed before it
stays visible.

Rules of this file: the fake goes in at ``runstore.sql.execute`` and touches only the
probe's own database (found by its file name), so the store's connection is real.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from runstore import RunStore
from runstore import sql
from runstore.errors import CapabilityProbeError
from runstore.store.probes import PROBE_PREFIX


def on_probe_database(connection: sqlite3.Connection) -> bool:
    files = [row[2] for row in connection.execute("PRAGMA database_list")]
    return any(PROBE_PREFIX in name for name in files)


def test_a_rollback_that_also_undoes_the_earlier_commit_fails_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 8 step 3: the WAL probe checks that two connections "expose commits, discard
    rollbacks"; a rollback discards only its own transaction. A database whose rollback
    also loses the row committed before it (faked: every ROLLBACK on the probe's database
    is followed by deleting its rows) shows the other connection no rows, and the store is
    refused (capability_probe_failed) by the probe's check after the rollback."""
    real = sql.execute
    rollbacks: list[str] = []

    def execute(connection: sqlite3.Connection, text: str, params: Any = ()) -> list[Any]:
        rows = real(connection, text, params)
        if text == "ROLLBACK" and on_probe_database(connection):
            rollbacks.append(text)
            real(connection, "DELETE FROM probe")
        return rows

    _refused_then_opens(tmp_path, monkeypatch, execute, "rolled-back data was visible")
    assert rollbacks == ["ROLLBACK"]


def test_a_commit_that_lands_twice_fails_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 8 step 3: the WAL probe checks that the other connection sees exactly the
    committed rows. A database that applies a commit twice (faked: the probe's COMMIT is
    followed by a copy of its row) shows that connection two rows for the probe's one, and
    the store is refused (capability_probe_failed) by the probe's check after the commit."""
    real = sql.execute
    commits: list[str] = []

    def execute(connection: sqlite3.Connection, text: str, params: Any = ()) -> list[Any]:
        rows = real(connection, text, params)
        if text == "COMMIT" and on_probe_database(connection) and not commits:
            commits.append(text)
            real(connection, "INSERT INTO probe (doc) SELECT doc FROM probe")
        return rows

    _refused_then_opens(
        tmp_path, monkeypatch, execute, "committed data was not visible to another connection"
    )
    assert commits == ["COMMIT"]


def _refused_then_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, execute: Any, message: str
) -> None:
    """With the faked ``execute``, opening a new store is refused by the WAL probe with
    ``message``; with the real one again, the same root opens."""
    monkeypatch.setattr(sql, "execute", execute)
    root = tmp_path / "store"
    root.mkdir()
    with pytest.raises(CapabilityProbeError) as caught:
        RunStore.open(root)
    assert caught.value.code == "capability_probe_failed"
    assert caught.value.message == message
    monkeypatch.undo()
    with RunStore.open(root) as store:
        assert store.database_path == str(root / "run.sqlite3")
