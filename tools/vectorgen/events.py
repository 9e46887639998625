"""The event vectors (``vectors/events.json``, SPEC.md sections 7 and 10): one script of
writer calls, what each call returned, and every event it committed, payload bytes included.

The scenario, :data:`SCENARIO`, is written once as data, a list of
:class:`runstore.testing.script.Call`. Each attempt's handle is its attempt id, so the
``attempt_id`` of a guarded operation in the file is the handle, standing (as
``vectors/README.md`` says) for the latest guard of that attempt.

:func:`play` checks the scenario through the lockstep kit: every call is made with
:func:`runstore.testing.lockstep.lockstep` on the model (``ModelWriter``) and on a real
store (``RunStore.open`` on a fresh temporary root), and must give equal results and commit
events with the same sequences; at the end the store's durable projection, events with
their payload bytes included, must equal the model's. Anything else raises
:class:`GenerationRefused`, and ``tools/regen`` then writes nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from typing import Any

import attrs
from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Censored
from runstore import CommittedEvent
from runstore import Failed
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Next
from runstore import Observation
from runstore import RecoveryReport
from runstore import Reference
from runstore import Retry
from runstore import RetryAuthorization
from runstore import RunStore
from runstore import Superseded
from runstore import model as m
from runstore import testing
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.canonical import JSON
from runstore.errors import RunStoreError
from runstore.kit.calls import argument_wire
from runstore.testing import script
from runstore.testing.lockstep import Diverged
from runstore.testing.lockstep import ModelWriter
from runstore.testing.publishing import ClockScript
from runstore.testing.script import Call
from runstore.testing.script import Context

from . import header
from . import render

# --- the scenario --------------------------------------------------------------------------

# Wall-clock-sized nanosecond times (beyond 2**53, so every *_ns value is a decimal string).
T0 = 1_700_000_000_000_000_000
EXPIRES_NS = T0 + 3_600 * 10**9


def at(ms: int) -> int:
    """The scenario's time ``ms`` milliseconds after ``T0``."""
    return T0 + ms * 1_000_000


ALPHA = testing.one_shot("alpha")
BETA = testing.one_shot("beta")
GAMMA = testing.one_shot("gamma")
CENSOR_REASON = 'budget "\u00e9puis\u00e9" \u2014 \u8a08\u7b97\u6642\u9593 \U0001f600'
FAILURE_DETAILS: dict[str, JSON] = {
    "exit": {"signal": "SIGKILL", "code": 137},
    "stages": [{"name": "evaluate", "ok": False, "retries": [1, 2]}, None],
    "retryable": True,
    "note": "caf\u00e9",
}


def _lease(name: str, owner: str) -> LeaseRequest:
    return testing.lease(name, expires_at_ns=EXPIRES_NS, owner=owner)


def _observation(bundle: testing.OneShot, retry_index: int, score: int) -> Observation:
    return testing.observation(
        bundle.observation_slot, bundle.attempt_id(retry_index), result={"score": score}
    )


def _artifact(kind: ArtifactKind, seed: str, ms: int) -> ArtifactRegistration:
    return testing.artifact(kind, seed, verified_at_ns=at(ms))


def _register(bundle: testing.OneShot) -> Call:
    name = f"register one-shot slot {bundle.attempt_slot.logical_slot}"
    return script.register_one_shot(*bundle.arguments(), name=name)


def _reserve(
    name: str,
    bundle: testing.OneShot,
    retry_index: int,
    authorization: RetryAuthorization,
    owner: str,
    ms: int,
) -> Call:
    """Reserve retry ``retry_index`` of ``bundle``, kept under the handle of its attempt id,
    with the lease ``<slot>-<retry index>`` held by ``owner``."""
    lease = _lease(f"{bundle.attempt_slot.logical_slot}-{retry_index}", owner)
    attempt = bundle.attempt_id(retry_index)
    return script.reserve(attempt, bundle.slot_id, authorization, lease, at(ms), name=name)


