"""What the writer (and the model) hand back: the ``OwnedAttempt`` guard every successful
transition returns, the claim decision, the terminal receipt, and the events delivered to
subscribers after commit.

Rules of this file: value layer; validated frozen values only (no I/O, no SQLite, no clock).
A guard is opaque to callers: the writer checks every field of it against the database.

Each value's ``to_json()`` is its one JSON form: plain JSON (dicts, lists, strings,
integers, booleans, null) following the conventions of the conformance vectors
(``vectors/README.md``, "Results"; SPEC.md section 10): ``*_ns`` times as decimal strings,
bytes as lowercase hex under a ``*_hex`` key, states by their value. A guard's form leaves
out its owner token (the owner's credential, which its ``repr`` hides too) and its lease
ids, saying only whether it holds a claim.
"""

from __future__ import annotations

import attrs
from runstore.canonical import JSON
from runstore.canonical import ns_to_json
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.errors import IdentityMismatchError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.identity import ATTEMPT
from runstore.identity import ATTEMPT_SLOT
from runstore.identity import check_index
from runstore.identity import check_typed_id
from runstore.identity import run_attempt_id
from runstore.records import ArtifactRegistration
from runstore.requests import LeaseRequest
from runstore.validation import boolean
from runstore.validation import index
from runstore.validation import member
from runstore.validation import ns
from runstore.validation import optional_text
from runstore.validation import text


def _check_attempt_binding(attempt_id: str, slot_id: str, retry_index: int) -> None:
    check_typed_id(slot_id, ATTEMPT_SLOT, "slot_id")
    check_index(retry_index, "retry_index")
    check_typed_id(attempt_id, ATTEMPT, "attempt_id")
    if attempt_id != run_attempt_id(slot_id, retry_index):
        raise IdentityMismatchError("attempt_id is not run_attempt_id(slot_id, retry_index)")


@attrs.frozen(kw_only=True)
class OwnedAttempt:
    """Proof of ownership of an attempt at one revision, returned by every successful
    transition. Opaque to callers: the writer checks every field against the database.
    ``attempt_id`` must equal ``run_attempt_id(slot_id, retry_index)`` (``identity_mismatch``);
    ``claim_lease_id`` is the finalization lease when the attempt holds its slot's claim."""

    attempt_id: str = attrs.field()
    slot_id: str = attrs.field()
    retry_index: int = attrs.field()
    state: AttemptState = attrs.field(validator=member(AttemptState))
    revision: int = attrs.field(validator=index)
    owner_token: str = attrs.field(validator=text, repr=False)
    lease_id: str = attrs.field(validator=text)
    claim_lease_id: str | None = attrs.field(default=None, validator=optional_text)

    def __attrs_post_init__(self) -> None:
        _check_attempt_binding(self.attempt_id, self.slot_id, self.retry_index)

    @classmethod
    def reserved(cls, slot_id: str, retry_index: int, lease: LeaseRequest) -> OwnedAttempt:
        """The first guard of attempt ``retry_index`` of ``slot_id``, reserved under
        ``lease``: state reserved, revision 0, no claim."""
        return cls(
            attempt_id=run_attempt_id(slot_id, retry_index),
            slot_id=slot_id,
            retry_index=retry_index,
            state=AttemptState.RESERVED,
            revision=0,
            owner_token=lease.owner_token,
            lease_id=lease.lease_id,
        )

    def moved(self, state: AttemptState, revision: int, claim_lease_id: str | None) -> OwnedAttempt:
        """The same owner's guard after a transition to ``state`` at ``revision``, holding
        the claim lease ``claim_lease_id`` (None when it holds no claim)."""
        return attrs.evolve(self, state=state, revision=revision, claim_lease_id=claim_lease_id)

    def to_json(self) -> dict[str, JSON]:
        """``{attempt_id, claimed, retry_index, revision, state}``: ``claimed`` is whether the
        guard holds a claim lease. The owner token, the lease ids and the slot id are not
        written (the attempt id names the attempt, and through it its slot)."""
        return {
            "attempt_id": self.attempt_id,
            "claimed": self.claim_lease_id is not None,
            "retry_index": self.retry_index,
            "revision": self.revision,
            "state": self.state.value,
        }


@attrs.frozen(kw_only=True)
class ClaimDisposition:
    """The committed outcome of ``begin_finalization``: the attempt is finalizing and either
    holds the slot's success claim (``claimed``) or must publish ``Superseded``. ``claimed``
    must agree with ``attempt.claim_lease_id`` being set (``invalid_record``)."""

    attempt: OwnedAttempt = attrs.field(validator=attrs.validators.instance_of(OwnedAttempt))
    claimed: bool = attrs.field(validator=boolean)

    def __attrs_post_init__(self) -> None:
        if self.attempt.state is not AttemptState.FINALIZING:
            raise InvalidRecordError("a claim disposition's attempt must be finalizing")
        if self.claimed != (self.attempt.claim_lease_id is not None):
            raise InvalidRecordError("claimed must match whether the attempt holds a claim lease")

    def to_json(self) -> dict[str, JSON]:
        """The guard's form (:meth:`OwnedAttempt.to_json`), whose ``claimed`` is the claim
        decision."""
        return {**self.attempt.to_json(), "claimed": self.claimed}


