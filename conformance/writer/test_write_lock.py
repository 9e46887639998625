"""The process-wide write lock (SPEC.md section 8, "The writer"): the handles of one
process on one database take their write transactions one at a time through one lock, so
threads queue instead of polling SQLite's busy handler; past the busy timeout a write is
``busy`` and changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from runstore import ExecutionKind
from runstore import RunStore
from runstore import RunStoreError
from runstore import SlotRole
from runstore import sql
from runstore.testing import fixtures as sc

from conformance.closed_store import rows


def test_handles_on_one_database_share_one_lock_and_other_databases_do_not(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        RunStore.open(tmp_path / "a") as first,
        RunStore.open(tmp_path / "a") as second,
        RunStore.open(tmp_path / "b") as other,
    ):
        assert first._write_lock is second._write_lock
        assert first._write_lock is not other._write_lock


def test_a_write_waits_for_another_threads_then_is_busy_past_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture = sc.slot_fixture(ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, name="a")
    args = (fixture.decision, fixture.run, fixture.attempt_slot, fixture.observation_slots[0])
    monkeypatch.setattr(sql, "BUSY_TIMEOUT_MS", 200)
    with RunStore.open(tmp_path) as holder, RunStore.open(tmp_path) as waiter:
        taken, release = threading.Event(), threading.Event()

        def hold() -> None:
            with holder._write_lock:
                taken.set()
                release.wait(10)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            assert taken.wait(10)
            with pytest.raises(RunStoreError) as info:
                waiter.register_one_shot(*args)
            assert info.value.code == "busy"
            assert rows(waiter.database_path, "SELECT count(*) FROM attempt_slots") == [(0,)]
        finally:
            release.set()
            thread.join()
        assert waiter.register_one_shot(*args) == fixture.slot_id  # free again: it commits
