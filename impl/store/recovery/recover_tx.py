"""Recovery's database steps, twin of :mod:`runstore.model.recovery_checks` (SPEC.md
section 14): which attempts are recoverable, the stage leases, a candidate outcome's
evidence against the records, and the transactions that import an outcome, move an attempt
to finalizing, commit an interrupted failure, release abandoned staging leases and register
independent orphans.

Rules of this file: each function runs inside the caller's transaction and never commits;
the filesystem side is :mod:`runstore.store.recovery.disk`. The decisions are written twice on
purpose: here over SQL, and in :mod:`runstore.model.recovery` over the model's state; the
lockstep tests hold the two together. Every time is the pass's one clock sample ``t``,
clamped per attempt to its preceding transition (``effective``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

import attrs
from runstore import payloads
from runstore import recovery_report
from runstore import rules
from runstore import sql
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.errors import SnapshotChangedError
from runstore.outcome_json import OutcomeClaim
from runstore.receipts import CommittedEvent
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.requests import LEASED_ROOT_ROLE
from runstore.requests import Accepted
from runstore.requests import Failed
from runstore.requests import Reference
from runstore.requests import Superseded
from runstore.requests import interrupted_claims
from runstore.store.artifacts import artifact_exists
from runstore.store.artifacts import insert_artifact
from runstore.store.attempts import transition
from runstore.store.finalization import acceptance_refusal
from runstore.store.finalization import check_final_artifact
from runstore.store.finalization import finalizing_decision
from runstore.store.finalization import finish
from runstore.store.guard import AttemptRecord
from runstore.store.guard import LeaseRecord
from runstore.store.guard import claim_lease
from runstore.store.guard import load_attempt
from runstore.store.guard import reservation_lease
from runstore.store.publication import outcome_document

_TERMINAL = tuple(sorted(state.value for state in TERMINAL_STATES))


def effective(attempt: AttemptRecord, t_ns: int) -> int:
    """The attempt's effective recovery time: ``max(t, updated_at_ns)``."""
    return rules.effective_now(t_ns, attempt.updated_at_ns)


def cause_at(connection: sqlite3.Connection, attempt: AttemptRecord, now_ns: int) -> str | None:
    """The attempt's recovery cause at ``now_ns`` (already clamped), or None while its
    owner keeps authority (:func:`runstore.rules.recovery_cause`)."""
    reservation = reservation_lease(connection, attempt.id)
    claim = claim_lease(connection, attempt.id)
    return rules.recovery_cause(
        reservation.expires_at_ns,
        reservation.released_at_ns is not None,
        None if claim is None else claim.expires_at_ns,
        claim is not None and claim.released_at_ns is not None,
        now_ns,
    )


def nonterminal_attempts(connection: sqlite3.Connection) -> list[AttemptRecord]:
    """Every attempt that is not terminal, in attempt id order."""
    marks = ", ".join("?" for _ in _TERMINAL)
    # No index holds state: scan the table in storage order and sort the few survivors
    # (``+id`` keeps the planner from walking the id index and looking every row up).
    rows = sql.execute(
        connection, f"SELECT id FROM attempts WHERE state NOT IN ({marks}) ORDER BY +id", _TERMINAL
    )
    found = [load_attempt(connection, row[0]) for row in rows]
    return [attempt for attempt in found if attempt is not None]


def attempt_states(connection: sqlite3.Connection, attempt_ids: Sequence[str]) -> dict[str, str]:
    """The state of each of ``attempt_ids`` that is registered."""
    found: dict[str, str] = {}
    for attempt_id in dict.fromkeys(attempt_ids):
        rows = sql.execute(connection, "SELECT state FROM attempts WHERE id = ?", (attempt_id,))
        if rows:
            found[attempt_id] = rows[0][0]
    return found


# --- stages -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class StageLease:
    """A staging lease and the time recovery judges it at: ``max(t, the attempt's
    updated_at_ns, acquired_at_ns)``."""

    id: str
    attempt_id: str
    staging_path: str
    judged_at_ns: int
    live: bool
    released: bool


