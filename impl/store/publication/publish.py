"""Transactional publication, twin of :mod:`runstore.testing.model_publisher` (which drives
the model's steps in this order): ``publish_artifact`` and ``publish_finalization``, the
boundary between durable filesystem publication and the store's transactions.

Rules of this file: orchestration only, in the order SPEC.md section 11 gives. No SQLite
transaction is open while the caller's ``populate`` runs, nor during hashing, syncing or
renaming: each database step is its own short ``BEGIN IMMEDIATE`` transaction through the
store's ``write``. The clock is sampled exactly where the SPEC says (before staging, before
the outcome is written, after the rename, and under the final write lock), each sample
checked like a ``*_ns`` argument. Filesystem steps live in :mod:`runstore.store.publication.staging`
and :mod:`runstore.store.publication.objects`, database steps in
:mod:`runstore.store.publication.publish_tx`. A receipt is returned only after the final commit;
before it, any failure leaves the registered stage (lock released) or a verified orphan for
recovery, and the attempt as it was.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final
from typing import Protocol
from typing import TypeVar

from runstore import arguments
from runstore import canonical
from runstore import durable
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.errors import ArtifactCorruptError
from runstore.errors import DestinationConflictError
from runstore.errors import DurabilityError
from runstore.errors import RunStoreError
from runstore.receipts import CommittedEvent
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.receipts import PublishedFinalization
from runstore.receipts import TerminalAttempt
from runstore.requests import Reference
from runstore.requests import TerminalOutcome
from runstore.store.publication import objects
from runstore.store.publication import outcome_document
from runstore.store.publication import publish_tx
from runstore.store.publication import staging

T = TypeVar("T")
Clock = Callable[[], int]
Populate = Callable[[str], object]
MANIFEST_NAME: Final = "manifest.json"
OUTCOME_NAME: Final = "outcome.json"


class Write(Protocol):
    """The store's transaction runner: one ``BEGIN IMMEDIATE`` transaction around
    ``operation``, committed on return (events delivered after), rolled back on error."""

    def __call__(
        self, operation: Callable[[sqlite3.Connection], tuple[T, Sequence[CommittedEvent]]]
    ) -> T: ...


def sample(clock: Clock) -> int:
    """One clock reading, checked: an int that is not a bool (invalid_record), in
    0..2^63-1 (out_of_range)."""
    value = clock()
    refusal = arguments.clock_sample(value)
    if refusal is not None:
        raise refusal
    return value


def _open_stage(
    root: str, write: Write, guard: OwnedAttempt, now_ns: int
) -> tuple[staging.Stage, int]:
    """Create a stage and commit its staging lease, under the shared recovery lock.
    Returns the stage (locked) and the lease's acquisition time. A refused registration
    removes the unregistered stage."""
    with staging.RecoveryLock(root, exclusive=False):
        stage = staging.create_stage(root)
        try:
            acquired = write(
                lambda c: (
                    publish_tx.register_stage(c, guard, stage.lease_id, stage.store_path, now_ns),
                    (),
                )
            )
        except BaseException:
            staging.remove_stage(stage)
            raise
    return stage, acquired


def place(root: str, stage: staging.Stage, completed: objects.CompletedObject, path: str) -> None:
    """Rename the completed object to its address without replacement and sync the
    destination parent (``artifacts/``); or verify that the address already holds the
    identical object and sync both parents (the stage, where the duplicate stays until
    cleanup, then ``artifacts/``). After a rename the stage's own entry for the object
    needs no sync: the object is reached through ``artifacts/`` only, and a stage that
    reappears after a power loss is recovery's to clean up (SPEC.md section 11)."""
    destination = os.path.join(root, path)
    parents: tuple[str, ...] = (os.path.dirname(destination),)
    try:
        durable.rename_noreplace(stage.object_path, destination)
    except FileExistsError:
        _verify_existing(destination, completed)
        parents = (stage.path, *parents)
    except OSError as exc:
        raise DurabilityError(f"publishing {path} failed: {exc}") from exc
    for parent in parents:
        try:
            durable.fsync_dir(parent)
        except OSError as exc:
            raise DurabilityError(f"syncing {parent} failed: {exc}") from exc


