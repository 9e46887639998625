"""The attempt record: the complete canonical document ``attempts.record_json`` holds.

Rules of this file: value layer; one pure function that both the writer (which stores the
document on every change of the row) and the model (whose projection recomputes it) call,
so the stored bytes are defined once (SPEC.md section 4, "Attempt record").
"""

from __future__ import annotations

from runstore.canonical import JSON
from runstore.enums import AttemptState
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import TerminalOutcome


def attempt_document(
    *,
    attempt_id: str,
    slot_id: str,
    retry_index: int,
    state: AttemptState,
    revision: int,
    started_at_ns: int,
    updated_at_ns: int,
    outcome: TerminalOutcome | None = None,
    finished_at_ns: int | None = None,
    final_artifact_id: str | None = None,
) -> dict[str, JSON]:
    """The attempt's record: its identity document (``retry_index``, ``slot_id``) and
    ``id``, its current ``state`` and ``revision``, ``started_at_ns`` and ``updated_at_ns``
    as decimal strings; once terminal also ``finished_at_ns`` (decimal string) and
    ``final_artifact_id``, plus ``failure_code`` and ``details`` for failed and ``reason``
    for censored. Never owner tokens, lease ids or staging paths."""
    document: dict[str, JSON] = {
        "id": attempt_id,
        "slot_id": slot_id,
        "retry_index": retry_index,
        "state": state.value,
        "revision": revision,
        "started_at_ns": str(started_at_ns),
        "updated_at_ns": str(updated_at_ns),
    }
    if outcome is not None:
        assert finished_at_ns is not None and final_artifact_id is not None
        document["finished_at_ns"] = str(finished_at_ns)
        document["final_artifact_id"] = final_artifact_id
        if isinstance(outcome, Failed):
            document["failure_code"] = outcome.code
            document["details"] = outcome.details
        elif isinstance(outcome, Censored):
            document["reason"] = outcome.reason
    return document
