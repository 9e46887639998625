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
from runstore.enums import ArtifactKind, AttemptState
from runstore.errors import InvalidRecordError, RunStoreError
from runstore.receipts import (
    ClaimDisposition,
    ObservationReceipt,
    OwnedAttempt,
    PublishedArtifact,
    PublishedFinalization,
    TerminalAttempt,
)
from runstore.records import (
    ApplicabilityDecision,
    ArtifactRegistration,
    AttemptSlot,
    Observation,
    ObservationSlot,
    ResolvedRun,
)
from runstore.recovery_report import RecoveryReport
from runstore.requests import LeaseRequest, Reference, RetryAuthorization, TerminalOutcome

T = TypeVar("T")
Clock = Callable[[], int]
Populate = Callable[[str], object]


class Writer(Protocol):
    """The writer methods a scenario may call (``RunStore`` has them all)."""

    def register_slots(
        self,
        decision: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slots: Sequence[ObservationSlot],
    ) -> str: ...

    def register_one_shot(
        self,
        decision: ApplicabilityDecision,
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
        references: Sequence[Reference],
        *,
        select: bool,
        now_ns: int,
    ) -> ObservationReceipt: ...

    def commit_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[Reference],
        finished_at_ns: int,
        now_ns: int,
    ) -> TerminalAttempt: ...

    def publish_artifact(
        self, attempt: OwnedAttempt, kind: ArtifactKind, populate: Populate, clock: Clock
    ) -> PublishedArtifact: ...

    def publish_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        references: Sequence[Reference],
        populate: Populate,
        clock: Clock,
    ) -> PublishedFinalization: ...

    def recover(self, clock: Clock) -> RecoveryReport: ...


class Diverged(Exception):
    """The store and the model disagreed, or the model broke its own contract."""


class ModelRefusal(Exception):
    """The model refused a call; ``code`` is the store error code for the same call."""

    def __init__(self, refusal: m.Refusal) -> None:
        super().__init__(f"{refusal.code}: {refusal.message}")
        self.code = refusal.code


class ModelWriter:
    """The pure model behind the :class:`Writer` interface; ``state`` is the current state."""

    def __init__(
        self,
        state: m.ModelState,
        tokens: Callable[[], str] | None = None,
        disk: Callable[[m.ModelState], m.DiskView] | None = None,
    ) -> None:
        self.state = state
        self.trail: list[m.ModelState] = []
        """Every state this writer moved to, in order: a publication commits several
        transactions, and a crash between them leaves one of these intermediate states."""
        self.tokens = tokens if tokens is not None else StageTokens()
        """Where the model's stage tokens come from (the store's come from the seam
        :func:`runstore.store.publication.staging.install_token_source`); two fresh
        :class:`StageTokens` counters keep the two in step."""
        self.disk = disk
        """What recovery finds on disk, read just before the model's pass (for a store
        driven in lockstep: :func:`runstore.testing.disk.disk_view` of its root); without
        it the model cannot recover."""

    def apply(self, step: tuple[m.ModelState, T | m.Refusal]) -> T:
        new_state, result = step
        if isinstance(result, m.Refusal):
            if new_state is not self.state:
                raise Diverged(f"the model refused ({result.code}) but changed its state")
            raise ModelRefusal(result)
        if new_state is not self.state:
            self.trail.append(new_state)
        self.state = new_state
        return result

    def register_slots(
        self,
        decision: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slots: Sequence[ObservationSlot],
    ) -> str:
        return self.apply(
            m.register_slots(self.state, decision, run, attempt_slot, observation_slots)
        )

    def register_one_shot(
        self,
        decision: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slot: ObservationSlot,
    ) -> str:
        return self.apply(
            m.register_one_shot(self.state, decision, run, attempt_slot, observation_slot)
        )

    def reserve(
        self, slot_id: str, authorization: RetryAuthorization, lease: LeaseRequest, now_ns: int
    ) -> OwnedAttempt:
        return self.apply(m.reserve(self.state, slot_id, authorization, lease, now_ns))

    def advance(self, attempt: OwnedAttempt, phase: AttemptState, now_ns: int) -> OwnedAttempt:
        return self.apply(m.advance(self.state, attempt, phase, now_ns))

    def renew(self, attempt: OwnedAttempt, expires_at_ns: int, now_ns: int) -> OwnedAttempt:
        return self.apply(m.renew(self.state, attempt, expires_at_ns, now_ns))

    def begin_finalization(
        self, attempt: OwnedAttempt, lease: LeaseRequest, now_ns: int
    ) -> ClaimDisposition:
        return self.apply(m.begin_finalization(self.state, attempt, lease, now_ns))

    def register_observation(
        self,
        attempt: OwnedAttempt,
        observation: Observation,
        artifact: ArtifactRegistration,
        references: Sequence[Reference],
        *,
        select: bool,
        now_ns: int,
    ) -> ObservationReceipt:
        return self.apply(
            m.register_observation(
                self.state, attempt, observation, artifact, references, select=select, now_ns=now_ns
            )
        )

    def commit_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[Reference],
        finished_at_ns: int,
        now_ns: int,
    ) -> TerminalAttempt:
        return self.apply(
            m.commit_finalization(
                self.state, attempt, outcome, artifact, references, finished_at_ns, now_ns
            )
        )

    def publish_artifact(
        self, attempt: OwnedAttempt, kind: ArtifactKind, populate: Populate, clock: Clock
    ) -> PublishedArtifact:
        from runstore.testing import model_publisher

        return model_publisher.publish_artifact(self, attempt, kind, populate, clock)

    def publish_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        references: Sequence[Reference],
        populate: Populate,
        clock: Clock,
    ) -> PublishedFinalization:
        from runstore.testing import model_publisher

        return model_publisher.publish_finalization(
            self, attempt, outcome, references, populate, clock
        )

    def recover(self, clock: Clock) -> RecoveryReport:
        from runstore.testing import model_publisher

        if not callable(clock):
            raise ModelRefusal(m.refuse(InvalidRecordError, "clock must be callable"))
        t_ns = model_publisher.sample(self, clock)
        if self.disk is None:
            raise Diverged("the model writer has no view of the disk to recover with")
        steps: list[m.ModelState] = []
        disk = self.disk(self.state)
        new_state, report = m.recover(self.state, t_ns, disk, steps)
        if isinstance(report, m.Refusal):
            return self.apply((new_state, report))
        for terminal in report.terminals:  # the store stages each failure it publishes
            final = new_state.attempts[terminal.attempt_id].final_artifact_id
            if new_state.artifacts[final or ""].path not in disk.objects:
                self.tokens()
        for step in steps[:-1]:  # each of the store's transactions that changed something
            self.apply((step, None))
        return self.apply((new_state, report))


class StageTokens:
    """Deterministic stage tokens for tests: ``00…01``, ``00…02``, ... (32 hex digits),
    or from ``start``."""

    def __init__(self, start: int = 1) -> None:
        self._next = start

    def __call__(self) -> str:
        token = f"{self._next:032x}"
        self._next += 1
        return token


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
