"""Which slots a run starts, with which retry authorization, and which it waits for.

Rules of this file: decisions only, from committed slot progress (SPEC.md section 15,
"Which slots run"): a fresh slot gets ``FirstAttempt``; a slot whose latest attempt was cut
off gets ``Retry(next, next)`` under ``--resume`` and its own bound; a slot whose attempts
all ended without acceptance gets ``Retry(next, bound)`` only under an explicit
``--retry-failed`` bound (and its codes); a satisfied slot is never started; a
measurement with a warm-up starts only once that warm-up is accepted; a slot with an
attempt still in progress is left alone, except that a resuming run waits (once) until
recovery may judge it. The
store re-checks every authorization, so a stale decision costs a refusal, never a second
acceptance.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.canonical import JSON
from runstore.errors import OptionInvalidError
from runstore.requests import FirstAttempt
from runstore.requests import Retry
from runstore.requests import RetryAuthorization
from runstore.runner.plan import SlotPlan
from runstore.store import RunStore
from runstore.store.coordinator_reads import SlotProgress


@attrs.frozen(kw_only=True)
class Waiting:
    """A slot whose attempt is still in progress (as committed), held until ``due_ns``,
    when recovery may judge it."""

    slot: SlotPlan
    due_ns: int


CUT_OFF_CODES: Final = frozenset({"interrupted_attempt", "cancelled", "worker_lost"})
"""Failure codes of attempts that ended because they were cut off (recovery judged the
owner dead, the run was stopped, the Dask worker or the supervisor died), not because of
what the worker computed: ``run --resume`` retries them (SPEC.md section 15.5)."""

FAILURE_CODES: Final = frozenset(
    {
        "worker_failed",
        "time_limit",
        "start_failed",
        "result_missing",
        "result_invalid",
        "output_too_large",
        "unsafe_output",
        "input_changed",
        *CUT_OFF_CODES,
    }
)
"""Every failure code an attempt of a run can end with (SPEC.md section 15.3)."""


def retry_codes(codes: Sequence[str] | None, retry_failed: int | None) -> tuple[str, ...] | None:
    """``--retry-code``'s codes, checked: each one an attempt can fail with, and only
    together with ``--retry-failed`` (``option_invalid`` otherwise); None when none given."""
    if not codes:
        return None
    if retry_failed is None:
        raise OptionInvalidError("--retry-code limits --retry-failed N, which is not given")
    unknown = sorted(set(codes) - FAILURE_CODES)
    if unknown:
        raise OptionInvalidError(
            f"--retry-code {unknown[0]!r} is no failure code; the codes: "
            + ", ".join(sorted(FAILURE_CODES))
        )
    return tuple(dict.fromkeys(codes))


DEFAULT_RESUME_RETRIES: Final = 3
MAX_RESUME_RETRIES: Final = 1000


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """``retry_failed``: the largest retry index a failed slot may reach (None: failures
    are not retried), only for ``retry_codes`` when given. ``resume``: retry a slot whose
    latest attempt was cut off while at most ``resume_retries`` of its attempts were."""

    resume: bool
    retry_failed: int | None
    retry_codes: tuple[str, ...] | None = None
    resume_retries: int = DEFAULT_RESUME_RETRIES


class Schedule:
    """The slots of one run: ready (with their authorization), waiting, and left alone."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        # Ready slots by their position in the plan, so a measurement that waited for its
        # warm-up, or a retried slot, runs in its planned place (the interleaved order).
        self.ready: list[tuple[int, int, SlotPlan, RetryAuthorization]] = []
        self.position: dict[str, int] = {}
        self._pushed = 0
        self.waiting: list[Waiting] = []
        self.waited: set[str] = set()
        self.satisfied = 0
        self.accepted: set[str] = set()  # accepted slots (a measurement waits for its warm-up)
        self.blocked: dict[str, list[tuple[SlotPlan, RetryAuthorization]]] = {}
        self.left: dict[str, str] = {}  # slot label -> why it is not run
        self.cut_off: dict[str, int] = {}  # slot id -> how many of its attempts were cut off
        self.resumed = 0  # retries given because the latest attempt was cut off

    @classmethod
    def from_progress(
        cls, slots: Sequence[SlotPlan], store: RunStore, policy: RetryPolicy, now_ns: int
    ) -> Schedule:
        schedule = cls(policy)
        schedule.position = {_slot_id(slot): index for index, slot in enumerate(slots)}
        progress = store.slot_progress([_slot_id(slot) for slot in slots])
        schedule.accepted = {slot_id for slot_id, found in progress.items() if found.accepted}
        for slot in slots:
            schedule._classify(slot, progress[_slot_id(slot)], now_ns)
        return schedule

    def _classify(self, slot: SlotPlan, progress: SlotProgress, now_ns: int) -> None:
        if progress.accepted:
            self.satisfied += 1
        elif progress.recoverable_at_ns is not None:
            if self.policy.resume and _slot_id(slot) not in self.waited:
                self.waited.add(_slot_id(slot))
                self.waiting.append(
                    Waiting(slot=slot, due_ns=max(now_ns, progress.recoverable_at_ns))
                )
            else:
                self.left[slot.label] = "attempt_in_progress"
        elif progress.attempts == 0:
            self._enqueue(slot, FirstAttempt())
        else:
            codes = progress.failure_codes
            self.cut_off[_slot_id(slot)] = sum(1 for code in codes if code in CUT_OFF_CODES)
            self._retry(slot, progress.attempts, codes[-1] if codes else None)

    def _enqueue(self, slot: SlotPlan, authorization: RetryAuthorization) -> None:
        """Ready, unless its warm-up is not accepted yet (then it waits for it)."""
        if slot.requires is None or slot.requires in self.accepted:
            self._push(slot, authorization)
        else:
            self.blocked.setdefault(slot.requires, []).append((slot, authorization))

    def _push(self, slot: SlotPlan, authorization: RetryAuthorization) -> None:
        self._pushed += 1
        position = self.position.get(_slot_id(slot), len(self.position))
        heapq.heappush(self.ready, (position, self._pushed, slot, authorization))

    def _retry(self, slot: SlotPlan, next_index: int, code: str | None) -> None:
        """The next attempt of a slot whose attempts all ended without acceptance, the
        latest with failure ``code`` (None when it was censored or superseded): after a
        cut-off, under ``--resume`` and its bound, an authorization of exactly the next
        index; otherwise under ``--retry-failed`` (and its codes) up to its bound."""
        policy = self.policy
        if code in CUT_OFF_CODES and policy.resume:
            if self.cut_off.get(_slot_id(slot), 0) <= policy.resume_retries:
                self.resumed += 1
                self._enqueue(slot, Retry(next_index=next_index, max_index=next_index))
                return
            if policy.retry_failed is None:
                self.left[slot.label] = "resume_bound_reached"
                return
        bound = policy.retry_failed
        if bound is None:
            cut = code in CUT_OFF_CODES
            self.left[slot.label] = "interrupted_not_resumed" if cut else "failed_not_retried"
        elif policy.retry_codes is not None and code not in policy.retry_codes:
            self.left[slot.label] = "failed_not_retried"
        elif next_index > bound:
            self.left[slot.label] = "retry_bound_reached"
        else:
            self._enqueue(slot, Retry(next_index=next_index, max_index=bound))

    def failed(self, slot: SlotPlan, retry_index: int, code: str | None) -> None:
        """An attempt of ``slot`` ended without acceptance in this run, with failure
        ``code`` (None when censored or superseded)."""
        if code in CUT_OFF_CODES:
            self.cut_off[_slot_id(slot)] = self.cut_off.get(_slot_id(slot), 0) + 1
        self._retry(slot, retry_index + 1, code)

    def accepted_now(self, slot_id: str) -> None:
        """An attempt of ``slot_id`` was accepted in this run: what waited for it is ready."""
        self.accepted.add(slot_id)
        for slot, authorization in self.blocked.pop(slot_id, ()):
            self._push(slot, authorization)

    def leftover(self) -> dict[str, str]:
        """Every slot left unsatisfied without another attempt, with why."""
        waiting = {
            slot.label: "warmup_unsatisfied"
            for queued in self.blocked.values()
            for slot, _ in queued
        }
        return {**self.left, **waiting}

    def next_ready(self) -> tuple[SlotPlan, RetryAuthorization] | None:
        if not self.ready:
            return None
        _position, _pushed, slot, authorization = heapq.heappop(self.ready)
        self.left.pop(slot.label, None)
        return slot, authorization

    def pending(self) -> bool:
        return bool(self.ready or self.waiting)

    def next_due(self) -> int | None:
        return min((w.due_ns for w in self.waiting), default=None)

    def waiting_due(self, now_ns: int) -> bool:
        return any(w.due_ns <= now_ns for w in self.waiting)

    def reread(self, store: RunStore, now_ns: int) -> None:
        """After a recovery pass: classify again every waiting slot that is due (a slot
        still in progress now is left alone: a live owner holds it)."""
        due = [w for w in self.waiting if w.due_ns <= now_ns]
        self.waiting = [w for w in self.waiting if w.due_ns > now_ns]
        progress = store.slot_progress([_slot_id(w.slot) for w in due])
        for waiting in due:
            self._classify(waiting.slot, progress[_slot_id(waiting.slot)], now_ns)

    def counts(self) -> dict[str, JSON]:
        return {
            "blocked": sum(len(queued) for queued in self.blocked.values()),
            "left": len(self.left),
            "ready": len(self.ready),
            "resumed": self.resumed,
            "satisfied": self.satisfied,
            "waiting": len(self.waiting),
        }


def _slot_id(slot: SlotPlan) -> str:
    assert slot.attempt_slot is not None
    return slot.attempt_slot.id
