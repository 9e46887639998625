"""The recovered-failure vectors (``vectors/recovery.json``, SPEC.md sections 13 and 14):
for each case, a script of writer calls that leaves one attempt whose owner lost
authority, one recovery pass at a pinned time, what the pass reported and committed, and
the exact bytes of the final object it published: ``outcome.json`` (the document of
``Failed(code="interrupted_attempt", details={"cause", "interrupted_state"})``) and
``manifest.json``.

Rules of this file: the cases are data; it writes no file (the caller writes ``build()``'s
text) and opens stores only on temporary roots of its own, one per case; the pinned bytes
are read from the store's root after the pass, never built here.

Each case is played on its own: every writer call and then the ``recover`` call in
lockstep on the model (``ModelWriter`` whose disk view is
:func:`runstore.testing.disk.disk_view` of the store's root) and on a real store
(``RunStore.open`` on a fresh temporary root, stage tokens from a fresh
:class:`~runstore.testing.lockstep.StageTokens` on both sides), requiring equal results,
the same committed event sequences and, at the end, equal durable projections. The final
object's ``outcome.json`` must then be exactly the document both builders
(:mod:`runstore.model.outcome_document` over the model's final state and
:mod:`runstore.store.publication.outcome_document` on the closed store's database inside ``BEGIN``)
build for the committed outcome, references and finish time; the outcome must be the one the case
expects; the pass must leave every observation and selection as it found them; and
:func:`runstore.store.publication.objects.verify` of the object must give the registered digests,
the object holding only ``outcome.json`` and ``manifest.json``. Anything else raises
:class:`~vectorgen.events.GenerationRefused` and nothing is written.

The operations are written exactly as ``outcomes.json`` writes its own (the argument and
result forms of :mod:`vectorgen.events`). The recovery pass is one more operation,
``recover``, whose ``arguments`` are ``{"clock": "<t>"}``: the single reading ``t`` the
pass samples from its clock, a decimal string. Its ``result`` is the report as plain JSON
(:func:`vectorgen.events.result_json`: ``RecoveryReport.to_json()`` with each rejection
as a ``[path, code]`` pair).

Not covered: an attempt with an artifact rooted under its lease (a ``leased_root``
dependency). Roots come only from ``publish_artifact``, which writes real payload files,
and the operation form of ``events.json`` has no ``publish_artifact``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import attrs
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import Next
from runstore import RecoveryReport
from runstore import RunStore
from runstore import TerminalOutcome
from runstore import model as m
from runstore import testing
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.model import outcome_document as model_builder
from runstore.requests import Reference
from runstore.requests import interrupted_outcome
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.testing import script
from runstore.testing.disk import disk_view
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import StageTokens
from runstore.testing.publishing import ClockScript
from runstore.testing.script import Call
from runstore.testing.script import Context

from . import header
from . import outcomes
from . import render
from .events import GenerationRefused
from .events import at
from .events import delivered_to
from .events import operation_json
from .events import step

# --- the cases -----------------------------------------------------------------------------


@attrs.frozen
class Case:
    """One vector: ``calls`` leave ``attempt_id`` recoverable at ``recover_at_ns``; the pass
    commits ``expected`` (the interrupted failure) for it."""

    name: str
    calls: tuple[Call, ...]
    attempt_id: str
    recover_at_ns: int
    expected: TerminalOutcome


def _artifact(kind: ArtifactKind, seed: str, ms: int) -> ArtifactRegistration:
    # Verification times are odd microseconds, so none equals any other time of a case.
    return testing.artifact(kind, seed, verified_at_ns=at(ms) + 1_000)


def _expired_executing() -> Case:
    slot = testing.one_shot("delta")
    d0 = slot.attempt_id(0)
    lease = testing.lease("delta-0", expires_at_ns=at(10), owner="delta-0")
    calls = (
        script.register_one_shot(*slot.arguments(), name="register the one-shot slot delta"),
        script.reserve(d0, slot.slot_id, FirstAttempt(), lease, at(1)),
        script.advance(d0, AttemptState.MATERIALIZING, at(2)),
        script.advance(d0, AttemptState.STARTING, at(3)),
        script.advance(d0, AttemptState.PREPARING, at(4)),
        script.advance(d0, AttemptState.EXECUTING, at(5)),
    )
    return Case(
        "reservation_expired: an executing attempt whose reservation lease expired",
        calls,
        d0,
        at(20),
        interrupted_outcome("reservation_expired", AttemptState.EXECUTING),
    )


def _expired_claim() -> Case:
    slot = testing.one_shot("epsilon")
    e0 = slot.attempt_id(0)
    reservation = testing.lease("epsilon-0", expires_at_ns=at(50), owner="epsilon-0")
    claim = testing.lease("epsilon-0-claim", expires_at_ns=at(10), owner="epsilon-0")
    result0 = _artifact(ArtifactKind.OBSERVATION, "epsilon-0-result", 4)
    calls = (
        script.register_one_shot(*slot.arguments(), name="register the one-shot slot epsilon"),
        script.reserve(e0, slot.slot_id, FirstAttempt(), reservation, at(1)),
        script.advance(e0, AttemptState.MATERIALIZING, at(2)),
        script.begin_finalization(e0, claim, at(3)),
        script.register_observation(
            e0,
            testing.observation(slot.observation_slot, e0, result={"score": 21}),
            result0,
            True,
            at(4),
        ),
    )
    return Case(
        "claim_expired: a claim holder in finalizing with its observation selected, "
        "its reservation live and its claim lease expired",
        calls,
        e0,
        at(20),
        interrupted_outcome("claim_expired", AttemptState.FINALIZING),
    )


def _expired_without_contending() -> Case:
    slot = testing.one_shot("zeta")
    z0, z1 = slot.attempt_id(0), slot.attempt_id(1)
    lease0 = testing.lease("zeta-0", expires_at_ns=at(60), owner="zeta-0")
    lease1 = testing.lease("zeta-1", expires_at_ns=at(10), owner="zeta-1")
    calls = (
        script.register_one_shot(*slot.arguments(), name="register the one-shot slot zeta"),
        script.reserve(z0, slot.slot_id, FirstAttempt(), lease0, at(1)),
        script.reserve(z1, slot.slot_id, Next(retry=True), lease1, at(2)),
        script.advance(z1, AttemptState.MATERIALIZING, at(3)),
        script.register_observation(
            z1,
            testing.observation(slot.observation_slot, z1, valid=False, result={"error": "oom"}),
            _artifact(ArtifactKind.OBSERVATION, "zeta-1-result", 4),
            False,
            at(4),
        ),
        script.advance(z1, AttemptState.FINALIZING, at(5)),
    )
    return Case(
        "reservation_expired in finalizing: a retry that entered without contending, "
        "recovered while retry 0 stays live",
        calls,
        z1,
        at(20),
        interrupted_outcome("reservation_expired", AttemptState.FINALIZING),
    )


CASES: tuple[Case, ...] = (_expired_executing(), _expired_claim(), _expired_without_contending())

# --- playing a case ------------------------------------------------------------------------


@attrs.frozen
class Played:
    """What a case left: its operations (as written), the recover operation, the final
    artifact and the bytes of its ``outcome.json`` and ``manifest.json``."""

    operations: list[dict[str, Any]]
    recover: dict[str, Any]
    final: ArtifactRegistration
    outcome: bytes
    manifest: bytes


def play(case: Case) -> Played:
    """Play ``case`` and its recovery pass in lockstep; raises ``GenerationRefused`` unless
    everything agrees and the final object holds exactly the documents both builders
    give."""
    previous = staging.install_token_source(StageTokens())
    try:
        with tempfile.TemporaryDirectory(prefix="runstore-recovery-") as root:
            return _play(case, root)
    finally:
        staging.install_token_source(previous)


def _play(case: Case, root: str) -> Played:
    model = ModelWriter(m.ModelState(), disk=lambda state: disk_view(root, state))
    operations: list[dict[str, Any]] = []
    recover = script.recover(ClockScript(samples=(case.recover_at_ns,)))
    with RunStore.open(root) as store:
        delivered = delivered_to(store)
        context: Context = {}
        for call in case.calls:
            result, sequences = step(case.name, call, model, store, context, delivered)
            operations.append(operation_json(call, result, sequences))
        kept = (model.state.observations, model.state.selections)
        report, sequences = step(case.name, recover, model, store, context, delivered)
        database_path = store.database_path
    if not isinstance(report, RecoveryReport):
        raise GenerationRefused(f"{case.name}: recover returned {type(report).__name__}")
    if store_projection(database_path) != model_projection(model.state):
        raise GenerationRefused(f"{case.name}: the durable projections disagree")
    if (model.state.observations, model.state.selections) != kept:
        raise GenerationRefused(f"{case.name}: the pass changed an observation or a selection")
    if [t.attempt_id for t in report.terminals] != [case.attempt_id]:
        raise GenerationRefused(f"{case.name}: the pass did not finalize exactly its attempt")
    row = model.state.attempts[case.attempt_id]
    if row.outcome != case.expected or row.final_artifact_id is None:
        raise GenerationRefused(f"{case.name}: the pass committed {row.outcome!r}")
    assert row.finished_at_ns is not None
    references = sorted(
        Reference(role, artifact_id)
        for owner, role, artifact_id in model.state.attempt_artifacts
        if owner == case.attempt_id
    )
    modelled = model_builder.outcome_document(
        model.state, case.attempt_id, row.outcome, references, row.finished_at_ns
    )
    stored = outcomes.store_document(
        database_path, case.attempt_id, row.outcome, references, row.finished_at_ns
    )
    final = model.state.artifacts[row.final_artifact_id]
    directory = os.path.join(root, final.path)
    with open(os.path.join(directory, "outcome.json"), "rb") as handle:
        on_disk = handle.read()
    if not (on_disk == modelled == stored):
        raise GenerationRefused(
            f"{case.name}: outcome.json on disk, the model's and the store's documents differ"
        )
    verified = objects.verify(directory, sync=False)
    if (verified.tree_sha256, verified.manifest_sha256) != (
        final.content_sha256,
        final.manifest_sha256,
    ):
        raise GenerationRefused(f"{case.name}: the final object does not verify as registered")
    with open(os.path.join(directory, "manifest.json"), "rb") as handle:
        manifest = handle.read()
    if manifest != verified.manifest or sorted(os.listdir(directory)) != [
        "manifest.json",
        "outcome.json",
    ]:
        raise GenerationRefused(f"{case.name}: the final object holds more than its documents")
    return Played(operations, operation_json(recover, report, sequences), final, on_disk, manifest)


# --- rendering -----------------------------------------------------------------------------


def case_json(case: Case) -> dict[str, Any]:
    """One entry of the ``recoveries`` section."""
    played = play(case)
    return {
        "name": case.name,
        "operations": played.operations,
        "recover": played.recover,
        "attempt_id": case.attempt_id,
        "final_artifact": {
            "id": played.final.id,
            "path": played.final.path,
            "content_sha256": played.final.content_sha256,
            "manifest_sha256": played.final.manifest_sha256,
        },
        "outcome_hex": played.outcome.hex(),
        "outcome_utf8": played.outcome.decode("utf-8"),
        "manifest_hex": played.manifest.hex(),
    }


def document() -> dict[str, Any]:
    """The document of ``vectors/recovery.json``."""
    return {
        **header("runstore recovered failure vectors"),
        "recoveries": [case_json(case) for case in CASES],
    }


def build() -> str:
    """The text of ``vectors/recovery.json``."""
    return render(document())
