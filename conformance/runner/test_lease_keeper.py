"""The lease keeper (SPEC.md section 15.4, "Leases never starve"): what it renews, what
counts as a refusal, and that a background thread which cannot work stops the run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from runstore import RunStore
from runstore import WriteBatch
from runstore.errors import StoreClosedError
from runstore.requests import FirstAttempt
from runstore.runner import attempt
from runstore.runner import lease_keeper
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import register
from runstore.runner.coordinator import run_campaign
from runstore.runner.lease_keeper import LeaseKeeper

from conformance.closed_store import rows
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign

LEASE_NS = 30 * SECOND


def started(store: RunStore, clock: Clock, keeper: LeaseKeeper) -> attempt.Started:
    plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",)))
    begun = attempt.start(store, plans[0], FirstAttempt(), LEASE_NS, clock, keeper)
    assert isinstance(begun, attempt.Started)
    return begun


def expiry(root: Path) -> int:
    ((expires,),) = rows(root, "SELECT expires_at_ns FROM leases WHERE purpose = 'reservation'")
    return int(expires)


def test_it_renews_a_held_attempt_once_a_third_of_the_lease_has_passed(tmp_path: Path) -> None:
    clock = Clock()
    keeper = LeaseKeeper(LEASE_NS, clock)
    with RunStore.open(str(tmp_path)) as store:
        begun = started(store, clock, keeper)
        first = expiry(tmp_path)
        keeper.renew_due(store)  # not due yet
        assert expiry(tmp_path) == first
        clock.advance(LEASE_NS // 3)
        keeper.renew_due(store)
        assert expiry(tmp_path) > first + LEASE_NS // 3 - SECOND
        assert keeper.longest_gap_ns() > 0 and keeper.refusal(begun.guard.attempt_id) is None
        keeper.release(begun.guard.attempt_id)
        clock.advance(LEASE_NS // 3)
        renewed = expiry(tmp_path)
        keeper.renew_due(store)  # released: no longer renewed
        assert expiry(tmp_path) == renewed and keeper.next_due_ns() is None


def test_a_refusal_with_the_guard_it_holds_is_recorded_one_for_a_moved_guard_is_not(
    tmp_path: Path,
) -> None:
    """The coordinator's thread commits a transition (and hands the keeper the new guard)
    between the keeper's reading of the guard and its renewal: the renewal with the old
    guard is refused (stale revision) but is no refusal of the attempt, and the next pass
    renews with the new guard. A renewal refused with the guard the keeper holds (the lease
    expired) is the attempt's refusal."""
    clock = Clock()
    keeper = LeaseKeeper(LEASE_NS, clock)
    with RunStore.open(str(tmp_path)) as store:
        begun = started(store, clock, keeper)

        class Racing:
            """The store, with the coordinator's transition landing just before a renewal."""

            def apply_batch(self, batch: WriteBatch) -> None:
                moved = store.advance(begun.guard, attempt.AttemptState.VALIDATING, clock())
                keeper.moved(moved)
                store.apply_batch(batch)

        clock.advance(LEASE_NS // 3)
        keeper.renew_due(Racing())  # type: ignore[arg-type]
        assert keeper.refusal(begun.guard.attempt_id) is None
        before = expiry(tmp_path)
        keeper.renew_due(store)  # still due: renewed with the moved guard
        assert expiry(tmp_path) > before
        clock.advance(2 * LEASE_NS)  # past every expiry, and due
        keeper.renew_due(store)
        refusal = keeper.refusal(begun.guard.attempt_id)
        assert refusal is not None and refusal.code == "lease_expired"


def test_a_background_thread_that_cannot_work_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its store cannot be opened (here: closed at once): the run raises that error rather
    than going on with renewals from one thread only."""

    class Closed:
        @staticmethod
        def open(root: str) -> RunStore:
            raise StoreClosedError("the keeper's store could not be opened")

    monkeypatch.setattr(lease_keeper, "RunStore", Closed)
    clock = Clock()
    with (
        RunStore.open(str(tmp_path)) as store,
        pytest.raises(StoreClosedError, match="keeper's store"),
    ):
        run_campaign(
            store,
            campaign(candidates=("a",), problems=("p", "q", "r")),
            ScriptedExecutor(lambda order, nth: None, clock),  # type: ignore[arg-type]
            RunOptions(jobs=1),
            Events(),  # type: ignore[arg-type]
            clock=clock,
        )


def test_two_callers_renewing_at_once_never_shorten_a_lease(tmp_path: Path) -> None:
    """The loop's thread and the background thread may find one attempt due together. The
    second renewal must not be computed from a clock read before the first one committed:
    a renewal asking for an earlier expiry than the one committed is ``renewal_shortens``,
    which the keeper would record as the attempt's lost lease (this test failed so before
    renewals were made one at a time)."""
    clock = Clock()
    keeper = LeaseKeeper(LEASE_NS, clock)
    root = str(tmp_path)

    def rival_renews() -> None:  # the background thread: a handle of its own
        with RunStore.open(root) as other:
            keeper.renew_due(other)

    with RunStore.open(root) as store:
        begun = started(store, clock, keeper)
        first = expiry(tmp_path)
        clock.advance(LEASE_NS // 3 + SECOND)
        joined: list[bool] = []

        class Racing:
            """``store``, whose first renewal lets the other caller renew meanwhile (with
            a later clock reading) before it commits its own."""

            def __init__(self) -> None:
                self.calls = 0

            def apply_batch(self, batch: WriteBatch) -> None:
                self.calls += 1
                if self.calls == 1:
                    clock.advance(SECOND)
                    rival = threading.Thread(target=rival_renews)
                    rival.start()
                    rival.join(timeout=0.5)
                    joined.append(not rival.is_alive())
                    rivals.append(rival)
                store.apply_batch(batch)

        rivals: list[threading.Thread] = []
        keeper.renew_due(Racing())  # type: ignore[arg-type]
        for rival in rivals:
            rival.join(timeout=10)
            assert not rival.is_alive()
        assert keeper.refusal(begun.guard.attempt_id) is None
        assert joined == [False]  # the rival waited for the first renewal to commit
        assert expiry(tmp_path) > first  # renewed, by the first caller
