"""Event payloads and the history append (one event plus one transition per revision).

Rules of this file: this is the model's single definition of the four internal event
kinds and their payload documents. The writer builds the same documents independently
(it must not import the model); the lockstep tests compare them. Payloads are plain JSON
objects exactly as stored in ``events.payload_json``:

* ``attempt_reserved``: ``{"from": null, "to": "reserved", "revision": 0, "slot_id": ...,
  "retry_index": ...}``
* ``attempt_transition``: ``{"from", "to", "revision"}`` (an execution phase change)
* ``attempt_finalizing``: ``{"from", "to": "finalizing", "revision", "claim"}`` where
  ``claim`` is ``"claimed"`` or ``"superseded"``; recovery's own move to finalizing is no
  success contender and carries no ``claim`` key
* ``attempt_finished``: ``{"from": "finalizing", "to", "revision"}`` plus
  ``"failure_code"`` and ``"details"`` for failed, ``"reason"`` for censored
"""

from __future__ import annotations

import attrs
from runstore.canonical import JSON
from runstore.model.state import EventRow, ModelState, TransitionRow
from runstore.records import AttemptState, Censored, Failed, TerminalOutcome

ATTEMPT_RESERVED = "attempt_reserved"
ATTEMPT_TRANSITION = "attempt_transition"
ATTEMPT_FINALIZING = "attempt_finalizing"
ATTEMPT_FINISHED = "attempt_finished"
EVENT_KINDS = (ATTEMPT_RESERVED, ATTEMPT_TRANSITION, ATTEMPT_FINALIZING, ATTEMPT_FINISHED)

CLAIMED = "claimed"
SUPERSEDED = "superseded"


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
    """Payload of ``attempt_transition``."""
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
        payload["details"] = dict(outcome.details)
    elif isinstance(outcome, Censored):
        payload["reason"] = outcome.reason
    return payload


def append_history(
    state: ModelState,
    *,
    kind: str,
    attempt_id: str,
    revision: int,
    source: AttemptState | None,
    target: AttemptState,
    at_ns: int,
    payload: dict[str, JSON],
) -> tuple[ModelState, int]:
    """Append one event and its transition; return the new state and the event's sequence."""
    sequence = state.next_event_sequence()
    event = EventRow(
        sequence=sequence, kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=payload
    )
    transition = TransitionRow(
        attempt_id=attempt_id,
        revision=revision,
        from_state=None if source is None else source.value,
        to_state=target.value,
        at_ns=at_ns,
        event_sequence=sequence,
    )
    new_state = attrs.evolve(
        state, events=(*state.events, event), transitions=(*state.transitions, transition)
    )
    return new_state, sequence
