"""What a recovery pass reports (SPEC.md section 14), and the stable codes of the reasons
it rejects a completed object.

Rules of this file: value layer (no I/O, no SQLite, no clock). Both the store's recovery
(:mod:`runstore.store.recovery.recover`) and the model's (:mod:`runstore.model.recovery`) build
these values, so the lockstep tests compare them directly.

``to_json()`` is each value's one JSON form (plain JSON, as :mod:`runstore.receipts` writes
its receipts). The recovery vectors (``vectors/recovery.json``) write a report's rejections
as ``[path, code]`` pairs taken from this form (messages are for people and not pinned),
and ``runstore recover`` prints a summary of it.
"""

from __future__ import annotations

from typing import Final

import attrs
from runstore.canonical import JSON
from runstore.errors import InvalidRecordError
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.validation import check_store_path

CORRUPT: Final = "corrupt"
MALFORMED_OUTCOME: Final = "malformed_outcome"
UNKNOWN_ATTEMPT: Final = "unknown_attempt"
ATTEMPT_TERMINAL: Final = "attempt_terminal"
NOT_FINALIZING: Final = "not_finalizing"
UNKNOWN_ARTIFACT: Final = "unknown_artifact"
EVIDENCE_MISMATCH: Final = "evidence_mismatch"
NOT_AUTHORIZED: Final = "not_authorized"
ACCEPTANCE_UNSATISFIED: Final = "acceptance_unsatisfied"
DEPENDENCY_CORRUPT: Final = "dependency_corrupt"
AMBIGUOUS: Final = "ambiguous"

REJECTION_CODES: Final = (
    CORRUPT,
    MALFORMED_OUTCOME,
    UNKNOWN_ATTEMPT,
    ATTEMPT_TERMINAL,
    NOT_FINALIZING,
    UNKNOWN_ARTIFACT,
    EVIDENCE_MISMATCH,
    NOT_AUTHORIZED,
    ACCEPTANCE_UNSATISFIED,
    DEPENDENCY_CORRUPT,
    AMBIGUOUS,
)
"""Every rejection code, in the order a candidate is checked (SPEC.md section 14)."""


def _code(_: object, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in REJECTION_CODES:
        raise InvalidRecordError(f"{attribute.name} {value!r:.40} is not a rejection code")


def _store_path(_: object, attribute: attrs.Attribute[str], value: object) -> None:
    check_store_path(value, attribute.name)


@attrs.frozen(kw_only=True)
class RejectedArtifact:
    """A completed object recovery left on disk: its store path, the stable ``code`` of
    the first check it failed, and a one-line ``message`` for people."""

    path: str = attrs.field(validator=_store_path)
    code: str = attrs.field(validator=_code)
    message: str = attrs.field(validator=attrs.validators.instance_of(str), eq=False)

    def to_json(self) -> dict[str, JSON]:
        """``{code, message, path}``."""
        return {"code": self.code, "message": self.message, "path": self.path}


def _sorted_terminals(items: tuple[TerminalAttempt, ...]) -> tuple[TerminalAttempt, ...]:
    return tuple(sorted(items, key=lambda item: item.attempt_id))


def _sorted_artifacts(items: tuple[ArtifactRegistration, ...]) -> tuple[ArtifactRegistration, ...]:
    return tuple(sorted(items, key=lambda item: item.id))


def _sorted_paths(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(items))


def _sorted_rejections(items: tuple[RejectedArtifact, ...]) -> tuple[RejectedArtifact, ...]:
    return tuple(sorted(items, key=lambda item: (item.path, item.code)))


@attrs.frozen(kw_only=True)
class RecoveryReport:
    """What one recovery pass did: the terminal receipts it committed (attempt id order),
    the registrations of independently imported objects (by id), the store paths of the
    stages it quarantined and of the stages it found held (by name), and the objects it
    rejected (by path, then code). Fields are normalized to those orders on construction,
    so two reports of the same pass compare equal (messages are not compared)."""

    terminals: tuple[TerminalAttempt, ...] = attrs.field(default=(), converter=_sorted_terminals)
    imported_artifacts: tuple[ArtifactRegistration, ...] = attrs.field(
        default=(), converter=_sorted_artifacts
    )
    quarantined_stages: tuple[str, ...] = attrs.field(default=(), converter=_sorted_paths)
    busy_stages: tuple[str, ...] = attrs.field(default=(), converter=_sorted_paths)
    rejected_artifacts: tuple[RejectedArtifact, ...] = attrs.field(
        default=(), converter=_sorted_rejections
    )

    @property
    def changed(self) -> bool:
        """Whether the pass committed or moved anything (a second pass over a resolved
        store changes nothing)."""
        return bool(self.terminals or self.imported_artifacts or self.quarantined_stages)

    def counts(self) -> dict[str, int]:
        """How many items each list of :meth:`to_json` holds, under the same keys (what a
        run's ``recovered`` event and ``runstore recover``'s table show)."""
        document = self.to_json()
        return {key: len(value) for key, value in document.items() if isinstance(value, list)}

    def to_json(self) -> dict[str, JSON]:
        """``{busy_stages, imported_artifacts, quarantined_stages, rejected_artifacts,
        terminals}``, each a list in the report's order: stage paths, artifact documents
        (:meth:`~runstore.records.ArtifactRegistration.to_json`), rejections
        (:meth:`RejectedArtifact.to_json`) and terminal receipts
        (:meth:`~runstore.receipts.TerminalAttempt.to_json`)."""
        return {
            "busy_stages": list(self.busy_stages),
            "imported_artifacts": [artifact.to_json() for artifact in self.imported_artifacts],
            "quarantined_stages": list(self.quarantined_stages),
            "rejected_artifacts": [rejected.to_json() for rejected in self.rejected_artifacts],
            "terminals": [terminal.to_json() for terminal in self.terminals],
        }
