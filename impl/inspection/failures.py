"""``failures``: every unsatisfied slot, grouped by its cause, each group with one excerpt
(SPEC.md section 15.6, "When a slot fails").

Rules of this file: reads only, on a snapshot's private copy. The slots in view and their
states stream from :func:`runstore.inspection.status_summary.slot_lines` (the scope and
rule ``status`` uses), so ``failures`` and ``status`` never disagree on which slots are
unsatisfied, and only unsatisfied slots are kept; a running or pending slot is not a
failure. A fixed number of set-based queries (ids in chunks of 500), whatever the number
of slots; the store's files are read only for each
group's excerpt, one attempt artifact per group, by
:func:`runstore.inspection.attempt_logs.attempt_logs`' rule (it must verify).
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Sequence
from typing import Final

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.inspection.attempt_logs import AttemptLogs
from runstore.inspection.attempt_logs import attempt_logs
from runstore.inspection.explain import artifacts_by_id
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import in_list
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.status_summary import SlotLine
from runstore.inspection.status_summary import slot_lines

UNSATISFIED: Final = (
    SlotState.FAILED,
    SlotState.INTERRUPTED,
    SlotState.CENSORED,
    SlotState.SUPERSEDED,
)
"""The slot states ``failures`` lists (section 15.6): terminal, and not accepted."""
_CHUNK: Final = 500

Key = tuple[str, str | None, str | None]
"""A group: (slot state, the latest attempt's failure code, its censor reason)."""


def slot_name(summary: SlotLine) -> str:
    """``<campaign>/<candidate>/<problem>/<slot>``: a target ``explain`` and ``logs`` take."""
    return f"{summary.logical_spec_id}/{summary.logical_slot}"


@attrs.frozen(kw_only=True)
class Excerpt:
    """One slot of a group, shown in full: its latest attempt's failure code and details
    (or censor reason), the logs of its attempt artifact (None without one), and ready
    command lines that show more."""

    slot: str
    attempt: int
    attempt_id: str
    state: str
    failure_code: str | None
    details: dict[str, JSON] | None
    reason: str | None
    logs: AttemptLogs | None
    explain_command: str
    logs_command: str

    def to_json(self) -> dict[str, JSON]:
        logs: JSON = None
        if self.logs is not None:
            tail = self.logs.stderr_tail
            logs = {
                "artifact_id": self.logs.artifact_id,
                "stdout": self.logs.stdout,
                "stderr": self.logs.stderr,
                "stderr_tail": None if tail is None else list(tail),
                "problem": self.logs.problem,
            }
        return {
            "slot": self.slot,
            "attempt": self.attempt,
            "attempt_id": self.attempt_id,
            "state": self.state,
            "failure_code": self.failure_code,
            "details": self.details,
            "reason": self.reason,
            "logs": logs,
            "explain_command": self.explain_command,
            "logs_command": self.logs_command,
        }


@attrs.frozen(kw_only=True)
class FailureGroup:
    """The unsatisfied slots that share a cause: a slot state with the failure code of the
    slot's latest attempt (``failed``, ``interrupted``) or its censor reason
    (``censored``); the slots by name; the first one's excerpt."""

    state: str
    code: str | None
    reason: str | None
    slots: tuple[str, ...]
    excerpt: Excerpt

    def to_json(self) -> dict[str, JSON]:
        return {
            "state": self.state,
            "code": self.code,
            "reason": self.reason,
            "count": len(self.slots),
            "slots": list(self.slots),
            "excerpt": self.excerpt.to_json(),
        }


@attrs.frozen(kw_only=True)
class FailureReport:
    """Every group, the largest first (ties by state, code and reason), of the ``slots``
    in view (one campaign's, or all)."""

    root: str
    campaign: str | None
    slots: int
    groups: tuple[FailureGroup, ...]

    @property
    def unsatisfied(self) -> int:
        return sum(len(group.slots) for group in self.groups)

    def to_json(self) -> dict[str, JSON]:
        return {
            "root": self.root,
            "campaign": self.campaign,
            "slots": self.slots,
            "unsatisfied": self.unsatisfied,
            "groups": [group.to_json() for group in self.groups],
        }


def _chunks(ids: Sequence[str]) -> list[Sequence[str]]:
    return [ids[start : start + _CHUNK] for start in range(0, len(ids), _CHUNK)]


def _latest(connection: sqlite3.Connection, ids: Sequence[str], columns: str) -> list[sql.Row]:
    """``columns`` of the attempts ``ids`` (``a.id`` first), in queries of 500 ids."""
    rows: list[sql.Row] = []
    for chunk in _chunks(ids):
        marks, params = in_list(chunk)
        query = f"SELECT a.id, {columns} FROM attempts AS a WHERE a.id IN ({marks})"
        rows += sql.execute(connection, query, params)
    return rows


def failures(snapshot: Snapshot, *, campaign: str | None = None) -> FailureReport:
    """The unsatisfied slots of the snapshot (or of one campaign's candidates), grouped by
    cause. An empty report (no groups) when every slot in view is accepted, running or
    pending; ``campaign`` naming nothing gives an empty report of 0 slots."""
    connection = snapshot.connection
    slots = 0
    groups: dict[Key, list[SlotLine]] = {}
    for summary in slot_lines(connection, campaign=campaign):
        slots += 1
        if summary.state not in UNSATISFIED or not summary.latest_attempt_id:
            continue
        key: Key = (
            summary.state.value,
            summary.latest_failure_code,
            summary.latest_censor_reason if summary.state is SlotState.CENSORED else None,
        )
        groups.setdefault(key, []).append(summary)
    for members in groups.values():
        members.sort(key=slot_name)
    excerpts = _excerpts(snapshot, [members[0] for members in groups.values()])
    ordered = sorted(
        groups.items(),
        key=lambda item: (-len(item[1]), tuple(part or "" for part in item[0])),
    )
    return FailureReport(
        root=snapshot.root,
        campaign=campaign,
        slots=slots,
        groups=tuple(
            FailureGroup(
                state=state,
                code=code,
                reason=reason,
                slots=tuple(slot_name(member) for member in members),
                excerpt=excerpts[members[0].slot_id],
            )
            for (state, code, reason), members in ordered
        ),
    )


def _excerpts(snapshot: Snapshot, firsts: Sequence[SlotLine]) -> dict[str, Excerpt]:
    """Each slot's excerpt, by slot id."""
    connection = snapshot.connection
    ids = [str(s.latest_attempt_id) for s in firsts]
    rows = {
        str(row[0]): row[1:]
        for row in _latest(
            connection,
            ids,
            "a.retry_index, a.state, a.failure_code, a.censor_reason, a.record_json, "
            "a.final_artifact_id",
        )
    }
    artifacts = artifacts_by_id(connection, {str(row[-1]) for row in rows.values() if row[-1]})
    store = shlex.quote(snapshot.root)
    found: dict[str, Excerpt] = {}
    for summary in firsts:
        index, state, code, reason, record_json, final_id = rows[str(summary.latest_attempt_id)]
        record = json.loads(record_json)
        details = record.get("details") if isinstance(record, dict) else None
        name = shlex.quote(slot_name(summary))
        artifact = artifacts.get(final_id) if final_id else None
        found[summary.slot_id] = Excerpt(
            slot=slot_name(summary),
            attempt=index,
            attempt_id=str(summary.latest_attempt_id),
            state=state,
            failure_code=code,
            details=details if isinstance(details, dict) else None,
            reason=reason,
            logs=None if artifact is None else attempt_logs(snapshot.root, artifact),
            explain_command=f"runstore explain {name} --store {store}",
            logs_command=f"runstore logs {name} --store {store}",
        )
    return found
