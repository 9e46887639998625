"""After a crash: reopen the store, check SQLite's integrity, match the durable projection
against the acceptable model states, and run the user's continuation.

Rules of this file: runs in a process that forks nothing of its own after opening the
store (the trial child), and closes every connection it opens. Returns a :class:`Verdict`;
never raises for a finding (an unexpected exception is itself reported as a failure).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

import attrs
from runstore import RunStore
from runstore import model as m
from runstore.crashsim.continuation import continue_as_user
from runstore.errors import RunStoreError
from runstore.probes import PROBE_PREFIX
from runstore.testing.lockstep import Diverged
from runstore.testing.projection import Projection, model_projection, store_projection

Acceptable = Sequence[tuple[str, m.ModelState]]
"""``(label, state)`` pairs: the model states the store may be in ("before", "after")."""


@attrs.frozen
class Verdict:
    """``ok`` is False for any finding; ``detail`` says what (or what the continuation did)."""

    ok: bool
    matched: str = ""
    detail: str = ""


def verify(root: str, acceptable: Acceptable) -> Verdict:
    """Reopen ``root`` and check it against ``acceptable``, then continue as a user would."""
    try:
        store = RunStore.open(root)
    except RunStoreError as error:
        return Verdict(ok=False, detail=f"reopening the store failed: {error}")
    try:
        return _check_open_store(store, acceptable)
    except Diverged as error:
        return Verdict(ok=False, detail=str(error))
    except Exception as error:  # a crash of the checker is a finding, not a pass
        return Verdict(ok=False, detail=f"verification raised {error!r}")
    finally:
        store.close()


def _check_open_store(store: RunStore, acceptable: Acceptable) -> Verdict:
    leftovers = sorted(n for n in os.listdir(store.root) if n.startswith(PROBE_PREFIX))
    if leftovers:
        return Verdict(ok=False, detail=f"probe directories survived reopening: {leftovers}")
    problem = sqlite_checks(store.database_path)
    if problem is not None:
        return Verdict(ok=False, detail=problem)
    projection = store_projection(store.database_path)
    for label, state in acceptable:
        if projection == model_projection(state):
            note = continue_as_user(store, state)
            return Verdict(ok=True, matched=label, detail=note)
    labels = " or ".join(label for label, _ in acceptable)
    differences = "; ".join(
        f"vs {label}: {difference(projection, model_projection(state))}"
        for label, state in acceptable
    )
    return Verdict(
        ok=False, detail=f"the projection matches no model state ({labels}): {differences}"
    )


def sqlite_checks(database_path: str) -> str | None:
    """Schema version 1, ``PRAGMA integrity_check`` ok and no ``foreign_key_check`` rows,
    read through a fresh read-only connection; returns a finding or None."""
    connection = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True)
    try:
        version = connection.execute("PRAGMA user_version").fetchall()
        integrity = connection.execute("PRAGMA integrity_check").fetchall()
        foreign = connection.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        connection.close()
    if version != [(1,)]:
        return f"user_version is {version!r} after reopening, not 1"
    if integrity != [("ok",)]:
        return f"integrity_check: {integrity[:5]!r}"
    if foreign:
        return f"foreign_key_check: {foreign[:5]!r}"
    return None


def difference(store: Projection, model: Projection, limit: int = 300) -> str:
    """A brief table-by-table difference: rows only the store has (+) or only the model has
    (-)."""
    parts = []
    for table in model:
        extra = [row for row in store.get(table, []) if row not in model[table]]
        missing = [row for row in model[table] if row not in store.get(table, [])]
        if extra or missing:
            parts.append(f"{table} +{_brief(extra)} -{_brief(missing)}")
    text = ", ".join(parts) or "no difference"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _brief(rows: list[object]) -> str:
    more = ", ..." if len(rows) > 2 else ""
    return "[" + ", ".join(repr(row)[:60] for row in rows[:2]) + more + "]"
