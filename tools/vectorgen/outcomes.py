"""The outcome document vectors (``vectors/outcomes.json``, SPEC.md section 13): for each
case, a script of writer calls, an attempt left finalizing by it, and the exact canonical
bytes of that attempt's ``outcome.json`` for a given outcome, references and finish time.

Rules of this file: the cases are data; it writes no file (the caller writes
``build()``'s text) and opens stores only on temporary roots of its own, one per case; the
pinned bytes come from the library's two builders, never from code here.

Each case is written once as data (:data:`CASES`), its calls as
:class:`runstore.testing.script.Call` values whose attempt handles are attempt ids, and is
played on its own: every call in lockstep on the model (``ModelWriter``) and on a real store
(``RunStore.open`` on a fresh temporary root), requiring equal results, the same committed
event sequences and, at the end, equal durable projections. The document is then built by
the model's builder (:mod:`runstore.model.outcome_document`) and, after the store is
closed, by the store's builder (:mod:`runstore.store.publication.outcome_document`) on a plain
connection inside ``BEGIN``; the two must give the same bytes. Anything else raises
:class:`~vectorgen.events.GenerationRefused` and nothing is written.

The operations are written exactly as ``events.json`` writes its own (the argument and
result forms of :mod:`vectorgen.events`, :func:`~vectorgen.events.operation_json`), with
``register_slots`` added: its ``observation_slots`` is the array of the slots'
``record_json`` documents.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Sequence
from typing import Any

import attrs
from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Next
from runstore import Reference
from runstore import RunStore
from runstore import Superseded
from runstore import TerminalOutcome
from runstore import model as m
from runstore import testing
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.canonical import JSON
from runstore.model import outcome_document as model_builder
from runstore.store.publication import outcome_document as store_builder
from runstore.testing import script
from runstore.testing.lockstep import ModelWriter
from runstore.testing.script import Call
from runstore.testing.script import Context

from . import header
from . import render
from .events import CENSOR_REASON
from .events import EXPIRES_NS
from .events import FAILURE_DETAILS
from .events import GenerationRefused
from .events import arguments_json
from .events import at
from .events import delivered_to
from .events import operation_json
from .events import step

# --- the cases -----------------------------------------------------------------------------


@attrs.frozen
class Case:
    """One vector: ``calls`` leave ``attempt_id`` finalizing; its document is built for
    ``outcome``, ``references`` (in this order, unsorted on purpose) and
    ``finished_at_ns``."""

    name: str
    calls: tuple[Call, ...]
    attempt_id: str
    outcome: TerminalOutcome
    references: tuple[Reference, ...]
    finished_at_ns: int


def _lease(name: str) -> LeaseRequest:
    """The lease ``lease-<name>`` of owner ``<name>`` without a ``-claim`` suffix."""
    return testing.lease(name, expires_at_ns=EXPIRES_NS, owner=name.removesuffix("-claim"))


def _artifact(kind: ArtifactKind, seed: str, ms: int) -> ArtifactRegistration:
    # Verification times are odd microseconds, so none equals any other time of a case.
    return testing.artifact(kind, seed, verified_at_ns=at(ms) + 1_000)


def _accepted() -> Case:
    flux = testing.stream("flux", checkpoints=2)
    s0 = flux.attempt_id(0)
    first, second = flux.observation_slots
    cp0 = _artifact(ArtifactKind.OBSERVATION, "flux-0-checkpoint-0", 3)
    cp1 = _artifact(ArtifactKind.OBSERVATION, "flux-0-checkpoint-1", 4)
    calls = (
        script.register_slots(*flux.arguments(), name="register the stream slot flux"),
        script.reserve(s0, flux.slot_id, FirstAttempt(), _lease("flux-0"), at(1)),
        script.begin_finalization(s0, _lease("flux-0-claim"), at(2)),
        script.register_observation(
            s0, testing.observation(first, s0, result={"step": 0}), cp0, True, at(3)
        ),
        script.register_observation(
            s0,
            testing.observation(second, s0, result={"step": 1}),
            cp1,
            True,
            at(4),
            references=[Reference("previous", cp0.id), Reference("self", cp1.id)],
        ),
    )
    references = (
        Reference("dataset", cp1.id),
        Reference("checkpoints", cp1.id),
        Reference("dataset", cp0.id),
    )
    return Case(
        "accepted: a stream's claim holder with both checkpoints selected",
        calls,
        s0,
        Accepted(),
        references,
        at(5),
    )


def _censored() -> Case:
    alpha = testing.one_shot("alpha")
    a0, a1 = alpha.attempt_id(0), alpha.attempt_id(1)
    result0 = _artifact(ArtifactKind.OBSERVATION, "alpha-0-result", 3)
    result1 = _artifact(ArtifactKind.OBSERVATION, "alpha-1-result", 7)
    final0 = _artifact(ArtifactKind.ATTEMPT, "alpha-0", 4)
    calls = (
        script.register_one_shot(*alpha.arguments(), name="register the one-shot slot alpha"),
        script.reserve(a0, alpha.slot_id, FirstAttempt(), _lease("alpha-0"), at(1)),
        script.begin_finalization(a0, _lease("alpha-0-claim"), at(2)),
        script.register_observation(
            a0,
            testing.observation(alpha.observation_slot, a0, result={"score": 3}),
            result0,
            True,
            at(3),
        ),
        script.commit_finalization(a0, Failed(code="lost", details={}), final0, [], at(4)),
        script.reserve(a1, alpha.slot_id, Next(retry=True), _lease("alpha-1"), at(5)),
        script.advance(a1, AttemptState.MATERIALIZING, at(6)),
        script.register_observation(
            a1,
            testing.observation(alpha.observation_slot, a1, result={"score": 5}),
            result1,
            False,
            at(7),
            references=[Reference("origin", result0.id)],
        ),
        script.advance(a1, AttemptState.FINALIZING, at(8)),
    )
    return Case(
        "censored: the slot's selection is another attempt's observation",
        calls,
        a1,
        Censored(reason="budget exhausted"),
        (Reference("log", final0.id),),
        at(9),
    )


def _failed() -> Case:
    beta = testing.one_shot("beta")
    b0 = beta.attempt_id(0)
    result0 = _artifact(ArtifactKind.OBSERVATION, "beta-0-result", 5)
    calls = (
        script.register_one_shot(*beta.arguments(), name="register the one-shot slot beta"),
        script.reserve(b0, beta.slot_id, FirstAttempt(), _lease("beta-0"), at(1)),
        script.advance(b0, AttemptState.MATERIALIZING, at(2)),
        script.advance(b0, AttemptState.STARTING, at(3)),
        script.begin_finalization(b0, _lease("beta-0-claim"), at(4)),
        script.register_observation(
            b0,
            testing.observation(beta.observation_slot, b0, result={"score": 8}),
            result0,
            True,
            at(5),
        ),
    )
    return Case(
        "failed: nested details; its own selected observation is not bound",
        calls,
        b0,
        Failed(code="worker_crashed", details=FAILURE_DETAILS),
        (Reference("input", result0.id),),
        at(6),
    )


def _superseded() -> Case:
    gamma = testing.one_shot("gamma")
    c0, c1 = gamma.attempt_id(0), gamma.attempt_id(1)
    result1 = _artifact(ArtifactKind.OBSERVATION, "gamma-1-result", 5)
    calls = (
        script.register_one_shot(*gamma.arguments(), name="register the one-shot slot gamma"),
        script.reserve(c0, gamma.slot_id, FirstAttempt(), _lease("gamma-0"), at(1)),
        script.reserve(c1, gamma.slot_id, Next(retry=True), _lease("gamma-1"), at(2)),
        script.begin_finalization(c0, _lease("gamma-0-claim"), at(3)),
        script.begin_finalization(c1, _lease("gamma-1-claim"), at(4)),
        script.register_observation(
            c1,
            testing.observation(gamma.observation_slot, c1, result={"score": 13}),
            result1,
            False,
            at(5),
        ),
    )
    return Case(
        "superseded: the losing contender keeps its own unselected observation",
        calls,
        c1,
        Superseded(),
        (),
        at(6),
    )


def _non_ascii() -> Case:
    slot = testing.one_shot("mesure-\u00e9t\u00e9", candidate="candidat-\u00fc")
    d0 = slot.attempt_id(0)
    result0 = _artifact(ArtifactKind.OBSERVATION, "mesure-0-result", 3)
    observation = testing.observation(
        slot.observation_slot, d0, result={"note": "\u00e9t\u00e9 \U0001f600", "\u00e9": 1}
    )
    calls = (
        script.register_one_shot(*slot.arguments(), name="register the non-ASCII slot"),
        script.reserve(d0, slot.slot_id, FirstAttempt(), _lease("mesure-0"), at(1)),
        script.begin_finalization(d0, _lease("mesure-0-claim"), at(2)),
        script.register_observation(
            d0,
            observation,
            result0,
            True,
            at(3),
            references=[Reference("\u00e9cho \U0001f600", result0.id)],
        ),
    )
    references = (
        Reference("\u00e9", result0.id),
        Reference("donn\u00e9es \U0001f600", result0.id),
        Reference("Zeta", result0.id),
    )
    return Case(
        "non-ASCII: names, results, roles sorted as UTF-8 bytes, and a censor reason",
        calls,
        d0,
        Censored(reason=CENSOR_REASON),
        references,
        at(4),
    )


CASES: tuple[Case, ...] = (_accepted(), _censored(), _failed(), _superseded(), _non_ascii())

# --- playing a case ------------------------------------------------------------------------


def outcome_argument(outcome: TerminalOutcome) -> JSON:
    """``outcome`` in the form ``events.json`` writes a ``commit_finalization`` argument."""
    call = Call("outcome", "commit_finalization", {"outcome": outcome}, "attempt")
    return arguments_json(call)["outcome"]


def store_document(
    database_path: str,
    attempt_id: str,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    finished_at_ns: int,
) -> bytes:
    """The store builder's bytes for the attempt's document, on a plain connection inside
    ``BEGIN`` (the store is closed)."""
    connection = sqlite3.connect(database_path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        data = store_builder.outcome_document(
            connection, attempt_id, outcome, list(references), finished_at_ns
        )
        connection.execute("ROLLBACK")
    finally:
        connection.close()
    return data


def play(case: Case) -> tuple[list[dict[str, Any]], bytes]:
    """Play ``case`` in lockstep; returns its operations (as written to the file) and the
    document bytes both builders agree on. Raises ``GenerationRefused`` otherwise."""
    model = ModelWriter(m.ModelState())
    operations: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="runstore-outcomes-") as root:
        with RunStore.open(root) as store:
            delivered = delivered_to(store)
            context: Context = {}
            for call in case.calls:
                result, sequences = step(case.name, call, model, store, context, delivered)
                operations.append(operation_json(call, result, sequences))
            database_path = store.database_path
        if store_projection(database_path) != model_projection(model.state):
            raise GenerationRefused(f"{case.name}: the durable projections disagree")
        stored = store_document(
            database_path, case.attempt_id, case.outcome, case.references, case.finished_at_ns
        )
    modelled_document = model_builder.outcome_document(
        model.state, case.attempt_id, case.outcome, case.references, case.finished_at_ns
    )
    if stored != modelled_document:
        raise GenerationRefused(f"{case.name}: the store and the model build different documents")
    return operations, stored


# --- rendering -----------------------------------------------------------------------------


def case_json(case: Case) -> dict[str, Any]:
    """One entry of the ``outcomes`` section."""
    operations, document = play(case)
    return {
        "name": case.name,
        "operations": operations,
        "attempt_id": case.attempt_id,
        "outcome": outcome_argument(case.outcome),
        "references": [[reference.role, reference.artifact_id] for reference in case.references],
        "finished_at_ns": str(case.finished_at_ns),
        "outcome_hex": document.hex(),
        "outcome_utf8": document.decode("utf-8"),
    }


def document() -> dict[str, Any]:
    """The document of ``vectors/outcomes.json``."""
    return {
        **header("runstore outcome document vectors"),
        "outcomes": [case_json(case) for case in CASES],
    }


def build() -> str:
    """The text of ``vectors/outcomes.json``."""
    return render(document())
