"""Applying a write batch to the store: every step in its own savepoint of one
``BEGIN IMMEDIATE`` transaction (SPEC.md section 8, "Write batches").

Rules of this file: runs inside the caller's write transaction and never commits. Each step
is the store function its single-operation method calls, with the same checks, so a batch
leaves exactly the rows its steps would leave committed one after another. A step's
refusal rolls back to its savepoint and only that step is refused; any other error (an
SQLite error, a bug) propagates and voids the whole transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from collections.abc import Sequence

from runstore import sql
from runstore.batch import Step
from runstore.batch import WriteBatch
from runstore.batch import run_steps
from runstore.errors import RunStoreError
from runstore.receipts import CommittedEvent
from runstore.store import attempts
from runstore.store import finalization
from runstore.store import leases
from runstore.store import observations

Applied = tuple[object, Sequence[CommittedEvent]]


def _one(result: tuple[object, CommittedEvent]) -> Applied:
    return result[0], (result[1],)


def _at_most_one(result: tuple[object, CommittedEvent | None]) -> Applied:
    return result[0], () if result[1] is None else (result[1],)


OPERATIONS: dict[str, Callable[..., Applied]] = {
    "reserve": lambda c, *a: _one(attempts.reserve(c, *a)),
    "advance": lambda c, *a: _one(attempts.advance(c, *a)),
    "renew": lambda c, *a: (leases.renew(c, *a), ()),
    "begin_finalization": lambda c, *a: _one(finalization.begin_finalization(c, *a)),
    "register_observation": lambda c, *a, **k: _at_most_one(
        observations.register_observation(c, *a, **k)
    ),
    "commit_finalization": lambda c, *a: _one(finalization.commit_finalization(c, *a)),
}
"""Each batchable operation's store function, as the single-operation method calls it:
``(result, committed events)``."""


def apply_steps(
    connection: sqlite3.Connection, batch: WriteBatch
) -> tuple[list[object], list[CommittedEvent]]:
    """Run ``batch``'s steps inside the open transaction: one outcome per step (a result,
    or the refusal that rolled the step back to its savepoint), and the events of the
    steps that were not refused, in order."""
    events: list[CommittedEvent] = []

    def apply(step: Step, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        sql.execute(connection, "SAVEPOINT batch_step")
        try:
            result, step_events = OPERATIONS[step.operation](connection, *args, **kwargs)
        except RunStoreError:
            sql.execute(connection, "ROLLBACK TO batch_step")
            sql.execute(connection, "RELEASE batch_step")
            raise
        sql.execute(connection, "RELEASE batch_step")
        events.extend(step_events)
        return result

    return run_steps(batch, apply, (RunStoreError,)), events


__all__ = ["OPERATIONS", "apply_steps"]
