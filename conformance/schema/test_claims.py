"""Leases and finalization claims: fencing, ownership, release, and recovery ordering."""

from __future__ import annotations

import pytest

from conformance.contract import TERMINAL_STATES
from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import count
from conformance.schema.rows import fk_failed
from conformance.schema.rows import insert
from conformance.schema.rows import refused
from conformance.schema.rows import row_of


def finalizing_attempt(rows: Rows, slot: str | None = None) -> str:
    if slot is None:
        slot = rows.world().slot
    return rows.attempt_in(slot, "finalizing")


# --- leases ------------------------------------------------------------------------------


def test_lease_purposes_and_staging_paths(rows: Rows) -> None:
    attempt = rows.reserve(rows.world().slot)
    rows.lease(attempt, purpose="reservation")
    rows.lease(attempt, purpose="finalization")
    rows.lease(attempt, purpose="staging")
    rows.lease(None, purpose="staging")  # the producing attempt is optional
    with check_failed("lease_purpose"):
        rows.lease(attempt, purpose="reading")
    with check_failed("lease_staging_path_iff_staging"):
        rows.lease(attempt, purpose="staging", staging_path=None)
    with check_failed("lease_staging_path_iff_staging"):
        rows.lease(attempt, purpose="reservation", staging_path="artifacts/.staging-x")
    with fk_failed():
        rows.lease("attempt:v1:" + "0" * 64)


def test_fencing_tokens_are_unique(rows: Rows) -> None:
    rows.lease(fencing_token=7)
    with refused("UNIQUE constraint failed: leases.fencing_token"):
        rows.lease(fencing_token=7)
    with check_failed("lease_fencing_token_range"):
        rows.lease(fencing_token=-1)
    assert count(rows.conn, "leases") == 1


def test_expiry_is_after_acquisition(rows: Rows) -> None:
    for expires in (1_000, 999):
        with check_failed("lease_expires_after_acquired"):
            rows.lease(acquired_at_ns=1_000, expires_at_ns=expires)
    with check_failed("lease_owner_token_nonempty"):
        rows.lease(owner_token="")


@pytest.mark.parametrize(
    "assignment",
    [
        "owner_token = 'owner-b'",
        "fencing_token = fencing_token + 100",
        "purpose = 'finalization'",
        "acquired_at_ns = acquired_at_ns + 1",
        "attempt_id = NULL",
        "id = 'renamed'",
    ],
)
def test_lease_identity_and_owner_are_immutable(rows: Rows, assignment: str) -> None:
    attempt = rows.reserve(rows.world().slot)
    lease = rows.lease(attempt)
    before = row_of(rows.conn, "leases", "id = ?", lease)
    with refused("leases: identity, owner, attempt, purpose and acquisition are immutable"):
        rows.conn.execute(f"UPDATE leases SET {assignment} WHERE id = ?", (lease,))
    assert row_of(rows.conn, "leases", "id = ?", lease) == before


def test_expiry_never_shrinks(rows: Rows) -> None:
    lease = rows.lease(acquired_at_ns=1_000, expires_at_ns=5_000)
    conn = rows.conn
    conn.execute("UPDATE leases SET expires_at_ns = 9000 WHERE id = ?", (lease,))
    conn.execute("UPDATE leases SET expires_at_ns = 9000 WHERE id = ?", (lease,))
    with refused("leases: expiry cannot be shortened"):
        conn.execute("UPDATE leases SET expires_at_ns = 8999 WHERE id = ?", (lease,))
    assert conn.execute("SELECT expires_at_ns FROM leases WHERE id = ?", (lease,)).fetchone() == (
        9_000,
    )


def test_a_released_lease_stays_released(rows: Rows) -> None:
    lease = rows.lease(acquired_at_ns=1_000, expires_at_ns=5_000)
    conn = rows.conn
    conn.execute("UPDATE leases SET released_at_ns = 2000 WHERE id = ?", (lease,))
    before = row_of(conn, "leases", "id = ?", lease)
    for assignment in (
        "released_at_ns = NULL",
        "released_at_ns = 3000",
        "expires_at_ns = 7000",
        "released_at_ns = NULL, expires_at_ns = 7000",
    ):
        with refused("leases: a released lease is final"):
            conn.execute(f"UPDATE leases SET {assignment} WHERE id = ?", (lease,))
    assert row_of(conn, "leases", "id = ?", lease) == before


