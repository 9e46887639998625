"""runstore.model: the pure reference model of the run store's coordination state.

Rules of this package: no I/O, no SQLite, no clock reads; it imports only the runtime's
value layer (records, requests, receipts, enums, errors, canonical JSON and the shared leaf
rules: ``runstore.edges``, ``runstore.rules``, ``runstore.payloads``, ``runstore.shapes``),
and the runtime never imports it, except the audit (:mod:`runstore.audit`), which replays a
store's event log through it. State is an immutable :class:`ModelState`; each operation
is a function ``op(state, ...) -> (new_state, result | Refusal)`` mirroring one writer
method, and a refusal carries the ``code`` of the error the writer raises for the same call
and returns the input state object unchanged.

Modules, each paired by name with the writer module of the same concept: ``state`` (rows
and the state value), ``guard`` (the shared check order), ``registration``, ``attempts``
(reserve, advance), ``leases`` (renew), ``events`` (history rows), ``artifacts``,
``observations`` (register and select), ``finalization`` (claims, the terminal commit),
``publication`` (staging leases, staged artifacts and the publisher's finalization
steps), ``content`` (manifests and tree hashes over in-memory trees),
``outcome_document``, ``recovery`` (the pass), ``recovery_checks`` (a candidate
outcome's checks) and ``disk`` (what recovery is told is on disk). What is *not*
shared with the writer, on purpose, is the composition: the order of checks and the state
changes of each operation, which the lockstep tests compare with the writer's SQL.
"""

from __future__ import annotations

from runstore import errors
from runstore.model.attempts import advance
from runstore.model.attempts import reserve
from runstore.model.disk import DiskObject
from runstore.model.disk import DiskView
from runstore.model.finalization import acceptance_refusal
from runstore.model.finalization import begin_finalization
from runstore.model.finalization import commit_finalization
from runstore.model.leases import renew
from runstore.model.observations import register_observation
from runstore.model.publication import begin_staging
from runstore.model.publication import check_finalization
from runstore.model.publication import publish_finalization_commit
from runstore.model.publication import publish_staged_artifact
from runstore.model.recovery import Recoverable
from runstore.model.recovery import recover
from runstore.model.recovery import recoverable
from runstore.model.registration import register_exclusion
from runstore.model.registration import register_many
from runstore.model.registration import register_one_shot
from runstore.model.registration import register_slots
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import refused
from runstore.requests import INTERRUPTED_ATTEMPT

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
        errors.OutcomeNotPermittedError,
        errors.SnapshotChangedError,
        errors.UnsafeEntryError,
        errors.ArtifactCorruptError,
    )
)
"""Every refusal code a model operation can return."""

__all__ = [
    "INTERRUPTED_ATTEMPT",
    "MODEL_REFUSAL_CODES",
    "DiskObject",
    "DiskView",
    "LeaseRow",
    "ModelState",
    "Recoverable",
    "Refusal",
    "acceptance_refusal",
    "advance",
    "begin_finalization",
    "begin_staging",
    "check_finalization",
    "commit_finalization",
    "publish_finalization_commit",
    "publish_staged_artifact",
    "recover",
    "recoverable",
    "refused",
    "register_exclusion",
    "register_many",
    "register_observation",
    "register_one_shot",
    "register_slots",
    "renew",
    "reserve",
]
