"""The scalar rules at their boundaries (SPEC.md sections 2, 6 and 14): each rule is
checked on both sides of the value where it changes its answer, and at that value.

``runstore.rules`` holds each rule once for the writer and the model, so a rule that is
wrong at its boundary is wrong in both and lockstep cannot see it; these tests take the
rule's text from SPEC instead.
"""

from __future__ import annotations

import pytest
from runstore import rules
from runstore.errors import ExpiryNotAfterNowError
from runstore.errors import RetryNotAuthorizedError
from runstore.requests import Retry

MAX_NS = 2**63 - 1


def test_a_timestamp_is_storable_from_0_through_2_63_minus_1() -> None:
    """SPEC 2, "Timestamps in JSON": a ``*_ns`` value is in 0..2^63-1 (SQLite's signed
    64-bit range), both ends included."""
    assert [rules.ns_in_range(v) for v in (-1, 0, MAX_NS - 1, MAX_NS, MAX_NS + 1)] == [
        False,
        True,
        True,
        True,
        False,
    ]


@pytest.mark.parametrize(
    ("released_at_ns", "live"),
    [(None, True), (99, False), (100, False), (101, True)],
)
def test_a_lease_released_at_or_before_an_instant_was_not_live_then(
    released_at_ns: int | None, live: bool
) -> None:
    """SPEC 6: a lease is live at ``t`` exactly when it is unreleased and ``t <
    expires_at_ns``; so a lease released at ``t`` itself, or before, was not live at ``t``
    (SPEC 14's ``not_authorized``: released at or before the finish time), and one
    released only after ``t`` was (its expiry being later)."""
    assert rules.lease_live_at(200, released_at_ns, 100) is live


@pytest.mark.parametrize(("expires_at_ns", "live"), [(99, False), (100, False), (101, True)])
def test_an_unreleased_lease_is_live_only_before_its_expiry(expires_at_ns: int, live: bool) -> None:
    """SPEC 6: expiry is exclusive: live at ``t`` exactly when ``t < expires_at_ns``."""
    assert rules.lease_live_at(expires_at_ns, None, 100) is live


@pytest.mark.parametrize(
    ("expires_at_ns", "refused"), [(0, True), (99, True), (100, True), (101, False)]
)
def test_a_new_expiry_must_be_strictly_after_the_operations_time(
    expires_at_ns: int, refused: bool
) -> None:
    """SPEC 9, ``expiry_not_after_now``: a requested expiry is not strictly after the
    operation's time, earlier ones as well as an equal one."""
    refusal = rules.expiry_refusal(expires_at_ns, 100)
    assert isinstance(refusal, ExpiryNotAfterNowError) if refused else refusal is None


@pytest.mark.parametrize("next_index", [0, 1, 2, 3, 4])
def test_a_retry_authorization_permits_exactly_its_own_index(next_index: int) -> None:
    """SPEC 6, "Retry authorization": ``Retry(next_index, max_index)`` refuses
    ``retry_not_authorized`` when the slot's next index differs from ``next_index``, in
    either direction: a stale authorization naming an index the slot has already used
    fails closed, like one naming an index still ahead."""
    authorization = Retry(next_index=2, max_index=9)
    refusal = rules.authorization_refusal(authorization, next_index)
    if next_index == 2:
        assert refusal is None
    else:
        assert isinstance(refusal, RetryNotAuthorizedError)


@pytest.mark.parametrize(
    ("premise", "conclusion", "holds"),
    [(False, False, True), (False, True, True), (True, False, False), (True, True, True)],
)
def test_implies_is_material_implication(premise: bool, conclusion: bool, holds: bool) -> None:
    """The contracts CrossHair checks on these rules (``crosshair check runstore.rules``)
    read ``implies(p, q)`` as material implication: false only when ``p`` holds and ``q``
    does not; any other reading would make a contract vacuous or wrong."""
    assert rules.implies(premise, conclusion) is holds
