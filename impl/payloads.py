"""The internal event kinds and their canonical payload documents.

Rules of this file: value layer; the single definition of the five event kinds and their
payloads (SPEC.md section 7). The writer (:mod:`runstore.store.events`) and the model
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
* ``observation_registered``: ``{"observation_id", "slot_id", "artifact_id",
  "references", "registered", "selected"}`` (no transition; see
  :func:`observation_payload`)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import TerminalOutcome

ATTEMPT_RESERVED: Final = "attempt_reserved"
ATTEMPT_TRANSITION: Final = "attempt_transition"
ATTEMPT_FINALIZING: Final = "attempt_finalizing"
ATTEMPT_FINISHED: Final = "attempt_finished"
OBSERVATION_REGISTERED: Final = "observation_registered"

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


def observation_payload(
    observation_id: str,
    slot_id: str,
    artifact_id: str,
    references: Sequence[tuple[str, str]],
    registered: bool,
    selected: bool,
) -> dict[str, JSON]:
    """Payload of ``observation_registered``: the observation, its observation slot, its
    directory artifact, its references as ``{"artifact_id", "role"}`` objects sorted by
    (role, artifact_id), whether this call inserted the observation (``registered``; false
    when an identical one was already there) and whether it selected it (``selected``;
    false when not asked to or when the slot already had a selection)."""
    return {
        "observation_id": observation_id,
        "slot_id": slot_id,
        "artifact_id": artifact_id,
        "references": [
            {"artifact_id": artifact, "role": role} for role, artifact in sorted(references)
        ],
        "registered": registered,
        "selected": selected,
    }
