"""runstore: a crash-safe, formally modelled durable run store on SQLite.

The public surface, importable from ``runstore`` directly:

* :class:`RunStore` (the store: ``RunStore.open(root)``) and the schema constants
  ``RUN_STORE_SCHEMA_SQL`` and ``RUN_STORE_SCHEMA_VERSION``;
* the error root :class:`RunStoreError` (every subclass, with its stable ``code``, lives in
  :mod:`runstore.errors`);
* the value vocabulary: the enumerations (``AttemptState``, ``ArtifactKind``, ...), the
  domain records (``ApplicabilityDecision``, ``ResolvedRun``, ``AttemptSlot``,
  ``ObservationSlot``, ``Observation``, ``ArtifactRegistration``), the requests
  (``LeaseRequest``, ``FirstAttempt``, ``Next``, ``Retry``, ``Accepted``, ``Censored``,
  ``Superseded``, ``Failed``, ``Reference``), the guard and receipts (``OwnedAttempt``,
  ``ClaimDisposition``, ``ObservationReceipt``, ``TerminalAttempt``, ``CommittedEvent``,
  ``PublishedArtifact``, ``PublishedFinalization``, ``RecoveryReport``, ``RejectedArtifact``)
  and ``run_attempt_id``.

Importing ``runstore`` (or the pure model, ``runstore.model``) loads only the value layer:
the store, and with it ``sqlite3`` and ``fcntl``, is imported on first use of ``RunStore``
or the schema constants (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runstore.enums import (
    TERMINAL_STATES,
    ArtifactKind,
    AttemptState,
    Completion,
    ExecutionKind,
    LeasePurpose,
    ObservationSlotKind,
    SlotRole,
)
from runstore.errors import RunStoreError
from runstore.identity import run_attempt_id
from runstore.receipts import (
    ClaimDisposition,
    CommittedEvent,
    ObservationReceipt,
    OwnedAttempt,
    PublishedArtifact,
    PublishedFinalization,
    TerminalAttempt,
)
from runstore.records import (
    ApplicabilityDecision,
    ArtifactRegistration,
    AttemptSlot,
    Observation,
    ObservationSlot,
    ResolvedRun,
)
from runstore.recovery_report import RecoveryReport, RejectedArtifact
from runstore.requests import (
    Accepted,
    Censored,
    Failed,
    FirstAttempt,
    LeaseRequest,
    Next,
    Reference,
    Retry,
    RetryAuthorization,
    Superseded,
    TerminalOutcome,
)

if TYPE_CHECKING:
    from runstore.store import RunStore
    from runstore.store.schema_sql import RUN_STORE_SCHEMA_SQL, RUN_STORE_SCHEMA_VERSION

# name -> the module that defines it, imported on first access.
_LAZY = {
    "RunStore": "runstore.store",
    "RUN_STORE_SCHEMA_SQL": "runstore.store.schema_sql",
    "RUN_STORE_SCHEMA_VERSION": "runstore.store.schema_sql",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'runstore' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


__all__ = [
    "RUN_STORE_SCHEMA_SQL",
    "RUN_STORE_SCHEMA_VERSION",
    "TERMINAL_STATES",
    "Accepted",
    "ApplicabilityDecision",
    "ArtifactKind",
    "ArtifactRegistration",
    "AttemptSlot",
    "AttemptState",
    "Censored",
    "ClaimDisposition",
    "CommittedEvent",
    "Completion",
    "ExecutionKind",
    "Failed",
    "FirstAttempt",
    "LeasePurpose",
    "LeaseRequest",
    "Next",
    "Observation",
    "ObservationReceipt",
    "ObservationSlot",
    "ObservationSlotKind",
    "OwnedAttempt",
    "PublishedArtifact",
    "PublishedFinalization",
    "RecoveryReport",
    "Reference",
    "RejectedArtifact",
    "ResolvedRun",
    "Retry",
    "RetryAuthorization",
    "RunStore",
    "RunStoreError",
    "SlotRole",
    "Superseded",
    "TerminalAttempt",
    "TerminalOutcome",
    "run_attempt_id",
]
