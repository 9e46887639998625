"""Write batches: writer operations recorded now and applied later, in order, in one
transaction (group commit, SPEC.md section 8, "Write batches").

Rules of this file: no I/O and no store. A :class:`WriteBatch` records steps, each the
name of a writer operation with its arguments, and hands out a :class:`Pending` per step;
an argument may be a pending of an earlier step of the same batch (or a
:meth:`Pending.then` of one), resolved when the batch is applied. :func:`run_steps` is
the one loop both sides apply a batch with, the store (each step in its own savepoint of
one ``BEGIN IMMEDIATE`` transaction) and the model (each step a model operation in
sequence): a step whose pending argument was refused is refused itself with
``batch_dependency_refused`` and never runs; any other refusal is the step's own, and
the steps after it run on. Pendings settle only through :meth:`WriteBatch.settle`, which
the store calls after its one commit: before that, no caller can act on a result that
might still be rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Generic
from typing import TypeVar

from runstore import arguments
from runstore.enums import AttemptState
from runstore.errors import BatchDependencyError
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.receipts import ClaimDisposition
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.records import Observation
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import RetryAuthorization
from runstore.requests import TerminalOutcome

T = TypeVar("T")
U = TypeVar("U")

MAX_STEPS = 10_000
"""The most steps one batch holds (a longer one is refused with ``invalid_record``)."""


class Pending(Generic[T]):
    """The result of one step of a :class:`WriteBatch`, known once the batch committed:
    :meth:`result` returns it or raises the step's refusal; before the commit (or after a
    batch that did not commit) it raises ``invalid_record``."""

    __slots__ = ("_batch", "_derive", "_step")

    def __init__(self, batch: WriteBatch, step: int, derive: Callable[[Any], T] | None) -> None:
        self._batch, self._step, self._derive = batch, step, derive

    def then(self, derive: Callable[[T], U]) -> Pending[U]:
        """A pending of ``derive(value)``: what a later step of the same batch takes as an
        argument that an earlier step returns inside its result (``disposition.then(lambda
        d: d.claimed)``). ``derive`` must be pure; it runs when the batch is applied."""
        own = self._derive
        chained = derive if own is None else (lambda value: derive(own(value)))
        return Pending(self._batch, self._step, chained)

    @property
    def done(self) -> bool:
        """Whether the batch committed, so that :meth:`result` answers."""
        return self._batch.settled

    def result(self) -> T:
        if not self._batch.settled:
            raise InvalidRecordError("the batch has not committed: its results are not known")
        return self.resolve(self._batch.outcomes)

    def resolve(self, outcomes: Sequence[object]) -> T:
        """The value from ``outcomes`` (one per step, a result or a refusal), derived;
        a refusal raises."""
        outcome: Any = outcomes[self._step]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome if self._derive is None else self._derive(outcome)

    @property
    def batch(self) -> WriteBatch:
        return self._batch


Guard = OwnedAttempt | Pending[OwnedAttempt]
"""A guard argument: an attempt guard, or the pending of an earlier step that returns one
(use :meth:`Pending.then` on a claim disposition or an observation receipt)."""


class Step:
    """One recorded operation: its name, positional and keyword arguments (pendings
    unresolved)."""

    __slots__ = ("args", "kwargs", "operation")

    def __init__(self, operation: str, args: tuple[object, ...], kwargs: dict[str, object]):
        self.operation, self.args, self.kwargs = operation, args, kwargs


class WriteBatch:
    """Writer operations to apply in order in one transaction with
    ``RunStore.apply_batch``. Each method takes the store method's arguments (any of them
    may be a pending of an earlier step of this batch) and returns the step's pending.
    Arguments that hold no pending are checked at once, as the store method checks them
    (a refusal records nothing); all are checked again when the step runs."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.outcomes: list[object] = []
        self.settled = False

    def __len__(self) -> int:
        return len(self.steps)

    def reserve(
        self,
        slot_id: str,
        authorization: RetryAuthorization,
        lease: LeaseRequest,
        now_ns: int,
    ) -> Pending[OwnedAttempt]:
        return self._add("reserve", slot_id, authorization, lease, now_ns)

    def advance(self, attempt: Guard, phase: AttemptState, now_ns: int) -> Pending[OwnedAttempt]:
        return self._add("advance", attempt, phase, now_ns)

    def renew(self, attempt: Guard, expires_at_ns: int, now_ns: int) -> Pending[OwnedAttempt]:
        return self._add("renew", attempt, expires_at_ns, now_ns)

    def begin_finalization(
        self, attempt: Guard, lease: LeaseRequest, now_ns: int
    ) -> Pending[ClaimDisposition]:
        return self._add("begin_finalization", attempt, lease, now_ns)

    def register_observation(
        self,
        attempt: Guard,
        observation: Observation,
        artifact: ArtifactRegistration,
        references: Sequence[Reference],
        *,
        select: bool | Pending[bool],
        now_ns: int,
    ) -> Pending[ObservationReceipt]:
        return self._add(
            "register_observation",
            attempt,
            observation,
            artifact,
            references,
            select=select,
            now_ns=now_ns,
        )

    def commit_finalization(
        self,
        attempt: Guard,
        outcome: TerminalOutcome,
        artifact: ArtifactRegistration,
        references: Sequence[Reference],
        finished_at_ns: int,
        now_ns: int,
    ) -> Pending[TerminalAttempt]:
        return self._add(
            "commit_finalization", attempt, outcome, artifact, references, finished_at_ns, now_ns
        )

    def settle(self, outcomes: Sequence[object]) -> None:
        """Make the committed outcomes (one per step) the pendings' answers."""
        if len(outcomes) != len(self.steps):
            raise InvalidRecordError("a batch settles with one outcome per step")
        self.outcomes, self.settled = list(outcomes), True

    def _add(self, operation: str, *args: object, **kwargs: object) -> Pending[Any]:
        if self.settled:
            raise InvalidRecordError("the batch has committed; record steps in a new batch")
        if len(self.steps) >= MAX_STEPS:
            raise InvalidRecordError(f"a batch holds at most {MAX_STEPS} steps")
        values = (*args, *kwargs.values())
        for value in values:
            if isinstance(value, Pending) and value.batch is not self:
                raise InvalidRecordError("a pending of another batch is not an argument here")
        if not any(isinstance(value, Pending) for value in values):
            refusal = CHECKS[operation](*args, **kwargs)
            if refusal is not None:
                raise refusal
        self.steps.append(Step(operation, args, kwargs))
        return Pending(self, len(self.steps) - 1, None)


