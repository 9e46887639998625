"""History in the model: one event and one transition row per revision, and events
without a transition (an observation's registration).

Rules of this file: pure functions over :class:`~runstore.model.state.ModelState`. The
event kinds and payload documents are :mod:`runstore.payloads`, shared with the writer
(:mod:`runstore.store.events`), so the bytes the lockstep tests compare come from one place.
Events are numbered from 1 in order; the model keeps payloads as documents, the store as
their canonical bytes.
"""

from __future__ import annotations

import attrs
from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.model.state import EventRow
from runstore.model.state import ModelState
from runstore.model.state import TransitionRow


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
    with_event, sequence = append_event(
        state, kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=payload
    )
    transition = TransitionRow(
        attempt_id=attempt_id,
        revision=revision,
        from_state=None if source is None else source.value,
        to_state=target.value,
        at_ns=at_ns,
        event_sequence=sequence,
    )
    return attrs.evolve(with_event, transitions=(*state.transitions, transition)), sequence


def append_event(
    state: ModelState, *, kind: str, attempt_id: str, at_ns: int, payload: dict[str, JSON]
) -> tuple[ModelState, int]:
    """Append one event without a transition (``observation_registered``); return the new
    state and the event's sequence."""
    sequence = state.next_event_sequence()
    event = EventRow(
        sequence=sequence, kind=kind, attempt_id=attempt_id, at_ns=at_ns, payload=payload
    )
    return attrs.evolve(state, events=(*state.events, event)), sequence