def stage_leases(
    connection: sqlite3.Connection, paths: Sequence[str], t_ns: int
) -> tuple[dict[str, StageLease], list[StageLease]]:
    """The staging leases naming ``paths`` (by path; of several naming one path, the last
    in storage order), and every unreleased staging lease (by lease id)."""
    # No index holds staging_path or released_at_ns: one pass over the leases in storage
    # order answers both questions (instead of one full scan per stage plus one more).
    rows = sql.execute(
        connection,
        "SELECT l.id, l.attempt_id, l.staging_path, l.acquired_at_ns, l.expires_at_ns, "
        "l.released_at_ns, a.updated_at_ns FROM leases AS l JOIN attempts AS a "
        "ON a.id = l.attempt_id WHERE l.purpose = 'staging' AND (l.released_at_ns IS NULL "
        "OR l.staging_path IN (SELECT value FROM json_each(?))) ORDER BY l.rowid",
        (json.dumps(list(paths)),),
    )
    wanted = set(paths)
    named: dict[str, StageLease] = {}
    unreleased: list[StageLease] = []
    for row in rows:
        lease = _stage_lease(row, t_ns)
        if lease.staging_path in wanted:
            named[lease.staging_path] = lease
        if not lease.released:
            unreleased.append(lease)
    unreleased.sort(key=lambda lease: lease.id)  # code point order = SQLite BINARY (UTF-8)
    return named, unreleased


def _stage_lease(row: sql.Row, t_ns: int) -> StageLease:
    lease_id, attempt_id, path, acquired, expires, released, updated = row
    judged = max(t_ns, updated, acquired)
    return StageLease(
        id=lease_id,
        attempt_id=attempt_id,
        staging_path=path,
        judged_at_ns=judged,
        live=rules.lease_live(expires, released is not None, judged),
        released=released is not None,
    )


def reread(
    connection: sqlite3.Connection, leases: Sequence[StageLease], t_ns: int
) -> list[StageLease]:
    """``leases`` as they are now (by primary key): no staging lease is created while
    recovery holds its lock exclusively, so these are still all the ones that matter."""
    found = []
    for lease in leases:
        rows = sql.execute(connection, _LEASE_BY_ID, (lease.id,))
        found.append(_stage_lease(rows[0], t_ns))
    return found


_LEASE_BY_ID = (
    "SELECT l.id, l.attempt_id, l.staging_path, l.acquired_at_ns, l.expires_at_ns, "
    "l.released_at_ns, a.updated_at_ns FROM leases AS l JOIN attempts AS a "
    "ON a.id = l.attempt_id WHERE l.id = ? AND l.purpose = 'staging'"
)


def release_stage_leases(
    connection: sqlite3.Connection, lease_ids: Sequence[str], t_ns: int
) -> None:
    """Release each of ``lease_ids`` (staging leases) at its judging time, rechecked under
    the write lock: a lease already released, or live again, is left."""
    for lease_id in lease_ids:
        rows = sql.execute(connection, _LEASE_BY_ID, (lease_id,))
        lease = _stage_lease(rows[0], t_ns)
        if not lease.released and not lease.live:
            sql.execute(
                connection,
                "UPDATE leases SET released_at_ns = ? WHERE id = ?",
                (lease.judged_at_ns, lease_id),
            )


# --- evidence -----------------------------------------------------------------------------


def leased_roots(connection: sqlite3.Connection, attempt_id: str) -> list[Reference]:
    """A ``leased_root`` reference to every artifact rooted under any of the attempt's
    leases, sorted, each once."""
    rows = sql.execute(
        connection,
        "SELECT DISTINCT r.artifact_id FROM leased_artifacts AS r JOIN leases AS l "
        "ON l.id = r.lease_id WHERE l.attempt_id = ? ORDER BY r.artifact_id",
        (attempt_id,),
    )
    return [Reference(LEASED_ROOT_ROLE, row[0]) for row in rows]


