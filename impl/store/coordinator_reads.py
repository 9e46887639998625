"""What a coordinator reads back from its own open store: registered records and slot progress.

Rules of this file: reads only, each in one read transaction on the store's own connection
(a coordinator must never copy or open the database files a second time in its process:
closing such a descriptor would drop its connection's locks). Every record is parsed from
its ``record_json``, which recomputes and checks its id. Nothing here decides anything: the
writer still checks every step, so a read that is stale by the time it is used costs a
refusal, never a wrong write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager

import attrs
from runstore import sql
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun

_CHUNK = 500  # bound parameters per IN (...) list


@attrs.frozen(kw_only=True)
class Registered:
    """The registered records of some candidates: their decisions, the runs of those
    decisions, and the runs' attempt and observation slots."""

    decisions: tuple[ApplicabilityDecision, ...]
    runs: tuple[ResolvedRun, ...]
    attempt_slots: tuple[AttemptSlot, ...]
    observation_slots: tuple[ObservationSlot, ...]


@attrs.frozen(kw_only=True)
class SlotProgress:
    """One attempt slot as committed: ``states`` holds its attempts' states by retry index
    (so ``len(states)`` is the next retry index); ``recoverable_at_ns`` is, when it has a
    nonterminal attempt, the earliest time at which recovery may judge that attempt (0 when
    a lease it depends on is already released), else None."""

    slot_id: str
    states: tuple[AttemptState, ...]
    recoverable_at_ns: int | None
    failure_codes: tuple[str | None, ...] = ()
    """The failure code of each attempt by retry index (None unless it failed)."""

    @property
    def accepted(self) -> bool:
        return AttemptState.ACCEPTED in self.states

    @property
    def attempts(self) -> int:
        return len(self.states)


@contextmanager
def read_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """One consistent read snapshot (a deferred transaction that only reads)."""
    sql.execute(connection, "BEGIN")
    try:
        yield
    finally:
        sql.execute(connection, "COMMIT")


def registered(connection: sqlite3.Connection, candidate_ids: Sequence[str]) -> Registered:
    """Every decision whose candidate is one of ``candidate_ids``, with its runs and their
    slots. Run inside :func:`read_transaction`."""
    decisions = [
        ApplicabilityDecision.from_bytes(row[0].encode("utf-8"))
        for ids in _chunks(sorted(set(candidate_ids)))
        for row in sql.execute(
            connection,
            "SELECT record_json FROM applicability_decisions WHERE candidate_id IN "
            f"({_marks(ids)}) ORDER BY id",
            ids,
        )
    ]
    runs = [
        ResolvedRun.from_bytes(row[0].encode("utf-8"))
        for ids in _chunks([decision.id for decision in decisions])
        for row in sql.execute(
            connection,
            f"SELECT record_json FROM resolved_runs WHERE decision_id IN ({_marks(ids)}) "
            "ORDER BY id",
            ids,
        )
    ]
    run_ids = [run.id for run in runs]
    attempt_slots = [
        AttemptSlot.from_bytes(row[0].encode("utf-8"))
        for ids in _chunks(run_ids)
        for row in sql.execute(
            connection,
            f"SELECT record_json FROM attempt_slots WHERE run_id IN ({_marks(ids)}) ORDER BY id",
            ids,
        )
    ]
    observation_slots = [
        ObservationSlot.from_bytes(row[0].encode("utf-8"))
        for ids in _chunks(run_ids)
        for row in sql.execute(
            connection,
            f"SELECT record_json FROM observation_slots WHERE run_id IN ({_marks(ids)}) "
            "ORDER BY id",
            ids,
        )
    ]
    return Registered(
        decisions=tuple(decisions),
        runs=tuple(runs),
        attempt_slots=tuple(attempt_slots),
        observation_slots=tuple(observation_slots),
    )


def slot_progress(
    connection: sqlite3.Connection, slot_ids: Sequence[str]
) -> dict[str, SlotProgress]:
    """The progress of each of ``slot_ids`` (a slot with no attempts has empty ``states``).
    Run inside :func:`read_transaction`."""
    states: dict[str, list[AttemptState]] = {slot_id: [] for slot_id in slot_ids}
    codes: dict[str, list[str | None]] = {slot_id: [] for slot_id in slot_ids}
    recoverable: dict[str, int] = {}
    for ids in _chunks(sorted(states)):
        for slot_id, state, code in sql.execute(
            connection,
            f"SELECT slot_id, state, failure_code FROM attempts WHERE slot_id IN "
            f"({_marks(ids)}) ORDER BY slot_id, retry_index",
            ids,
        ):
            states[slot_id].append(AttemptState(state))
            codes[slot_id].append(code)
        # The leases a nonterminal attempt's liveness depends on: its reservation and the
        # lease of the claim it holds (SPEC.md section 6, "Recovery decision").
        for slot_id, at_ns in sql.execute(
            connection,
            "SELECT a.slot_id, min(CASE WHEN l.released_at_ns IS NULL THEN l.expires_at_ns "
            "ELSE 0 END) FROM attempts AS a JOIN leases AS l ON l.attempt_id = a.id "
            "LEFT JOIN finalization_claims AS c ON c.lease_id = l.id "
            f"WHERE a.slot_id IN ({_marks(ids)}) AND a.state NOT IN "
            f"({_marks(_TERMINAL)}) AND (l.purpose = 'reservation' OR c.lease_id IS NOT NULL) "
            "GROUP BY a.id",
            [*ids, *_TERMINAL],
        ):
            recoverable[slot_id] = min(int(at_ns), recoverable.get(slot_id, int(at_ns)))
    return {
        slot_id: SlotProgress(
            slot_id=slot_id,
            states=tuple(found),
            recoverable_at_ns=recoverable.get(slot_id),
            failure_codes=tuple(codes[slot_id]),
        )
        for slot_id, found in states.items()
    }


_TERMINAL = sorted(state.value for state in TERMINAL_STATES)


def _chunks(values: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), _CHUNK):
        yield list(values[start : start + _CHUNK])


def _marks(values: Sequence[str]) -> str:
    return ", ".join("?" * len(values))