def _verify_existing(destination: str, completed: objects.CompletedObject) -> None:
    """The address is taken: it must be a directory holding exactly the identical complete
    object (every byte read and compared through its manifest, every file and directory
    synced, the tree hash recomputed); anything else is destination_conflict."""
    name = os.path.basename(destination)
    try:
        info = os.lstat(destination)
    except OSError as exc:
        raise DestinationConflictError(f"{name} cannot be inspected: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise DestinationConflictError(f"{name} exists and is not a directory")
    try:
        existing = objects.verify(destination, sync=True)
    except ArtifactCorruptError as exc:
        raise DestinationConflictError(f"{name} exists but does not verify: {exc.message}") from exc
    if (existing.tree_sha256, existing.manifest) != (completed.tree_sha256, completed.manifest):
        raise DestinationConflictError(f"{name} exists with other content")


def _address(kind: ArtifactKind, completed: objects.CompletedObject) -> str:
    """The store path of the completed object: ``artifacts/<kind>-<tree sha256>``."""
    return objects.address(kind, completed.tree_sha256)[1]


def publish_artifact(
    root: str,
    write: Write,
    guard: OwnedAttempt,
    kind: ArtifactKind,
    populate: Populate,
    clock: Clock,
) -> PublishedArtifact:
    """Publish an independent artifact of ``kind`` that ``populate(path)`` writes under
    its private ``path``; see SPEC.md section 11 for the steps and their order."""
    staged_at = sample(clock)
    stage, acquired = _open_stage(root, write, guard, staged_at)
    try:
        populate(stage.object_path)
        inventory = objects.scan(stage.object_path, reserved=(MANIFEST_NAME,))
        completed = objects.complete(stage.object_path, inventory, {})
        place(root, stage, completed, _address(kind, completed))
        artifact = objects.registration(kind, completed, max(sample(clock), acquired))

        def commit(connection: sqlite3.Connection) -> tuple[None, tuple[()]]:
            publish_tx.publish_staged(connection, guard, stage.lease_id, artifact, sample(clock))
            return None, ()

        write(commit)
    except BaseException:
        stage.unlock()
        raise
    staging.remove_stage(stage, sync=False)
    return PublishedArtifact(attempt=guard, artifact=artifact)


def _prepare_outcome(
    write: Write,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    now_ns: int,
) -> tuple[int, bytes, dict[str, JSON]]:
    """Check the finalization at the finish-time sample and build the outcome document
    from one consistent view. Returns (finish time, bytes, the snapshot those bytes hold)."""

    def check(connection: sqlite3.Connection) -> tuple[int, bytes, dict[str, JSON]]:
        finished = publish_tx.check_finalization(connection, guard, outcome, references, now_ns)
        document = outcome_document.outcome_document(
            connection, guard.attempt_id, outcome, references, finished
        )
        return finished, document, _snapshot_of(document)

    return write(lambda c: (check(c), ()))


def _snapshot_of(document: bytes) -> dict[str, JSON]:
    """The ``snapshot`` the document's bytes hold: what the final transaction compares with
    the records, read back rather than queried twice. The bytes are the encoder's own, so
    they are parsed without being checked again."""
    snapshot = canonical.decode_trusted_object(document)["snapshot"]
    assert isinstance(snapshot, dict)
    return snapshot


def publish_finalization(
    root: str,
    write: Write,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    populate: Populate,
    clock: Clock,
) -> PublishedFinalization:
    """Publish the attempt's final artifact, whose ``outcome.json`` the runtime writes, and
    commit the terminal outcome with it; see SPEC.md section 11."""
    staged_at = sample(clock)
    write(
        lambda c: (
            publish_tx.check_finalization(c, guard, outcome, references, staged_at),
            (),
        )
    )
    stage, acquired = _open_stage(root, write, guard, staged_at)
    try:
        populate(stage.object_path)
        inventory = objects.scan(stage.object_path, reserved=(MANIFEST_NAME, OUTCOME_NAME))
        finish_sample = max(sample(clock), acquired)
        finished, document, snapshot = _prepare_outcome(
            write, guard, outcome, references, finish_sample
        )
        completed = objects.complete(stage.object_path, inventory, {OUTCOME_NAME: document})
        place(root, stage, completed, _address(ArtifactKind.ATTEMPT, completed))
        artifact = objects.registration(
            ArtifactKind.ATTEMPT, completed, max(sample(clock), acquired)
        )

        def commit(connection: sqlite3.Connection) -> tuple[TerminalAttempt, list[CommittedEvent]]:
            terminal, event = publish_tx.publish_finalization_commit(
                connection,
                guard,
                stage.lease_id,
                outcome,
                artifact,
                references,
                snapshot,
                finished,
                sample(clock),
            )
            return terminal, [event]

        terminal = write(commit)
    except BaseException:
        stage.unlock()
        raise
    staging.remove_stage(stage, sync=False)
    return PublishedFinalization(terminal=terminal, artifact=artifact)


__all__ = ["RunStoreError", "publish_artifact", "publish_finalization", "sample"]