CHECKS: dict[str, Callable[..., RunStoreError | None]] = {
    name: arguments.OPERATIONS[name]
    for name in (
        "reserve",
        "advance",
        "renew",
        "begin_finalization",
        "register_observation",
        "commit_finalization",
    )
}
"""Each operation's argument check (:mod:`runstore.arguments`), the store method's own."""


def _resolved(value: object, outcomes: Sequence[object]) -> object:
    return value.resolve(outcomes) if isinstance(value, Pending) else value


def run_steps(
    batch: WriteBatch,
    apply: Callable[[Step, tuple[object, ...], dict[str, object]], object],
    refusals: tuple[type[BaseException], ...],
) -> list[object]:
    """Apply ``batch``'s steps in order through ``apply(step, args, kwargs)`` (pendings
    resolved, arguments checked) and return one outcome per step: its result, or the
    refusal (an instance of ``refusals``, or ``batch_dependency_refused`` for a step whose
    pending argument was refused, or the argument check's refusal) that stopped it.
    Anything else ``apply`` raises propagates: the caller's transaction is then void."""
    outcomes: list[object] = []
    for number, step in enumerate(batch.steps):
        try:
            args = tuple(_resolved(value, outcomes) for value in step.args)
            kwargs = {name: _resolved(value, outcomes) for name, value in step.kwargs.items()}
        except (RunStoreError, *refusals) as refused:  # type: ignore[misc]
            outcomes.append(
                BatchDependencyError(
                    f"step {number} ({step.operation}) takes the result of a refused step "
                    f"({getattr(refused, 'code', 'refused')})"
                )
            )
            continue
        refusal = CHECKS[step.operation](*args, **kwargs)
        if refusal is not None:
            outcomes.append(refusal)
            continue
        try:
            outcomes.append(apply(step, args, kwargs))
        except refusals as refused:
            outcomes.append(refused)
    return outcomes


__all__ = ["MAX_STEPS", "Guard", "Pending", "Step", "WriteBatch", "run_steps"]