def _advance(name: str, attempt: str, phase: AttemptState, ms: int) -> Call:
    return script.advance(attempt, phase, at(ms), name=name)


def _claim(name: str, attempt: str, lease: str, owner: str, ms: int) -> Call:
    return script.begin_finalization(attempt, _lease(lease, owner), at(ms), name=name)


A0, A1 = ALPHA.attempt_id(0), ALPHA.attempt_id(1)
B0, B1 = BETA.attempt_id(0), BETA.attempt_id(1)
C0 = GAMMA.attempt_id(0)
S = AttemptState
BETA_RESULT = _artifact(ArtifactKind.OBSERVATION, "beta-0-result", 21)

SCENARIO: list[Call] = [
    *(_register(bundle) for bundle in (ALPHA, BETA, GAMMA)),
    _reserve("reserve alpha retry 0 (first_attempt)", ALPHA, 0, FirstAttempt(), "worker-1", 1),
    _reserve("reserve beta retry 0 (next, retry false)", BETA, 0, Next(retry=False), "worker-2", 2),
    _advance("alpha#0 reserved -> materializing", A0, S.MATERIALIZING, 3),
    _advance("alpha#0 materializing -> starting", A0, S.STARTING, 4),
    _reserve(
        "reserve beta retry 1 while retry 0 is live (next, retry true)",
        BETA,
        1,
        Next(retry=True),
        "worker-3",
        5,
    ),
    _advance("beta#0 reserved -> materializing", B0, S.MATERIALIZING, 6),
    _advance("alpha#0 starting -> preparing", A0, S.PREPARING, 7),
    _advance("alpha#0 preparing -> executing", A0, S.EXECUTING, 8),
    _advance("alpha#0 executing -> checkpointing", A0, S.CHECKPOINTING, 9),
    _advance("alpha#0 checkpointing -> validating", A0, S.VALIDATING, 10),
    _advance("alpha#0 validating -> evaluating", A0, S.EVALUATING, 11),
    _advance("alpha#0 evaluating -> executing (the loop)", A0, S.EXECUTING, 12),
    _advance("alpha#0 executing -> validating (no checkpoint)", A0, S.VALIDATING, 13),
    _advance("alpha#0 validating -> evaluating again", A0, S.EVALUATING, 14),
    _advance("beta#0 materializing -> starting", B0, S.STARTING, 15),
    _advance("beta#0 starting -> preparing", B0, S.PREPARING, 16),
    _advance("beta#0 preparing -> executing", B0, S.EXECUTING, 17),
    _advance("beta#1 reserved -> materializing", B1, S.MATERIALIZING, 18),
    _claim(
        "beta#0 begin_finalization from executing (claimed)", B0, "beta-0-claim", "worker-2", 19
    ),
    _claim(
        "beta#1 begin_finalization from materializing (superseded: beta#0 holds the claim)",
        B1,
        "beta-1-claim",
        "worker-3",
        20,
    ),
    script.register_observation(
        B0,
        _observation(BETA, 0, 41),
        BETA_RESULT,
        True,
        at(21),
        references=[Reference("metrics", BETA_RESULT.id)],
        name="beta#0 register_observation and select (with a metrics reference)",
    ),
    script.commit_finalization(
        B0,
        Accepted(),
        _artifact(ArtifactKind.ATTEMPT, "beta-0", 22),
        [Reference("result", BETA_RESULT.id)],
        at(22) + 500_000,
        finished_at_ns=at(22),
        name="beta#0 commit accepted (with a reference; finished 0.5 ms before the commit)",
    ),
    script.commit_finalization(
        B1,
        Superseded(),
        _artifact(ArtifactKind.ATTEMPT, "beta-1", 23),
        [],
        at(23),
        name="beta#1 commit superseded (without the claim)",
    ),
    _claim(
        "alpha#0 begin_finalization from evaluating (claimed)", A0, "alpha-0-claim", "worker-1", 24
    ),
    script.commit_finalization(
        A0,
        Failed(code="worker_crashed", details=FAILURE_DETAILS),
        _artifact(ArtifactKind.ATTEMPT, "alpha-0", 25),
        [],
        at(25),
        name="alpha#0 commit failed (code, nested details)",
    ),
    _reserve(
        "reserve alpha retry 1 after a failure (next, retry true)",
        ALPHA,
        1,
        Next(retry=True),
        "worker-1",
        26,
    ),
    _advance("alpha#1 reserved -> materializing", A1, S.MATERIALIZING, 27),
    _advance("alpha#1 materializing -> starting, clock behind (clamped)", A1, S.STARTING, 26),
    _claim(
        "alpha#1 begin_finalization from starting (claimed)", A1, "alpha-1-claim", "worker-1", 28
    ),
    script.register_observation(
        A1,
        _observation(ALPHA, 1, 7),
        _artifact(ArtifactKind.OBSERVATION, "alpha-1-result", 29),
        True,
        at(29),
        name="alpha#1 register_observation and select",
    ),
    script.commit_finalization(
        A1,
        Accepted(),
        _artifact(ArtifactKind.ATTEMPT, "alpha-1", 30),
        [],
        at(30),
        name="alpha#1 commit accepted",
    ),
    _reserve(
        "reserve gamma retry 0 (retry 0 of at most 2)",
        GAMMA,
        0,
        Retry(next_index=0, max_index=2),
        "worker-4",
        31,
    ),
    _advance("gamma#0 reserved -> finalizing without contending (no claim)", C0, S.FINALIZING, 32),
    script.commit_finalization(
        C0,
        Censored(reason=CENSOR_REASON),
        _artifact(ArtifactKind.ATTEMPT, "gamma-0", 33),
        [],
        at(33),
        name="gamma#0 commit censored (non-ASCII reason with a quote, without a claim)",
    ),
]

