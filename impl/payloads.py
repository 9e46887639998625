"""The internal event kinds and their canonical payload documents.

Rules of this file: value layer; the single definition of the four event kinds and their
payloads (SPEC.md section 7). The writer (:mod:`runstore.events`) and the model
(:mod:`runstore.model.events`) both build payloads here, so the bytes the lockstep tests and
the event vectors compare come from one place. Payloads are plain JSON objects exactly as
stored, canonically encoded, in ``events.payload_json``:

* ``attempt_reserved``: ``{"from": null, "to": "reserved", "revision": 0, "slot_id": ...,
  "retry_index": ...}``
* ``attempt_transition``: ``{"from", "to", "revision"}`` (a change between execution phases)
* ``attempt_finalizing``: ``{"from", "to": "finalizing", "revision", "claim"}`` where
  ``claim`` is ``"claimed"`` or ``"superseded"``; recovery's own move to finalizing is no
  success contender and carries no ``claim`` key
* ``attempt_finished``: ``{"from": "finalizing", "to", "revision"}`` plus
  ``"failure_code"`` and ``"details"`` for failed, ``"reason"`` for censored
"""

from __future__ import annotations

from typing import Final

from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.requests import Censored, Failed, TerminalOutcome

ATTEMPT_RESERVED: Final = "attempt_reserved"
ATTEMPT_TRANSITION: Final = "attempt_transition"
ATTEMPT_FINALIZING: Final = "attempt_finalizing"
ATTEMPT_FINISHED: Final = "attempt_finished"

CLAIMED: Final = "claimed"
"""``attempt_finalizing``'s ``claim`` when the attempt took the slot's success claim."""
SUPERSEDED: Final = "superseded"
"""``attempt_finalizing``'s ``claim`` when another attempt holds or won the slot."""


def reserved_payload(slot_id: str, retry_index: int) -> dict[str, JSON]:
    """Payload of ``attempt_reserved`` (revision 0)."""
    return {
        "from": None,
        "to": AttemptState.RESERVED.value,
        "revision": 0,
        "slot_id": slot_id,
        "retry_index": retry_index,
    }


def transition_payload(
    source: AttemptState, target: AttemptState, revision: int
) -> dict[str, JSON]:
    """Payload of ``attempt_transition`` (and the shared part of the other two)."""
    return {"from": source.value, "to": target.value, "revision": revision}


def finalizing_payload(source: AttemptState, revision: int, claim: str | None) -> dict[str, JSON]:
    """Payload of ``attempt_finalizing``; ``claim`` None for recovery's move."""
    payload = transition_payload(source, AttemptState.FINALIZING, revision)
    if claim is not None:
        payload["claim"] = claim
    return payload


def finished_payload(outcome: TerminalOutcome, revision: int) -> dict[str, JSON]:
    """Payload of ``attempt_finished`` for ``outcome``."""
    payload = transition_payload(AttemptState.FINALIZING, outcome.state, revision)
    if isinstance(outcome, Failed):
        payload["failure_code"] = outcome.code
        payload["details"] = outcome.details
    elif isinstance(outcome, Censored):
        payload["reason"] = outcome.reason
    return payload
