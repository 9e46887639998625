"""Registering a batch of slots and exclusions in the caller's one write transaction
(``register_many``): the same checks, refusals and rows as its items registered one at a
time (:mod:`runstore.store.registration`), in set-based SQL.

Rules of this file: runs inside the caller's write transaction and never commits. The
batch's own rules (limits, naming the refused item) are :mod:`runstore.registration_batch`,
each item's argument checks :mod:`runstore.shapes`, both shared with the model. Everything
the conflict checks need is read by one statement, and each table gets one ``INSERT ...
SELECT`` over a JSON array of its new rows, in item order (so rows, and their rowids, come
out as the items' own calls would write them). A refusal raises before any INSERT runs,
and the caller's rollback discards the whole batch either way.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from runstore import canonical
from runstore import sql
from runstore.errors import RegistrationConflictError
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.registration_batch import ATTEMPT_KEY_CONFLICT
from runstore.registration_batch import OTHER_MEMBERS
from runstore.registration_batch import Item
from runstore.registration_batch import held_refusal
from runstore.registration_batch import item_refusal
from runstore.registration_batch import named

Key = tuple[str, str]
"""A slot's unique ``(run_id, logical_slot)``."""


def register_many(
    connection: sqlite3.Connection,
    items: Sequence[Item],
    candidate_ids: Sequence[str],
    held: int | None,
) -> tuple[str, ...]:
    """Register ``items`` in order, as :func:`~runstore.store.registration.register_slots`
    and :func:`~runstore.store.registration.register_exclusion` would one after the other;
    returns each item's id (the attempt slot's, or the exclusion's).

    First, when ``held`` is given, ``registration_conflict`` unless the store holds exactly
    ``held`` decisions and runs whose candidate is one of ``candidate_ids`` (records are
    never deleted, so an equal count means nothing was registered for them since the
    caller counted). Then each item's checks in order, the first refusal raised with its
    message prefixed ``items[i]: ``: its argument checks, then ``registration_conflict``
    against what the store holds and what the earlier items register."""
    if held is not None:
        found = sql.scalar(connection, _HELD_SQL, (_json(list(dict.fromkeys(candidate_ids))),))
        if found != held:
            raise held_refusal(found, held)
    batch = _Batch(connection, items)
    results = tuple(batch.add(index, item) for index, item in enumerate(items))
    batch.insert(connection)
    return results


_HELD_SQL = (
    "SELECT (SELECT count(*) FROM applicability_decisions WHERE candidate_id IN "
    "(SELECT value FROM json_each(?1))) + (SELECT count(*) FROM resolved_runs "
    "WHERE candidate_id IN (SELECT value FROM json_each(?1)))"
)

_READ_SQL = (
    "SELECT 'decision', d.id, NULL, NULL FROM json_each(?1) AS k "
    "JOIN applicability_decisions AS d ON d.id = k.value "
    "UNION ALL SELECT 'run', r.id, NULL, NULL FROM json_each(?2) AS k "
    "JOIN resolved_runs AS r ON r.id = k.value "
    "UNION ALL SELECT 'attempt_slot', s.run_id, s.logical_slot, s.id FROM json_each(?3) AS k "
    "JOIN attempt_slots AS s ON s.run_id = json_extract(k.value, '$[0]') "
    "AND s.logical_slot = json_extract(k.value, '$[1]') "
    "UNION ALL SELECT 'observation_slot', s.run_id, s.logical_slot, s.id "
    "FROM json_each(?4) AS k JOIN observation_slots AS s "
    "ON s.run_id = json_extract(k.value, '$[0]') "
    "AND s.logical_slot = json_extract(k.value, '$[1]') "
    "UNION ALL SELECT 'member', m.attempt_slot_id, m.observation_slot_id, NULL "
    "FROM json_each(?5) AS k JOIN attempt_observation_slots AS m "
    "ON m.attempt_slot_id = k.value"
)
"""What the batch's checks need, read by one statement: ``decision`` and ``run``, each of
the batch's decisions and runs that is registered (``?1``, ``?2``: JSON arrays of ids);
``attempt_slot`` and ``observation_slot``, every registered slot holding one of the
batch's ``(run_id, logical_slot)`` keys (``?3``, ``?4``: arrays of ``[run_id,
logical_slot]``), with its id; ``member``, the registered memberships of the batch's
attempt slots (``?5``: an array of ids)."""


