"""The coordinator: register a campaign, then fill its unsatisfied slots through an executor.

Rules of this file: the only code that decides what to run. It owns the store handle and
the executor for the length of :func:`run_campaign`, on one thread: attempts start between
waits on the executor, and every decision and report is made on this thread (SPEC.md
section 15.5, "Which slots run"). An attempt whose worker ended is finished (published and
committed) on a finisher thread with a store handle of its own
(:class:`~runstore.runner.finishers.Finishers`; section 15.4, "Finishing runs beside the
loop"), and its outcome reported here. Renewals are the
:class:`~runstore.runner.lease_keeper.LeaseKeeper`'s, from this thread and its own
(section 15.4, "Leases never starve"). Stopping (``stop`` set, e.g. by Ctrl-C) starts
nothing new, cancels running workers and commits their ``cancelled`` failures, so no
lease is left live. A store error other than the expected refusals propagates after the
workers are killed: nothing is retried around a durability step.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable

from runstore import registration_batch
from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.errors import AttemptTerminalError
from runstore.errors import BusyError
from runstore.errors import ClaimExpiredError
from runstore.errors import LeaseExpiredError
from runstore.errors import LeaseReleasedError
from runstore.errors import RegistrationConflictError
from runstore.errors import RetryBoundExceededError
from runstore.errors import RetryNotAuthorizedError
from runstore.errors import RunStoreError
from runstore.errors import SlotSatisfiedError
from runstore.errors import StaleRevisionError
from runstore.recovery_report import RecoveryReport
from runstore.requests import RetryAuthorization
from runstore.runner import attempt
from runstore.runner import run_events
from runstore.runner.campaign import Campaign
from runstore.runner.environment import Environments
from runstore.runner.executor import Executor
from runstore.runner.executor import WorkHandle
from runstore.runner.finishers import Finishers
from runstore.runner.lease_keeper import LeaseKeeper
from runstore.runner.plan import SlotPlan
from runstore.runner.plan import candidate_id
from runstore.runner.revisions import Revised
from runstore.runner.revisions import resolve
from runstore.runner.run_options import MAX_JOBS
from runstore.runner.run_options import RunOptions
from runstore.runner.run_options import RunSummary
from runstore.runner.schedule import RetryPolicy
from runstore.runner.schedule import Schedule
from runstore.store import RunStore

Clock = Callable[[], int]

LOST = (LeaseExpiredError, LeaseReleasedError, ClaimExpiredError, StaleRevisionError)
"""Refusals that mean this coordinator no longer owns the attempt (it was too slow, or
recovery or another process took over): the attempt is left to recovery."""

TAKEN = (SlotSatisfiedError, RetryNotAuthorizedError, RetryBoundExceededError)
"""Refusals of ``reserve`` that mean another attempt got the slot first."""

MAX_FINISHERS = 8
"""The most finisher threads (each with its own store handle) one run uses: ``--jobs``,
up to this."""

FINISHING_POLL_S = 0.01
"""How often the loop looks for ended finishers while it also waits for workers, in
seconds: its shortest wait (:meth:`_Loop._timeout_s` never waits less)."""

Finishing = attempt.Finished | RunStoreError
"""What a finisher thread hands back: the committed outcome, or the refusal that says the
coordinator lost the attempt."""

BACKSTOP_NS = 60_000_000_000
"""How long past its time limit a worker may stay unfinished before the coordinator
cancels it itself (the executor enforces the limit; this guards against one that does
not)."""


Reporter = run_events.Reporter
"""Receives each event of a run (SPEC.md section 15.7); :func:`run_campaign` stamps every
event's ``time_ns`` and ``time`` (:class:`~runstore.runner.run_events.Stamped`)."""


def register(
    store: RunStore, campaign: Campaign, *, revise: bool = False
) -> tuple[tuple[SlotPlan, ...], int, Revised]:
    """Register every applicable pair (identical records are reused), each at its revision
    (SPEC.md section 15.9); returns the plans, how many slots were new, and the revisions.
    A pair that differs from its latest registered revision refuses the whole campaign
    with ``registration_conflict`` before anything is registered, unless ``revise``.

    The records go in chunks of :data:`REGISTRATION_CHUNK`, one transaction each
    (``register_many``), each refused unless the campaign's candidates still hold exactly
    the decisions and runs the plan was made against plus the chunks before it: when
    another process registered for them in between, the campaign is read and planned
    again (at most :data:`REGISTRATION_ATTEMPTS` times), so no chunk is ever registered
    against records its plan did not see."""
    candidates = [candidate_id(campaign, c) for c in campaign.candidates]
    for attempt_number in range(1, REGISTRATION_ATTEMPTS + 1):
        held = store.registered_for(candidates)
        revised = resolve(campaign, held, revise=revise)
        items = _items(revised, {slot.id for slot in held.attempt_slots})
        decisions = {decision.id for decision in held.decisions}
        runs = {run.id for run in held.runs}
        try:
            for start in range(0, len(items), REGISTRATION_CHUNK):
                chunk = items[start : start + REGISTRATION_CHUNK]
                store.register_many(
                    chunk, candidate_ids=candidates, held=len(decisions) + len(runs)
                )
                for item in chunk:
                    if isinstance(item, tuple):
                        decisions.add(item[0].id)
                        runs.add(item[1].id)
                    else:
                        decisions.add(item.id)
        except RegistrationConflictError:
            if attempt_number == REGISTRATION_ATTEMPTS:
                raise
            continue  # read again: resolve names a real conflict, or the plan still holds
        new = sum(isinstance(item, tuple) for item in items)
        return revised.plans, new, revised
    raise AssertionError("unreachable: the last attempt returns or raises")