# --- playing it in lockstep ----------------------------------------------------------------


class GenerationRefused(Exception):
    """The scenario did not play cleanly: the store and the model disagree, or a call was
    refused (by both: the scenario refuses nothing). Nothing may be written."""


@attrs.frozen
class Played:
    """One call of the scenario as the store played it."""

    call: Call
    result: object
    event_sequences: tuple[int, ...]


def delivered_to(store: RunStore) -> list[CommittedEvent]:
    """A list to which ``store`` appends every event it commits (its subscriber)."""
    delivered: list[CommittedEvent] = []
    store.subscribe(delivered.append)
    return delivered


def step(
    name: str,
    call: Call,
    model: ModelWriter,
    store: RunStore,
    context: Context,
    delivered: list[CommittedEvent],
) -> tuple[object, list[int]]:
    """Apply ``call`` in lockstep (in the file or case ``name``); returns its result and the
    sequences of the events it committed (``delivered``, the store's subscriber, grows with
    each), which must be the model's. Raises ``GenerationRefused`` when the two disagree,
    or when the call is refused."""
    before, model_before = len(delivered), len(model.state.events)
    try:
        result = script.apply_in_lockstep(call, model, store, context)
    except Diverged as error:
        raise GenerationRefused(
            f"{name}: the store and the model disagree at {call.name!r}: {error}"
        ) from error
    except RunStoreError as error:
        raise GenerationRefused(
            f"{name}: {call.name!r} was refused ({error.code}); the scenario refuses nothing"
        ) from error
    sequences = [event.sequence for event in delivered[before:]]
    modelled = [row.sequence for row in model.state.events[model_before:]]
    if sequences != modelled:
        raise GenerationRefused(
            f"{name}: the store and the model disagree at {call.name!r}: "
            f"events {sequences} and {modelled}"
        )
    return result, sequences


