"""Explicit recovery, twin of :mod:`runstore.model.recovery`: ``RunStore.recover(clock)``
(SPEC.md section 14).

Rules of this file: orchestration only, in the order SPEC.md section 14 gives: the
exclusive recovery lock, one clock sample, the stage locks (a held stage defers its
attempt), recoverable attempts in id order (import of exactly one passing outcome, or an
interrupted failure published through a private stage), the stages (judged after the
attempts' commits), then independent orphans. Each database step is its own short
``BEGIN IMMEDIATE`` transaction through the store's ``write``; none is open while objects
are verified, synced or renamed. Filesystem steps live in :mod:`runstore.store.recovery.disk`,
database steps in :mod:`runstore.store.recovery.recover_tx`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from typing import TypeVar

import attrs
from runstore import canonical
from runstore import recovery_report
from runstore.canonical import JSON
from runstore.enums import TERMINAL_STATES
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.outcome_json import OutcomeClaim
from runstore.outcome_json import read_outcome
from runstore.receipts import CommittedEvent
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.recovery_report import RecoveryReport
from runstore.recovery_report import RejectedArtifact
from runstore.requests import interrupted_claims
from runstore.requests import interrupted_outcome
from runstore.shapes import references_refusal
from runstore.store.guard import AttemptRecord
from runstore.store.guard import load_attempt
from runstore.store.publication import objects
from runstore.store.publication import publish
from runstore.store.publication import staging
from runstore.store.publication.publish import Clock
from runstore.store.publication.publish import Write
from runstore.store.recovery import disk
from runstore.store.recovery import recover_tx

R = TypeVar("R")
_ADDRESS_PREFIX = f"{staging.ARTIFACTS_DIR}/"


@attrs.frozen(kw_only=True)
class _Candidate:
    """An unregistered attempt object and what its ``outcome.json`` claims."""

    name: str
    claim: OutcomeClaim
    data: bytes

    @property
    def path(self) -> str:
        return _ADDRESS_PREFIX + self.name


@attrs.define
class _Pass:
    """One recovery pass's working state and report."""

    root: str
    write: Write
    t_ns: int
    terminals: list[TerminalAttempt] = attrs.Factory(list)
    imported: list[ArtifactRegistration] = attrs.Factory(list)
    quarantined: list[str] = attrs.Factory(list)
    busy: list[str] = attrs.Factory(list)
    rejected: list[RejectedArtifact] = attrs.Factory(list)
    deferred: set[str] = attrs.Factory(set)
    verified: dict[str, bool] = attrs.Factory(dict)

    def reject(self, path: str, code: str, message: str) -> None:
        self.rejected.append(RejectedArtifact(path=path, code=code, message=message[:300]))

    def report(self) -> RecoveryReport:
        return RecoveryReport(
            terminals=tuple(self.terminals),
            imported_artifacts=tuple(self.imported),
            quarantined_stages=tuple(self.quarantined),
            busy_stages=tuple(self.busy),
            rejected_artifacts=tuple(self.rejected),
        )


def recover(root: str, write: Write, clock: Clock) -> RecoveryReport:
    """One recovery pass over the store at ``root``; see SPEC.md section 14."""
    if not callable(clock):
        raise InvalidRecordError("clock must be callable")
    with staging.RecoveryLock(root, exclusive=True, timeout=0.0):
        work = _Pass(root=root, write=write, t_ns=publish.sample(clock))
        listing = disk.list_artifacts(root)
        stages = _probe_stages(work, listing.stages)
        try:
            registered = work.write(lambda c: (recover_tx.registered_names(c), ()))
            unregistered = disk.addresses(listing.names - registered)
            attempts = [name for name, kind in unregistered if kind is ArtifactKind.ATTEMPT]
            _attempts(work, attempts)
            _settle_stages(work, stages)
        finally:
            _release(stages)
        _orphans(
            work, [(name, kind) for name, kind in unregistered if kind is not ArtifactKind.ATTEMPT]
        )
        return work.report()