class _Batch:
    """The registered state the batch's items are checked against, as they are added in
    order, and the new rows they make."""

    def __init__(self, connection: sqlite3.Connection, items: Sequence[Item]) -> None:
        slots = [item for item in items if not isinstance(item, ApplicabilityDecision)]
        decisions = [item for item in items if isinstance(item, ApplicabilityDecision)]
        decisions += [decision for decision, _, _, _ in slots]
        rows = sql.execute(
            connection,
            _READ_SQL,
            (
                _json(list(dict.fromkeys(d.id for d in decisions))),
                _json(list(dict.fromkeys(run.id for _, run, _, _ in slots))),
                _json(list(dict.fromkeys(_key(a) for _, _, a, _ in slots))),
                _json(list(dict.fromkeys(_key(o) for *_, obs in slots for o in obs))),
                _json(list(dict.fromkeys(a.id for _, _, a, _ in slots))),
            ),
        )
        self.decisions: set[str] = set()
        self.runs: set[str] = set()
        self.attempt_keys: dict[Key, str] = {}
        self.observation_keys: dict[Key, str] = {}
        self.members: dict[str, set[str]] = {}
        for tag, first, second, third in rows:
            if tag == "decision":
                self.decisions.add(first)
            elif tag == "run":
                self.runs.add(first)
            elif tag == "attempt_slot":
                self.attempt_keys[first, second] = third
                self.members.setdefault(third, set())
            elif tag == "observation_slot":
                self.observation_keys[first, second] = third
            else:
                self.members.setdefault(first, set()).add(second)
        self.new_decisions: list[ApplicabilityDecision] = []
        self.new_runs: list[ResolvedRun] = []
        self.new_attempt_slots: list[AttemptSlot] = []
        self.new_observation_slots: list[ObservationSlot] = []
        self.new_members: list[tuple[str, str, str]] = []

    def add(self, index: int, item: Item) -> str:
        """Check item ``index`` against everything registered before it and keep its new
        rows; returns its id. Raises its refusal, named."""
        refusal = item_refusal(index, item)
        if refusal is not None:
            raise refusal
        if isinstance(item, ApplicabilityDecision):
            self._decision(item)
            return item.id
        decision, run, attempt_slot, observation_slots = item
        taken = self.attempt_keys.get(_key(attempt_slot), attempt_slot.id) != attempt_slot.id
        if taken or any(
            self.observation_keys.get(_key(slot), slot.id) != slot.id for slot in observation_slots
        ):
            raise named(index, RegistrationConflictError(ATTEMPT_KEY_CONFLICT))
        members = {slot.id for slot in observation_slots}
        registered = self.members.get(attempt_slot.id)
        if registered is not None:
            if registered != members:
                raise named(index, RegistrationConflictError(OTHER_MEMBERS))
            return attempt_slot.id
        self._decision(decision)
        if run.id not in self.runs:
            self.runs.add(run.id)
            self.new_runs.append(run)
        self.attempt_keys[_key(attempt_slot)] = attempt_slot.id
        self.members[attempt_slot.id] = members
        self.new_attempt_slots.append(attempt_slot)
        for slot in observation_slots:
            if _key(slot) not in self.observation_keys:
                self.observation_keys[_key(slot)] = slot.id
                self.new_observation_slots.append(slot)
            self.new_members.append((slot.id, attempt_slot.id, run.id))
        return attempt_slot.id

    def _decision(self, decision: ApplicabilityDecision) -> None:
        if decision.id not in self.decisions:
            self.decisions.add(decision.id)
            self.new_decisions.append(decision)

    def insert(self, connection: sqlite3.Connection) -> None:
        """One INSERT per table that gets rows, parents first (the foreign keys are
        checked per statement)."""
        tables = (
            (
                _INSERT_DECISIONS,
                [
                    [d.id, d.candidate_id, d.problem_id, int(d.applicable), _document(d)]
                    for d in self.new_decisions
                ],
            ),
            (
                _INSERT_RUNS,
                [
                    [r.id, r.logical_spec_id, r.decision_id, r.candidate_id, _document(r)]
                    for r in self.new_runs
                ],
            ),
            (
                _INSERT_ATTEMPT_SLOTS,
                [
                    [
                        a.id,
                        a.run_id,
                        a.logical_slot,
                        a.execution_kind.value,
                        a.role.value,
                        _document(a),
                    ]
                    for a in self.new_attempt_slots
                ],
            ),
            (
                _INSERT_OBSERVATION_SLOTS,
                [
                    [o.id, o.run_id, o.logical_slot, o.kind.value, o.checkpoint_index, _document(o)]
                    for o in self.new_observation_slots
                ],
            ),
            (_INSERT_MEMBERS, [list(member) for member in self.new_members]),
        )
        for statement, rows in tables:
            if rows:
                sql.execute(connection, statement, (_json(rows),))