def play() -> tuple[list[Played], list[CommittedEvent]]:
    """Play :data:`SCENARIO` in lockstep on the model and on a fresh store; returns each
    call with the store's result and the sequences of the events it committed, and every
    event the store delivered to its subscriber. Raises :class:`GenerationRefused` unless
    the two agree call by call and on the final durable projection."""
    model = ModelWriter(m.ModelState())
    played: list[Played] = []
    with (
        tempfile.TemporaryDirectory(prefix="runstore-vectors-") as root,
        RunStore.open(root) as store,
    ):
        delivered = delivered_to(store)
        context: Context = {}
        for call in SCENARIO:
            result, sequences = step("events.json", call, model, store, context, delivered)
            guard = context.get(call.attempt or "")
            if call.attempt is not None and (guard is None or guard.attempt_id != call.attempt):
                raise GenerationRefused(f"{call.name!r}: its handle is not its attempt's id")
            played.append(Played(call, result, tuple(sequences)))
        stored = store_projection(store.database_path)
    modelled_projection = model_projection(model.state)
    if stored != modelled_projection:
        tables = [name for name in stored if stored[name] != modelled_projection.get(name)]
        raise GenerationRefused(
            f"the store and the model disagree on the durable projection: {', '.join(tables)}"
        )
    if [(e.sequence, e.kind, e.attempt_id, e.at_ns, e.payload) for e in delivered] != stored[
        "events"
    ]:
        raise GenerationRefused("the events the store delivered are not the events it committed")
    return played, delivered


# --- rendering (vectors/README.md, ``events.json``) -----------------------------------------


def _argument_json(key: str, value: Any) -> JSON:
    """An argument in the files' form: the conformance protocol's (``runstore.kit.calls``),
    except a recovery clock, which the files write as its one reading."""
    if isinstance(value, ClockScript):  # recover: the one reading the pass samples
        (reading,) = value.samples
        return str(reading)
    form: JSON = argument_wire(key, value)
    return form


VECTOR_NAMES: dict[str, str] = {"decision": "candidate"}
"""Parameters the vector files name otherwise: their format (``vectors/README.md``) calls a
registration's decision ``candidate``, and the files keep their bytes."""


def arguments_json(call: Call) -> dict[str, JSON]:
    """The call's arguments as plain JSON, under the names the vector files use
    (:data:`VECTOR_NAMES`); a guarded call's ``attempt_id`` is its handle."""
    document = {
        VECTOR_NAMES.get(key, key): _argument_json(key, value)
        for key, value in call.arguments.items()
    }
    if call.operation in script.GUARDED:
        document["attempt_id"] = call.attempt
    return document


def result_json(result: object) -> dict[str, JSON]:
    """What a call returned, as plain JSON: a registration's slot id as ``{slot_id}``, a
    receipt as its ``to_json()`` (``vectors/README.md``, "Results"), and a recovery report
    as its ``to_json()`` with each rejection cut to a ``[path, code]`` pair (its message is
    for people and is not pinned)."""
    if isinstance(result, str):
        return {"slot_id": result}
    if isinstance(result, RecoveryReport):
        document: dict[str, Any] = result.to_json()
        pairs = [[item["path"], item["code"]] for item in document["rejected_artifacts"]]
        return {**document, "rejected_artifacts": pairs}
    return result.to_json()  # a guard, a claim disposition or a receipt


def operation_json(call: Call, result: object, sequences: Sequence[int]) -> dict[str, Any]:
    """One entry of a file's ``operations``: the call, its arguments, its result and the
    sequences of the events it committed."""
    return {
        "name": call.name,
        "operation": call.operation,
        "arguments": arguments_json(call),
        "result": result_json(result),
        "event_sequences": list(sequences),
    }


def document() -> dict[str, Any]:
    """The document of ``vectors/events.json`` (only once the store and the model agree)."""
    played, events = play()
    names = {sequence: p.call.name for p in played for sequence in p.event_sequences}
    return {
        **header("runstore event vectors"),
        "operations": [operation_json(p.call, p.result, p.event_sequences) for p in played],
        "events": [
            {"name": names[e.sequence], **e.to_json(), "payload_utf8": e.payload.decode("utf-8")}
            for e in events
        ],
    }


def build() -> str:
    """The text of ``vectors/events.json``."""
    return render(document())