def test_release_not_before_acquisition(rows: Rows) -> None:
    lease = rows.lease(acquired_at_ns=1_000, expires_at_ns=5_000)
    with check_failed("lease_released_after_acquired"):
        rows.conn.execute("UPDATE leases SET released_at_ns = 999 WHERE id = ?", (lease,))


def test_leases_are_never_deleted(rows: Rows) -> None:
    lease = rows.lease()
    conn = rows.conn
    with refused("leases: rows cannot be deleted"):
        conn.execute("DELETE FROM leases WHERE id = ?", (lease,))
    names = [c[1] for c in conn.execute("PRAGMA table_info(leases)")]
    before = row_of(conn, "leases", "id = ?", lease)
    with refused("leases: rows cannot be deleted"):
        insert(conn, "leases", dict(zip(names, before, strict=True)), "INSERT OR REPLACE")
    assert row_of(conn, "leases", "id = ?", lease) == before


# --- claims ------------------------------------------------------------------------------


def test_a_claim_binds_attempt_slot_and_its_finalization_lease(rows: Rows) -> None:
    attempt = finalizing_attempt(rows)
    lease = rows.claim(attempt)
    slot = rows.current(attempt)[0]
    assert row_of(rows.conn, "finalization_claims", "slot_id = ?", slot)[:3] == (
        slot,
        attempt,
        lease,
    )


def test_claim_refuses_an_attempt_of_another_slot(rows: Rows) -> None:
    world = rows.world()
    attempt = finalizing_attempt(rows, world.slot)
    other_slot = rows.attempt_slot(world.run)
    with fk_failed():
        rows.claim(attempt, slot_id=other_slot)
    assert count(rows.conn, "finalization_claims") == 0


def test_claim_refuses_a_lease_of_another_attempt(rows: Rows) -> None:
    world = rows.world()
    attempt = finalizing_attempt(rows, world.slot)
    rival = finalizing_attempt(rows, world.slot)
    rivals_lease = rows.lease(rival, purpose="finalization")
    with fk_failed():
        rows.claim(attempt, lease_id=rivals_lease)
    assert count(rows.conn, "finalization_claims") == 0


@pytest.mark.parametrize("purpose", ["reservation", "staging"])
def test_claim_refuses_a_lease_of_another_purpose(rows: Rows, purpose: str) -> None:
    attempt = finalizing_attempt(rows)
    lease = rows.lease(attempt, purpose=purpose)
    with fk_failed():
        rows.claim(attempt, lease_id=lease)
    with check_failed("claim_lease_purpose"):
        rows.claim(attempt, lease_id=lease, lease_purpose=purpose)
    assert count(rows.conn, "finalization_claims") == 0


def test_at_most_one_claim_per_slot_and_per_lease(rows: Rows) -> None:
    world = rows.world()
    attempt = finalizing_attempt(rows, world.slot)
    rival = finalizing_attempt(rows, world.slot)
    lease = rows.claim(attempt)
    with refused("UNIQUE constraint failed: finalization_claims.slot_id"):
        rows.claim(rival)
    # The same finalization lease cannot back a second claim on another slot either.
    other = rows.attempt_slot(world.run)
    with refused("UNIQUE constraint failed: finalization_claims.lease_id"):
        rows.claim(attempt, lease_id=lease, slot_id=other)
    assert count(rows.conn, "finalization_claims") == 1


def test_claim_refuses_a_released_lease(rows: Rows) -> None:
    attempt = finalizing_attempt(rows)
    lease = rows.lease(attempt, purpose="finalization")
    rows.conn.execute(
        "UPDATE leases SET released_at_ns = acquired_at_ns + 1 WHERE id = ?", (lease,)
    )
    with refused("finalization_claims: the lease is released"):
        rows.claim(attempt, lease_id=lease)
    assert count(rows.conn, "finalization_claims") == 0


def test_claim_refused_once_the_slot_is_accepted(rows: Rows) -> None:
    world = rows.world()
    rows.attempt_in(world.slot, "accepted")
    late = finalizing_attempt(rows, world.slot)
    with refused("finalization_claims: the slot already has an accepted attempt"):
        rows.claim(late)
    assert count(rows.conn, "finalization_claims") == 0


