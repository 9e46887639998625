"""Writer spec tests: a claim whose lease belongs to another owner refuses the attempt
with ``owner_mismatch`` (SPEC.md section 6, guarded check order, step 7), whichever of the
two owner tokens is the smaller string.

``begin_finalization`` refuses a claim lease of another owner, so no writer call leaves
such a claim: its rows are written through a separate connection, as the schema allows,
and the model cannot follow them. Owner tokens are compared for equality, never by order.
"""

from __future__ import annotations

import sqlite3

import pytest
from runstore import AttemptState
from runstore import OwnedAttempt
from runstore import RunStoreError
from runstore.testing import fixtures as sc

from conformance.writer.world import EXPIRES
from conformance.writer.world import World

S = AttemptState


def claim_of_another_owner(world: World, guard: OwnedAttempt, owner: str) -> None:
    """A live claim of ``guard``'s attempt whose finalization lease ``claim-x`` is
    ``owner``'s, inserted behind the writer's back."""
    connection = sqlite3.connect(world.database_path, isolation_level=None)
    try:
        connection.execute(
            "INSERT INTO leases (id, fencing_token, owner_token, attempt_id, purpose, "
            "acquired_at_ns, expires_at_ns) VALUES ('claim-x', "
            "(SELECT max(fencing_token) + 1 FROM leases), ?, ?, 'finalization', 1200, 9000)",
            (owner, guard.attempt_id),
        )
        connection.execute(
            "INSERT INTO finalization_claims (slot_id, attempt_id, lease_id, claimed_at_ns, "
            "lease_purpose) VALUES (?, ?, 'claim-x', 1200, 'finalization')",
            (guard.slot_id, guard.attempt_id),
        )
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("guard_owner", "claim_owner"),
    [("owner-a", "owner-b"), ("owner-b", "owner-a")],
    ids=["claim-owner-sorts-after", "claim-owner-sorts-before"],
)
def test_a_claim_lease_of_another_owner_is_an_owner_mismatch_whatever_the_order(
    world: World, guard_owner: str, claim_owner: str
) -> None:
    """SPEC.md section 6, step 7: if the attempt holds a claim, ``owner_mismatch`` when the
    claim's lease has another owner than the guard's, before the guard's claim lease is
    compared (step 9, ``lease_mismatch``); nothing is written."""
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", owner=guard_owner)
    guard = world.walk(guard, sc.EXECUTION_PATH, 1_100)
    claim_of_another_owner(world, guard, claim_owner)
    before = world.projection()
    for call in (
        lambda: world.store.renew(guard, EXPIRES + 1, 1_400),
        lambda: world.store.advance(guard, S.VALIDATING, 1_400),
    ):
        with pytest.raises(RunStoreError) as refused:
            call()
        assert refused.value.code == "owner_mismatch", refused.value
        assert world.projection() == before
