"""The shared leaf rules of the value layer (``runstore.edges``, ``runstore.rules``): the
legal edges are the contract's edges, advance takes exactly the execution edges, and the
rules return typed refusals. Both the model and the writer call these; CrossHair verifies
their contracts in the test command.
"""

from __future__ import annotations

import pytest
from runstore import AttemptState
from runstore import edges
from runstore import errors
from runstore import rules
from runstore.edges import LEGAL_EDGES

from conformance.contract import EDGES

# --- edges -----------------------------------------------------------------------------


def test_legal_edges_are_the_contract_edges() -> None:
    assert EDGES == LEGAL_EDGES
    assert set(AttemptState) == set(edges.ALL_STATES)
    assert set(edges.TERMINAL_ORDER) == {"accepted", "censored", "superseded", "failed"}


def test_advance_takes_every_execution_edge_and_nothing_else() -> None:
    for source in AttemptState:
        for target in AttemptState:
            legal = (source.value, target.value) in edges.EXECUTION_EDGES
            assert legal == (
                (source.value, target.value) in LEGAL_EDGES
                and target.value not in ("finalizing", *edges.TERMINAL_ORDER)
            )


def test_refusals_in_rules_are_typed_errors() -> None:
    assert type(rules.lease_refusal("a lease", 10, False, 10)) is errors.LeaseExpiredError
    assert type(rules.lease_refusal("a lease", 10, True, 0)) is errors.LeaseReleasedError
    assert rules.lease_refusal("a lease", 10, False, 9) is None
    assert type(rules.renewal_refusal(5, 10, 1)) is errors.RenewalShortensError
    assert type(rules.renewal_refusal(1, 10, 1)) is errors.ExpiryNotAfterNowError
    assert rules.retry_refusal(1, False, 0, 0) is errors.RetryBoundExceededError
    assert rules.retry_refusal(1, True, None, None) is errors.RetryNotAuthorizedError
    assert type(rules.expiry_refusal(5, 5)) is errors.ExpiryNotAfterNowError


@pytest.mark.parametrize(
    ("held", "claim", "now", "cause"),
    [
        ((10, False), None, 9, None),
        ((10, False), None, 10, "reservation_expired"),
        ((10, True), (20, False), 0, "reservation_released"),
        ((10, False), (20, True), 0, "claim_released"),
        ((30, False), (20, False), 20, "claim_expired"),
        ((30, False), (20, False), 19, None),
    ],
)
def test_recovery_cause_names_the_first_lost_authority(
    held: tuple[int, bool], claim: tuple[int, bool] | None, now: int, cause: str | None
) -> None:
    claim_until, claim_released = claim if claim is not None else (None, False)
    assert rules.recovery_cause(*held, claim_until, claim_released, now) == cause