@pytest.mark.parametrize(
    "assignment",
    [
        "attempt_id = attempt_id",
        "claimed_at_ns = claimed_at_ns + 1",
        "lease_id = lease_id",
    ],
)
def test_claims_are_not_updatable(rows: Rows, assignment: str) -> None:
    attempt = finalizing_attempt(rows)
    rows.claim(attempt)
    before = row_of(rows.conn, "finalization_claims", "attempt_id = ?", attempt)
    with refused("finalization_claims: rows are immutable"):
        rows.conn.execute(f"UPDATE finalization_claims SET {assignment}")
    assert row_of(rows.conn, "finalization_claims", "attempt_id = ?", attempt) == before


def test_claim_owner_cannot_change(rows: Rows) -> None:
    world = rows.world()
    owner = finalizing_attempt(rows, world.slot)
    thief = finalizing_attempt(rows, world.slot)
    rows.claim(owner)
    thief_lease = rows.lease(thief, purpose="finalization")
    with refused("finalization_claims: rows are immutable"):
        rows.conn.execute(
            "UPDATE finalization_claims SET attempt_id = ?, lease_id = ? WHERE slot_id = ?",
            (thief, thief_lease, world.slot),
        )
    # Nor by replacing the row while the owner is still open.
    with refused("finalization_claims: the claiming attempt is not terminal"):
        insert(
            rows.conn,
            "finalization_claims",
            {
                "slot_id": world.slot,
                "attempt_id": thief,
                "lease_id": thief_lease,
                "claimed_at_ns": rows.now(),
                "lease_purpose": "finalization",
            },
            "INSERT OR REPLACE",
        )
    assert row_of(rows.conn, "finalization_claims", "slot_id = ?", world.slot)[1] == owner


# --- recovery ordering -------------------------------------------------------------------


def test_claim_cannot_be_released_while_its_attempt_is_open(rows: Rows) -> None:
    attempt = finalizing_attempt(rows)
    lease = rows.claim(attempt)
    # Even an expired, released lease does not let the claim go early.
    rows.conn.execute("UPDATE leases SET released_at_ns = expires_at_ns WHERE id = ?", (lease,))
    with refused("finalization_claims: the claiming attempt is not terminal"):
        rows.conn.execute("DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt,))
    assert count(rows.conn, "finalization_claims") == 1


@pytest.mark.parametrize("outcome", TERMINAL_STATES)
def test_claim_released_after_the_terminal_outcome(rows: Rows, outcome: str) -> None:
    world = rows.world()
    attempt = finalizing_attempt(rows, world.slot)
    rows.claim(attempt)
    rows.advance(attempt, outcome, release_claim=False)
    rows.conn.execute("DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt,))
    assert count(rows.conn, "finalization_claims") == 0
    if outcome != "accepted":
        # The slot is open again for an authorized retry.
        retry = finalizing_attempt(rows, world.slot)
        rows.claim(retry)
        rows.advance(retry, "accepted")
        assert rows.current(retry)[2] == "accepted"


def test_terminal_update_and_claim_release_commit_together(rows: Rows) -> None:
    # Recovery order inside one transaction: the delete before the terminal update is
    # refused, the delete after it succeeds.
    attempt = finalizing_attempt(rows)
    rows.claim(attempt)
    conn = rows.conn
    conn.execute("BEGIN IMMEDIATE")
    with refused("finalization_claims: the claiming attempt is not terminal"):
        conn.execute("DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt,))
    rows.step(attempt, "failed", failure_code="interrupted_attempt")
    conn.execute("DELETE FROM finalization_claims WHERE attempt_id = ?", (attempt,))
    conn.execute("COMMIT")
    assert rows.current(attempt)[2] == "failed"
    assert count(conn, "finalization_claims") == 0


def test_leased_artifacts_need_lease_and_artifact(rows: Rows) -> None:
    lease = rows.lease()
    artifact = rows.artifact("dataset")
    insert(rows.conn, "leased_artifacts", {"lease_id": lease, "artifact_id": artifact})
    with fk_failed():
        insert(rows.conn, "leased_artifacts", {"lease_id": "nope", "artifact_id": artifact})
    with fk_failed():
        insert(
            rows.conn,
            "leased_artifacts",
            {"lease_id": lease, "artifact_id": "run-store-v1:dataset-" + "0" * 64},
        )
    assert count(rows.conn, "leased_artifacts") == 1
