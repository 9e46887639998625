"""Recovery's release of staging leases whose stage is gone (SPEC.md section 14.2 step 5,
and section 14.5's crash case "a quarantine rename before its lease release is a missing
stage with a lease"), one test per rule:

- an unreleased staging lease, expired at its judging time, of an attempt not deferred,
  whose stage directory no longer exists (an earlier pass renamed it into the quarantine
  and died before releasing it) is released at that judging time, though its attempt's
  owner is live; one nanosecond before its expiry it is left;
- each such lease is rechecked first under the write lock: one found live again (its
  owner, its clock behind the recoverer's, renewed it after the pass judged it) is left.

Rules of this file: the owner stays live through the pass (its reservation extended
alone, a write the schema allows, as ``test_abandonment.py`` does), so that only the
stage's lease is judged and no terminal commit releases it; the stage is moved into the
quarantine by hand, as the earlier pass's rename left it. Expected values are SPEC.md's.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import OwnedAttempt
from runstore import RecoveryReport
from runstore import RunStore
from runstore import sql
from runstore.testing import fixtures as sc

from conformance.publication.world import EXPIRES
from conformance.publication.world import PublicationWorld
from conformance.recovery.world import crash_populate
from conformance.recovery.world import leases
from conformance.recovery.world import recover

STAGE_LEASE = f"staging-{1:032x}"
"""The lease id of the first stage (deterministic tokens)."""
BY_ID = "WHERE l.id = ? AND l.purpose = 'staging'"
"""Part of the statement that reads one staging lease by id (recover_tx): the pass reads
each lease again so, after the attempts, to judge the stages."""


def quarantined_before_release(world: PublicationWorld) -> tuple[OwnedAttempt, Path]:
    """A live owner (reservation until ``2 * EXPIRES``) whose stage, acquired at 2,000 and
    expiring at ``EXPIRES``, an earlier pass moved into the quarantine before it died:
    the stage is gone from ``artifacts/`` and its lease is unreleased."""
    guard = world.executing(sc.slot_fixture())
    stage = crash_populate(world, guard, start=2_000)
    assert world.lease(STAGE_LEASE)[:3] == (2_000, EXPIRES, None)
    with sqlite3.connect(world.database_path, isolation_level=None) as connection:
        connection.execute(
            "UPDATE leases SET expires_at_ns = ? WHERE id = 'reservation-0'", (2 * EXPIRES,)
        )
    connection.close()
    holding = world.artifacts / ".quarantine"
    holding.mkdir()
    moved = holding / stage.name
    os.rename(stage, moved)
    return guard, moved


def test_an_expired_lease_whose_stage_is_gone_is_released_at_its_judging_time(
    world: PublicationWorld,
) -> None:
    """SPEC.md section 14.2 step 5: one transaction releases, at their judging time, the
    unreleased, expired staging leases of attempts not deferred whose stage directory
    does not exist; this is how the next pass completes a quarantine whose lease release
    was lost (section 14.5). The lease is judged at ``max(t, updated_at_ns,
    acquired_at_ns)`` and expiry is exclusive (section 6): at ``EXPIRES - 1`` it is left,
    at ``EXPIRES`` released at ``EXPIRES``. Nothing else changes: the owner's reservation
    stays live and unreleased, and the quarantined stage is not touched or reported."""
    guard, moved = quarantined_before_release(world)
    contents = sorted(str(p.relative_to(moved)) for p in moved.rglob("*"))

    assert recover(world, EXPIRES - 1) == RecoveryReport()
    assert leases(world, guard.attempt_id) == {"reservation-0": None, STAGE_LEASE: None}

    assert recover(world, EXPIRES) == RecoveryReport()
    assert leases(world, guard.attempt_id) == {"reservation-0": None, STAGE_LEASE: EXPIRES}
    assert sorted(str(p.relative_to(moved)) for p in moved.rglob("*")) == contents
    assert recover(world, EXPIRES + 1) == RecoveryReport()
    assert world.lease(STAGE_LEASE)[2] == EXPIRES


@pytest.fixture
def owner(world: PublicationWorld) -> Iterator[RunStore]:
    """The owner's own handle on the store."""
    handle = RunStore.open(world.root)
    yield handle
    handle.close()


def test_a_lease_renewed_after_it_was_judged_is_rechecked_and_left(
    world: PublicationWorld, owner: RunStore
) -> None:
    """SPEC.md section 14.2 step 5: each lease to release is rechecked first, and one
    found live again is left. The pass judges the stage's lease expired at ``EXPIRES``;
    before its release transaction begins, the owner, whose clock reads ``EXPIRES - 1``,
    renews (section 6: renewal extends every live staging lease, and by the owner's clock
    the stage's still is) to ``3 * EXPIRES``. The release finds it live at its judging
    time and leaves it unreleased, with the owner's new expiry."""
    guard, _ = quarantined_before_release(world)
    judged: list[bool] = []
    acting: list[bool] = []
    renewed: list[OwnedAttempt] = []

    def observer(phase: str, statement: str) -> None:
        if phase != "before" or acting:
            return
        if BY_ID in statement:
            judged.append(True)
        elif judged and statement == "BEGIN IMMEDIATE":
            acting.append(True)  # the owner's own statements pass by
            renewed.append(owner.renew(guard, 3 * EXPIRES, EXPIRES - 1))

    previous = sql.install_observer(observer)
    try:
        report = recover(world, EXPIRES)
    finally:
        sql.install_observer(previous)
    assert renewed, "the owner never renewed between the judgement and the release"
    assert report == RecoveryReport()
    assert world.lease(STAGE_LEASE)[1:3] == (3 * EXPIRES, None)
    assert leases(world, guard.attempt_id) == {"reservation-0": None, STAGE_LEASE: None}