REGISTRATION_CHUNK = 5_000
"""Slots (and exclusions) per registration transaction: large enough that a transaction's
fixed cost is spread thin, small enough that the write lock is never held long."""

REGISTRATION_ATTEMPTS = 3


def _items(revised: Revised, known: set[str]) -> list[registration_batch.Item]:
    """What a run registers, in plan order: the exclusion of each pair a revision stops
    measuring, and each applicable slot not registered yet."""
    moved = set(revised.revised)
    items: list[registration_batch.Item] = []
    for slot in revised.plans:
        if slot.run is None and (slot.candidate.name, slot.problem.name) in moved:
            # a revision stops measuring a registered pair: the exclusion is its record
            items.append(slot.decision)
            continue
        if slot.attempt_slot is None or slot.run is None or slot.attempt_slot.id in known:
            continue
        items.append((slot.decision, slot.run, slot.attempt_slot, slot.observation_slots))
    return items


def run_campaign(
    store: RunStore,
    campaign: Campaign,
    executor: Executor,
    options: RunOptions,
    report: Reporter,
    *,
    stop: threading.Event | None = None,
    clock: Clock = time.time_ns,
) -> RunSummary:
    """Register ``campaign`` and run its unsatisfied slots to a terminal outcome each."""
    report = run_events.Stamped(report, clock)
    plans, new, revised = register(store, campaign, revise=options.revise)
    applicable = [slot for slot in plans if slot.attempt_slot is not None]
    report(
        "campaign",
        {
            "campaign": campaign.name,
            "excluded": len(plans) - len(applicable),
            "registered": new,
            "revision": revised.revision,
            "revised": [f"{candidate} x {problem}" for candidate, problem in revised.revised],
            "changes": list(revised.changes),
            "slots": len(applicable),
        },
    )
    recovery = None
    if options.resume:
        recovery = store.recover(clock)
        report("recovered", _recovered(recovery))
    policy = RetryPolicy(
        resume=options.resume,
        retry_failed=options.retry_failed,
        retry_codes=options.retry_codes,
        resume_retries=options.resume_retries,
    )
    schedule = Schedule.from_progress(applicable, store, policy, clock())
    report("planned", {**schedule.counts(), "jobs": options.jobs, "seed": campaign.seed})
    loop = _Loop(store, campaign, executor, options, report, clock, schedule)
    loop.run(stop or threading.Event())
    unsatisfied = _unsatisfied(store, applicable)
    summary = RunSummary(
        slots=len(applicable),
        excluded=len(plans) - len(applicable),
        satisfied=len(applicable) - len(unsatisfied),
        accepted=loop.accepted,
        failed=loop.failed,
        unsatisfied=tuple(unsatisfied),
        left=tuple(sorted(schedule.leftover().items())),
        stopped=loop.stopped,
        recovery=recovery,
    )
    report("summary", summary.to_json())
    return summary


