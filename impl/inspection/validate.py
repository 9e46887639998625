"""``runstore validate``: check a store's database and artifacts and list what is wrong.

Rules of this file: it reads only through the inspection reader's raw snapshot
(:meth:`~runstore.inspection.snapshot.Snapshot.take` with ``strict=False``), so it never
opens SQLite on the store's own files and never writes the store; artifact directories are
read in place under the snapshot's root, read-only. Damage is reported, never refused:
every check hands ``(code, subject, message)`` to one :class:`_Log`, which keeps at most
:data:`FINDING_CAP` findings per code and then one ``findings_truncated`` summary per
code. The refusals are the reader's (``unsafe_path``, ``inspection_unsafe``,
``inspection_unstable``) and ``invalid_record`` for ill-typed arguments. Every query is
set-based and streamed from a cursor, so a 100,000-attempt store takes linear time and
bounded memory. The database and invariant checks live here, the record and history checks
in :mod:`runstore.inspection.validate_rows`, the on-disk ones in
:mod:`runstore.inspection.validate_artifacts`; the order is SPEC.md section 16.1's.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Final

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.enums import AttemptState, ExecutionKind, LeasePurpose, SlotRole
from runstore.errors import InvalidRecordError, SchemaMismatchError, UnsafePathError
from runstore.inspection import validate_artifacts, validate_rows
from runstore.inspection.snapshot import DEFAULT_TRIES, Snapshot
from runstore.inspection.validate_rows import TERMINAL_SQL, Row, stream
from runstore.payloads import CLAIMED, SUPERSEDED
from runstore.requests import INTERRUPTED_ATTEMPT
from runstore.rules import outcome_refusal
from runstore.store import schema_check
from runstore.store.publication.staging import lease_id_for, store_path_for
from runstore.store.schema_sql import RUN_STORE_SCHEMA_VERSION

__all__ = ["DEFAULT_TRIES", "FINDING_CAP", "Finding", "ValidationReport", "validate_store"]

FINDING_CAP: Final = 1000
"""At most this many findings of one code are listed; the rest are counted."""
_MESSAGE_LIMIT: Final = 500

DATABASE_UNREADABLE: Final = "database_unreadable"
SQLITE_INTEGRITY: Final = "sqlite_integrity"
SCHEMA_VERSION: Final = "schema_version"
SCHEMA_MISMATCH: Final = "schema_mismatch"
FOREIGN_KEY: Final = "foreign_key"
SLOT_ACCEPTED_TWICE: Final = "slot_accepted_twice"
RETRY_GAP: Final = "retry_gap"
SLOT_MEMBERSHIP: Final = "slot_membership"
OUTCOME_NOT_PERMITTED: Final = "outcome_not_permitted"
ACCEPTANCE_UNSATISFIED: Final = "acceptance_unsatisfied"
CLAIM_INCONSISTENT: Final = "claim_inconsistent"
CLAIM_MISSING: Final = "claim_missing"
RESERVATION_LEASE: Final = "reservation_lease"
LEASE_UNRELEASED: Final = "lease_unreleased"
LEASE_INCONSISTENT: Final = "lease_inconsistent"
FENCING_GAP: Final = "fencing_gap"
SELECTION_INVALID: Final = "selection_invalid"
FINDINGS_TRUNCATED: Final = "findings_truncated"

FINDING_CODES: Final = (
    DATABASE_UNREADABLE,
    SQLITE_INTEGRITY,
    SCHEMA_VERSION,
    SCHEMA_MISMATCH,
    FOREIGN_KEY,
    *validate_rows.CODES,
    SLOT_ACCEPTED_TWICE,
    RETRY_GAP,
    SLOT_MEMBERSHIP,
    OUTCOME_NOT_PERMITTED,
    ACCEPTANCE_UNSATISFIED,
    CLAIM_INCONSISTENT,
    CLAIM_MISSING,
    RESERVATION_LEASE,
    LEASE_UNRELEASED,
    LEASE_INCONSISTENT,
    FENCING_GAP,
    SELECTION_INVALID,
    *validate_artifacts.CODES,
    FINDINGS_TRUNCATED,
)
"""Every finding code, in the order the checks run."""

_CLAIM_OF_EVENT: Final = (
    "CASE WHEN json_valid(e.payload_json) THEN json_extract(e.payload_json, '$.claim') END"
)


@attrs.frozen(kw_only=True)
class Finding:
    """One defect: a stable lower_snake_case ``code``, the ``subject`` it concerns (a
    record id, ``table:rowid``, an artifact path, or ``"database"``) and a one-line
    ``message``."""

    code: str
    subject: str
    message: str

    def to_json(self) -> dict[str, JSON]:
        return {"code": self.code, "message": self.message, "subject": self.subject}


@attrs.frozen(kw_only=True)
class ValidationReport:
    """What ``validate`` checked (``checked``: rows or artifacts per kind) and found."""

    root: str
    quick: bool
    checked: dict[str, int]
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """True exactly when nothing was found."""
        return not self.findings

    def to_json(self) -> dict[str, JSON]:
        return {
            "checked": dict(sorted(self.checked.items())),
            "findings": [finding.to_json() for finding in self.findings],
            "ok": self.ok,
            "quick": self.quick,
            "root": self.root,
        }


class _Log:
    """The findings so far: at most ``cap`` per code, the rest counted."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._kept: list[Finding] = []
        self._counts: Counter[str] = Counter()

    def __call__(self, code: str, subject: str, message: str) -> None:
        self._counts[code] += 1
        if self._counts[code] <= self._cap:
            line = " ".join(str(message).split())[:_MESSAGE_LIMIT]
            self._kept.append(Finding(code=code, subject=str(subject), message=line))

    def findings(self) -> tuple[Finding, ...]:
        """The kept findings in the order found, then one ``findings_truncated`` per code
        that had more than ``cap`` (its subject is that code)."""
        summaries = [
            Finding(
                code=FINDINGS_TRUNCATED,
                subject=code,
                message=f"{count - self._cap} more {code} findings not listed ({count} in all)",
            )
            for code, count in sorted(self._counts.items())
            if count > self._cap
        ]
        return (*self._kept, *summaries)


