"""The one error hierarchy of runstore.

Rules of this file: every refusal the store (or the model) can make is a subclass of
:class:`RunStoreError` with a stable ``code`` string. Codes are part of the public contract
(SPEC.md lists them); they are never renamed or reused. This module imports nothing from
the rest of the package.
"""

from __future__ import annotations

from typing import ClassVar


class RunStoreError(Exception):
    """Root of every runstore error. ``code`` is stable; the message is one line.
    ``argument`` names the raising function's parameter the refusal concerns, where that
    function takes several paths and the message alone would not say which one to fix
    (``export``'s ``out_dir``, ``write_report``'s ``path``); None otherwise. The command
    line maps it to its own option's name for the hint (SPEC.md 15.7)."""

    code: ClassVar[str] = "run_store_error"

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.argument = argument

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


# --- opening a store -------------------------------------------------------------------


class UnsafePathError(RunStoreError):
    """The root or a store file is not where, or not what, the store requires
    (relative, missing, a symbolic link, not a regular file or directory)."""

    code = "unsafe_path"


class UnsupportedFilesystemError(RunStoreError):
    """The root lies on a filesystem the store refuses (a recognized network filesystem)."""

    code = "unsupported_filesystem"


class CapabilityProbeError(RunStoreError):
    """A capability probe failed: the filesystem or SQLite cannot give the guarantees."""

    code = "capability_probe_failed"


class UnknownSchemaVersionError(RunStoreError):
    """The database's ``user_version`` is neither 0 nor a version this build knows."""

    code = "unknown_schema_version"


class UnversionedDatabaseError(RunStoreError):
    """``user_version`` is 0 but the database already holds user objects."""

    code = "unversioned_database"


class SchemaMismatchError(RunStoreError):
    """A version-1 database whose tables, indexes or triggers differ from the embedded schema."""

    code = "schema_mismatch"


class BusyError(RunStoreError):
    """A lock could not be taken within its timeout; the caller may retry explicitly."""

    code = "busy"


class ConnectionSettingsError(RunStoreError):
    """A required connection setting did not read back as required."""

    code = "connection_settings"


class DurabilityError(RunStoreError):
    """A durability step (fsync, directory sync, no-replace rename, durable mkdir or unlink)
    failed outside the probes. Nothing after the failed step was done."""

    code = "durability_failed"


class DatabaseError(RunStoreError):
    """SQLite reported an error the store does not map to a more specific refusal."""

    code = "database_error"


class StoreClosedError(RunStoreError):
    """The store handle was used after ``close()``."""

    code = "store_closed"


class DirectConstructionError(RunStoreError):
    """``RunStore(...)`` was called directly: ``RunStore.open(root)`` is the only way to get
    a handle (it runs the path checks, probes and schema check a handle relies on)."""

    code = "direct_construction"


# --- records and canonical JSON --------------------------------------------------------


class InvalidRecordError(RunStoreError):
    """A domain record, guard or request has a field of the wrong type or shape (empty or
    over-long string, control characters, malformed digest or path, inconsistent fields)."""

    code = "invalid_record"


class InvalidCanonicalJsonError(RunStoreError):
    """A value cannot be encoded as canonical JSON (float, non-string key, lone surrogate,
    unsupported type), or input bytes are not exactly the canonical encoding of a value
    (whitespace, unsorted or duplicate keys, other escapes, leading zeros, invalid UTF-8)."""

    code = "invalid_canonical_json"


class IdentityMismatchError(RunStoreError):
    """A stored or supplied identity differs from the one recomputed from the record."""

    code = "identity_mismatch"


class OutOfRangeError(RunStoreError):
    """An integer lies outside its range: canonical JSON integers, ``retry_index`` and
    ``revision`` within +/-(2**53-1) (non-negative where stated); ``*_ns`` within 0..2**63-1."""

    code = "out_of_range"


# --- writer refusals -------------------------------------------------------------------


class RegistrationConflictError(RunStoreError):
    """A record with the same identity (or the same unique key) is already registered with
    different content. Registering identical content again is a no-op, not this error."""

    code = "registration_conflict"


class BatchDependencyError(RunStoreError):
    """A step of a write batch takes the result of an earlier step of the batch that was
    refused; it never ran (SPEC.md section 8, "Write batches")."""

    code = "batch_dependency_refused"


class UnknownSlotError(RunStoreError):
    """The named attempt or observation slot (or its run) is not registered."""

    code = "unknown_slot"


class SlotSatisfiedError(RunStoreError):
    """The attempt slot already has an accepted attempt; no new attempt or claim is allowed."""

    code = "slot_satisfied"


class RetryNotAuthorizedError(RunStoreError):
    """A reservation's retry authorization does not allow the next retry index (a first
    attempt requested for a slot that has attempts, a retry without authorization, or a
    retry index that is not the next one)."""

    code = "retry_not_authorized"


class RetryBoundExceededError(RunStoreError):
    """The next retry index would exceed the authorization's ``max_index``."""

    code = "retry_bound_exceeded"


class DuplicateLeaseError(RunStoreError):
    """A lease with this id already exists, or the attempt already holds a live lease of
    this purpose."""

    code = "duplicate_lease"


class OwnerMismatchError(RunStoreError):
    """The caller's owner token is not the owner token of the lease it presents."""

    code = "owner_mismatch"


class LeaseMismatchError(RunStoreError):
    """The presented lease exists but belongs to another attempt or has another purpose."""

    code = "lease_mismatch"