class _Loop:
    def __init__(
        self,
        store: RunStore,
        campaign: Campaign,
        executor: Executor,
        options: RunOptions,
        report: Reporter,
        clock: Clock,
        schedule: Schedule,
    ) -> None:
        self.store, self.executor, self.options = store, executor, options
        self.report, self.clock, self.schedule = report, clock, schedule
        self.lease_ns = campaign.lease_ns
        self.keeper = LeaseKeeper(campaign.lease_ns, clock)
        self.environments = Environments()
        """The environment artifacts this run published: each distinct one once."""
        self.running: dict[WorkHandle, attempt.Started] = {}
        self.finishing: dict[concurrent.futures.Future[Finishing], attempt.Started] = {}
        """Attempts whose worker ended, being finished on the finishers' threads."""
        self.finishers: Finishers | None = None
        self.accepted = 0
        self.failed = 0
        self.stopped = False
        self.announced: tuple[int, int] | None = None
        """The last ``waiting_for_leases`` reported: (slots, until_ns)."""

    def run(self, stop: threading.Event) -> None:
        count = min(self.options.jobs, MAX_FINISHERS)
        with self.keeper.background(self.store.root), Finishers(self.store.root, count) as pool:
            self.finishers = pool
            self._run(stop)

    def _run(self, stop: threading.Event) -> None:
        try:
            while self.running or self.finishing or (not self.stopped and self.schedule.pending()):
                if stop.is_set() and not self.stopped:
                    self.stopped = True
                    for handle in self.running:
                        handle.cancel()
                    self.report("stopping", {"running": len(self.running)})
                if not self.stopped:
                    self._settle_waiting()
                    self._fill()
                    self._announce_waiting()
                if self.running or not self.finishing:
                    done = self.executor.wait(list(self.running), self._timeout_s())
                else:  # only finishing: wait for the first to end
                    concurrent.futures.wait(  # no deadline (0.0): until the first ends
                        self.finishing,
                        self._timeout_s() or None,
                        concurrent.futures.FIRST_COMPLETED,
                    )
                    done = set()
                for handle in done:
                    self._finish(handle)
                self._collect()
                self._renew_due()
        except BaseException:
            for handle in self.running:
                handle.cancel()
            raise

    def _fill(self) -> None:
        """Start ready slots until ``jobs`` workers run: each round's slots reserved and
        advanced to executing in one write batch (:func:`attempt.start_many`)."""
        while self._room():
            queued: list[tuple[SlotPlan, RetryAuthorization]] = []
            while self._room(len(queued)):
                ready = self.schedule.next_ready()
                if ready is None:
                    break
                queued.append(ready)
            if not queued:
                return
            self._start(queued)

    def _room(self, queued: int = 0) -> bool:
        """Whether one more slot may start: at most ``jobs`` workers run, and at most
        ``jobs`` more attempts are being finished (their results wait in memory)."""
        running = len(self.running) + queued
        return running < self.options.jobs and running + len(self.finishing) < 2 * self.options.jobs

    def _start(self, queued: list[tuple[SlotPlan, RetryAuthorization]]) -> None:
        try:
            begun = attempt.start_many(self.store, queued, self.lease_ns, self.clock, self.keeper)
        except BusyError as refusal:  # busy past patience: nothing was reserved
            for slot, _ in queued:
                self.report(
                    "lease_lost", {**_slot_fields(slot), "attempt": None, "reason": refusal.code}
                )
            return
        unexpected: RunStoreError | None = None
        for (slot, _), started in zip(queued, begun, strict=True):
            if isinstance(started, TAKEN):
                self.report("skipped", {**_slot_fields(slot), "reason": started.code})
            elif isinstance(started, (*LOST, BusyError)):  # lost, or busy past patience
                self.report(
                    "lease_lost", {**_slot_fields(slot), "attempt": None, "reason": started.code}
                )
            elif isinstance(started, RunStoreError):
                unexpected = unexpected or started
            elif isinstance(started, attempt.Finished):
                self.keeper.release(started.terminal.attempt_id)
                self._finished(started)
            else:
                self._running(slot, started)
        if unexpected is not None:  # the others are running: the loop's stop cancels them
            raise unexpected

    def _running(self, slot: SlotPlan, started: attempt.Started) -> None:
        handle = self.executor.submit(started.order)
        self.running[handle] = started
        self.report(
            "attempt_started",
            {
                **_slot_fields(slot),
                "attempt": started.guard.attempt_id,
                "retry_index": started.guard.retry_index,
            },
        )

    def _finish(self, handle: WorkHandle) -> None:
        """Hand the ended worker's attempt to a finisher thread (:func:`attempt.finish` on
        that thread's handle); :meth:`_collect` reports it once it ends."""
        started = self.running.pop(handle)
        work = handle.result()
        lease_ns, clock, keeper, environments = (
            self.lease_ns,
            self.clock,
            self.keeper,
            self.environments,
        )

        def task(store: RunStore) -> Finishing:
            try:
                return attempt.finish(store, started, work, lease_ns, clock, keeper, environments)
            except (*LOST, AttemptTerminalError, BusyError) as refusal:
                return refusal  # busy: past the attempt's patience (attempt.patient)
            finally:
                keeper.release(started.guard.attempt_id)

        assert self.finishers is not None
        self.finishing[self.finishers.submit(task)] = started

    def _drain(self) -> None:
        """Wait for every finishing attempt to end, and report each."""
        concurrent.futures.wait(self.finishing)
        self._collect()

    def _collect(self) -> None:
        """Report every finished attempt; an error that is no refusal stops the run."""
        for future in [future for future in self.finishing if future.done()]:
            started = self.finishing.pop(future)
            outcome = future.result()
            if isinstance(outcome, RunStoreError):
                self._lost(started, outcome)
            else:
                self._finished(outcome)

    def _finished(self, finished: attempt.Finished) -> None:
        terminal = finished.terminal
        fields: dict[str, run_events.EventValue] = {
            **_slot_fields(finished.plan),
            "attempt": terminal.attempt_id,
            "duration_s": run_events.duration_s(finished.started_at_ns, terminal.finished_at_ns),
            "logs": run_events.log_paths(self.store.root, finished.artifact_path, finished.logs),
            "retry_index": terminal.retry_index,
            "state": terminal.state.value,
        }
        if finished.failure is not None:
            self.failed += 1
            fields["failure_code"] = finished.failure.code
            fields["details"] = finished.failure.details
            fields["stderr_tail"] = list(finished.stderr_tail)
            if not self.stopped:
                self.schedule.failed(finished.plan, terminal.retry_index, finished.failure.code)
        elif terminal.state is AttemptState.ACCEPTED:
            self.accepted += 1
            fields["metrics"] = finished.metrics
            self.schedule.accepted_now(terminal.slot_id)
        self.report("attempt_finished", fields)

    def _lost(self, started: attempt.Started, refusal: RunStoreError) -> None:
        self.report(
            "lease_lost",
            {
                **_slot_fields(started.plan),
                "attempt": started.guard.attempt_id,
                "reason": refusal.code,
            },
        )

    def _renew_due(self) -> None:
        """Renew what is due on this thread's handle too (the keeper's thread does it while
        this one is busy), and give up each running attempt whose renewal was refused: its
        worker is cancelled and the attempt left to recovery."""
        if self.keeper.failure is not None:
            raise self.keeper.failure
        self.keeper.renew_due(self.store)
        now = self.clock()
        for handle, started in list(self.running.items()):
            if now - started.started_at_ns > started.order.timeout_ns + BACKSTOP_NS:
                handle.cancel()
            refusal = self.keeper.refusal(started.guard.attempt_id)
            if refusal is not None:
                handle.cancel()
                del self.running[handle]
                self.keeper.release(started.guard.attempt_id)
                self._lost(started, refusal)

    def _settle_waiting(self) -> None:
        """Recover once a waiting slot is due, then classify the due slots again. One clock
        sample serves the waiting decision, the recovery pass and the re-reading, so every
        slot counted due was judged by the pass (a later sample would count a slot whose
        lease expired after the pass's instant as due, and leave it in progress)."""
        now = self.clock()
        if self.schedule.waiting_due(now):
            self._drain()  # recovery's lock excludes the finishers' publications
            recovery = self.store.recover(lambda: now)
            self.report("recovered", _recovered(recovery))
            self.schedule.reread(self.store, now)

    def _announce_waiting(self) -> None:
        """Report ``waiting_for_leases`` before the run waits for slots whose attempts are
        still in progress (``--resume``): how many, and when the last of their leases lets
        recovery judge them (``until_ns``, ``until``). Reported again only when that
        changes, and never for a wait that is already over."""
        due = [waiting.due_ns for waiting in self.schedule.waiting]
        if not due:
            return
        wait = (len(due), max(due))
        if wait == self.announced or wait[1] <= self.clock():
            return
        self.announced = wait
        self.report(
            "waiting_for_leases",
            {"slots": wait[0], "until": run_events.iso_time(wait[1]), "until_ns": wait[1]},
        )

    def _timeout_s(self) -> float:
        """Until the next renewal or waiting slot is due: at least 10 ms, at most 1 s
        (none when there is nothing to wait for); 10 ms while attempts are being finished
        beside running workers (a finisher's end cannot wake the executor's wait)."""
        if self.finishing and self.running:
            return FINISHING_POLL_S
        deadlines = [
            due for due in (self.keeper.next_due_ns(), self.schedule.next_due()) if due is not None
        ]
        if not deadlines:
            return 0.0
        return max(FINISHING_POLL_S, min(1.0, (min(deadlines) - self.clock()) / 1e9))


def _unsatisfied(store: RunStore, applicable: list[SlotPlan]) -> list[str]:
    ids = [slot.attempt_slot.id for slot in applicable if slot.attempt_slot is not None]
    progress = store.slot_progress(ids)
    return [
        slot.label
        for slot in applicable
        if slot.attempt_slot is not None and not progress[slot.attempt_slot.id].accepted
    ]


def _slot_fields(slot: SlotPlan) -> dict[str, JSON]:
    """The fields naming ``slot`` in its events (:func:`run_events.slot_fields`)."""
    return run_events.slot_fields(slot)


def _recovered(report: RecoveryReport) -> dict[str, JSON]:
    """The ``recovered`` event's fields: how many items each list of the report holds
    (:meth:`RecoveryReport.counts`)."""
    return {**report.counts()}


__all__ = ["LOST", "MAX_JOBS", "TAKEN", "RunOptions", "RunSummary", "register", "run_campaign"]
