"""What the coordinator reports for each way a start or a finish can end, and how its
registration counts chunks (SPEC.md section 15.2, 15.4, 15.5, 15.7, 15.8 "Fencing").

A refusal of ``reserve`` that means another attempt got the slot is ``skipped``; one that
means this coordinator lost the attempt, or a store busy past the attempt's patience, is
``lease_lost`` and the attempt is left to recovery; any other error stops the run once
the slots started with it are handled. The in-process coordinator runs with a scripted
executor and a controlled clock (conformance/runner/world.py); where a store refusal
cannot be produced on demand (``busy`` past patience takes a held write lock and
seconds), ``attempt.start_many`` is wrapped to return it for one slot.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from runstore import RunStore
from runstore.errors import BusyError
from runstore.errors import InvalidRecordError
from runstore.errors import LeaseExpiredError
from runstore.errors import RunStoreError
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.runner import attempt
from runstore.runner import coordinator
from runstore.runner.coordinator import register
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult

from conformance.closed_store import rows
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import Counting
from conformance.runner.world import always
from conformance.runner.world import campaign
from conformance.runner.world import input_file
from conformance.runner.world import run
from conformance.runner.world import succeeded

ONE_SLOT = {"candidates": ("a",), "problems": ("p",)}


def first_slot_gets(
    monkeypatch: pytest.MonkeyPatch, outcome: RunStoreError | type[RunStoreError]
) -> list[int]:
    """Make ``attempt.start_many`` raise ``outcome`` (a class: for the whole batch, before
    anything is reserved) or put it in place of the first slot's result (an instance: that
    slot's reservation was refused; the others' steps go on). Returns the batch sizes."""
    real = attempt.start_many
    sizes: list[int] = []

    def start_many(store: RunStore, slots: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(slots))
        if isinstance(outcome, type):
            if len(sizes) == 1:
                raise outcome("the store stayed busy past the attempt's patience")
            return real(store, slots, *args, **kwargs)
        if len(sizes) > 1:
            return real(store, slots, *args, **kwargs)
        return [outcome, *real(store, slots[1:], *args, **kwargs)]

    monkeypatch.setattr(attempt, "start_many", start_many)
    return sizes


def test_a_start_busy_past_patience_reports_each_slot_lost_and_reserves_nothing(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 15.7: ``lease_lost`` means "the attempt was left to recovery"; a
    batch refused ``busy`` reserved nothing, so each of its slots is reported with no
    attempt and reason ``busy``, and the run goes on with the next batch."""
    sizes = first_slot_gets(monkeypatch, BusyError)
    summary, events, executor = run(root, always(succeeded()))
    lost = events.named("lease_lost")
    assert [(f["attempt"], f["reason"]) for f in lost] == [(None, "busy")] * sizes[0]
    assert sizes[0] == 2 and len(lost) == 2
    assert rows(root, "SELECT count(*) FROM attempts") == [(4 - sizes[0],)]
    assert summary.satisfied == 2 and len(executor.orders) == 2


@pytest.mark.parametrize(
    "refusal", [LeaseExpiredError("lease expired before the start"), BusyError("busy")]
)
def test_a_start_refused_for_one_slot_reports_it_and_runs_the_others(
    root: str, monkeypatch: pytest.MonkeyPatch, refusal: RunStoreError
) -> None:
    """SPEC.md section 15.4: "a refused reservation ... refuses only that slot's steps":
    the slot whose start was refused as lost is reported ``lease_lost`` with its reason and
    no attempt, and the other slots of its batch run."""
    first_slot_gets(monkeypatch, refusal)
    summary, events, executor = run(root, always(succeeded()))
    (reported,) = events.named("lease_lost")
    assert (reported["attempt"], reported["reason"]) == (None, refusal.code)
    assert events.named("skipped") == []
    assert summary.satisfied == 3 and len(executor.orders) == 3


def test_a_slot_another_coordinator_started_first_is_skipped(root: str) -> None:
    """SPEC.md section 15.7: ``skipped`` means "another attempt got the slot first". While
    the first slot runs, another coordinator reserves the second; this run's reservation
    of it is refused, reported ``skipped`` with the refusal's code, and nothing is run
    for it."""
    clock = Clock()

    def rival_takes_q(order: WorkOrder, nth: int) -> WorkResult:
        if dict(order.env)["RUNSTORE_PROBLEM"] == "p":
            with RunStore.open(root) as other:
                plans, _, _ = register(other, campaign(candidates=("a",), problems=("p", "q")))
                (q,) = [slot for slot in plans if slot.problem.name == "q"]
                taken = attempt.start(other, q, FirstAttempt(), 30 * SECOND, clock)
                assert isinstance(taken, attempt.Started)
        return succeeded()

    options = coordinator.RunOptions(jobs=1)
    summary, events, executor = run(
        root, rival_takes_q, clock=clock, options=options, candidates=("a",), problems=("p", "q")
    )
    (skipped,) = events.named("skipped")
    assert (skipped["problem_name"], skipped["reason"]) == ("q", "retry_not_authorized")
    assert [dict(o.env)["RUNSTORE_PROBLEM"] for o in executor.orders] == ["p"]
    assert summary.unsatisfied == ("a x q",)


