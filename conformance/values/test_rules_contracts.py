"""Contracts of the shared value layer that lockstep cannot see, checked directly.

``runstore.rules`` and ``runstore.payloads`` are called by both the writer and the model, so
a flaw in them is a flaw both sides share and the lockstep tests agree on it. CrossHair
checks the rules' contracts in the project's check command; these pin the same boundaries
in the default test suite, from SPEC.md's text: a retry index is in 0..2^53-1 inclusive
(section 3), and an ``observation_registered`` payload lists its references sorted by
role, then artifact id (section 7).
"""

from __future__ import annotations

import pytest
from runstore import canonical
from runstore import errors
from runstore import payloads
from runstore import rules

MAX_INDEX = 2**53 - 1


@pytest.mark.parametrize(
    ("value", "inside"),
    [
        (-1, False),
        (0, True),
        (1, True),
        (MAX_INDEX - 1, True),
        (MAX_INDEX, True),
        (MAX_INDEX + 1, False),
    ],
)
def test_the_index_range_is_zero_to_two_to_the_53_minus_one_inclusive(
    value: int, inside: bool
) -> None:
    assert rules.index_in_range(value) is inside
    refusal = rules.range_refusal(indices=[("retry_index", value)])
    if inside:
        assert refusal is None
    else:
        assert type(refusal) is errors.OutOfRangeError
        assert f"retry_index={value}" in str(refusal)


def test_an_observation_payload_sorts_its_references_by_role_then_artifact() -> None:
    # Given out of order, and with the artifact ids ordered against their roles.
    references = [("log", "artifact-a"), ("environment", "artifact-z"), ("log", "artifact-0")]
    payload = payloads.observation_payload(
        "observation:v1:x", "observation-slot:v1:y", "artifact-dir", references, True, False
    )
    assert payload["references"] == [
        {"artifact_id": "artifact-z", "role": "environment"},
        {"artifact_id": "artifact-0", "role": "log"},
        {"artifact_id": "artifact-a", "role": "log"},
    ]
    assert canonical.encode(payload) == (
        b'{"artifact_id":"artifact-dir","observation_id":"observation:v1:x","references":['
        b'{"artifact_id":"artifact-z","role":"environment"},'
        b'{"artifact_id":"artifact-0","role":"log"},{"artifact_id":"artifact-a","role":"log"}],'
        b'"registered":true,"selected":false,"slot_id":"observation-slot:v1:y"}'
    )