def _live_at(lease: LeaseRecord, at_ns: int) -> bool:
    return rules.lease_live_at(lease.expires_at_ns, lease.released_at_ns, at_ns)


def _owner_authorized(
    connection: sqlite3.Connection, attempt: AttemptRecord, claim: OutcomeClaim
) -> str | None:
    finished = claim.finished_at_ns
    reservation = reservation_lease(connection, attempt.id)
    held = claim_lease(connection, attempt.id)
    if not _live_at(reservation, finished):
        return "the reservation lease was not live at the finish time"
    if held is not None and not _live_at(held, finished):
        return "the claim's lease was not live at the finish time"
    refusal = rules.outcome_refusal(
        finalizing_decision(connection, attempt),
        isinstance(claim.outcome, Accepted),
        isinstance(claim.outcome, Superseded),
    )
    if refusal is not None:
        return refusal.message
    if isinstance(claim.outcome, Accepted) and (
        held is None or held.owner_token != reservation.owner_token
    ):
        return "the attempt holds no claim of its reservation owner"
    return None


def _recovery_authored(
    connection: sqlite3.Connection, attempt: AttemptRecord, claim: OutcomeClaim
) -> bool:
    claims = interrupted_claims(claim.outcome)
    if claims is None:
        return False
    cause = cause_at(connection, attempt, claim.finished_at_ns)
    roots = leased_roots(connection, attempt.id)
    return cause == claims[0] and list(claim.references) == roots


def evaluate(
    connection: sqlite3.Connection, attempt: AttemptRecord, claim: OutcomeClaim, data: bytes
) -> tuple[str, str] | None:
    """The first database check the candidate ``data`` (whose claims are ``claim``) fails
    for the recoverable ``attempt``, as ``(code, message)``, or None when it passes them
    all (``not_finalizing`` through ``acceptance_unsatisfied``; SPEC.md section 14)."""
    if attempt.state is not AttemptState.FINALIZING:
        return recovery_report.NOT_FINALIZING, f"the attempt is {attempt.state.value}"
    for role, artifact_id in (reference.pair for reference in claim.references):
        if not artifact_exists(connection, artifact_id):
            return recovery_report.UNKNOWN_ARTIFACT, f"{role} artifact {artifact_id} is unknown"
    rebuilt = outcome_document.outcome_document(
        connection, attempt.id, claim.outcome, claim.references, claim.finished_at_ns
    )
    if rebuilt != data:
        return recovery_report.EVIDENCE_MISMATCH, "the records no longer match its outcome.json"
    if claim.finished_at_ns < attempt.updated_at_ns:
        return recovery_report.NOT_AUTHORIZED, "it finished before the attempt's last transition"
    unauthorized = _owner_authorized(connection, attempt, claim)
    if unauthorized is not None and not _recovery_authored(connection, attempt, claim):
        return recovery_report.NOT_AUTHORIZED, unauthorized
    if isinstance(claim.outcome, Accepted):
        unsatisfied = acceptance_refusal(connection, attempt)
        if unsatisfied is not None:
            return recovery_report.ACCEPTANCE_UNSATISFIED, unsatisfied
    return None


# --- committing ---------------------------------------------------------------------------


def recheck(
    connection: sqlite3.Connection, attempt_id: str, revision: int, t_ns: int
) -> AttemptRecord | None:
    """Under the write lock: the attempt, still at ``revision`` and recoverable at its
    effective time; None when it changed or its owner is live again."""
    attempt = load_attempt(connection, attempt_id)
    if attempt is None or attempt.revision != revision or attempt.state in TERMINAL_STATES:
        return None
    return None if cause_at(connection, attempt, effective(attempt, t_ns)) is None else attempt


