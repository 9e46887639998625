"""Writer call scripts as data: one :class:`Call` per writer method call, played on any
:class:`~runstore.testing.lockstep.Writer` (a ``RunStore`` or the model's ``ModelWriter``).

Rules of this file: values and deterministic functions only, no I/O. A call names the
writer method (``operation``), its keyword arguments as values, and for the guarded
operations the *handle* of the attempt it acts on: guards flow between calls through a
context dict (handle -> the attempt's latest guard), because a guard only exists once the
call that returns it has run. The crash simulator's scenarios (:mod:`runstore.crashsim.scenarios`)
and the event vectors (``tools/vectorgen/events.py``) are written in this one type, and both
check a script by playing it through :func:`runstore.testing.lockstep.lockstep` (the
event vectors with :func:`apply_in_lockstep`, call by call).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

import attrs
from runstore.batch import WriteBatch
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.receipts import ClaimDisposition
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import RetryAuthorization
from runstore.requests import TerminalOutcome
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import Outcome
from runstore.testing.lockstep import Writer
from runstore.testing.lockstep import lockstep
from runstore.testing.lockstep import outcome
from runstore.testing.publishing import ClockScript
from runstore.testing.publishing import Payload

Context = dict[str, OwnedAttempt]
"""Handle -> the latest guard of that attempt."""

GUARDED: Final = frozenset(
    {
        "advance",
        "renew",
        "begin_finalization",
        "register_observation",
        "commit_finalization",
        "publish_artifact",
        "publish_finalization",
    }
)
"""The operations whose first argument is a guard (``attempt``), taken from the context."""

OPERATIONS: Final = GUARDED | {
    "register_slots",
    "register_one_shot",
    "reserve",
    "recover",
    "apply_batch",
}

BATCHABLE: Final = frozenset(
    {"reserve", "advance", "renew", "begin_finalization", "register_observation"}
    | {"commit_finalization"}
)
"""The operations a write batch records (:func:`batch`)."""


@attrs.frozen
class Call:
    """One writer call. ``arguments`` are the method's keyword arguments except the guard;
    ``attempt`` is the handle of the guard a guarded call uses, or for ``reserve`` the
    handle the new attempt's guard is kept under (None for registrations)."""

    name: str
    operation: str = attrs.field(validator=attrs.validators.in_(OPERATIONS))
    arguments: Mapping[str, Any]
    attempt: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.attempt is None) == (self.operation in GUARDED or self.operation == "reserve"):
            raise ValueError(f"{self.name}: only reserve and guarded calls name an attempt")

    def invoke(self, writer: Writer, context: Context) -> object:
        """Make the call on ``writer`` with the handle's guard from ``context``; returns
        its result and leaves ``context`` as it was."""
        if self.operation == "apply_batch":
            return self._invoke_batch(writer, context)
        method = getattr(writer, self.operation)
        arguments = {
            name: value.fresh() if isinstance(value, ClockScript) else value
            for name, value in self.arguments.items()
        }
        if self.operation in GUARDED:
            assert self.attempt is not None
            return method(context[self.attempt], **arguments)  # the guard, by position
        return method(**arguments)

    def _invoke_batch(self, writer: Writer, context: Context) -> tuple[Outcome, ...]:
        """The batch's calls recorded in one :class:`WriteBatch` (a later call's guard is the
        pending of the handle's last call before it in the batch, else the context's),
        applied with ``writer.apply_batch``: each call's outcome, in order."""
        batch, local, pendings = WriteBatch(), dict[str, Any](context), []
        for call in self.arguments["calls"]:
            method = getattr(batch, call.operation)
            arguments = {
                name: value.fresh() if isinstance(value, ClockScript) else value
                for name, value in call.arguments.items()
            }
            if call.operation in GUARDED:
                pending = method(local[call.attempt], **arguments)
            else:
                pending = method(**arguments)
            if call.operation in ("begin_finalization", "register_observation"):
                local[call.attempt] = pending.then(_guard_of)
            elif call.operation != "commit_finalization":
                local[call.attempt] = pending
            pendings.append(pending)
        writer.apply_batch(batch)
        return tuple(outcome(pending.result) for pending in pendings)

    def keep(self, result: object, context: Context) -> None:
        """Keep the guard ``result`` carries (directly, or in a claim disposition or an
        observation receipt) as the
        handle's latest guard; for a batch, each call's that was not refused, in order."""
        if self.operation == "apply_batch":
            assert isinstance(result, tuple)
            for call, (kind, value) in zip(self.arguments["calls"], result, strict=True):
                if kind == "ok":
                    call.keep(value, context)
            return
        guard = (
            result.attempt
            if isinstance(result, ClaimDisposition | ObservationReceipt | PublishedArtifact)
            else result
        )
        if self.attempt is not None and isinstance(guard, OwnedAttempt):
            context[self.attempt] = guard

    def apply(self, writer: Writer, context: Context) -> object:
        """:meth:`invoke`, then :meth:`keep` its result; returns the result."""
        result = self.invoke(writer, context)
        self.keep(result, context)
        return result


def play(calls: Sequence[Call], writer: Writer, context: Context | None = None) -> list[object]:
    """Apply each call in order; returns their results."""
    context = {} if context is None else context
    return [call.apply(writer, context) for call in calls]