def test_an_unexpected_start_error_stops_the_run_after_the_others_of_its_batch(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator's rule (impl/runner/coordinator.py, after SPEC.md section 15.5
    "Stopping"): a store error other than the expected refusals propagates, after the
    slots started in the same batch are running and then cancelled, so no lease is left
    live behind the error."""
    first_slot_gets(monkeypatch, InvalidRecordError("a record the store refused"))
    with pytest.raises(InvalidRecordError):
        run(root, lambda order, nth: None)
    assert rows(root, "SELECT count(*) FROM attempts") == [(1,)]


def test_an_input_changed_before_the_start_fails_the_attempt_without_a_worker(
    root: str, tmp_path: Path
) -> None:
    """SPEC.md section 15.4 step 2: "When an input no longer has its registered digest the
    batch stops at `materializing` and the attempt fails `input_changed`"; it is reported
    ``attempt_finished`` with ``logs`` "`{}` when no worker ran" (section 15.7), and no
    order is submitted."""
    data = input_file(tmp_path, "input.txt", b"registered bytes")
    with RunStore.open(root) as store:
        register(store, campaign(files=(data,), **ONE_SLOT))  # type: ignore[arg-type]
    Path(data.source).write_bytes(b"edited bytes!!!!")  # same size, another digest
    summary, events, executor = run(
        root, always(succeeded()), executor=Counting, files=(data,), **ONE_SLOT
    )
    (finished,) = events.named("attempt_finished")
    assert (finished["failure_code"], finished["logs"]) == ("input_changed", {})
    assert executor.orders == [] and summary.failed == 1
    assert rows(root, "SELECT count(*) FROM leases WHERE released_at_ns IS NULL") == [(0,)]
    # SPEC.md section 15.4: "with nothing due the loop does not wait": nothing ran, nothing
    # is held, so the run ends without sleeping.
    assert isinstance(executor, Counting) and set(executor.timeouts) <= {0.0}


def test_a_result_that_reaches_the_writer_after_the_lease_expired_is_lease_lost(
    root: str,
) -> None:
    """SPEC.md section 15.8, "Fencing": "a result that still reaches the writer after the
    lease was lost is refused by its guard check ... and nothing of it is published; the
    run reports `lease_lost` and the attempt is left to recovery". The worker ends in the
    same wait that carries the clock 60 s past its 9 s lease."""
    clock = Clock()

    def late(order: WorkOrder, nth: int) -> WorkResult:
        clock.advance(60 * SECOND)
        return succeeded()

    summary, events, _ = run(root, late, clock=clock, lease_ns=9 * SECOND, **ONE_SLOT)
    (lost,) = events.named("lease_lost")
    assert lost["reason"] == "lease_expired" and isinstance(lost["attempt"], str)
    assert events.named("attempt_finished") == []
    assert rows(root, "SELECT state FROM attempts") == [("executing",)]
    assert rows(root, "SELECT count(*) FROM artifacts WHERE kind = 'observation'") == [(0,)]
    assert summary.unsatisfied == ("a x p",)


def test_an_attempt_a_rival_supersedes_counts_neither_accepted_nor_failed(root: str) -> None:
    """SPEC.md section 15.7: the summary's ``accepted`` and ``failed`` count "the attempts
    this run finished each way". While this run's worker runs, a rival starts a retry of
    the same slot and commits it accepted; this run's attempt then commits
    ``superseded``, which is neither, and the slot is satisfied (by the rival)."""
    clock = Clock()

    def rival_wins(order: WorkOrder, nth: int) -> WorkResult:
        with RunStore.open(root) as other:
            plans, _, _ = register(other, campaign(**ONE_SLOT))  # type: ignore[arg-type]
            rival = attempt.start(other, plans[0], Next(retry=True), 30 * SECOND, clock)
            assert isinstance(rival, attempt.Started)
            won = attempt.finish(other, rival, succeeded(), 30 * SECOND, clock)
            assert won.terminal.state.value == "accepted"
        return succeeded()

    summary, events, _ = run(root, rival_wins, clock=clock, **ONE_SLOT)
    (finished,) = events.named("attempt_finished")
    assert finished["state"] == "superseded"
    assert (summary.accepted, summary.failed, summary.satisfied) == (0, 0, 1)


class Counted:
    """A store handle that counts ``register_many`` calls and their refusals."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.calls = 0
        self.refused = 0

    def registered_for(self, candidates: list[str]) -> Any:
        return self.store.registered_for(candidates)

    def register_many(self, chunk: Any, **held: Any) -> Any:
        self.calls += 1
        try:
            return self.store.register_many(chunk, **held)
        except RunStoreError:
            self.refused += 1
            raise


