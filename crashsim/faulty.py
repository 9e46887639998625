"""Deliberately faulty scenarios: the simulator's teeth. Test-only; never in the catalog.

Rules of this file: each scenario here breaks one promise on purpose, through the
store's private connection and the runtime's own SQL helpers, so the tests can show the
simulator notices:

* ``faulty_split_reserve`` writes a reservation in two transactions (the attempt, its
  event and transition first, the lease in a second commit): a crash between them leaves
  a state the model never has, and must be reported as a failure.
* ``faulty_changing_path`` runs one extra statement whenever a marker file exists, and
  creates the marker when it does not: the reference run creates it, so every later run
  takes another path after that point, and those crash points must be reported as prefix
  mismatches, never counted.
"""

from __future__ import annotations

import os
from typing import Final

import attrs
from runstore import RunStore, canonical, payloads, sql
from runstore.attempt_record import attempt_document
from runstore.crashsim.scenarios import (
    FIXTURE,
    REGISTERED,
    Scenario,
    Step,
    advance,
    reserve,
)
from runstore.enums import AttemptState, LeasePurpose
from runstore.events import append_history
from runstore.identity import run_attempt_id
from runstore.leases import insert_lease
from runstore.receipts import OwnedAttempt
from runstore.requests import FirstAttempt
from runstore.testing import fixtures as fx
from runstore.testing.script import Context

SPLIT: Final = "faulty_split_reserve"
CHANGING: Final = "faulty_changing_path"
FAULTY_NAMES: Final = (SPLIT, CHANGING)

_A = "attempt-a"


def _split_reserve(store: RunStore, context: Context) -> object:
    """``reserve(FirstAttempt)`` for the fixture slot at 1000 under lease reservation-a,
    committed in two transactions."""
    connection = store._require_connection()
    slot, now, lease = FIXTURE.slot_id, 1_000, fx.lease("reservation-a", 10_000)
    attempt_id = run_attempt_id(slot, 0)
    record = canonical.encode(
        attempt_document(
            attempt_id=attempt_id,
            slot_id=slot,
            retry_index=0,
            state=AttemptState.RESERVED,
            revision=0,
            started_at_ns=now,
            updated_at_ns=now,
        )
    ).decode()
    with sql.immediate_transaction(connection):
        sql.execute(
            connection,
            "INSERT INTO attempts (id, slot_id, retry_index, state, revision, started_at_ns, "
            "updated_at_ns, record_json) VALUES (?, ?, 0, 'reserved', 0, ?, ?, ?)",
            (attempt_id, slot, now, now, record),
        )
        payload = payloads.reserved_payload(slot, 0)
        kind = payloads.ATTEMPT_RESERVED
        append_history(connection, kind, attempt_id, 0, None, AttemptState.RESERVED, now, payload)
    with sql.immediate_transaction(connection):  # the fault: a second commit
        insert_lease(
            connection,
            lease_id=lease.lease_id,
            owner_token=lease.owner_token,
            attempt_id=attempt_id,
            purpose=LeasePurpose.RESERVATION,
            acquired_at_ns=now,
            expires_at_ns=lease.expires_at_ns,
        )
    guard = OwnedAttempt.reserved(slot, 0, lease)
    context[_A] = guard
    return guard


def split_reserve() -> Scenario:
    """The split-transaction scenario (its model step is an ordinary reserve)."""
    model_step = reserve(_A, FirstAttempt(), "reservation-a", 1_000)
    step = Step(attrs.evolve(model_step.call, name="split reserve"), _split_reserve)
    return Scenario(name=SPLIT, setup=REGISTERED, steps=(step,))


def changing_path(marker: str) -> Scenario:
    """The path-changing scenario, branching on the file ``marker`` (which must not exist
    before the campaign)."""
    plain = advance(_A, AttemptState.STARTING, 1_200)

    def branching(store: RunStore, context: Context) -> object:
        if os.path.exists(marker):
            sql.execute(store._require_connection(), "SELECT count(*) FROM attempts")
        else:
            with open(marker, "w", encoding="utf-8"):
                pass
        return plain.on_store(store, context)

    steps = (
        advance(_A, AttemptState.MATERIALIZING, 1_100),
        Step(attrs.evolve(plain.call, name="branching advance"), branching),
        advance(_A, AttemptState.PREPARING, 1_300),
    )
    setup = (*REGISTERED, reserve(_A, FirstAttempt(), "reservation-a", 1_000))
    return Scenario(name=CHANGING, setup=setup, steps=steps)


def faulty_scenarios(marker_directory: str) -> dict[str, Scenario]:
    """Both faulty scenarios by name; the path-changing one keeps its marker in
    ``marker_directory``."""
    marker = os.path.join(marker_directory, "crashsim-branch-marker")
    return {SPLIT: split_reserve(), CHANGING: changing_path(marker)}