def apply_in_lockstep(call: Call, model: ModelWriter, store: Writer, context: Context) -> object:
    """:func:`~runstore.testing.lockstep.lockstep` of ``call`` on the model and on the
    store: both sides are handed the same guard from the shared ``context``, and the guard
    they return (equal on both sides, or lockstep raises ``Diverged``) is kept afterwards.
    A refusal shared by both is re-raised, leaving ``context`` unchanged."""
    result = lockstep(model, store, lambda writer: call.invoke(writer, context))
    call.keep(result, context)
    return result


def _guard_of(result: ClaimDisposition | ObservationReceipt) -> OwnedAttempt:
    return result.attempt


# --- builders: one per writer method, named after it ---------------------------------------


def batch(calls: Sequence[Call], *, name: str | None = None) -> Call:
    """``apply_batch`` of ``calls`` (each a :data:`BATCHABLE` call) as one write batch; its
    result is each call's outcome, ``("ok", result)`` or ``("refused", code)``."""
    for call in calls:
        if call.operation not in BATCHABLE:
            raise ValueError(f"{call.name}: {call.operation} is not a batch step")
    label = name or "batch: " + ", ".join(call.name for call in calls)
    return Call(label, "apply_batch", {"calls": tuple(calls)})


def register_slots(
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slots: Sequence[ObservationSlot],
    *,
    name: str = "register_slots",
) -> Call:
    return Call(
        name,
        "register_slots",
        {
            "decision": decision,
            "run": run,
            "attempt_slot": attempt_slot,
            "observation_slots": tuple(observation_slots),
        },
    )


def register_one_shot(
    decision: ApplicabilityDecision,
    run: ResolvedRun,
    attempt_slot: AttemptSlot,
    observation_slot: ObservationSlot,
    *,
    name: str = "register_one_shot",
) -> Call:
    return Call(
        name,
        "register_one_shot",
        {
            "decision": decision,
            "run": run,
            "attempt_slot": attempt_slot,
            "observation_slot": observation_slot,
        },
    )


def reserve(
    attempt: str,
    slot_id: str,
    authorization: RetryAuthorization,
    lease: LeaseRequest,
    now_ns: int,
    *,
    name: str | None = None,
) -> Call:
    arguments = {"slot_id": slot_id, "authorization": authorization, "lease": lease}
    return Call(name or f"reserve {attempt}", "reserve", {**arguments, "now_ns": now_ns}, attempt)


def advance(attempt: str, phase: AttemptState, now_ns: int, *, name: str | None = None) -> Call:
    label = name or f"advance {attempt} to {phase.value}"
    return Call(label, "advance", {"phase": phase, "now_ns": now_ns}, attempt)


def renew(attempt: str, expires_at_ns: int, now_ns: int, *, name: str | None = None) -> Call:
    arguments = {"expires_at_ns": expires_at_ns, "now_ns": now_ns}
    return Call(name or f"renew {attempt}", "renew", arguments, attempt)


def begin_finalization(
    attempt: str, lease: LeaseRequest, now_ns: int, *, name: str | None = None
) -> Call:
    label = name or f"begin_finalization {attempt}"
    return Call(label, "begin_finalization", {"lease": lease, "now_ns": now_ns}, attempt)


def register_observation(
    attempt: str,
    observation: Observation,
    artifact: ArtifactRegistration,
    select: bool,
    now_ns: int,
    *,
    references: Sequence[Reference] = (),
    name: str | None = None,
) -> Call:
    selected = "selected" if select else "unselected"
    arguments = {
        "observation": observation,
        "artifact": artifact,
        "references": tuple(references),
        "select": select,
    }
    return Call(
        name or f"register_observation {attempt} {selected}",
        "register_observation",
        {**arguments, "now_ns": now_ns},
        attempt,
    )


def commit_finalization(
    attempt: str,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    now_ns: int,
    *,
    finished_at_ns: int | None = None,
    name: str | None = None,
) -> Call:
    """A terminal commit at ``now_ns``, finishing at ``finished_at_ns`` (default: the
    same time)."""
    arguments = {
        "outcome": outcome,
        "artifact": artifact,
        "references": tuple(references),
        "finished_at_ns": now_ns if finished_at_ns is None else finished_at_ns,
    }
    return Call(
        name or f"commit_finalization {attempt} {outcome.state.value}",
        "commit_finalization",
        {**arguments, "now_ns": now_ns},
        attempt,
    )


def publish_artifact(
    attempt: str,
    kind: ArtifactKind,
    populate: Payload,
    clock: ClockScript,
    *,
    name: str | None = None,
) -> Call:
    """Publish an independent artifact that ``populate`` writes, sampling ``clock`` (a
    fresh clock per play)."""
    return Call(
        name or f"publish_artifact {attempt} {kind.value}",
        "publish_artifact",
        {"kind": kind, "populate": populate, "clock": clock},
        attempt,
    )


def publish_finalization(
    attempt: str,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    populate: Payload,
    clock: ClockScript,
    *,
    name: str | None = None,
) -> Call:
    """Publish the attempt's final artifact and commit ``outcome``."""
    return Call(
        name or f"publish_finalization {attempt} {outcome.state.value}",
        "publish_finalization",
        {
            "outcome": outcome,
            "references": tuple(references),
            "populate": populate,
            "clock": clock,
        },
        attempt,
    )


def recover(clock: ClockScript, *, name: str = "recover") -> Call:
    """One recovery pass, sampling ``clock`` (a fresh clock per play)."""
    return Call(name, "recover", {"clock": clock})