def validate_store(
    root: str, *, quick: bool = False, tries: int = DEFAULT_TRIES
) -> ValidationReport:
    """Check the store at ``root`` (SPEC.md section 16.1) and report every finding.

    Takes a raw inspection snapshot (at most ``tries`` copies), then checks in order: the
    database (readable, ``integrity_check``, ``user_version``, the exact schema,
    ``foreign_key_check``); every identified record and attempt; the attempts' history and
    the event log; the invariants of slots, outcomes, claims, leases and selections; every
    registered artifact on disk (``quick``: existence, inventory and manifest digest only,
    no content hashing). An unreadable database or a foreign ``user_version`` ends the
    checks after its finding. Refuses ``unsafe_path`` (not a store, or a database without
    any schema), ``inspection_unsafe``, ``inspection_unstable``, and ``invalid_record``
    for a non-bool ``quick`` or a ``tries`` that is not a positive int. Writes nothing.
    """
    if not isinstance(quick, bool):
        raise InvalidRecordError(f"quick must be a bool, not {quick!r:.40}")
    log = _Log(FINDING_CAP)
    checked: dict[str, int] = {}
    with Snapshot.take(root, tries=tries, strict=False) as snapshot:
        connection = snapshot.connection
        connection.text_factory = _lenient_text
        try:
            if _check_database(connection, snapshot.root, log):
                _check_rest(connection, snapshot.root, quick, log, checked)
        except sqlite3.DatabaseError as error:
            log(DATABASE_UNREADABLE, "database", f"reading the copy failed: {error}")
        store = snapshot.root
    return ValidationReport(root=store, quick=quick, checked=checked, findings=log.findings())


def _check_rest(
    connection: sqlite3.Connection, root: str, quick: bool, log: _Log, checked: dict[str, int]
) -> None:
    """The checks after the database's, in order; ``checked`` grows with each, so after an
    unreadable page it shows how far they got."""
    checked.update(validate_rows.check_records(connection, log))
    checked["attempts"] = validate_rows.check_attempts(connection, log)
    validate_rows.check_revisions(connection, log)
    checked["attempt_transitions"] = validate_rows.check_transitions(connection, log)
    checked["events"] = validate_rows.check_events(connection, log)
    checked.update(_check_invariants(connection, log))
    checked["artifacts"] = validate_artifacts.check_artifacts(
        connection, root, quick=quick, report=log
    )


def _lenient_text(data: bytes) -> str:
    """Column text that is not UTF-8 still reads (and then fails its checks)."""
    return data.decode("utf-8", "surrogateescape")


# --- the database --------------------------------------------------------------------------


