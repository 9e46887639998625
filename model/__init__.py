"""runstore.model: the pure reference model of the run store's coordination state.

Rules of this package: no I/O, no SQLite, no clock reads; it imports only
``runstore.records``, ``runstore.canonical`` and ``runstore.errors`` from the runtime
(and ``scenarios`` its fixtures from ``runstore.testing``, which is pure record
construction too), and the runtime never imports it. State is an immutable
:class:`ModelState`; each operation is a function
``op(state, ...) -> (new_state, result | Refusal)`` mirroring one writer method, and a
refusal carries the ``code`` of the error the writer raises for the same call and returns
the input state object unchanged.

Modules: ``edges`` (the legal edges, as data), ``rules`` (scalar rules with CrossHair
contracts), ``state`` (rows and the state value), ``events`` (event payloads),
``guard`` (the shared check order), ``registration``, ``attempts`` (reserve, advance,
renew), ``finalization`` (claims, observations, terminal commit), ``staging``,
``recovery``, ``scenarios`` and ``trace`` (Markdown transcripts).
"""

from __future__ import annotations

from runstore import errors
from runstore.model.attempts import advance, renew, reserve
from runstore.model.edges import EXECUTION_EDGES, LEGAL_EDGES
from runstore.model.finalization import (
    acceptance_refusal,
    begin_finalization,
    commit_finalization,
    register_observation,
)
from runstore.model.recovery import INTERRUPTED_ATTEMPT, Recoverable, recover, recoverable
from runstore.model.registration import register_one_shot, register_slots
from runstore.model.staging import begin_staging, publish_staged_artifact
from runstore.model.state import ModelState, Refusal

MODEL_REFUSAL_CODES: frozenset[str] = frozenset(
    error.code
    for error in (
        errors.OutOfRangeError,
        errors.InvalidRecordError,
        errors.RegistrationConflictError,
        errors.UnknownSlotError,
        errors.SlotSatisfiedError,
        errors.RetryNotAuthorizedError,
        errors.RetryBoundExceededError,
        errors.DuplicateLeaseError,
        errors.OwnerMismatchError,
        errors.LeaseMismatchError,
        errors.LeaseReleasedError,
        errors.LeaseExpiredError,
        errors.StaleRevisionError,
        errors.IllegalTransitionError,
        errors.AttemptTerminalError,
        errors.ClaimRequiredError,
        errors.ClaimExpiredError,
        errors.AcceptanceUnsatisfiedError,
        errors.UnknownArtifactError,
        errors.ObservationSlotMismatchError,
        errors.ExpiryNotAfterNowError,
        errors.RenewalShortensError,
    )
)
"""Every refusal code a model operation can return."""

__all__ = [
    "EXECUTION_EDGES",
    "INTERRUPTED_ATTEMPT",
    "LEGAL_EDGES",
    "MODEL_REFUSAL_CODES",
    "ModelState",
    "Recoverable",
    "Refusal",
    "acceptance_refusal",
    "advance",
    "begin_finalization",
    "begin_staging",
    "commit_finalization",
    "publish_staged_artifact",
    "recover",
    "recoverable",
    "register_observation",
    "register_one_shot",
    "register_slots",
    "renew",
    "reserve",
]
