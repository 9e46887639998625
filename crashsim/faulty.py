"""Deliberately faulty scenarios: the simulator's teeth. Test-only; never in the catalog.

Rules of this file: each scenario here breaks one promise on purpose, through the
store's private connection and the runtime's own SQL and publication helpers, so the tests
can show the simulator notices:

* ``faulty_split_reserve`` writes a reservation in two transactions (the attempt, its
  event and transition first, the lease in a second commit): a crash between them leaves
  a state the model never has, and must be reported as a failure.
* ``faulty_changing_path`` runs one extra statement whenever a marker file exists, and
  creates the marker when it does not: the reference run creates it, so every later run
  takes another path after that point, and those crash points must be reported as prefix
  mismatches, never counted.
* ``faulty_early_registration`` publishes a dataset with the final transaction committed
  *before* the no-replace rename (the publisher's own steps otherwise): a crash between
  that commit and the rename leaves a registered artifact whose object is not on disk,
  and must be reported as a failure.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Final

import attrs
from runstore import RunStore
from runstore import canonical
from runstore import durable
from runstore import payloads
from runstore import sql
from runstore.attempt_record import attempt_document
from runstore.crashsim.scenarios import DATA
from runstore.crashsim.scenarios import FIXTURE
from runstore.crashsim.scenarios import REGISTERED
from runstore.crashsim.scenarios import RUNNING
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.scenarios import Step
from runstore.crashsim.scenarios import advance
from runstore.crashsim.scenarios import publish
from runstore.crashsim.scenarios import reserve
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import LeasePurpose
from runstore.identity import run_attempt_id
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.requests import FirstAttempt
from runstore.store.events import append_history
from runstore.store.leases import insert_lease
from runstore.store.publication import objects
from runstore.store.publication import publish as publication
from runstore.store.publication import publish_tx
from runstore.store.publication import staging
from runstore.testing import fixtures as fx
from runstore.testing.script import Context

SPLIT: Final = "faulty_split_reserve"
CHANGING: Final = "faulty_changing_path"
EARLY: Final = "faulty_early_registration"
FAULTY_NAMES: Final = (SPLIT, CHANGING, EARLY)

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
    before the sweep)."""
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


EARLY_AT: Final = 1_150


def _early_registration(store: RunStore, context: Context) -> object:
    """``publish_artifact`` of :data:`DATA` by attempt A at :data:`EARLY_AT` through the
    publisher's own public steps, clock samples in the same order, but with the final
    transaction committed before the rename (the fault)."""
    guard, root, write = context[_A], store.root, store._write
    clock = iter(range(EARLY_AT, EARLY_AT + 10)).__next__
    staged_at = publication.sample(clock)
    with staging.RecoveryLock(root, exclusive=False):
        stage = staging.create_stage(root)
        acquired = write(
            lambda c: (
                publish_tx.register_stage(c, guard, stage.lease_id, stage.store_path, staged_at),
                (),
            )
        )
    DATA(stage.object_path)
    inventory = objects.scan(stage.object_path, reserved=(publication.MANIFEST_NAME,))
    completed = objects.complete(stage.object_path, inventory, {})
    verified = max(publication.sample(clock), acquired)
    artifact = objects.registration(ArtifactKind.DATASET, completed, verified)

    def commit(connection: sqlite3.Connection) -> tuple[None, tuple[()]]:
        now = publication.sample(clock)
        publish_tx.publish_staged(connection, guard, stage.lease_id, artifact, now)
        return None, ()

    write(commit)  # the fault: the final transaction commits before the rename
    destination = os.path.join(root, artifact.path)
    durable.rename_noreplace(stage.object_path, destination)
    durable.fsync_dir(stage.path)
    durable.fsync_dir(os.path.dirname(destination))
    staging.remove_stage(stage)
    return PublishedArtifact(attempt=guard, artifact=artifact)


def early_registration() -> Scenario:
    """The register-before-rename scenario (its model step is an ordinary publication)."""
    model_step = publish(_A, EARLY_AT)
    step = Step(
        attrs.evolve(model_step.call, name="early-registering publish"), _early_registration
    )
    return Scenario(name=EARLY, setup=RUNNING, steps=(step,))


def faulty_scenarios(marker_directory: str) -> dict[str, Scenario]:
    """The faulty scenarios by name; the path-changing one keeps its marker in
    ``marker_directory``."""
    marker = os.path.join(marker_directory, "crashsim-branch-marker")
    return {SPLIT: split_reserve(), CHANGING: changing_path(marker), EARLY: early_registration()}
