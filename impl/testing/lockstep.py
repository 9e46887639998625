"""The lockstep kit: one writer interface over the store and the model, so a scenario runs
on either, and the one way to drive the two in lockstep.

Rules of this file: :class:`Writer` is the structural type of ``RunStore``'s writer methods;
:class:`ModelWriter` implements it over the pure model, holding the current state and
raising :class:`ModelRefusal` (with the refusal's code) where the store would raise a
``RunStoreError``. :func:`outcome` turns either kind of refusal into a comparable value,
and :func:`lockstep` makes one call on the model and then on a store, raising
:class:`Diverged` unless both give the same result or the same refusal code. No I/O here
beyond the store the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from runstore import model as m
from runstore.enums import AttemptState
from runstore.errors import RunStoreError
from runstore.receipts import ClaimDisposition, ObservationReceipt, OwnedAttempt, TerminalAttempt
from runstore.records import (
    ApplicabilityDecision,
    ArtifactRegistration,
    AttemptSlot,
    Observation,
    ObservationSlot,
    ResolvedRun,
)
from runstore.requests import LeaseRequest, RetryAuthorization, TerminalOutcome

T = TypeVar("T")


class Writer(Protocol):
    """The writer methods a scenario may call (``RunStore`` has them all)."""

    def register_slots(
        self,
        candidate: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slots: Sequence[ObservationSlot],
    ) -> str: ...

    def register_one_shot(
        self,
        candidate: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slot: ObservationSlot,
    ) -> str: ...

    def reserve(
        self, slot_id: str, authorization: RetryAuthorization, lease: LeaseRequest, now_ns: int
    ) -> OwnedAttempt: ...

    def advance(self, attempt: OwnedAttempt, phase: AttemptState, now_ns: int) -> OwnedAttempt: ...

    def renew(self, attempt: OwnedAttempt, expires_at_ns: int, now_ns: int) -> OwnedAttempt: ...

    def begin_finalization(
        self, attempt: OwnedAttempt, lease: LeaseRequest, now_ns: int
    ) -> ClaimDisposition: ...

    def register_observation(
        self,
        attempt: OwnedAttempt,
        observation: Observation,
        artifact: ArtifactRegistration,
        references: Sequence[tuple[str, str]],
        select: bool,
        now_ns: int,
    ) -> ObservationReceipt: ...

    def commit_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[tuple[str, str]],
        finished_at_ns: int,
        now_ns: int,
    ) -> TerminalAttempt: ...


class Diverged(Exception):
    """The store and the model disagreed, or the model broke its own contract."""


class ModelRefusal(Exception):
    """The model refused a call; ``code`` is the store error code for the same call."""

    def __init__(self, refusal: m.Refusal) -> None:
        super().__init__(f"{refusal.code}: {refusal.message}")
        self.code = refusal.code


class ModelWriter:
    """The pure model behind the :class:`Writer` interface; ``state`` is the current state."""

    def __init__(self, state: m.ModelState) -> None:
        self.state = state

    def _apply(self, step: tuple[m.ModelState, T | m.Refusal]) -> T:
        new_state, result = step
        if isinstance(result, m.Refusal):
            if new_state is not self.state:
                raise Diverged(f"the model refused ({result.code}) but changed its state")
            raise ModelRefusal(result)
        self.state = new_state
        return result

    def register_slots(
        self,
        candidate: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slots: Sequence[ObservationSlot],
    ) -> str:
        return self._apply(
            m.register_slots(self.state, candidate, run, attempt_slot, observation_slots)
        )

    def register_one_shot(
        self,
        candidate: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slot: ObservationSlot,
    ) -> str:
        return self._apply(
            m.register_one_shot(self.state, candidate, run, attempt_slot, observation_slot)
        )

    def reserve(
        self, slot_id: str, authorization: RetryAuthorization, lease: LeaseRequest, now_ns: int
    ) -> OwnedAttempt:
        return self._apply(m.reserve(self.state, slot_id, authorization, lease, now_ns))

    def advance(self, attempt: OwnedAttempt, phase: AttemptState, now_ns: int) -> OwnedAttempt:
        return self._apply(m.advance(self.state, attempt, phase, now_ns))

    def renew(self, attempt: OwnedAttempt, expires_at_ns: int, now_ns: int) -> OwnedAttempt:
        return self._apply(m.renew(self.state, attempt, expires_at_ns, now_ns))

    def begin_finalization(
        self, attempt: OwnedAttempt, lease: LeaseRequest, now_ns: int
    ) -> ClaimDisposition:
        return self._apply(m.begin_finalization(self.state, attempt, lease, now_ns))

    def register_observation(
        self,
        attempt: OwnedAttempt,
        observation: Observation,
        artifact: ArtifactRegistration,
        references: Sequence[tuple[str, str]],
        select: bool,
        now_ns: int,
    ) -> ObservationReceipt:
        return self._apply(
            m.register_observation(
                self.state, attempt, observation, artifact, references, select, now_ns
            )
        )

    def commit_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[tuple[str, str]],
        finished_at_ns: int,
        now_ns: int,
    ) -> TerminalAttempt:
        return self._apply(
            m.commit_finalization(
                self.state, attempt, outcome, artifact, references, finished_at_ns, now_ns
            )
        )


Outcome = tuple[str, object]
"""``("ok", result)`` or ``("refused", code)``."""


def outcome(call: Callable[[], object]) -> Outcome:
    """Run ``call``; a store or model refusal becomes ``("refused", code)``."""
    try:
        return ("ok", call())
    except (ModelRefusal, RunStoreError) as refusal:
        return ("refused", refusal.code)


def lockstep(model: ModelWriter, store: Writer, call: Callable[[Writer], T]) -> T:
    """Make ``call`` on ``model`` and then on ``store``: both must return equal results, or
    both refuse with the same code (and the model's state is then unchanged); otherwise
    :class:`Diverged`. Returns the store's result; the store's refusal is re-raised after
    the comparison."""
    expected = outcome(lambda: call(model))
    try:
        actual = call(store)
    except RunStoreError as error:
        if expected != ("refused", error.code):
            raise Diverged(f"the store refused ({error}); the model gave {expected!r}") from error
        raise
    if expected != ("ok", actual):
        raise Diverged(f"the store gave {actual!r}; the model gave {expected!r}")
    return actual