def import_outcome(
    connection: sqlite3.Connection,
    attempt_id: str,
    revision: int,
    claim: OutcomeClaim,
    data: bytes,
    artifact: ArtifactRegistration,
    t_ns: int,
) -> tuple[TerminalAttempt, CommittedEvent] | None:
    """Commit the verified outcome ``data`` as the attempt's terminal outcome, rechecking
    the expired owner and every database check first (``snapshot_changed`` when the
    evidence no longer holds); None when the attempt is no longer recoverable."""
    attempt = recheck(connection, attempt_id, revision, t_ns)
    if attempt is None:
        return None
    failed = evaluate(connection, attempt, claim, data)
    if failed is not None:
        raise SnapshotChangedError(f"{artifact.path} no longer passes: {failed[1]}")
    check_final_artifact(connection, artifact)
    commit_ns = max(effective(attempt, t_ns), claim.finished_at_ns)
    return finish(
        connection,
        attempt,
        claim.finished_at_ns,
        commit_ns,
        claim.outcome,
        artifact,
        claim.references,
    )


def move_to_finalizing(
    connection: sqlite3.Connection, attempt_id: str, revision: int, t_ns: int
) -> tuple[AttemptRecord, CommittedEvent] | None:
    """Move the recoverable attempt to finalizing at its effective time (an
    ``attempt_finalizing`` event without a ``claim`` key); None when it is no longer
    recoverable at ``revision``."""
    attempt = recheck(connection, attempt_id, revision, t_ns)
    if attempt is None:
        return None
    payload = payloads.finalizing_payload(attempt.state, attempt.revision + 1, None)
    return transition(
        connection,
        attempt,
        effective(attempt, t_ns),
        AttemptState.FINALIZING,
        payloads.ATTEMPT_FINALIZING,
        payload,
    )


def failure_document(
    connection: sqlite3.Connection, attempt: AttemptRecord, outcome: Failed, t_ns: int
) -> tuple[bytes, list[Reference]]:
    """The ``outcome.json`` of the interrupted failure of the finalizing ``attempt`` at its
    effective time, and its ``leased_root`` references."""
    references = leased_roots(connection, attempt.id)
    document = outcome_document.outcome_document(
        connection, attempt.id, outcome, references, effective(attempt, t_ns)
    )
    return document, references


def commit_failure(
    connection: sqlite3.Connection,
    attempt_id: str,
    revision: int,
    outcome: Failed,
    data: bytes,
    artifact: ArtifactRegistration,
    t_ns: int,
) -> tuple[TerminalAttempt, CommittedEvent] | None:
    """Commit the published interrupted failure ``data``: the attempt still finalizing at
    ``revision`` and recoverable (None otherwise), the document still what the records give
    (``snapshot_changed`` otherwise), then the terminal commit at the effective time."""
    attempt = recheck(connection, attempt_id, revision, t_ns)
    if attempt is None:
        return None
    document, references = failure_document(connection, attempt, outcome, t_ns)
    if document != data:
        raise SnapshotChangedError(f"the records of {attempt_id} changed during recovery")
    check_final_artifact(connection, artifact)
    now = effective(attempt, t_ns)
    return finish(connection, attempt, now, now, outcome, artifact, references)


def register_orphans(
    connection: sqlite3.Connection, artifacts: Sequence[ArtifactRegistration]
) -> list[ArtifactRegistration]:
    """Register each verified independent orphan that still has no row (one registered
    meanwhile by its publisher is left as it is); returns those registered."""
    registered = []
    for artifact in artifacts:
        if artifact_exists(connection, artifact.id):
            continue
        insert_artifact(connection, artifact)
        registered.append(artifact)
    return registered


def registered_names(connection: sqlite3.Connection) -> frozenset[str]:
    """The names under ``artifacts/`` of every registered artifact (its path without the
    ``artifacts/`` prefix, which the schema requires every path to have)."""
    prefix = len("artifacts/")  # sliced here: the covering index on path answers alone
    return frozenset(
        row[0][prefix:] for row in sql.execute(connection, "SELECT path FROM artifacts")
    )