# --- stages -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class _Stages:
    """What the stage probe found: each stage's lock, and the staging leases that matter
    (those naming a stage, and every unreleased one)."""

    locks: dict[str, disk.StageLock]
    leases: tuple[recover_tx.StageLease, ...]


def _probe_stages(work: _Pass, names: Sequence[str]) -> _Stages:
    """Try every stage's lock without waiting; a held stage is busy and defers the
    attempt its lease names. The locks taken stay held until :func:`_release`."""
    paths = [_ADDRESS_PREFIX + name for name in names]
    named, unreleased = work.write(lambda c: (recover_tx.stage_leases(c, paths, work.t_ns), ()))
    locks: dict[str, disk.StageLock] = {}
    try:
        for name, path in zip(names, paths, strict=True):
            locks[name] = disk.StageLock(f"{work.root}/{path}")
            if locks[name].held_elsewhere:
                work.busy.append(path)
                if path in named:
                    work.deferred.add(named[path].attempt_id)
    except BaseException:
        _release(_Stages(locks=locks, leases=()))
        raise
    leases = {lease.id: lease for lease in (*named.values(), *unreleased)}
    return _Stages(locks=locks, leases=tuple(sorted(leases.values(), key=lambda x: x.id)))


def _release(stages: _Stages) -> None:
    for lock in stages.locks.values():
        lock.release()


def _settle_stages(work: _Pass, stages: _Stages) -> None:
    """After the attempts: quarantine each free stage whose lease is missing, released or
    expired (not of a deferred attempt), then release the unreleased, expired staging
    leases whose stage is gone, in one transaction."""
    free = [name for name, lock in stages.locks.items() if not lock.held_elsewhere]
    paths = {name: _ADDRESS_PREFIX + name for name in free}
    current = work.write(lambda c: (recover_tx.reread(c, stages.leases, work.t_ns), ()))
    named = {lease.staging_path: lease for lease in current}
    open_leases = [lease for lease in current if not lease.released]
    for name in free:
        lease = named.get(paths[name])
        if lease is not None and lease.attempt_id in work.deferred:
            continue
        abandoned = lease is None or lease.released or not lease.live
        if abandoned and disk.quarantine(work.root, name):
            work.quarantined.append(paths[name])
    releasable = [
        lease.id
        for lease in open_leases
        if not lease.live
        and lease.attempt_id not in work.deferred
        and not disk.stage_exists(work.root, lease.staging_path)
    ]
    if releasable:

        def release(connection: sqlite3.Connection) -> tuple[None, tuple[()]]:
            recover_tx.release_stage_leases(connection, releasable, work.t_ns)
            return None, ()

        work.write(release)


# --- attempts -----------------------------------------------------------------------------


def _recoverable(work: _Pass) -> list[tuple[AttemptRecord, str]]:
    def find(connection: sqlite3.Connection) -> list[tuple[AttemptRecord, str]]:
        found = []
        for attempt in recover_tx.nonterminal_attempts(connection):
            cause = recover_tx.cause_at(
                connection, attempt, recover_tx.effective(attempt, work.t_ns)
            )
            if cause is not None and attempt.id not in work.deferred:
                found.append((attempt, cause))
        return found

    return work.write(lambda c: (find(c), ()))


def _read_candidates(work: _Pass, names: Sequence[str]) -> list[_Candidate]:
    """Read every unregistered attempt object; reject those that do not verify or whose
    ``outcome.json`` is missing or malformed."""
    found = []
    for name in names:
        path = _ADDRESS_PREFIX + name
        try:
            item = disk.read_object(work.root, name, sync=False)
        except ArtifactCorruptError as exc:
            work.reject(path, recovery_report.CORRUPT, exc.message)
            continue
        if item.outcome is None:
            work.reject(path, recovery_report.CORRUPT, "it has no outcome.json")
            continue
        try:
            claim = read_outcome(item.outcome)
        except RunStoreError as exc:
            work.reject(path, recovery_report.MALFORMED_OUTCOME, exc.message)
            continue
        shape = references_refusal(claim.references)
        if shape is not None:
            work.reject(path, recovery_report.MALFORMED_OUTCOME, shape.message)
            continue
        found.append(_Candidate(name=name, claim=claim, data=item.outcome))
    return found


