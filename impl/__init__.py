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

from typing import TYPE_CHECKING
from typing import Any

from runstore.batch import Pending
from runstore.batch import WriteBatch
from runstore.enums import TERMINAL_STATES
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import LeasePurpose
from runstore.enums import ObservationSlotKind
from runstore.enums import SlotRole
from runstore.errors import RunStoreError
from runstore.identity import run_attempt_id
from runstore.receipts import ClaimDisposition
from runstore.receipts import CommittedEvent
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.receipts import PublishedFinalization
from runstore.receipts import TerminalAttempt
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.recovery_report import RecoveryReport
from runstore.recovery_report import RejectedArtifact
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import FirstAttempt
from runstore.requests import LeaseRequest
from runstore.requests import Next
from runstore.requests import Reference
from runstore.requests import Retry
from runstore.requests import RetryAuthorization
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome

if TYPE_CHECKING:
    from runstore.store import RunStore
    from runstore.store.schema_sql import RUN_STORE_SCHEMA_SQL
    from runstore.store.schema_sql import RUN_STORE_SCHEMA_VERSION

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
    "Pending",
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
    "WriteBatch",
    "run_attempt_id",
]
