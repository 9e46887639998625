"""Reading the plain-JSON argument forms the vector files share (``vectors/README.md``):
leases, retry authorizations and terminal outcomes, as an independent implementation would
read them. Used by ``test_vectors.py`` (events) and ``test_vectors_outcomes.py``.
"""

from __future__ import annotations

from typing import Any

from runstore import (
    Accepted,
    Censored,
    Failed,
    FirstAttempt,
    LeaseRequest,
    Next,
    Retry,
    RetryAuthorization,
    Superseded,
    TerminalOutcome,
)
from runstore.canonical import ns_from_json


def lease_of(document: dict[str, Any]) -> LeaseRequest:
    return LeaseRequest(
        lease_id=document["lease_id"],
        owner_token=document["owner_token"],
        expires_at_ns=ns_from_json(document["expires_at_ns"]),
    )


def authorization_of(document: dict[str, Any]) -> RetryAuthorization:
    if document["kind"] == "first_attempt":
        return FirstAttempt()
    if document["kind"] == "next":
        return Next(retry=document["retry"])
    assert document["kind"] == "retry"
    return Retry(next_index=document["next_index"], max_index=document["max_index"])


def outcome_of(document: dict[str, Any]) -> TerminalOutcome:
    state = document["state"]
    if state == "failed":
        return Failed(code=document["code"], details=document["details"])
    if state == "censored":
        return Censored(reason=document["reason"])
    if state == "superseded":
        return Superseded()
    assert state == "accepted"
    return Accepted()