@attrs.frozen(kw_only=True)
class ObservationReceipt:
    """The committed result of ``register_observation``: the attempt's guard (unchanged: an
    observation moves no revision), whether this call selected the observation
    (``selected``; false when not asked or when the slot's earlier selection was kept), the
    observation now selected in its slot (``selection``, None when the slot has none) and
    the ``observation_registered`` event's sequence (None when the call changed nothing:
    an identical re-registration that selected nothing new)."""

    attempt: OwnedAttempt = attrs.field(validator=attrs.validators.instance_of(OwnedAttempt))
    observation_id: str = attrs.field(validator=text)
    selected: bool = attrs.field(validator=boolean)
    selection: str | None = attrs.field(validator=optional_text)
    event_sequence: int | None = attrs.field(validator=attrs.validators.optional(ns))

    def __attrs_post_init__(self) -> None:
        if self.selected and self.selection != self.observation_id:
            raise InvalidRecordError("a selecting call leaves its own observation selected")
        if self.event_sequence is not None and self.event_sequence < 1:
            raise OutOfRangeError("event_sequence starts at 1")

    def to_json(self) -> dict[str, JSON]:
        """The guard's form (:meth:`OwnedAttempt.to_json`) plus ``event_sequence`` (null
        when the call changed nothing), ``observation_id``, ``selected`` and ``selection``
        (null when the slot has no selection)."""
        return {
            **self.attempt.to_json(),
            "event_sequence": self.event_sequence,
            "observation_id": self.observation_id,
            "selected": self.selected,
            "selection": self.selection,
        }


@attrs.frozen(kw_only=True)
class TerminalAttempt:
    """Receipt of a committed terminal outcome. ``state`` is terminal; ``revision`` is at
    least 2 (reserved, finalizing, terminal); ``event_sequence`` names the committed
    terminal event (>= 1)."""

    attempt_id: str = attrs.field()
    slot_id: str = attrs.field()
    retry_index: int = attrs.field()
    state: AttemptState = attrs.field(validator=member(AttemptState))
    revision: int = attrs.field(validator=index)
    finished_at_ns: int = attrs.field(validator=ns)
    event_sequence: int = attrs.field(validator=ns)

    def __attrs_post_init__(self) -> None:
        _check_attempt_binding(self.attempt_id, self.slot_id, self.retry_index)
        if self.state not in TERMINAL_STATES:
            raise InvalidRecordError(f"state {self.state.value} is not terminal")
        if self.revision < 2:
            raise InvalidRecordError("a terminal revision is at least 2")
        if self.event_sequence < 1:
            raise OutOfRangeError("event_sequence starts at 1")

    def to_json(self) -> dict[str, JSON]:
        """``{attempt_id, event_sequence, finished_at_ns, retry_index, revision, state}``,
        ``finished_at_ns`` a decimal string. The slot id is not written (the attempt id
        names the attempt, and through it its slot)."""
        return {
            "attempt_id": self.attempt_id,
            "event_sequence": self.event_sequence,
            "finished_at_ns": ns_to_json(self.finished_at_ns),
            "retry_index": self.retry_index,
            "revision": self.revision,
            "state": self.state.value,
        }


@attrs.frozen(kw_only=True)
class CommittedEvent:
    """An event as delivered to subscribers, after its transaction committed."""

    sequence: int
    kind: str
    attempt_id: str | None
    at_ns: int
    payload: bytes
    """The canonical JSON bytes stored in ``events.payload_json``."""

    def to_json(self) -> dict[str, JSON]:
        """``{at_ns, attempt_id, kind, payload_hex, sequence}``: ``at_ns`` a decimal string,
        ``attempt_id`` null for an event of no attempt, ``payload_hex`` the payload bytes
        exactly (SPEC.md section 7)."""
        return {
            "at_ns": ns_to_json(self.at_ns),
            "attempt_id": self.attempt_id,
            "kind": self.kind,
            "payload_hex": self.payload.hex(),
            "sequence": self.sequence,
        }


@attrs.frozen(kw_only=True)
class PublishedArtifact:
    """Receipt of ``publish_artifact``, returned only after its final commit: the
    unchanged guard and the registration of the published, verified object (the artifact
    is rooted under the attempt's reservation lease)."""

    attempt: OwnedAttempt = attrs.field(validator=attrs.validators.instance_of(OwnedAttempt))
    artifact: ArtifactRegistration = attrs.field(
        validator=attrs.validators.instance_of(ArtifactRegistration)
    )

    def to_json(self) -> dict[str, JSON]:
        """``{artifact, attempt}``: the artifact document and the guard's form."""
        return {"artifact": self.artifact.to_json(), "attempt": self.attempt.to_json()}


@attrs.frozen(kw_only=True)
class PublishedFinalization:
    """Receipt of ``publish_finalization``, returned only after its final commit: the
    terminal receipt and the registration of the published attempt artifact (whose
    ``outcome.json`` is the canonical outcome document)."""

    terminal: TerminalAttempt = attrs.field(validator=attrs.validators.instance_of(TerminalAttempt))
    artifact: ArtifactRegistration = attrs.field(
        validator=attrs.validators.instance_of(ArtifactRegistration)
    )

    def to_json(self) -> dict[str, JSON]:
        """``{artifact, terminal}``: the artifact document and the terminal receipt's form."""
        return {"artifact": self.artifact.to_json(), "terminal": self.terminal.to_json()}