def test_each_chunk_counts_the_records_of_the_chunks_before_it_exclusions_included(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 15.2: "Each chunk passes `held`: the number of decisions and runs of
    the campaign's candidates that the plan was made from, plus those of the chunks before
    it". With chunks of 2 items, a revision that excludes two registered pairs and adds
    two new problems registers in ceil(items / 2) chunks, none refused (a wrong count
    would be refused and make the runner plan again)."""
    monkeypatch.setattr(coordinator, "REGISTRATION_CHUNK", 2)
    with RunStore.open(root) as store:
        counted = Counted(store)
        _, new, _ = register(counted, campaign())  # type: ignore[arg-type]
        assert (new, counted.calls, counted.refused) == (4, 2, 0)
        revised = campaign(problems=("p", "q", "r", "s"), applies_to={"a": ("r", "s")})
        counted = Counted(store)
        _, new, outcome = register(counted, revised, revise=True)  # type: ignore[arg-type]
    items = 2 + 4  # the exclusions of a x p and a x q; a x r, a x s, b x r, b x s
    assert (new, counted.calls, counted.refused) == (4, math.ceil(items / 2), 0)
    assert sorted(outcome.revised) == [("a", "p"), ("a", "q")]
    excluded = (
        "SELECT count(*) FROM applicability_decisions"
        " WHERE json_extract(record_json, '$.applicable') = 0"
    )
    assert rows(root, excluded) == [(2,)]


@pytest.mark.parametrize(("items", "chunks"), [(5_000, 1), (5_001, 2)])
def test_registration_writes_at_most_5000_items_per_transaction(
    root: str, items: int, chunks: int
) -> None:
    """SPEC.md section 15.2: every slot not yet registered is registered "by
    `register_many` (section 6) in chunks of 5,000 items, one transaction each": 5,000 new
    slots take one chunk, 5,001 two."""
    problems = tuple(f"p{i}" for i in range(items))
    with RunStore.open(root) as store:
        counted = Counted(store)
        _, new, _ = register(counted, campaign(candidates=("a",), problems=problems))  # type: ignore[arg-type]
    assert (new, counted.calls, counted.refused) == (items, chunks, 0)


@pytest.mark.parametrize("jobs", [3, 10])
def test_at_most_min_jobs_8_finisher_threads_finish_at_once(
    root: str, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """SPEC.md section 15.4: an ended attempt goes to "one of `min(--jobs, 8)` finisher
    threads". Every worker ends at once and each finisher holds its attempt until as many
    as that hold one (and 0.3 s more, for one too many to show): never more at once."""
    expected = min(jobs, 8)
    lock, release = threading.Lock(), threading.Event()
    holding, most = 0, 0
    real_finish = attempt.finish

    def held_finish(*args: Any) -> Any:
        nonlocal holding, most
        with lock:
            holding += 1
            most = max(most, holding)
            if holding == expected:
                threading.Timer(0.3, release.set).start()
        assert release.wait(30), "fewer finishers than expected ever held an attempt"
        with lock:
            holding -= 1
        return real_finish(*args)

    monkeypatch.setattr(attempt, "finish", held_finish)
    problems = tuple(f"p{i}" for i in range(5))
    summary, _, _ = run(
        root, always(succeeded()), options=coordinator.RunOptions(jobs=jobs), problems=problems
    )
    assert summary.satisfied == 10
    assert most == expected


def test_new_repetitions_of_registered_pairs_add_nothing_to_held(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 15.2: ``held`` counts "the decisions and runs of the campaign's
    candidates that the plan was made from, plus those of the chunks before it". Two more
    repetitions of four registered pairs are eight new slots of runs already held: with
    chunks of 2 items, every chunk passes the same count and none is refused."""
    monkeypatch.setattr(coordinator, "REGISTRATION_CHUNK", 2)
    with RunStore.open(root) as store:
        register(store, campaign())
        counted = Counted(store)
        more = attrs.evolve(campaign(), repetitions=3)
        _, new, _ = register(counted, more)  # type: ignore[arg-type]
    assert (new, counted.calls, counted.refused) == (8, 4, 0)
