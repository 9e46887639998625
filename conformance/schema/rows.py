"""Row builders for the schema v1 conformance tests.

The tests talk to the schema only through plain SQL on an in-memory database built from
``impl/store/schema/v1.sql``. The builders here insert one consistent chain of rows (decision ->
run -> slots -> membership -> artifacts -> attempts with their events and transitions ->
leases, claims, observations, selections) so that each test can break exactly one thing.
Every builder takes keyword overrides for the columns it writes.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.contract import TERMINAL_STATES

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "impl" / "store" / "schema" / "v1.sql"

ARTIFACT_KINDS = (
    "attempt",
    "observation",
    "result",
    "metrics",
    "dataset",
    "source",
    "environment",
    "other",
)
MAX_JSON_INT = 2**53 - 1
MAX_NS = 2**63 - 1

# Shortest legal path from ``reserved`` to each state (the states after ``reserved``).
PATH_TO: dict[str, tuple[str, ...]] = {
    "reserved": (),
    "materializing": ("materializing",),
    "starting": ("materializing", "starting"),
    "preparing": ("materializing", "starting", "preparing"),
    "executing": ("materializing", "starting", "preparing", "executing"),
    "checkpointing": ("materializing", "starting", "preparing", "executing", "checkpointing"),
    "validating": ("materializing", "starting", "preparing", "executing", "validating"),
    "evaluating": (
        "materializing",
        "starting",
        "preparing",
        "executing",
        "validating",
        "evaluating",
    ),
    "finalizing": ("finalizing",),
    "accepted": ("finalizing", "accepted"),
    "censored": ("finalizing", "censored"),
    "superseded": ("finalizing", "superseded"),
    "failed": ("finalizing", "failed"),
}


# --- building the database ---------------------------------------------------------------


def schema_text() -> str:
    return SCHEMA_PATH.read_text(encoding="utf-8")


def split_statements(script: str) -> list[str]:
    """Split the script line by line with ``sqlite3.complete_statement``, the way the
    initializer does, so trigger bodies stay whole."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip() and not all(
        line.strip().startswith("--") or not line.strip() for line in pending.splitlines()
    ):
        raise ValueError("schema script ends inside an incomplete statement")
    return statements


def connect() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA recursive_triggers = ON")
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
    assert conn.execute("PRAGMA recursive_triggers").fetchone() == (1,)
    return conn


def create_schema(conn: sqlite3.Connection, script: str | None = None) -> None:
    """Run every statement in one immediate transaction, as the initializer does."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in split_statements(schema_text() if script is None else script):
            conn.execute(statement)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def open_store() -> sqlite3.Connection:
    conn = connect()
    create_schema(conn)
    return conn


# --- small utilities ---------------------------------------------------------------------


def hexdigest(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def typed_id(prefix: str, label: str) -> str:
    return f"{prefix}:v1:{hexdigest(prefix + '/' + label)}"


def refused(match: str) -> Any:
    """Expect an IntegrityError whose message contains ``match`` literally."""
    return pytest.raises(sqlite3.IntegrityError, match=re.escape(match))


def check_failed(name: str) -> Any:
    return refused(f"CHECK constraint failed: {name}")


def fk_failed() -> Any:
    return refused("FOREIGN KEY constraint failed")


def insert(conn: sqlite3.Connection, table: str, row: dict[str, Any], verb: str = "INSERT") -> int:
    columns = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    cursor = conn.execute(f"{verb} INTO {table} ({columns}) VALUES ({marks})", tuple(row.values()))
    return int(cursor.lastrowid or 0)


def count(conn: sqlite3.Connection, table: str, where: str = "1", *args: Any) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", args).fetchone()[0])


def row_of(conn: sqlite3.Connection, table: str, where: str, *args: Any) -> tuple[Any, ...]:
    found = conn.execute(f"SELECT * FROM {table} WHERE {where}", args).fetchall()
    assert len(found) == 1, found
    return tuple(found[0])


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT; on any failure (including a deferred foreign key at
    COMMIT, which leaves the transaction open) roll back and re-raise."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextmanager
def rolled_back(conn: sqlite3.Connection) -> Iterator[None]:
    """Run a block inside a transaction that is always rolled back (no COMMIT, so deferred
    foreign keys are never checked)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def event_kind_for(revision: int, to_state: str) -> str:
    if revision == 0:
        return "attempt_reserved"
    if to_state == "finalizing":
        return "attempt_finalizing"
    if to_state in TERMINAL_STATES:
        return "attempt_finished"
    return "attempt_transition"