def _attempts(work: _Pass, names: Sequence[str]) -> None:
    recoverable = _recoverable(work)
    candidates = _read_candidates(work, names)
    states: dict[str, str] = work.write(
        lambda c: (recover_tx.attempt_states(c, [x.claim.attempt_id for x in candidates]), ())
    )
    wanted = {attempt.id for attempt, _ in recoverable}
    by_attempt: dict[str, list[_Candidate]] = {}
    for candidate in candidates:
        attempt_id = candidate.claim.attempt_id
        state = states.get(attempt_id)
        if state is None:
            work.reject(candidate.path, recovery_report.UNKNOWN_ATTEMPT, f"{attempt_id} is unknown")
        elif state in TERMINAL_STATES:
            work.reject(
                candidate.path, recovery_report.ATTEMPT_TERMINAL, f"{attempt_id} is {state}"
            )
        elif attempt_id in wanted:
            by_attempt.setdefault(attempt_id, []).append(candidate)
    for attempt, cause in recoverable:
        _recover_attempt(work, attempt, cause, by_attempt.get(attempt.id, []))


def _recover_attempt(
    work: _Pass, attempt: AttemptRecord, cause: str, candidates: Sequence[_Candidate]
) -> None:
    passing = [candidate for candidate in candidates if _passes(work, attempt, candidate)]
    chosen = _preferred(passing)
    for candidate in passing:
        if candidate is not chosen:
            work.reject(
                candidate.path,
                recovery_report.AMBIGUOUS,
                f"{len(passing)} completed outcomes of {attempt.id} pass",
            )
    if chosen is not None:
        _import(work, attempt, chosen)
    else:
        _fail(work, attempt, cause)


def _preferred(passing: Sequence[_Candidate]) -> _Candidate | None:
    """The one candidate to import: recovery's own published failures take precedence
    (an earlier pass already judged the owner's outcomes and published this one), then
    exactly one must remain; None when none or several do."""
    own = [c for c in passing if interrupted_claims(c.claim.outcome) is not None]
    considered = own or list(passing)
    return considered[0] if len(considered) == 1 else None


def _passes(work: _Pass, attempt: AttemptRecord, candidate: _Candidate) -> bool:
    def check(connection: sqlite3.Connection) -> tuple[str, str] | None:
        current = load_attempt(connection, attempt.id)
        assert current is not None
        return recover_tx.evaluate(connection, current, candidate.claim, candidate.data)

    failed = work.write(lambda c: (check(c), ()))
    if failed is not None:
        work.reject(candidate.path, *failed)
        return False
    for entry in _artifact_entries(canonical.decode_object(candidate.data)):
        if not _verifies(work, entry):
            work.reject(
                candidate.path,
                recovery_report.DEPENDENCY_CORRUPT,
                f"{entry['path']} does not verify",
            )
            return False
    return True


def _artifact_entries(document: dict[str, JSON]) -> Iterator[dict[str, JSON]]:
    """Every artifact entry the document names: its dependencies, and the directory and
    references of every observation its snapshot lists."""
    for item in _objects(document["dependencies"]):
        yield _object(item["artifact"])
    snapshot = _object(document["snapshot"])
    for key in ("produced_observations", "selected_observations"):
        for entry in _objects(snapshot.get(key, [])):
            yield _object(entry["artifact"])
            for reference in _objects(entry["references"]):
                yield _object(reference["artifact"])


def _objects(value: JSON) -> list[dict[str, JSON]]:
    assert isinstance(value, list)
    return [_object(item) for item in value]


