"""The model's side of ``publish_artifact`` and ``publish_finalization``, for
:class:`~runstore.testing.lockstep.ModelWriter` (any
:class:`~runstore.testing.model_steps.ModelSteps`): the store's steps, in the store's order,
over the pure model.

Rules of this file: the publisher's *filesystem* work is modelled by its result only: the
callback runs in a private temporary directory, the tree is read back
(:func:`runstore.testing.publishing.read_tree`) and checked, completed and hashed by the
model's own content module (:mod:`runstore.model.content`, independent of the store's
:mod:`runstore.store.publication.objects`). The database steps are the model's operations
(``check_finalization``, ``begin_staging``, ``publish_staged_artifact``,
``publish_finalization``), each applied through ``ModelSteps.apply`` so a refusal raises
``ModelRefusal`` exactly where the store raises. Clock samples and stage tokens are
consumed at the same points as the store's, so a lockstep play of one script sees the same
times and names on both sides.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final

from runstore import arguments
from runstore import model as m
from runstore.enums import ArtifactKind
from runstore.errors import RunStoreError
from runstore.model import content
from runstore.model import outcome_document
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.receipts import PublishedFinalization
from runstore.records import ArtifactRegistration
from runstore.requests import Reference
from runstore.requests import TerminalOutcome
from runstore.store.publication import staging
from runstore.testing.model_steps import ModelRefusal
from runstore.testing.model_steps import ModelSteps
from runstore.testing.publishing import read_tree

MANIFEST: Final = "manifest.json"
OUTCOME: Final = "outcome.json"


def _raise(error: RunStoreError | None) -> None:
    if error is not None:
        raise ModelRefusal(m.refused(error))


def sample(clock: Callable[[], int]) -> int:
    """One reading of a publisher's clock, checked as the store checks it."""
    value = clock()
    _raise(arguments.clock_sample(value))
    assert isinstance(value, int)
    return value


def _stage(writer: ModelSteps, attempt: OwnedAttempt, now_ns: int) -> m.LeaseRow:
    token = writer.tokens()
    return writer.apply(
        m.begin_staging(
            writer.state,
            attempt,
            staging.lease_id_for(token),
            staging.store_path_for(token),
            now_ns,
        )
    )


def _populated(populate: Callable[[str], object], reserved: tuple[str, ...]) -> content.Tree:
    with tempfile.TemporaryDirectory(prefix="runstore-model-") as scratch:
        directory = os.path.join(scratch, "object")
        os.mkdir(directory, 0o700)
        populate(directory)
        tree = read_tree(directory)
    refusal = content.refusal(tree, reserved)
    if refusal is not None:
        raise ModelRefusal(refusal)
    return tree


def _registration(
    kind: ArtifactKind, tree_sha256: str, manifest_sha256: str, verified_at_ns: int
) -> ArtifactRegistration:
    return ArtifactRegistration(
        kind=kind,
        path=f"artifacts/{kind.value}-{tree_sha256}",
        content_sha256=tree_sha256,
        manifest_sha256=manifest_sha256,
        verified_at_ns=verified_at_ns,
    )


def publish_artifact(
    writer: ModelSteps,
    attempt: OwnedAttempt,
    kind: ArtifactKind,
    populate: Callable[[str], object],
    clock: Callable[[], int],
) -> PublishedArtifact:
    """``RunStore.publish_artifact`` over the model."""
    _raise(arguments.publish_artifact_arguments(attempt, kind, populate, clock))
    _raise(arguments.publish_kind_refusal(kind))
    stage = _stage(writer, attempt, sample(clock))
    tree = _populated(populate, (MANIFEST,))
    completed = content.complete(tree, {}, (MANIFEST,))
    assert not isinstance(completed, m.Refusal), completed
    _, tree_sha256, manifest_sha256 = completed
    verified = max(sample(clock), stage.acquired_at_ns)
    artifact = _registration(kind, tree_sha256, manifest_sha256, verified)
    writer.apply(
        m.publish_staged_artifact(writer.state, attempt, stage.id, artifact, sample(clock))
    )
    return PublishedArtifact(attempt=attempt, artifact=artifact)


def publish_finalization(
    writer: ModelSteps,
    attempt: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    populate: Callable[[str], object],
    clock: Callable[[], int],
) -> PublishedFinalization:
    """``RunStore.publish_finalization`` over the model."""
    _raise(arguments.publish_finalization_arguments(attempt, outcome, references, populate, clock))
    staged_at = sample(clock)
    writer.apply(m.check_finalization(writer.state, attempt, outcome, references, staged_at))
    stage = _stage(writer, attempt, staged_at)
    tree = _populated(populate, (MANIFEST, OUTCOME))
    finish_sample = max(sample(clock), stage.acquired_at_ns)
    finished = writer.apply(
        m.check_finalization(writer.state, attempt, outcome, references, finish_sample)
    )
    document = outcome_document.outcome_document(
        writer.state, attempt.attempt_id, outcome, references, finished
    )
    snapshot = outcome_document.snapshot(writer.state, attempt.attempt_id, outcome)
    completed = content.complete(tree, {OUTCOME: document}, (MANIFEST, OUTCOME))
    assert not isinstance(completed, m.Refusal), completed
    _, tree_sha256, manifest_sha256 = completed
    verified = max(sample(clock), stage.acquired_at_ns)
    artifact = _registration(ArtifactKind.ATTEMPT, tree_sha256, manifest_sha256, verified)
    terminal = writer.apply(
        m.publish_finalization_commit(
            writer.state,
            attempt,
            stage.id,
            outcome,
            artifact,
            references,
            snapshot,
            finished,
            sample(clock),
        )
    )
    return PublishedFinalization(terminal=terminal, artifact=artifact)
