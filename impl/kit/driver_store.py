"""This package's answers to the store operations of the driver protocol (SPEC.md section
18.3), for :mod:`runstore.kit.driver`: one :class:`StoreSession` per driver process.

Rules of this file: every operation goes through ``RunStore``'s public API (publication
through a ``populate`` callback creating the request's entries, clocks as the request's
readings); the projection and the outcome document are read through their own read-only
or rolled-back connections, never the writer's. Refusals are the library's own.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

from runstore.audit.projection import store_projection
from runstore.enums import AttemptState
from runstore.errors import InvalidRecordError
from runstore.errors import StoreClosedError
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.store import RunStore
from runstore.store.publication import outcome_document as builder

from .forms import entries_of
from .forms import projection_wire
from .forms import result_wire
from .wire import artifact_of
from .wire import authorization_of
from .wire import clock_of
from .wire import guard_of
from .wire import integer
from .wire import kind_of
from .wire import lease_of
from .wire import member
from .wire import outcome_of
from .wire import references_of

Args = dict[str, Any]


def _state(text: object) -> AttemptState:
    if text not in {s.value for s in AttemptState}:
        raise InvalidRecordError(f"unknown attempt state {str(text)[:40]}")
    return AttemptState(text)


def _clock(document: object) -> Callable[[], int]:
    samples = clock_of(document)

    def readings() -> Iterator[int]:
        yield from samples
        last = samples[-1]
        while True:
            last += 1
            yield last

    iterator = readings()
    return lambda: next(iterator)


def _populate(document: object) -> Callable[[str], None]:
    entries = entries_of(document)

    def populate(path: str) -> None:
        for item in entries:
            target = os.path.join(path, item["path"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if item["type"] == "directory":
                os.makedirs(target, exist_ok=True)
            elif item["type"] == "symlink":
                os.symlink(item["target"], target)
            elif item["type"] == "fifo":
                os.mkfifo(target)
            else:
                with open(target, "wb") as handle:
                    handle.write(bytes.fromhex(item["data_hex"]))
                os.chmod(target, 0o755 if item["executable"] else 0o644)

    return populate


class StoreSession:
    """The store a driver process has open (at most one)."""

    def __init__(self) -> None:
        self.store: RunStore | None = None

    def _open_store(self) -> RunStore:
        if self.store is None:
            raise StoreClosedError("no store is open: send open first")
        return self.store

    def open(self, args: Args) -> Args:
        root = member(args, "root")
        if not isinstance(root, str):
            raise InvalidRecordError("root must be a string")
        self.close({})
        self.store = RunStore.open(root)
        return {}

    def close(self, args: Args) -> Args:
        if self.store is not None:
            store, self.store = self.store, None
            store.close()
        return {}

    def register_slots(self, args: Args) -> Args:
        slots = member(args, "observation_slots")
        if not isinstance(slots, list):
            raise InvalidRecordError("observation_slots must be an array")
        return result_wire(
            self._open_store().register_slots(
                ApplicabilityDecision.from_json(member(args, "candidate")),
                ResolvedRun.from_json(member(args, "run")),
                AttemptSlot.from_json(member(args, "attempt_slot")),
                [ObservationSlot.from_json(slot) for slot in slots],
            )
        )

    def register_one_shot(self, args: Args) -> Args:
        return result_wire(
            self._open_store().register_one_shot(
                ApplicabilityDecision.from_json(member(args, "candidate")),
                ResolvedRun.from_json(member(args, "run")),
                AttemptSlot.from_json(member(args, "attempt_slot")),
                ObservationSlot.from_json(member(args, "observation_slot")),
            )
        )

    def reserve(self, args: Args) -> Args:
        return result_wire(
            self._open_store().reserve(
                member(args, "slot_id"),
                authorization_of(member(args, "authorization")),
                lease_of(member(args, "lease")),
                integer(member(args, "now_ns"), "now_ns"),
            )
        )

    def advance(self, args: Args) -> Args:
        return result_wire(
            self._open_store().advance(
                guard_of(member(args, "guard")),
                _state(member(args, "phase")),
                integer(member(args, "now_ns"), "now_ns"),
            )
        )

    def renew(self, args: Args) -> Args:
        return result_wire(
            self._open_store().renew(
                guard_of(member(args, "guard")),
                integer(member(args, "expires_at_ns"), "expires_at_ns"),
                integer(member(args, "now_ns"), "now_ns"),
            )
        )

    def begin_finalization(self, args: Args) -> Args:
        return result_wire(
            self._open_store().begin_finalization(
                guard_of(member(args, "guard")),
                lease_of(member(args, "lease")),
                integer(member(args, "now_ns"), "now_ns"),
            )
        )

    def register_observation(self, args: Args) -> Args:
        select = member(args, "select")
        if type(select) is not bool:
            raise InvalidRecordError("select must be a boolean")
        return result_wire(
            self._open_store().register_observation(
                guard_of(member(args, "guard")),
                Observation.from_json(member(args, "observation")),
                artifact_of(member(args, "artifact")),
                references_of(member(args, "references")),
                select=select,
                now_ns=integer(member(args, "now_ns"), "now_ns"),
            )
        )

    def commit_finalization(self, args: Args) -> Args:
        return result_wire(
            self._open_store().commit_finalization(
                guard_of(member(args, "guard")),
                outcome_of(member(args, "outcome")),
                artifact_of(member(args, "artifact")),
                references_of(member(args, "references")),
                integer(member(args, "finished_at_ns"), "finished_at_ns"),
                integer(member(args, "now_ns"), "now_ns"),
            )
        )

    def publish_artifact(self, args: Args) -> Args:
        return result_wire(
            self._open_store().publish_artifact(
                guard_of(member(args, "guard")),
                kind_of(member(args, "kind")),
                _populate(member(args, "entries")),
                _clock(member(args, "clock")),
            )
        )

    def publish_finalization(self, args: Args) -> Args:
        return result_wire(
            self._open_store().publish_finalization(
                guard_of(member(args, "guard")),
                outcome_of(member(args, "outcome")),
                references_of(member(args, "references")),
                _populate(member(args, "entries")),
                _clock(member(args, "clock")),
            )
        )

    def recover(self, args: Args) -> Args:
        return result_wire(self._open_store().recover(_clock(member(args, "clock"))))

    def outcome_document(self, args: Args) -> Args:
        path = self._open_store().database_path
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        try:
            connection.execute("BEGIN")
            data = builder.outcome_document(
                connection,
                member(args, "attempt_id"),
                outcome_of(member(args, "outcome")),
                references_of(member(args, "references")),
                integer(member(args, "finished_at_ns"), "finished_at_ns"),
            )
            connection.execute("ROLLBACK")
        finally:
            connection.close()
        return {"outcome_hex": data.hex()}

    def projection(self, args: Args) -> Args:
        return {"tables": projection_wire(store_projection(self._open_store().database_path))}

    def operations(self) -> dict[str, Callable[[Args], Args]]:
        """The store operations, by protocol name."""
        names = [
            "open",
            "close",
            "register_slots",
            "register_one_shot",
            "reserve",
            "advance",
            "renew",
            "begin_finalization",
            "register_observation",
            "commit_finalization",
            "publish_artifact",
            "publish_finalization",
            "recover",
            "outcome_document",
            "projection",
        ]
        return {name: getattr(self, name) for name in names}