def _columns(count: int) -> str:
    return ", ".join(f"json_extract(value, '$[{i}]')" for i in range(count))


_INSERT_DECISIONS = (
    "INSERT INTO applicability_decisions (id, candidate_id, problem_id, applicable, "
    f"record_json) SELECT {_columns(5)} FROM json_each(?1)"
)
_INSERT_RUNS = (
    "INSERT INTO resolved_runs (id, logical_spec_id, decision_id, candidate_id, applicable, "
    f"record_json) SELECT {_columns(4)}, 1, json_extract(value, '$[4]') FROM json_each(?1)"
)
_INSERT_ATTEMPT_SLOTS = (
    "INSERT INTO attempt_slots (id, run_id, logical_slot, execution_kind, role, record_json) "
    f"SELECT {_columns(6)} FROM json_each(?1)"
)
_INSERT_OBSERVATION_SLOTS = (
    "INSERT INTO observation_slots (id, run_id, logical_slot, kind, checkpoint_index, "
    f"record_json) SELECT {_columns(6)} FROM json_each(?1)"
)
_INSERT_MEMBERS = (
    "INSERT INTO attempt_observation_slots (observation_slot_id, attempt_slot_id, run_id) "
    f"SELECT {_columns(3)} FROM json_each(?1)"
)
"""Each row is a JSON array of the columns, in order; ``json_each`` keeps the array's
order, so rows are inserted in item order. Every value is text, an integer or null, and
text round-trips exactly: record documents escape every control character, identifiers
and names hold none, and no string holds a lone surrogate (the records refuse them)."""


_EXACT_RECORDS = (ApplicabilityDecision, ResolvedRun, AttemptSlot, ObservationSlot)


def _document(record: ApplicabilityDecision | ResolvedRun | AttemptSlot | ObservationSlot) -> str:
    """``record_json``: the canonical text of the record's document. A record of the exact
    class built its document from fields it validated, so the C encoder writes it (the
    same bytes; :func:`~runstore.canonical.encode_checked_types`); anything else, such as a
    subclass that overrides a method, is encoded with every check."""
    document = record.to_json()
    if type(record) in _EXACT_RECORDS:
        return canonical.encode_checked_types(document).decode("utf-8")
    return canonical.encode(document).decode("utf-8")


def _key(slot: AttemptSlot | ObservationSlot) -> Key:
    return (slot.run_id, slot.logical_slot)


def _json(value: object) -> str:
    """JSON text without ASCII escapes, so text SQLite cannot bind fails here as it would
    as a parameter of its own."""
    return json.dumps(value, ensure_ascii=False)
