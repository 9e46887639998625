"""Rules of the coordinator's loop that its scenario tests (test_coordinator.py) pass
without pinning: the summary's count of satisfied slots, how often registration plans
again, how many ended attempts may wait to be finished, how long the loop waits, when it
cancels a worker itself, and that a stop cancels at once (SPEC.md section 15.3, 15.4,
15.5, 15.7). Each runs the coordinator in process with a scripted executor and a
controlled clock (conformance/runner/world.py)."""

from __future__ import annotations

import datetime
import sys
import threading
import time
from collections.abc import Collection
from typing import Any

import pytest
from runstore import RunStore
from runstore.errors import RegistrationConflictError
from runstore.requests import FirstAttempt
from runstore.runner import attempt
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import register
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.store import RunStore as StoreHandle

from conformance.closed_store import rows
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import Handle
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import always
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import resumed
from conformance.runner.world import run
from conformance.runner.world import succeeded

MILLISECOND = 10**6
ONE_PAIR: dict[str, Any] = {"candidates": ("a",), "problems": ("p",)}


def hang(order: WorkOrder, nth: int) -> WorkResult | None:
    """A worker that does not end until it is cancelled."""
    return None


def test_the_summary_counts_as_satisfied_the_slots_with_an_accepted_attempt(root: str) -> None:
    """SPEC.md section 15.7: exit status 0 is "done: for `run`, every applicable slot is
    satisfied". The summary's ``satisfied`` counts the applicable slots that hold an
    accepted attempt, and ``unsatisfied`` names each of the others: of four slots, one
    failed, three are satisfied."""

    def fail_a_x_p(order: WorkOrder, nth: int) -> WorkResult:
        env = dict(order.env)
        pair = (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"])
        return result(WorkStatus.EXITED, 1) if pair == ("a", "p") else succeeded()

    summary, events, _ = run(root, fail_a_x_p)
    assert (summary.slots, summary.satisfied, summary.unsatisfied) == (4, 3, ("a x p",))
    assert events.named("summary")[0]["satisfied"] == 3
    accepted = "SELECT count(DISTINCT slot_id) FROM attempts WHERE state = 'accepted'"
    assert rows(root, accepted) == [(3,)]


def test_the_summary_counts_the_pairs_found_not_applicable_as_excluded(root: str) -> None:
    """SPEC.md section 15.7: the summary's ``excluded`` counts "the pairs found not
    applicable" and ``slots`` the applicable slots, and the ``campaign`` event holds
    "`slots` and `excluded` as the summary counts them": ``a`` applies to ``p`` and ``b``
    to ``p`` and ``q``, so of six pairs three are excluded and three run (counts no other
    arithmetic of 6 and 3 gives)."""
    rules = {"a": ("p",), "b": ("p", "q")}
    summary, events, _ = run(root, always(succeeded()), problems=("p", "q", "r"), applies_to=rules)
    assert (summary.slots, summary.excluded, summary.satisfied) == (3, 3, 3)
    assert events.named("summary")[0]["excluded"] == 3
    (announced,) = events.named("campaign")
    assert (announced["slots"], announced["excluded"], announced["registered"]) == (3, 3, 3)


class Racing:
    """A store handle through which another runner registers before each of the first
    ``races`` chunks: another file of the same campaign, one problem of its own each time,
    so every such chunk's ``held`` count is stale when it reaches the store."""

    def __init__(self, store: StoreHandle, root: str, races: int) -> None:
        self.store, self.root, self.races = store, root, races
        self.chunks = 0

    def registered_for(self, candidates: list[str]) -> Any:
        return self.store.registered_for(candidates)

    def register_many(self, chunk: Any, **held: Any) -> Any:
        self.chunks += 1
        if self.chunks <= self.races:
            with RunStore.open(self.root) as other:
                register(other, campaign(problems=(f"x{self.chunks}",)))
        return self.store.register_many(chunk, **held)


@pytest.mark.parametrize("races", [1, 2])
def test_registration_plans_again_after_each_refused_chunk_up_to_three_times(
    root: str, races: int
) -> None:
    """SPEC.md section 15.2: a chunk refused with ``registration_conflict`` "sends the
    runner back to read the store and plan again, at most three times in all": after one
    or two refused chunks, the third plan still registers every slot."""
    with RunStore.open(root) as store:
        racing = Racing(store, root, races)
        plans, new, _ = register(racing, campaign())  # type: ignore[arg-type]
    assert (len(plans), new, racing.chunks) == (4, 4, races + 1)
    slots = "SELECT count(*) FROM attempt_slots"
    assert rows(root, slots) == [(4 + 2 * races,)]  # the other runner's a x xN, b x xN


def test_registration_gives_up_after_its_third_refused_chunk(root: str) -> None:
    """SPEC.md section 15.2: "at most three times in all": a third refused chunk refuses
    the run with ``registration_conflict``, and no fourth plan is made."""
    with RunStore.open(root) as store:
        racing = Racing(store, root, races=4)
        with pytest.raises(RegistrationConflictError):
            register(racing, campaign())  # type: ignore[arg-type]
    assert racing.chunks == 3
    assert rows(root, "SELECT count(*) FROM attempt_slots") == [(6,)]  # the other runner's


@pytest.mark.parametrize("jobs", [2, 3])
def test_at_most_jobs_ended_attempts_wait_to_be_finished(
    root: str, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """SPEC.md section 15.4: "at most `--jobs` workers run, and at most `--jobs` more ended
    attempts wait to be finished". With workers ending one at a time and every finisher
    held back, the coordinator starts ``2 x jobs`` workers and no more until a finisher
    ends; then all eight slots run."""
    release = threading.Event()
    finished = 0
    outstanding: list[int] = []
    real_finish = attempt.finish

    def held_finish(*args: Any) -> Any:
        nonlocal finished
        release.wait(30)
        done = real_finish(*args)
        finished += 1
        return done

    monkeypatch.setattr(attempt, "finish", held_finish)

    class OneAtATime(ScriptedExecutor):
        """Each wait ends the oldest running worker; the ``2 x jobs``-th ending lets the
        finishers go (the coordinator is then at its bound: nothing running, all of them
        finishing)."""

        ended = 0

        def submit(self, order: WorkOrder) -> Handle:
            outstanding.append(len(self.handles) + 1 - finished)
            return super().submit(order)

        def wait(self, handles: Collection[Handle], timeout_s: float) -> set[Handle]:
            done = {handle for handle in handles if handle.done()}
            if done or not handles:
                return done
            oldest = next(iter(handles))
            oldest.outcome = succeeded()
            self.ended += 1
            if self.ended == 2 * jobs:
                release.set()
            return {oldest}

    options = RunOptions(jobs=jobs)
    problems = ("p", "q", "r", "s")
    summary, _, executor = run(root, hang, executor=OneAtATime, options=options, problems=problems)
    assert summary.satisfied == 8
    assert executor.max_running == jobs
    assert max(outstanding) == 2 * jobs, outstanding


def dead_owner(root: str, clock: Clock, lease_ns: int) -> int:
    """An attempt of ``a x p`` left in progress by a coordinator that died, under a lease of
    ``lease_ns``; returns when that lease expires."""
    with RunStore.open(root) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",)))
        started = attempt.start(store, plans[0], FirstAttempt(), lease_ns, clock)
        assert isinstance(started, attempt.Started)
    return started.started_at_ns + lease_ns


def resume(root: str, clock: Clock) -> tuple[list[tuple[str, dict[str, object]]], list[float]]:
    """``run --resume --retry-failed 1`` of ``a x p``, which must satisfy it: its events,
    and its waits' timeouts."""
    summary, events, executor = resumed(root, clock)
    assert summary.unsatisfied == ()
    return events.events, executor.timeouts


def test_resume_recovers_within_10_ms_of_the_lease_expiry_it_waits_for(root: str) -> None:
    """SPEC.md section 15.5: each wait "ends when the next renewal or lease expiry is due
    (at least 10 ms and at most 1 s each), so the pass runs within 10 ms of that lease's
    expiry": a lease of 30.25 s is judged 30.25 s after it was taken, not at the next
    whole second, after waits of 1 s (none ends before it must: no poll for nothing)."""
    clock = Clock()
    expiry = dead_owner(root, clock, 30 * SECOND + SECOND // 4)
    events, timeouts = resume(root, clock)
    recovered = [fields for name, fields in events if name == "recovered"]
    assert [r["terminals"] for r in recovered] == [0, 1]
    late = recovered[1]["time_ns"] - expiry  # type: ignore[operator]
    assert 0 <= late <= 10 * MILLISECOND + MILLISECOND
    assert timeouts[:30] == [1.0] * 30
    assert len(timeouts) <= 33, timeouts


def test_waiting_for_leases_is_reported_once_for_one_wait(root: str) -> None:
    """SPEC.md section 15.7: ``waiting_for_leases`` "comes again when either changes, and
    never for a wait already over": one attempt in progress, one wait of 30 s, one event,
    and it comes before the recovery pass that ends the wait."""
    clock = Clock()
    expiry = dead_owner(root, clock, 30 * SECOND)
    events, _ = resume(root, clock)
    waiting = [fields for name, fields in events if name == "waiting_for_leases"]
    assert [(w["slots"], w["until_ns"]) for w in waiting] == [(1, expiry)]
    # `until` is "the same instant as ISO 8601 UTC with milliseconds, truncated" (the
    # form of every event's `time`).
    second = datetime.datetime.fromtimestamp(expiry // SECOND, datetime.UTC)
    assert waiting[0]["until"] == f"{second:%Y-%m-%dT%H:%M:%S}.{expiry // 10**6 % 1000:03d}Z"
    names = [name for name, _ in events]
    assert names.index("waiting_for_leases") < len(names) - 1 - names[::-1].index("recovered")


class Still(Clock):
    """A clock that moves only when the test moves it."""

    def __call__(self) -> int:
        return self.now


def test_the_coordinator_cancels_a_worker_more_than_60_s_past_its_time_limit(root: str) -> None:
    """SPEC.md section 15.3: should an executor fail to enforce the time limit, "the
    coordinator cancels a worker still unfinished more than 60 s past its time limit
    itself (not at exactly 60 s past)". The clock is put at exactly 60 s past the limit,
    then 1 ns later; the worker is cancelled only after the second."""
    seen: list[tuple[int, bool]] = []

    class Unenforced(ScriptedExecutor):
        """Never ends a worker itself; its waits move the clock to the instants under test."""

        began = 0

        def submit(self, order: WorkOrder) -> Handle:
            self.began = self.clock.now
            return super().submit(order)

        def wait(self, handles: Collection[Handle], timeout_s: float) -> set[Handle]:
            (handle,) = handles
            seen.append((self.clock.now - self.began, handle.cancelled))
            if handle.done():
                return {handle}
            if len(seen) == 1:
                self.clock.now = self.began + 60 * SECOND + 60 * SECOND
            else:
                self.clock.advance(1)
            return set()

    summary, events, _ = run(
        root,
        hang,
        clock=Still(),
        executor=Unenforced,
        candidates=("a",),
        problems=("p",),
        lease_ns=1000 * SECOND,
        timeout_ns=60 * SECOND,
    )
    limit = 120 * SECOND
    assert seen == [(0, False), (limit, False), (limit + 1, True)]
    assert [f["failure_code"] for f in events.named("attempt_finished")] == ["cancelled"]
    assert summary.failed == 1


def test_a_stop_cancels_running_workers_at_once_not_at_their_time_limit(root: str) -> None:
    """SPEC.md section 15.5: on a stop "nothing new starts, running workers are killed then
    (none is left to its time limit)": both workers end cancelled within a second of
    (controlled) time, although their limit is 60 s."""
    stop = threading.Event()

    def stop_and_hang(order: WorkOrder, nth: int) -> WorkResult | None:
        stop.set()
        return None

    clock = Clock()
    summary, events, _ = run(root, stop_and_hang, clock=clock, stop=stop, timeout_ns=60 * SECOND)
    assert summary.stopped
    finished = events.named("attempt_finished")
    assert [f["failure_code"] for f in finished] == ["cancelled", "cancelled"]
    assert all(float(f["duration_s"]) < 1.5 for f in finished)  # type: ignore[arg-type]


def test_an_error_that_ends_the_run_cancels_its_running_workers(root: str) -> None:
    """SPEC.md section 15.5: "A second signal abandons the run at once: the workers are
    killed". Whatever ends the loop (here the second ``KeyboardInterrupt``, raised while
    it waits on the workers) cancels every running worker before it propagates; their
    attempts stay in progress for recovery."""
    made: list[ScriptedExecutor] = []

    class Interrupted(ScriptedExecutor):
        def wait(self, handles: Collection[Handle], timeout_s: float) -> set[Handle]:
            made.append(self)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(root, hang, executor=Interrupted)
    (executor,) = set(made)
    assert len(executor.handles) == 2
    assert all(handle.cancelled for handle in executor.handles)
    assert rows(root, "SELECT count(*) FROM attempts WHERE state = 'executing'") == [(2,)]


class Timed(ScriptedExecutor):
    """Ends the oldest worker at its fifth wait, then, at the next wait, waits for the
    test's finisher to hold that attempt (``finishing``) and lets it go (``release``).
    Keeps each wait's timeout, with ``before`` (no worker had ended yet) and ``held`` (the
    finisher was holding its attempt)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.waits: list[tuple[float, str]] = []
        self.finishing = threading.Event()
        self.release = threading.Event()

    def wait(self, handles: Collection[Handle], timeout_s: float) -> set[Handle]:
        ended = any(handle.outcome is not None for handle in self.handles)
        if ended and not self.release.is_set():
            assert self.finishing.wait(30), "the finisher never took the ended attempt"
            self.waits.append((timeout_s, "held"))
            self.release.set()
        else:
            self.waits.append((timeout_s, "after" if ended else "before"))
        done = {handle for handle in handles if handle.done()}
        if done or not handles:
            return done
        if len(self.waits) % 5 == 0:
            oldest = next(iter(handles))
            oldest.outcome = succeeded()
            return {oldest}
        self.clock.advance(int(timeout_s * SECOND))
        return set()


def test_while_workers_run_and_one_finishes_the_loop_polls_every_10_ms(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 15.4: "While workers run and an attempt is being finished, the
    coordinator's waits on the workers last 10 ms (a finisher's end does not wake them) ...
    otherwise a wait lasts until the next renewal is due, at most 1 s". The first worker
    ends while the second runs, and its finisher holds the attempt until the loop has
    waited once on the second: that wait is 10 ms, every wait before it 1 s."""
    executors: list[Timed] = []
    real_finish = attempt.finish

    class Held(Timed):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            executors.append(self)

    def held_finish(*args: Any) -> Any:
        (executor,) = executors
        if not executor.release.is_set():
            executor.finishing.set()
            assert executor.release.wait(30), "the loop never waited while this finished"
        return real_finish(*args)

    monkeypatch.setattr(attempt, "finish", held_finish)
    summary, _, _ = run(root, hang, executor=Held, candidates=("a",), problems=("p", "q"))
    assert summary.satisfied == 2
    (executor,) = executors
    held = [timeout for timeout, when in executor.waits if when == "held"]
    assert held == [pytest.approx(0.01, abs=1e-6)], executor.waits
    before = [timeout for timeout, when in executor.waits if when == "before"]
    assert before == [1.0] * 5, executor.waits


def test_a_stop_is_reported_while_the_run_only_waits_for_a_finisher(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 15.5: "`stopping` is reported within a second, also while the run
    only waits for attempts being finished (those finish)". The one worker has ended and
    its finisher holds the attempt; the stop comes 0.2 s later, while the loop waits on
    the finisher alone, and ``stopping`` is reported before the finisher lets go (it waits
    up to 10 s for it); the attempt is then accepted."""
    stop, reported = threading.Event(), threading.Event()
    seen_while_held: list[bool] = []
    real_finish = attempt.finish

    def held_finish(*args: Any) -> Any:
        time.sleep(0.2)  # the loop is waiting on this finisher by now
        stop.set()
        seen_while_held.append(reported.wait(10))
        return real_finish(*args)

    class Watched(Events):
        def __call__(self, event: str, fields: dict[str, object]) -> None:
            super().__call__(event, fields)
            if event == "stopping":
                reported.set()

    monkeypatch.setattr(attempt, "finish", held_finish)
    summary, events, _ = run(root, always(succeeded()), stop=stop, events=Watched(), **ONE_PAIR)
    assert seen_while_held == [True]
    assert summary.stopped and summary.accepted == 1
    assert [name for name, _ in events.events][-2:] == ["attempt_finished", "summary"]


@pytest.mark.parametrize("late_ns", [0, 3600 * SECOND])
def test_a_wait_that_is_over_before_it_is_announced_is_not_announced(
    root: str, late_ns: int
) -> None:
    """SPEC.md section 15.7: ``waiting_for_leases`` comes "never for a wait already over".
    The loop decides what is due on one clock sample and what to announce on a later one;
    here the clock jumps at the second (time passing between them, as on a loaded
    machine) to the lease's expiry itself, or an hour past it, so the only wait is over
    when it would be announced: no event, and the next pass recovers the slot."""
    expiry = 0

    class Jumps(Clock):
        jumped = False

        def __call__(self) -> int:
            if not self.jumped and sys._getframe(1).f_code.co_name == "_announce_waiting":
                self.jumped = True
                self.now = expiry + late_ns - 1_000  # the reading adds its 1 µs
            return super().__call__()

    clock = Jumps()
    expiry = dead_owner(root, clock, 30 * SECOND)
    events, timeouts = resume(root, clock)
    assert clock.jumped
    assert [name for name, _ in events if name == "waiting_for_leases"] == []
    assert [f["terminals"] for name, f in events if name == "recovered"] == [0, 1]
    # SPEC.md section 15.5: a wait ends when the next lease expiry is due; this one is
    # already due, so the wait is the shortest, 10 ms.
    assert timeouts[0] == pytest.approx(0.01, abs=1e-6), timeouts