def _object(value: JSON) -> dict[str, JSON]:
    assert isinstance(value, dict)
    return value


def _verifies(work: _Pass, entry: dict[str, JSON]) -> bool:
    path, content, manifest = entry["path"], entry["content_sha256"], entry["manifest_sha256"]
    assert isinstance(path, str) and isinstance(content, str) and isinstance(manifest, str)
    if path not in work.verified:
        work.verified[path] = disk.verifies(work.root, path, content, manifest)
    return work.verified[path]


def _import(work: _Pass, attempt: AttemptRecord, candidate: _Candidate) -> None:
    """Sync the one passing object and its parent, then commit it (rechecked)."""
    found = disk.read_object(work.root, candidate.name, sync=True)
    disk.sync_artifacts(work.root)
    artifact = objects.registration(ArtifactKind.ATTEMPT, found.completed, work.t_ns)
    terminal = work.write(
        lambda c: _events(
            recover_tx.import_outcome(
                c,
                attempt.id,
                attempt.revision,
                candidate.claim,
                candidate.data,
                artifact,
                work.t_ns,
            )
        )
    )
    if terminal is not None:
        work.terminals.append(terminal)


def _fail(work: _Pass, attempt: AttemptRecord, cause: str) -> None:
    """Move to finalizing if needed, publish the interrupted failure through a private
    stage, and commit it (each step rechecked)."""
    outcome = interrupted_outcome(cause, attempt.state)
    revision = attempt.revision
    if attempt.state is not AttemptState.FINALIZING:
        moved = work.write(
            lambda c: _events(recover_tx.move_to_finalizing(c, attempt.id, revision, work.t_ns))
        )
        if moved is None:
            return
        revision += 1

    def document(connection: sqlite3.Connection) -> bytes:
        current = load_attempt(connection, attempt.id)
        assert current is not None
        return recover_tx.failure_document(connection, current, outcome, work.t_ns)[0]

    data: bytes = work.write(lambda c: (document(c), ()))
    stage = staging.create_stage(work.root)
    try:
        inventory = objects.scan(stage.object_path, reserved=())
        completed = objects.complete(stage.object_path, inventory, {disk.OUTCOME_NAME: data})
        address = objects.address(ArtifactKind.ATTEMPT, completed.tree_sha256)[1]
        publish.place(work.root, stage, completed, address)
        artifact = objects.registration(ArtifactKind.ATTEMPT, completed, work.t_ns)
        terminal = work.write(
            lambda c: _events(
                recover_tx.commit_failure(
                    c, attempt.id, revision, outcome, data, artifact, work.t_ns
                )
            )
        )
    except BaseException:
        stage.unlock()
        raise
    staging.remove_stage(stage, sync=False)
    if terminal is not None:
        work.terminals.append(terminal)


def _events(
    result: tuple[R, CommittedEvent] | None,
) -> tuple[R | None, tuple[CommittedEvent, ...]]:
    """A transaction's value and its event for ``write``; None (nothing committed) stays
    None with no event."""
    if result is None:
        return None, ()
    return result[0], (result[1],)


# --- independent orphans ------------------------------------------------------------------


def _orphans(work: _Pass, names: Sequence[tuple[str, ArtifactKind]]) -> None:
    """Verify (and sync) every unregistered object of another kind and register those
    that verify as artifact rows only, in one transaction after ``artifacts/`` is synced."""
    verified = []
    for name, kind in names:
        try:
            found = disk.read_object(work.root, name, sync=True)
        except ArtifactCorruptError as exc:
            work.reject(_ADDRESS_PREFIX + name, recovery_report.CORRUPT, exc.message)
            continue
        verified.append(objects.registration(kind, found.completed, work.t_ns))
    if not verified:
        return
    disk.sync_artifacts(work.root)
    work.imported.extend(work.write(lambda c: (recover_tx.register_orphans(c, verified), ())))