def _check_database(connection: sqlite3.Connection, root: str, log: _Log) -> bool:
    """The database-level checks; False when the rest cannot be interpreted."""
    try:
        version = sql.scalar(connection, "PRAGMA user_version")
        objects = schema_check.user_object_count(connection)
    except sqlite3.DatabaseError as error:
        log(DATABASE_UNREADABLE, "database", f"the copy cannot be read: {error}")
        return False
    if version == 0 and objects == 0:
        raise UnsafePathError(f"the database in {root} holds no run store schema")
    _check_integrity(connection, log)
    if version != RUN_STORE_SCHEMA_VERSION:
        log(
            SCHEMA_VERSION,
            "database",
            f"user_version is {version}, not {RUN_STORE_SCHEMA_VERSION}: nothing else is checked",
        )
        return False
    try:
        schema_check.verify_schema(connection)
    except SchemaMismatchError as error:
        log(SCHEMA_MISMATCH, "database", error.message)
    for table, rowid, parent, key in stream(connection, "PRAGMA foreign_key_check"):
        log(FOREIGN_KEY, f"{table}:{rowid}", f"no {parent} row for its foreign key {key}")
    return True


def _check_integrity(connection: sqlite3.Connection, log: _Log) -> None:
    """Each problem line of ``PRAGMA integrity_check`` (which stops at 100). SQLite raises
    instead of reporting some damage (a page whose header is garbage); then each table is
    checked on its own, so the finding names the damaged table."""
    try:
        _log_integrity(connection, "PRAGMA integrity_check", "", log)
    except sqlite3.DatabaseError:
        names = sql.execute(
            connection, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"
        )
        for (name,) in names:
            quoted = str(name).replace('"', '""')
            try:
                _log_integrity(connection, f'PRAGMA integrity_check("{quoted}")', name, log)
            except sqlite3.DatabaseError as error:
                log(SQLITE_INTEGRITY, "database", f"table {name}: {error}")


def _log_integrity(connection: sqlite3.Connection, query: str, table: str, log: _Log) -> None:
    prefix = f"table {table}: " if table else ""
    for (text,) in stream(connection, query):
        for line in str(text).splitlines():
            if line != "ok" and not line.startswith("*** in database"):
                log(SQLITE_INTEGRITY, "database", prefix + line)


# --- invariants ----------------------------------------------------------------------------


def _check_invariants(connection: sqlite3.Connection, log: _Log) -> dict[str, int]:
    _check_slots(connection, log)
    _check_outcomes(connection, log)
    return {
        "finalization_claims": _check_claims(connection, log),
        "leases": _check_leases(connection, log),
        "selected_observations": _check_selections(connection, log),
    }


def _check_slots(connection: sqlite3.Connection, log: _Log) -> None:
    """At most one accepted attempt per slot (read past the unique index, which a damaged
    store may contradict), retry indices 0..n-1, and each slot's observation slots the
    shape its kind and role need."""
    twice = (
        "SELECT slot_id, count(*) FROM attempts NOT INDEXED WHERE state = 'accepted' "
        "GROUP BY slot_id HAVING count(*) > 1"
    )
    for slot_id, count in stream(connection, twice):
        log(SLOT_ACCEPTED_TWICE, slot_id, f"{count} accepted attempts")
    retries = (
        "SELECT slot_id, count(*), max(retry_index) FROM attempts GROUP BY slot_id "
        "HAVING max(retry_index) != count(*) - 1"
    )
    for slot_id, count, highest in stream(connection, retries):
        log(RETRY_GAP, slot_id, f"{count} attempts but retry indices up to {highest}")
    members = (
        "SELECT s.id, s.execution_kind, s.role, count(CASE WHEN o.kind = 'result' THEN 1 END), "
        "count(CASE WHEN o.kind = 'checkpoint' THEN 1 END), count(m.observation_slot_id) "
        "FROM attempt_slots AS s LEFT JOIN attempt_observation_slots AS m "
        "ON m.attempt_slot_id = s.id LEFT JOIN observation_slots AS o "
        "ON o.id = m.observation_slot_id GROUP BY s.id"
    )
    for row in stream(connection, members):
        problem = _membership_problem(row)
        if problem is not None:
            log(SLOT_MEMBERSHIP, row[0], problem)


def _membership_problem(row: Row) -> str | None:
    _, kind, role, results, checkpoints, members = row
    if role == SlotRole.WARMUP.value:
        return None if members == 0 else f"a warm-up owning {members} observation slots"
    if kind == ExecutionKind.STREAM.value:
        shaped = checkpoints >= 1 and checkpoints == members
    else:
        shaped = results == 1 and members == 1
    if shaped:
        return None
    return f"a {kind} measurement owning {results} result and {checkpoints} checkpoint slots"