# --- the row builders --------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    decision: str
    run: str
    slot: str
    obs_slot: str


class Rows:
    """Inserts consistent rows with unique ids and a strictly increasing clock."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.clock = 1_000_000
        self._serial = 0

    def now(self) -> int:
        self.clock += 1_000
        return self.clock

    def label(self, what: str) -> str:
        self._serial += 1
        return f"{what}-{self._serial}"

    # resolved records

    def decision(self, **overrides: Any) -> str:
        row: dict[str, Any] = {
            "id": typed_id("decision", self.label("decision")),
            "candidate_id": "candidate-a",
            "problem_id": "problem-a",
            "applicable": 1,
            "record_json": '{"evidence":{}}',
        }
        row.update(overrides)
        insert(self.conn, "applicability_decisions", row)
        return str(row["id"])

    def run(self, decision_id: str, **overrides: Any) -> str:
        candidate = self.conn.execute(
            "SELECT candidate_id FROM applicability_decisions WHERE id = ?", (decision_id,)
        ).fetchone()
        row: dict[str, Any] = {
            "id": typed_id("run", self.label("run")),
            "logical_spec_id": "spec-a",
            "decision_id": decision_id,
            "candidate_id": candidate[0] if candidate else "candidate-a",
            "applicable": 1,
            "record_json": '{"specification":{}}',
        }
        row.update(overrides)
        insert(self.conn, "resolved_runs", row)
        return str(row["id"])

    def attempt_slot(self, run_id: str, **overrides: Any) -> str:
        row: dict[str, Any] = {
            "id": typed_id("attempt-slot", self.label("slot")),
            "run_id": run_id,
            "logical_slot": self.label("logical-attempt-slot"),
            "execution_kind": "one_shot",
            "role": "measurement",
            "record_json": "{}",
        }
        row.update(overrides)
        insert(self.conn, "attempt_slots", row)
        return str(row["id"])

    def observation_slot(self, run_id: str, **overrides: Any) -> str:
        row: dict[str, Any] = {
            "id": typed_id("observation-slot", self.label("obs-slot")),
            "run_id": run_id,
            "logical_slot": self.label("logical-observation-slot"),
            "kind": "result",
            "checkpoint_index": None,
            "record_json": "{}",
        }
        row.update(overrides)
        insert(self.conn, "observation_slots", row)
        return str(row["id"])

    def membership(self, observation_slot_id: str, attempt_slot_id: str, run_id: str) -> None:
        insert(
            self.conn,
            "attempt_observation_slots",
            {
                "observation_slot_id": observation_slot_id,
                "attempt_slot_id": attempt_slot_id,
                "run_id": run_id,
            },
        )

    def world(self, *, role: str = "measurement", execution_kind: str = "one_shot") -> World:
        """A decision, its run, one execution slot and (unless warm-up) one owned result
        slot."""
        decision = self.decision()
        run = self.run(decision)
        slot = self.attempt_slot(run, role=role, execution_kind=execution_kind)
        obs_slot = ""
        if role != "warmup":
            obs_slot = self.observation_slot(run)
            self.membership(obs_slot, slot, run)
        return World(decision=decision, run=run, slot=slot, obs_slot=obs_slot)

    def owned_slot(self, world: World, **overrides: Any) -> str:
        """Another observation slot of the world's run, owned by the world's slot."""
        obs_slot = self.observation_slot(world.run, **overrides)
        self.membership(obs_slot, world.slot, world.run)
        return obs_slot

    # artifacts

    def artifact_row(self, kind: str = "attempt", **overrides: Any) -> dict[str, Any]:
        content = hexdigest(self.label("content"))
        row: dict[str, Any] = {
            "id": f"run-store-v1:{kind}-{content}",
            "kind": kind,
            "path": f"artifacts/{kind}-{content}",
            "content_sha256": content,
            "manifest_sha256": hexdigest(self.label("manifest")),
            "verified_at_ns": self.now(),
        }
        row.update(overrides)
        return row

    def artifact(self, kind: str = "attempt", **overrides: Any) -> str:
        row = self.artifact_row(kind, **overrides)
        insert(self.conn, "artifacts", row)
        return str(row["id"])

    # attempts

    def event(self, kind: str, attempt_id: str | None, at_ns: int, **overrides: Any) -> int:
        row: dict[str, Any] = {
            "kind": kind,
            "attempt_id": attempt_id,
            "at_ns": at_ns,
            "payload_json": "{}",
        }
        row.update(overrides)
        return insert(self.conn, "events", row)

    def transition(
        self,
        attempt_id: str,
        revision: int,
        from_state: str | None,
        to_state: str,
        at_ns: int,
        *,
        event_sequence: int | None = None,
    ) -> None:
        if event_sequence is None:
            event_sequence = self.event(event_kind_for(revision, to_state), attempt_id, at_ns)
        insert(
            self.conn,
            "attempt_transitions",
            {
                "attempt_id": attempt_id,
                "revision": revision,
                "from_state": from_state,
                "to_state": to_state,
                "at_ns": at_ns,
                "event_sequence": event_sequence,
            },
        )

    def next_retry(self, slot_id: str) -> int:
        return int(
            self.conn.execute(
                "SELECT coalesce(max(retry_index) + 1, 0) FROM attempts WHERE slot_id = ?",
                (slot_id,),
            ).fetchone()[0]
        )

    def attempt_row(self, slot_id: str, **overrides: Any) -> dict[str, Any]:
        retry = overrides.pop("retry_index", None)
        if retry is None:
            retry = self.next_retry(slot_id)
        at = overrides.pop("started_at_ns", None)
        if at is None:
            at = self.now()
        row: dict[str, Any] = {
            "id": typed_id("attempt", f"{slot_id}/{retry}"),
            "slot_id": slot_id,
            "retry_index": retry,
            "state": "reserved",
            "revision": 0,
            "started_at_ns": at,
            "updated_at_ns": at,
            "record_json": "{}",
        }
        row.update(overrides)
        return row

    def reserve(self, slot_id: str, **overrides: Any) -> str:
        """Attempt row, reservation event and revision-0 transition in one transaction."""
        row = self.attempt_row(slot_id, **overrides)
        with transaction(self.conn):
            insert(self.conn, "attempts", row)
            self.transition(row["id"], 0, None, "reserved", row["started_at_ns"])
        return str(row["id"])

    def current(self, attempt_id: str) -> tuple[str, int, str, int]:
        """(slot_id, revision, state, updated_at_ns) of an attempt."""
        found = self.conn.execute(
            "SELECT slot_id, revision, state, updated_at_ns FROM attempts WHERE id = ?",
            (attempt_id,),
        ).fetchone()
        assert found is not None, attempt_id
        return found[0], found[1], found[2], found[3]

    def outcome_fields(self, to_state: str, at_ns: int) -> dict[str, Any]:
        """The finish columns a correct writer sets when entering ``to_state``."""
        if to_state not in TERMINAL_STATES:
            return {}
        fields: dict[str, Any] = {
            "finished_at_ns": at_ns,
            "final_artifact_id": self.artifact("attempt"),
            "final_artifact_kind": "attempt",
        }
        if to_state == "failed":
            fields["failure_code"] = "worker_crashed"
        if to_state == "censored":
            fields["censor_reason"] = "budget exhausted"
        return fields

    def update_attempt(self, attempt_id: str, fields: dict[str, Any]) -> int:
        assignments = ", ".join(f"{column} = ?" for column in fields)
        cursor = self.conn.execute(
            f"UPDATE attempts SET {assignments} WHERE id = ?", (*fields.values(), attempt_id)
        )
        return cursor.rowcount

    def step(
        self, attempt_id: str, to_state: str, *, at_ns: int | None = None, **fields: Any
    ) -> None:
        """Inside the caller's transaction: event, transition and projection update for one
        step. ``fields`` override the projection columns written."""
        _slot, revision, state, _updated = self.current(attempt_id)
        at = self.now() if at_ns is None else at_ns
        self.transition(attempt_id, revision + 1, state, to_state, at)
        update: dict[str, Any] = {"state": to_state, "revision": revision + 1, "updated_at_ns": at}
        update.update(self.outcome_fields(to_state, at))
        update.update(fields)
        self.update_attempt(attempt_id, update)

    def advance(
        self,
        attempt_id: str,
        to_state: str,
        *,
        at_ns: int | None = None,
        release_claim: bool = True,
        **fields: Any,
    ) -> None:
        """One committed step. Acceptance first takes the slot's claim when the attempt
        holds none; a terminal step deletes the attempt's claim afterwards in the same
        transaction (unless ``release_claim`` is false), as commit_finalization does."""
        if to_state == "accepted" and not self.claim_of(attempt_id):
            self.claim(attempt_id)
        with transaction(self.conn):
            self.step(attempt_id, to_state, at_ns=at_ns, **fields)
            if to_state in TERMINAL_STATES and release_claim:
                self.conn.execute(
                    "DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt_id,)
                )

    def drive(self, attempt_id: str, *states: str) -> None:
        for state in states:
            self.advance(attempt_id, state)

    def attempt_in(self, slot_id: str, state: str, **overrides: Any) -> str:
        """A new attempt of ``slot_id`` brought to ``state`` along the shortest legal path."""
        attempt_id = self.reserve(slot_id, **overrides)
        self.drive(attempt_id, *PATH_TO[state])
        return attempt_id

    # leases and claims

    def lease(self, attempt_id: str | None = None, **overrides: Any) -> str:
        acquired = overrides.pop("acquired_at_ns", None)
        if acquired is None:
            acquired = self.now()
        purpose = overrides.get("purpose", "reservation")
        token = self.conn.execute(
            "SELECT coalesce(max(fencing_token) + 1, 1) FROM leases"
        ).fetchone()[0]
        row: dict[str, Any] = {
            "id": self.label("lease"),
            "fencing_token": token,
            "owner_token": "owner-a",
            "attempt_id": attempt_id,
            "purpose": purpose,
            "acquired_at_ns": acquired,
            "expires_at_ns": acquired + 60_000_000_000,
            "released_at_ns": None,
            "staging_path": (
                f"artifacts/.staging-{self.label('stage')}" if purpose == "staging" else None
            ),
        }
        row.update(overrides)
        insert(self.conn, "leases", row)
        return str(row["id"])

    def claim_of(self, attempt_id: str) -> str | None:
        found = self.conn.execute(
            "SELECT lease_id FROM finalization_claims WHERE attempt_id = ?", (attempt_id,)
        ).fetchone()
        return None if found is None else str(found[0])

    def claim(self, attempt_id: str, *, lease_id: str | None = None, **overrides: Any) -> str:
        """A finalization lease of the attempt (unless ``lease_id`` is given) and the claim of
        the attempt's slot. Returns the lease id."""
        slot_id = self.current(attempt_id)[0]
        if lease_id is None:
            lease_id = self.lease(attempt_id, purpose="finalization")
        row: dict[str, Any] = {
            "slot_id": slot_id,
            "attempt_id": attempt_id,
            "lease_id": lease_id,
            "claimed_at_ns": self.now(),
            "lease_purpose": "finalization",
        }
        row.update(overrides)
        insert(self.conn, "finalization_claims", row)
        return lease_id

    # observations

    def observation(self, attempt_id: str, obs_slot_id: str, **overrides: Any) -> str:
        """An observation with its own (freshly registered) observation directory."""
        attempt_slot = self.current(attempt_id)[0]
        row: dict[str, Any] = {
            "id": typed_id("observation", self.label("observation")),
            "slot_id": obs_slot_id,
            "attempt_id": attempt_id,
            "attempt_slot_id": attempt_slot,
            "valid": 1,
            "completion": "reached",
            "artifact_id": self.artifact("observation"),
            "artifact_kind": "observation",
            "registered_at_ns": self.now(),
            "record_json": '{"result":{}}',
        }
        row.update(overrides)
        insert(self.conn, "observations", row)
        return str(row["id"])

    def select(self, obs_slot_id: str, observation_id: str, **overrides: Any) -> None:
        row: dict[str, Any] = {
            "slot_id": obs_slot_id,
            "observation_id": observation_id,
            "valid": 1,
            "selected_at_ns": self.now(),
        }
        row.update(overrides)
        insert(self.conn, "selected_observations", row)

    # references that keep artifacts alive

    def attempt_reference(self, attempt_id: str, artifact_id: str, role: str = "dataset") -> None:
        insert(
            self.conn,
            "attempt_artifacts",
            {"attempt_id": attempt_id, "role": role, "artifact_id": artifact_id},
        )

    def observation_reference(
        self, observation_id: str, artifact_id: str, role: str = "metrics"
    ) -> None:
        insert(
            self.conn,
            "observation_artifacts",
            {"observation_id": observation_id, "role": role, "artifact_id": artifact_id},
        )

    def leased_root(self, lease_id: str, artifact_id: str) -> None:
        insert(self.conn, "leased_artifacts", {"lease_id": lease_id, "artifact_id": artifact_id})

    def release(self, lease_id: str) -> None:
        self.conn.execute(
            "UPDATE leases SET released_at_ns = ? WHERE id = ?", (self.now(), lease_id)
        )
