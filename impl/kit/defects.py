"""Defects the reference driver can plant (``python -m runstore.kit.driver --defect NAME``),
each a known way an implementation goes wrong, and the kit check that must catch it.

Rules of this file: a defect wraps the driver's handler table and changes one behaviour;
every other answer stays the library's. The kit's tests run each and require
:attr:`Defect.check` to fail, so a kit that stopped looking would fail them.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any

import attrs
from runstore import canonical
from runstore.records import ApplicabilityDecision

from .wire import member
from .wire import value_of

if TYPE_CHECKING:
    from .driver_store import StoreSession

Handler = Callable[[dict[str, Any]], dict[str, Any]]
Table = dict[str, Handler]


@attrs.frozen
class Defect:
    name: str
    check: str
    """The name of the kit check that must fail."""
    description: str
    plant: Callable[[Table, StoreSession], Table]


def _unsorted_keys(table: Table, session: StoreSession) -> Table:
    """Object members written in the order the value was built."""

    def encode(args: dict[str, Any]) -> dict[str, Any]:
        value = value_of(member(args, "value"))
        data = canonical.encode(value)
        if isinstance(value, dict) and len(value) > 1:
            parts = [canonical.encode(k) + b":" + canonical.encode(v) for k, v in value.items()]
            data = b"{" + b",".join(parts) + b"}"
        return {"canonical_hex": data.hex()}

    return {**table, "canonical.encode": encode}


def _executable_ignored(table: Table, session: StoreSession) -> Table:
    """The tree hash reads every file as not executable."""
    inner = table["tree.hash"]

    def tree_hash(args: dict[str, Any]) -> dict[str, Any]:
        entries = [
            {**entry, "executable": False} if isinstance(entry, dict) else entry
            for entry in member(args, "entries")
        ]
        return inner({**args, "entries": entries})

    return {**table, "tree.hash": tree_hash}


def _stale_revision_accepted(table: Table, session: StoreSession) -> Table:
    """``advance`` takes the attempt's current revision and state for the guard's, so a
    stale guard moves the attempt."""
    inner = table["advance"]

    def advance(args: dict[str, Any]) -> dict[str, Any]:
        guard = member(args, "guard")
        store = session.store
        if store is not None and isinstance(guard, dict):
            connection = sqlite3.connect(f"file:{store.database_path}?mode=ro", uri=True)
            try:
                row = connection.execute(
                    "SELECT state, revision FROM attempts WHERE id = ?",
                    (str(guard.get("attempt_id")),),
                ).fetchone()
            finally:
                connection.close()
            if row is not None:
                guard = {**guard, "state": row[0], "revision": str(row[1])}
        return inner({**args, "guard": guard})

    return {**table, "advance": advance}


def _recovery_skipped(table: Table, session: StoreSession) -> Table:
    """``recover`` reports an empty pass and does nothing."""

    def recover(args: dict[str, Any]) -> dict[str, Any]:
        empty: list[Any] = []
        return {
            "busy_stages": empty,
            "imported_artifacts": empty,
            "quarantined_stages": empty,
            "rejected_artifacts": empty,
            "terminals": empty,
        }

    return {**table, "recover": recover}


TORN_PAUSE_S = 0.25
"""How long the torn registration waits between its two commits."""


def _registration_torn(table: Table, session: StoreSession) -> Table:
    """A registration commits its decision alone first, waits, and then the rest: correct
    when it runs to the end, a state no model step makes when killed between."""
    inner = table["register_one_shot"]

    def register_one_shot(args: dict[str, Any]) -> dict[str, Any]:
        store = session.store
        if store is not None:
            decision = ApplicabilityDecision.from_json(member(args, "candidate"))
            connection = sqlite3.connect(store.database_path, isolation_level=None)
            try:
                connection.execute(
                    "INSERT OR IGNORE INTO applicability_decisions "
                    "(id, candidate_id, problem_id, applicable, record_json) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (
                        decision.id,
                        decision.candidate_id,
                        decision.problem_id,
                        int(decision.applicable),
                        decision.to_bytes().decode("utf-8"),
                    ),
                )
            finally:
                connection.close()
            time.sleep(TORN_PAUSE_S)
        return inner(args)

    return {**table, "register_one_shot": register_one_shot}


DEFECTS: dict[str, Defect] = {
    d.name: d
    for d in (
        Defect(
            "unsorted_keys",
            "canonical_json.json encode",
            "canonical JSON writes object members unsorted",
            _unsorted_keys,
        ),
        Defect(
            "executable_ignored",
            "content.json tree_hashes",
            "the tree hash ignores the executable bit",
            _executable_ignored,
        ),
        Defect(
            "stale_revision_accepted",
            "writer lockstep",
            "advance accepts a guard whose revision is no longer current",
            _stale_revision_accepted,
        ),
        Defect(
            "recovery_skipped",
            "recovery.json",
            "recover reports an empty pass and resolves nothing",
            _recovery_skipped,
        ),
        Defect(
            "registration_torn",
            "crash campaign",
            "a registration commits in two transactions",
            _registration_torn,
        ),
    )
}
"""The plantable defects, by name."""