def _check_outcomes(connection: sqlite3.Connection, log: _Log) -> None:
    """Each terminal outcome matches how its attempt entered finalizing (SPEC.md section
    6, :func:`runstore.rules.outcome_refusal`; recovery's ``interrupted_attempt`` failure
    ends any way in), and each accepted measurement's acceptance still holds."""
    ways = (
        f"SELECT a.id, a.state, a.failure_code, {_CLAIM_OF_EVENT} FROM attempts AS a "
        "JOIN attempt_transitions AS t ON t.attempt_id = a.id AND t.revision = a.revision - 1 "
        f"JOIN events AS e ON e.sequence = t.event_sequence WHERE a.state IN {TERMINAL_SQL}"
    )
    for attempt_id, state, failure_code, claim in stream(connection, ways):
        if state == AttemptState.FAILED.value and failure_code == INTERRUPTED_ATTEMPT:
            continue
        decision = claim if claim in (CLAIMED, SUPERSEDED) else None
        refusal = outcome_refusal(
            decision, state == AttemptState.ACCEPTED.value, state == AttemptState.SUPERSEDED.value
        )
        if refusal is not None:
            log(
                OUTCOME_NOT_PERMITTED,
                attempt_id,
                f"{state} after entering finalizing {decision or 'without contending'}: {refusal}",
            )
    acceptance = (
        "SELECT a.id, s.execution_kind, m.observation_slot_id, "
        "EXISTS (SELECT 1 FROM selected_observations AS x "
        "WHERE x.slot_id = m.observation_slot_id), "
        "EXISTS (SELECT 1 FROM observations AS o WHERE o.attempt_id = a.id "
        "AND o.slot_id = m.observation_slot_id AND o.valid = 1 AND o.completion = 'reached') "
        "FROM attempts AS a JOIN attempt_slots AS s ON s.id = a.slot_id "
        "JOIN attempt_observation_slots AS m ON m.attempt_slot_id = a.slot_id "
        "WHERE a.state = 'accepted' AND s.role = 'measurement'"
    )
    for attempt_id, kind, slot_id, selected, produced in stream(connection, acceptance):
        if not selected:
            log(ACCEPTANCE_UNSATISFIED, attempt_id, f"observation slot {slot_id} has no selection")
        elif kind != ExecutionKind.STREAM.value and not produced:
            log(
                ACCEPTANCE_UNSATISFIED,
                attempt_id,
                f"it produced no valid, reached observation for {slot_id}",
            )


_CLAIMS: Final = (
    "SELECT c.attempt_id, c.slot_id, a.slot_id, a.state, l.attempt_id, l.purpose, "
    "l.released_at_ns, (SELECT "
    + _CLAIM_OF_EVENT
    + " FROM attempt_transitions AS t JOIN events AS e ON e.sequence = t.event_sequence "
    "WHERE t.attempt_id = c.attempt_id AND t.revision = a.revision) "
    "FROM finalization_claims AS c LEFT JOIN attempts AS a ON a.id = c.attempt_id "
    "LEFT JOIN leases AS l ON l.id = c.lease_id ORDER BY c.rowid"
)


def _check_claims(connection: sqlite3.Connection, log: _Log) -> int:
    """A claim belongs to a nonterminal attempt of its slot that is finalizing and entered
    it claimed, under an unreleased finalization lease of that attempt; and every such
    attempt still holds its claim (only its terminal commit deletes it)."""
    count = 0
    for row in stream(connection, _CLAIMS):
        count += 1
        problem = _claim_problem(row)
        if problem is not None:
            log(CLAIM_INCONSISTENT, row[0], problem)
    unclaimed = (
        f"SELECT a.id FROM attempts AS a JOIN attempt_transitions AS t ON t.attempt_id = a.id "
        "AND t.revision = a.revision JOIN events AS e ON e.sequence = t.event_sequence "
        f"WHERE a.state = 'finalizing' AND {_CLAIM_OF_EVENT} = ? AND NOT EXISTS "
        "(SELECT 1 FROM finalization_claims AS c WHERE c.slot_id = a.slot_id "
        "AND c.attempt_id = a.id)"
    )
    for (attempt_id,) in stream(connection, unclaimed, (CLAIMED,)):
        log(CLAIM_MISSING, attempt_id, "it entered finalizing claimed but holds no claim")
    return count


def _claim_problem(row: Row) -> str | None:
    _, slot_id, attempt_slot, state, lease_attempt, purpose, released, claim = row
    if state is None:
        return "the claiming attempt does not exist"
    if attempt_slot != slot_id:
        return f"the claim's slot {slot_id!r:.100} is not the attempt's"
    if state != AttemptState.FINALIZING.value:
        return f"the claiming attempt is {state}, not finalizing"
    if claim != CLAIMED:
        return f"the attempt entered finalizing {claim or 'without contending'}"
    if (lease_attempt, purpose) != (row[0], LeasePurpose.FINALIZATION.value):
        return "its lease is not a finalization lease of the attempt"
    if released is not None:
        return f"its lease was released at {released}"
    return None


