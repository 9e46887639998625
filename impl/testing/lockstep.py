"""The lockstep kit: one writer interface over the store and the model, so a scenario runs
on either, and the one way to drive the two in lockstep.

Rules of this file: :data:`Writer` is either side, a ``RunStore`` or a :class:`ModelWriter`
(so a call typed against it is checked against both); :class:`ModelWriter` offers
``RunStore``'s writer methods over the pure model, each the model operation of the same
name applied to the current state (publication through
:mod:`runstore.testing.model_publisher`), raising :class:`ModelRefusal` (with the refusal's
code) where the store would raise a ``RunStoreError``. :func:`outcome` turns either kind of
refusal into a comparable value, and :func:`lockstep` makes one call on the model and then
on a store, raising :class:`Diverged` unless both give the same result or the same refusal
code. No I/O here beyond the store the caller passes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Concatenate
from typing import ParamSpec
from typing import TypeAlias
from typing import TypeVar

from runstore import model as m
from runstore.batch import Step
from runstore.batch import WriteBatch
from runstore.batch import run_steps
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.model.state import refuse
from runstore.recovery_report import RecoveryReport
from runstore.testing import model_publisher
from runstore.testing.model_steps import Diverged
from runstore.testing.model_steps import ModelRefusal
from runstore.testing.model_steps import ModelSteps
from runstore.testing.model_steps import StageTokens

if TYPE_CHECKING:
    from runstore.store import RunStore

__all__ = [
    "Diverged",
    "ModelRefusal",
    "ModelWriter",
    "Outcome",
    "StageTokens",
    "Writer",
    "lockstep",
    "outcome",
]

P = ParamSpec("P")
T = TypeVar("T")
Clock = Callable[[], int]


def _operation(
    operation: Callable[Concatenate[m.ModelState, P], tuple[m.ModelState, T | m.Refusal]],
) -> Callable[Concatenate[ModelSteps, P], T]:
    """The writer method ``operation`` makes: applied to the writer's current state, its
    result returned (its refusal raised). Its parameters are the operation's, after the
    state: the store's, in the store's order (the guard is ``guard`` there, ``attempt`` on
    the store, and every caller passes it by position)."""

    @functools.wraps(operation)
    def method(writer: ModelSteps, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return writer.apply(operation(writer.state, *args, **kwargs))

    return method


class ModelWriter(ModelSteps):
    """The pure model behind the :data:`Writer` interface; ``state`` is the current state."""

    def __init__(
        self,
        state: m.ModelState,
        tokens: Callable[[], str] | None = None,
        disk: Callable[[m.ModelState], m.DiskView] | None = None,
    ) -> None:
        super().__init__(state, tokens)
        self.disk = disk
        """What recovery finds on disk, read just before the model's pass (for a store
        driven in lockstep: :func:`runstore.testing.disk.disk_view` of its root); without
        it the model cannot recover."""

    register_slots = _operation(m.register_slots)
    register_one_shot = _operation(m.register_one_shot)
    register_exclusion = _operation(m.register_exclusion)
    reserve = _operation(m.reserve)
    advance = _operation(m.advance)
    renew = _operation(m.renew)
    begin_finalization = _operation(m.begin_finalization)
    register_observation = _operation(m.register_observation)
    commit_finalization = _operation(m.commit_finalization)
    publish_artifact = model_publisher.publish_artifact
    publish_finalization = model_publisher.publish_finalization

    def apply_batch(self, batch: WriteBatch) -> None:
        """``RunStore.apply_batch`` on the model: the batch's steps as the sequence of the
        model's operations of the same names (SPEC.md section 8, "Write batches"), each
        refusal its own step's, the pendings settled at the end. One batch is applied to one
        side only: build it again for the other."""
        if not isinstance(batch, WriteBatch):
            raise ModelRefusal(refuse(InvalidRecordError, "batch must be a WriteBatch"))
        if batch.settled:
            raise ModelRefusal(refuse(InvalidRecordError, "the batch has committed already"))

        def apply(step: Step, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
            return getattr(self, step.operation)(*args, **kwargs)

        before = len(self.trail)
        batch.settle(run_steps(batch, apply, (ModelRefusal,)))
        del self.trail[before:-1]  # one transaction: only its last state is ever seen

    def recover(self, clock: Clock) -> RecoveryReport:
        if not callable(clock):
            raise ModelRefusal(refuse(InvalidRecordError, "clock must be callable"))
        t_ns = model_publisher.sample(clock)
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


Writer: TypeAlias = "RunStore | ModelWriter"
"""The writer a scenario calls: the store itself, or the model behind :class:`ModelWriter`."""

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
