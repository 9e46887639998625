"""The RunStore face: durable opening of a store root, and the handle callers hold.

Rules of this file: ``RunStore.open`` is the only way to get a handle; it runs the path
checks, the capability probes, and schema creation or verification, in that order, under
the initialization lock. The handle owns its SQLite connection privately. Operations on an
open store live in their own modules and are exposed here as thin methods.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from collections.abc import Sequence
from types import TracebackType
from typing import TypeVar

from runstore import arguments
from runstore import registration_batch
from runstore import sql
from runstore.batch import WriteBatch
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.errors import BusyError
from runstore.errors import DatabaseError
from runstore.errors import DirectConstructionError
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.errors import StoreClosedError
from runstore.receipts import ClaimDisposition
from runstore.receipts import CommittedEvent
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.receipts import PublishedFinalization
from runstore.receipts import TerminalAttempt
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.recovery_report import RecoveryReport
from runstore.registration_batch import Item
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import RetryAuthorization
from runstore.requests import TerminalOutcome
from runstore.store import attempts
from runstore.store import batch_apply
from runstore.store import coordinator_reads
from runstore.store import finalization
from runstore.store import leases
from runstore.store import observations
from runstore.store import probes
from runstore.store import registration
from runstore.store import registration_batch as store_batch
from runstore.store import store_open
from runstore.store import store_root
from runstore.store import write_lock
from runstore.store.publication import publish
from runstore.store.publication.publish import Clock
from runstore.store.publication.publish import Populate
from runstore.store.recovery import recover as recovery

T = TypeVar("T")
Subscriber = Callable[[CommittedEvent], None]
_subscriber_log = logging.getLogger("runstore.subscribers")


class RunStore:
    """An open run store. Obtain one with :meth:`RunStore.open`; close it with
    :meth:`close` or by using it as a context manager."""

    _root: str
    _database_path: str
    _descriptor: store_root.HeldDescriptor
    _connection: sqlite3.Connection | None
    _subscribers: list[Subscriber]
    _subscriber_failures: int
    _write_lock: threading.RLock

    def __init__(self, *_: object, **__: object) -> None:
        """Refused with ``direct_construction``, whatever the arguments: a handle is only
        as safe as the checks :meth:`open` runs before it makes one."""
        raise DirectConstructionError("RunStore(...) makes no handle; use RunStore.open(root)")

    @classmethod
    def _opened(
        cls,
        root: str,
        database_path: str,
        connection: sqlite3.Connection,
        descriptor: store_root.HeldDescriptor,
    ) -> RunStore:
        """The handle :meth:`open` returns, around what it opened (``__init__`` refuses)."""
        store = object.__new__(cls)
        store._root = root
        store._descriptor = descriptor
        store._database_path = database_path
        store._connection = connection
        store._subscribers = []
        store._subscriber_failures = 0
        store._write_lock = write_lock.writer_lock(descriptor.key)
        return store

    @property
    def root(self) -> str:
        """The absolute store root directory."""
        return self._root

    @property
    def database_path(self) -> str:
        """The absolute path of ``run.sqlite3``."""
        return self._database_path

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> RunStore:
        """Open the store in ``root``, creating schema v1 if the database is new.

        ``root`` must be an existing absolute directory on a local filesystem; it is never
        created. Under ``.run-store-init.lock`` (waiting at most 5 s, else BusyError) this
        runs the capability probes in a disposable directory, then reads ``user_version``:
        0 on an empty database creates v1 in one ``BEGIN IMMEDIATE`` transaction and syncs
        the database file and root; 0 with objects is refused (unversioned_database); 1 is
        verified against the embedded schema (schema_mismatch); anything else is refused
        (unknown_schema_version). Every refusal leaves the database file as it was and
        returns no handle. Opening never records attempts or events.
        """
        path = store_root.checked_root(root)
        store_root.check_not_nested(path)
        store_root.check_filesystem(path)
        store_root.check_store_files(path)
        database_path = os.path.join(path, store_root.DATABASE_NAME)
        with store_root.InitLock(path):
            probes.clear_stale_probe_directories(path)
            probes.run_probes(path)
            store_root.check_store_files(path)
            held = store_root.database_descriptors.acquire(database_path)
            try:
                connection = store_open.open_connection(path, database_path, held.fd)
            except BaseException:
                store_root.database_descriptors.release(held)
                raise
        return cls._opened(path, database_path, connection, held)

    def close(self) -> None:
        """Close the connection. Idempotent: closing a closed store does nothing."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            finally:
                store_root.database_descriptors.release(self._descriptor)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- the transactional writer -----------------------------------------------------------
    # Each method is exactly one BEGIN IMMEDIATE transaction and returns only after COMMIT;
    # any error rolls back every write of the call. Events reach subscribers after commit.

    def subscribe(self, subscriber: Subscriber) -> None:
        """Call ``subscriber`` with each event this handle commits, after its commit, in
        sequence order. A rolled-back operation delivers nothing. A subscriber can never
        cost a committed result: an exception it raises (any ``Exception``) is logged on the
        ``runstore.subscribers`` logger with its traceback and counted in
        :attr:`subscriber_failures`, the remaining subscribers and events are still
        delivered, and the operation returns its value."""
        self._subscribers.append(subscriber)

    @property
    def subscriber_failures(self) -> int:
        """How many subscriber calls on this handle raised (see :meth:`subscribe`)."""
        return self._subscriber_failures

    def register_slots(
        self,
        decision: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slots: Sequence[ObservationSlot],
    ) -> str:
        """Register a decision, its run, one attempt slot of any kind (one-shot, fresh
        observation or stream; measurement or warm-up) and every observation slot it owns,
        with their memberships; returns the attempt slot id. A warm-up owns no observation
        slot, a one-shot or fresh-observation measurement exactly one result slot, a stream
        one or more checkpoint slots. Identical re-registration is a no-op; refusals:
        invalid_record, observation_slot_mismatch, registration_conflict."""
        _raise(arguments.register_slots_arguments(decision, run, attempt_slot, observation_slots))
        return self._write(
            lambda c: (
                registration.register_slots(c, decision, run, attempt_slot, observation_slots),
                (),
            )
        )

    def register_exclusion(self, decision: ApplicabilityDecision) -> str:
        """Register an exclusion: a decision with ``applicable`` false, which resolves no
        run (a campaign revision that stops measuring a pair records it so, SPEC.md section
        15.9); returns its id. Identical re-registration is a no-op; refusals:
        invalid_record (not a decision, or an applicable one)."""
        _raise(arguments.register_exclusion_arguments(decision))
        return self._write(lambda c: (registration.register_exclusion(c, decision), ()))

    def register_many(
        self, items: Sequence[Item], *, candidate_ids: Sequence[str] = (), held: int | None = None
    ) -> tuple[str, ...]:
        """Register ``items`` (exclusions, or ``register_slots`` argument tuples) in order, all
        or nothing, in one transaction; each item's id. Checks and refusals:
        :func:`runstore.store.registration_batch.register_many`."""
        _raise(arguments.register_many_arguments(items, candidate_ids, held))
        _raise(registration_batch.batch_refusal(items, candidate_ids, held))
        return self._write(lambda c: (store_batch.register_many(c, items, candidate_ids, held), ()))

    def register_one_shot(
        self,
        decision: ApplicabilityDecision,
        run: ResolvedRun,
        attempt_slot: AttemptSlot,
        observation_slot: ObservationSlot,
    ) -> str:
        """:meth:`register_slots` for a one-shot measurement and its single result slot
        (anything else is invalid_record); returns the attempt slot id."""
        _raise(arguments.register_one_shot_arguments(decision, run, attempt_slot, observation_slot))
        return self._write(
            lambda c: (
                registration.register_one_shot(c, decision, run, attempt_slot, observation_slot),
                (),
            )
        )

    def reserve(
        self,
        slot_id: str,
        authorization: RetryAuthorization,
        lease: LeaseRequest,
        now_ns: int,
    ) -> OwnedAttempt:
        """Allocate the slot's next retry under ``lease``: the attempt, its reservation
        lease, the attempt_reserved event and the revision-0 transition, together."""
        _raise(arguments.reserve_arguments(slot_id, authorization, lease, now_ns))
        return self._write(
            lambda c: _one_event(attempts.reserve(c, slot_id, authorization, lease, now_ns))
        )

    def advance(self, attempt: OwnedAttempt, phase: AttemptState, now_ns: int) -> OwnedAttempt:
        """Move an owned attempt one legal edge to ``phase``: an execution phase, or
        finalizing without contending for the slot's claim (it may then commit Failed or
        Censored, never Accepted)."""
        _raise(arguments.advance_arguments(attempt, phase, now_ns))
        return self._write(lambda c: _one_event(attempts.advance(c, attempt, phase, now_ns)))

    def renew(self, attempt: OwnedAttempt, expires_at_ns: int, now_ns: int) -> OwnedAttempt:
        """Extend the reservation, any owned claim lease and live staging leases together,
        never shortening; returns the same guard."""
        _raise(arguments.renew_arguments(attempt, expires_at_ns, now_ns))
        return self._write(lambda c: (leases.renew(c, attempt, expires_at_ns, now_ns), ()))

    def begin_finalization(
        self, attempt: OwnedAttempt, lease: LeaseRequest, now_ns: int
    ) -> ClaimDisposition:
        """Enter finalizing as a success contender and record the committed claim
        decision (claimed or superseded)."""
        _raise(arguments.begin_finalization_arguments(attempt, lease, now_ns))
        return self._write(
            lambda c: _one_event(finalization.begin_finalization(c, attempt, lease, now_ns))
        )

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
        """Register a published observation, its artifact and its references with an
        ``observation_registered`` event, optionally selecting it under the attempt's claim
        (an earlier selection is preserved); the receipt says whether this call selected
        it."""
        _raise(
            arguments.register_observation_arguments(
                attempt, observation, artifact, references, select, now_ns
            )
        )
        return self._write(
            lambda c: _at_most_one_event(
                observations.register_observation(
                    c, attempt, observation, artifact, references, select=select, now_ns=now_ns
                )
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
        """Register the final attempt artifact and references, append the terminal event and
        transition at the immutable finish time ``finished_at_ns``, delete the claim and
        release the attempt's leases at the commit time ``now_ns`` (leases and claim are
        checked then), together."""
        _raise(
            arguments.commit_finalization_arguments(
                attempt, outcome, artifact, references, finished_at_ns, now_ns
            )
        )
        return self._write(
            lambda c: _one_event(
                finalization.commit_finalization(
                    c, attempt, outcome, artifact, references, finished_at_ns, now_ns
                )
            )
        )

    def apply_batch(self, batch: WriteBatch) -> None:
        """Apply ``batch``'s steps in order in one ``BEGIN IMMEDIATE`` transaction, each
        with its own checks and its own savepoint, and settle every step's pending only
        after the one commit (SPEC.md section 8, "Write batches"). A refused step rolls back
        only itself; a step taking a refused step's result is refused with batch_dependency_refused.
        Events reach subscribers after the commit, in sequence order. When the transaction
        itself fails (busy, database_error, store_closed) nothing is committed, no pending
        settles and the batch may be applied again; a committed batch is refused
        (invalid_record)."""
        if not isinstance(batch, WriteBatch):
            raise InvalidRecordError(f"batch must be a WriteBatch, got {type(batch).__name__}")
        if batch.settled:
            raise InvalidRecordError("the batch has committed already")
        self._require_connection()
        outcomes = self._write(lambda c: batch_apply.apply_steps(c, batch))
        batch.settle(outcomes)

    # --- transactional publication ----------------------------------------------------------
    # Several short transactions each, none open while ``populate`` runs or files are
    # hashed, synced or renamed; the receipt only after the final commit (SPEC.md 11).

    def publish_artifact(
        self, attempt: OwnedAttempt, kind: ArtifactKind, populate: Populate, clock: Clock
    ) -> PublishedArtifact:
        """Publish an independent artifact: ``populate(path)`` writes the complete payload
        under its private ``path`` and returns with every writer closed; the runtime
        verifies the inventory, writes ``manifest.json``, syncs and renames the object to
        ``artifacts/<kind>-<tree sha256>`` (or verifies the identical object already
        there), then registers it, roots it under the reservation lease and releases the
        stage, together. ``clock()`` returns the current epoch nanoseconds."""
        _raise(arguments.publish_artifact_arguments(attempt, kind, populate, clock))
        _raise(arguments.publish_kind_refusal(kind))
        self._require_connection()
        return publish.publish_artifact(self._root, self._write, attempt, kind, populate, clock)

    def publish_finalization(
        self,
        attempt: OwnedAttempt,
        outcome: TerminalOutcome,
        references: Sequence[Reference],
        populate: Populate,
        clock: Clock,
    ) -> PublishedFinalization:
        """Publish the finalizing attempt's artifact with the runtime's canonical
        ``outcome.json`` (``populate`` may add logs and validated documents) and commit the
        terminal outcome with it, as ``commit_finalization`` does."""
        _raise(
            arguments.publish_finalization_arguments(attempt, outcome, references, populate, clock)
        )
        self._require_connection()
        return publish.publish_finalization(
            self._root, self._write, attempt, outcome, references, populate, clock
        )

    # --- explicit recovery --------------------------------------------------------------------

    def recover(self, clock: Clock) -> RecoveryReport:
        """Resolve what dead or expired owners left (SPEC.md section 14): under the
        exclusive ``.run-store-recovery.lock`` (``busy`` when held), quarantine abandoned
        stages, import the one verified outcome of each recoverable attempt or commit its
        interrupted failure, and register independent verified orphans. ``clock()`` is
        sampled once. Never renews, starts workers or allocates retries; a second pass over
        a resolved store commits nothing."""
        self._require_connection()
        return recovery.recover(self._root, self._write, clock)

    # --- reads for the coordinator ---------------------------------------------------------
    # One read transaction each on this handle's own connection; they decide nothing (the
    # writer checks every step again). Inspection of a store by another process goes
    # through runstore.inspection instead.

    def registered_for(self, candidate_ids: Sequence[str]) -> coordinator_reads.Registered:
        """The decisions of ``candidate_ids`` (a list or tuple of str, else
        ``invalid_record``) with their runs and slots, as committed."""
        _raise(arguments.id_list_arguments("candidate_ids", candidate_ids))
        connection = self._require_connection()
        with coordinator_reads.read_transaction(connection):
            return coordinator_reads.registered(connection, candidate_ids)

    def slot_progress(self, slot_ids: Sequence[str]) -> dict[str, coordinator_reads.SlotProgress]:
        """Each of ``slot_ids``' (a list or tuple of str, else ``invalid_record``) attempt
        states by retry index and, when it has a nonterminal attempt, when recovery may
        judge it; an unregistered id reads as a slot without attempts."""
        _raise(arguments.id_list_arguments("slot_ids", slot_ids))
        connection = self._require_connection()
        with coordinator_reads.read_transaction(connection):
            return coordinator_reads.slot_progress(connection, slot_ids)

    def _write(
        self, operation: Callable[[sqlite3.Connection], tuple[T, Sequence[CommittedEvent]]]
    ) -> T:
        connection = self._require_connection()
        if not self._write_lock.acquire(timeout=sql.BUSY_TIMEOUT_MS / 1000):
            raise BusyError("another thread of this process held the store's write lock for 5 s")
        try:
            with sql.immediate_transaction(connection):
                result, events = operation(connection)
        except sqlite3.Error as exc:
            raise DatabaseError(f"the transaction was rolled back: {exc}") from exc
        finally:
            self._write_lock.release()
        for event in events:
            for subscriber in self._subscribers:
                try:
                    subscriber(event)
                except Exception:  # the result is committed: report, never raise
                    self._subscriber_failures += 1
                    _subscriber_log.exception(
                        "subscriber %r raised on committed event %d", subscriber, event.sequence
                    )
        return result

    def _require_connection(self) -> sqlite3.Connection:
        if self._connection is None:
            raise StoreClosedError("this RunStore handle is closed")
        return self._connection

    def __repr__(self) -> str:
        state = "open" if self._connection is not None else "closed"
        return f"RunStore({self._root!r}, {state})"


def _raise(refusal: RunStoreError | None) -> None:
    """Raise an argument check's refusal (before any transaction begins)."""
    if refusal is not None:
        raise refusal


def _at_most_one_event(
    result: tuple[T, CommittedEvent | None],
) -> tuple[T, tuple[CommittedEvent, ...]]:
    return result[0], () if result[1] is None else (result[1],)


def _one_event(result: tuple[T, CommittedEvent]) -> tuple[T, tuple[CommittedEvent]]:
    return result[0], (result[1],)


__all__ = ["RunStore", "RunStoreError"]