def _check_leases(connection: sqlite3.Connection, log: _Log) -> int:
    """Every attempt has exactly one reservation lease and at most one finalization lease;
    a terminal attempt holds no unreleased lease; a lease belongs to an attempt; a staging
    lease's path is its stage's; roots are held by reservation leases; fencing tokens are
    1..n. Returns the number of leases."""
    per_attempt = (
        "SELECT a.id, a.state, count(CASE WHEN l.purpose = 'reservation' THEN 1 END), "
        "count(CASE WHEN l.purpose = 'finalization' THEN 1 END), "
        "count(CASE WHEN l.id IS NOT NULL AND l.released_at_ns IS NULL THEN 1 END) "
        "FROM attempts AS a LEFT JOIN leases AS l ON l.attempt_id = a.id GROUP BY a.id"
    )
    for attempt_id, state, reservations, finalizations, unreleased in stream(
        connection, per_attempt
    ):
        if reservations != 1:
            log(RESERVATION_LEASE, attempt_id, f"{reservations} reservation leases, not 1")
        if finalizations > 1:
            log(LEASE_INCONSISTENT, attempt_id, f"{finalizations} finalization leases")
        if state in validate_rows.TERMINAL_VALUES and unreleased:
            log(LEASE_UNRELEASED, attempt_id, f"{state} with {unreleased} unreleased leases")
    leases = "SELECT rowid, id, attempt_id, purpose, staging_path FROM leases ORDER BY rowid"
    count = 0
    for rowid, lease_id, attempt_id, purpose, staging_path in stream(connection, leases):
        count += 1
        if attempt_id is None:
            log(LEASE_INCONSISTENT, f"leases:{rowid}", f"lease {lease_id!r:.100} has no attempt")
        if purpose == LeasePurpose.STAGING.value and not _is_stage(lease_id, staging_path):
            log(LEASE_INCONSISTENT, f"leases:{rowid}", "its staging path is not its stage's")
    roots = (
        "SELECT r.rowid, l.purpose FROM leased_artifacts AS r JOIN leases AS l "
        "ON l.id = r.lease_id WHERE l.purpose != 'reservation'"
    )
    for rowid, purpose in stream(connection, roots):
        log(LEASE_INCONSISTENT, f"leased_artifacts:{rowid}", f"rooted under a {purpose} lease")
    for total, lowest, highest in stream(
        connection, "SELECT count(*), min(fencing_token), max(fencing_token) FROM leases"
    ):
        if total and (lowest, highest) != (1, total):
            log(FENCING_GAP, "leases", f"{total} leases hold tokens {lowest}..{highest}")
    return count


def _is_stage(lease_id: str, staging_path: object) -> bool:
    token = lease_id.removeprefix(lease_id_for(""))
    return lease_id == lease_id_for(token) and token != "" and staging_path == store_path_for(token)


_SELECTIONS: Final = (
    "SELECT s.slot_id, s.observation_id, s.selected_at_ns, o.slot_id, o.valid, "
    "o.registered_at_ns, EXISTS (SELECT 1 FROM attempt_transitions AS t JOIN events AS e "
    "ON e.sequence = t.event_sequence WHERE t.attempt_id = o.attempt_id "
    f"AND t.to_state = 'finalizing' AND {_CLAIM_OF_EVENT} = ?) "
    "FROM selected_observations AS s LEFT JOIN observations AS o ON o.id = s.observation_id "
    "ORDER BY s.rowid"
)


def _check_selections(connection: sqlite3.Connection, log: _Log) -> int:
    """A selection names a valid observation of its own slot, registered no later than
    the selection, whose attempt held the slot's claim. Returns the number of
    selections."""
    count = 0
    for row in stream(connection, _SELECTIONS, (CLAIMED,)):
        count += 1
        problem = _selection_problem(row)
        if problem is not None:
            log(SELECTION_INVALID, row[0], problem)
    return count


def _selection_problem(row: Row) -> str | None:
    slot_id, observation_id, selected_at, observed_slot, valid, registered_at, claimed = row
    if observed_slot is None:
        return f"it selects the unknown observation {observation_id!r:.100}"
    if observed_slot != slot_id:
        return f"it selects {observation_id}, an observation of another slot"
    if valid != 1:
        return f"it selects the invalid observation {observation_id}"
    if selected_at < registered_at:
        return f"selected at {selected_at}, before {observation_id} was registered"
    if not claimed:
        return f"the attempt of {observation_id} never held the slot's claim"
    return None