class LeaseReleasedError(RunStoreError):
    """The presented lease was already released."""

    code = "lease_released"


class LeaseExpiredError(RunStoreError):
    """The presented lease's expiry is not after the operation's time."""

    code = "lease_expired"


class StaleRevisionError(RunStoreError):
    """The caller's guard names a revision (or state) that is no longer the attempt's current
    one: another writer advanced it first."""

    code = "stale_revision"


class IllegalTransitionError(RunStoreError):
    """The requested state change is not an edge of the attempt state machine."""

    code = "illegal_transition"


class AttemptTerminalError(RunStoreError):
    """The attempt is already in a terminal state; it can no longer change."""

    code = "attempt_terminal"


class ClaimRequiredError(RunStoreError):
    """The operation needs the attempt to hold the slot's finalization claim, and it does not."""

    code = "claim_required"


class ClaimExpiredError(RunStoreError):
    """The finalization claim's lease expired before the operation's time."""

    code = "claim_expired"


class AcceptanceUnsatisfiedError(RunStoreError):
    """Acceptance preconditions do not hold (for example a required observation slot has no
    selected valid observation, or the final artifact is missing)."""

    code = "acceptance_unsatisfied"


class UnknownArtifactError(RunStoreError):
    """The named artifact is not registered (or is registered with another kind)."""

    code = "unknown_artifact"


class ObservationSlotMismatchError(RunStoreError):
    """The observation slot does not belong to the attempt's slot (or run), or the
    observation does not belong to the slot it is selected for."""

    code = "observation_slot_mismatch"


class ExpiryNotAfterNowError(RunStoreError):
    """A requested lease expiry is not strictly after the operation's time."""

    code = "expiry_not_after_now"


class RenewalShortensError(RunStoreError):
    """A lease renewal would move the expiry earlier than it already is."""

    code = "renewal_shortens"


class OutcomeNotPermittedError(RunStoreError):
    """The terminal outcome does not match how the attempt entered finalizing: a superseded
    contender may commit only ``Superseded``, and only a superseded contender may."""

    code = "outcome_not_permitted"


# --- publication -------------------------------------------------------------------------


class UnsafeEntryError(RunStoreError):
    """A directory being published holds an entry the publisher refuses: a symbolic link,
    a special file, an empty directory, a name that is not safe and normalized, or a
    runtime-owned file (``manifest.json``, ``outcome.json``) the caller wrote."""

    code = "unsafe_entry"


class DestinationConflictError(RunStoreError):
    """The content address already holds something that is not the identical complete
    object (empty, incomplete, changed or conflicting); nothing was replaced."""

    code = "destination_conflict"


class ArtifactCorruptError(RunStoreError):
    """A completed object does not verify: its manifest, inventory, sizes, content digests
    or tree hash differ from what they must be (or a file changed while it was read)."""

    code = "artifact_corrupt"


class SnapshotChangedError(RunStoreError):
    """The records the outcome document's snapshot describes changed before the final
    transaction; the published outcome no longer describes the committed state."""

    code = "snapshot_changed"


# --- campaigns, the runner and inspection ------------------------------------------------


class CampaignInvalidError(RunStoreError):
    """A campaign file cannot be used: unreadable, not TOML, or a key missing, unknown or
    of the wrong type or value. The message names the file and the line or key."""

    code = "campaign_invalid"


class InspectionUnsafeError(RunStoreError):
    """The inspection reader refuses to copy a database this process holds a connection to
    (closing a descriptor of that file would drop the connection's locks)."""

    code = "inspection_unsafe"


class InspectionUnstableError(RunStoreError):
    """No stable copy of the database and its WAL was obtained within the retry budget
    (a writer kept changing them), or the copy did not pass its checks."""

    code = "inspection_unstable"


class ExecutorUnavailableError(RunStoreError):
    """The chosen executor cannot be used: its optional extra is not installed, its
    scheduler cannot be reached, has no worker, would re-run a task on its own, or a worker
    runs another version of runstore. Nothing was registered or started."""

    code = "executor_unavailable"


class ComparisonInvalidError(RunStoreError):
    """A comparison cannot be made as asked: its campaign, baseline or metric names
    nothing the store holds, or the campaign is ambiguous. The message lists what exists."""

    code = "comparison_invalid"


class LogUnavailableError(RunStoreError):
    """A worker's log cannot be shown: the slot has no such attempt, the attempt has no
    attempt artifact, the artifact holds no such log, or the log is too large to hand over
    whole. (An artifact that does not verify is ``artifact_corrupt``.)"""

    code = "log_unavailable"


class UnknownCampaignError(RunStoreError):
    """A reading command was asked for a campaign the store does not hold (a typo would
    otherwise read as an empty campaign). The message lists the campaigns it holds."""

    code = "unknown_campaign"


class UnknownRevisionError(RunStoreError):
    """A reading command was asked for a revision its campaign does not have. The message
    names the revisions it has."""

    code = "unknown_revision"


class OptionInvalidError(RunStoreError):
    """A command's options cannot be used together or name something that does not exist
    (such as a failure code ``--retry-code`` does not know). Nothing was done."""

    code = "option_invalid"


class ImplementationUnavailableError(RunStoreError):
    """The conformance kit could not drive an implementation: its driver command did not
    start, or did not answer ``hello`` with this protocol's version (SPEC.md section 18)."""

    code = "implementation_unavailable"
