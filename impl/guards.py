"""Requests, retry authorizations, terminal outcomes, and the guards and receipts the writer
(and the model) return.

Rules of this file: validated frozen values only (no I/O, no SQLite, no clock); re-exported by
:mod:`runstore.records`, which is where callers import them from.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs
from runstore.canonical import JSON, decode_object
from runstore.enums import TERMINAL_STATES, AttemptState
from runstore.errors import IdentityMismatchError, InvalidRecordError, OutOfRangeError
from runstore.identity import ATTEMPT, ATTEMPT_SLOT, check_index, check_typed_id, run_attempt_id
from runstore.validation import (
    MAX_REASON_LENGTH,
    boolean,
    canonical_object_bytes,
    check_text,
    index,
    member,
    ns,
    optional_text,
    text,
)


@attrs.frozen(kw_only=True)
class LeaseRequest:
    """A caller's request for a lease: a unique id, its private owner token, an expiry."""

    lease_id: str = attrs.field(validator=text)
    owner_token: str = attrs.field(validator=text, repr=False)
    expires_at_ns: int = attrs.field(validator=ns)


@attrs.frozen(kw_only=True)
class FirstAttempt:
    """Authorizes retry index 0 only."""


@attrs.frozen(kw_only=True)
class Next:
    """Authorizes the next index, allocated under the write lock: ``retry=False`` permits only
    a first attempt; ``retry=True`` explicitly authorizes one more attempt."""

    retry: bool = attrs.field(validator=boolean)


@attrs.frozen(kw_only=True)
class Retry:
    """Authorizes exactly ``next_index`` as the next retry, with an inclusive bound
    ``max_index`` (``next_index <= max_index``, else ``invalid_record``)."""

    next_index: int = attrs.field(validator=index)
    max_index: int = attrs.field(validator=index)

    def __attrs_post_init__(self) -> None:
        if self.next_index > self.max_index:
            raise InvalidRecordError(
                f"next_index {self.next_index} exceeds max_index {self.max_index}"
            )


RetryAuthorization: TypeAlias = FirstAttempt | Next | Retry


@attrs.frozen(kw_only=True)
class Accepted:
    """The attempt's result is accepted for its slot (needs the slot's finalization claim)."""

    state: ClassVar[AttemptState] = AttemptState.ACCEPTED


@attrs.frozen(kw_only=True)
class Censored:
    """The attempt ended without a usable verdict; ``reason`` is nonempty, at most 4096
    characters, without control characters."""

    state: ClassVar[AttemptState] = AttemptState.CENSORED
    reason: str = attrs.field()

    def __attrs_post_init__(self) -> None:
        check_text(self.reason, "reason", MAX_REASON_LENGTH)


@attrs.frozen(kw_only=True)
class Superseded:
    """Another attempt won (or already holds) the slot's success."""

    state: ClassVar[AttemptState] = AttemptState.SUPERSEDED


@attrs.frozen(kw_only=True)
class Failed:
    """The attempt failed with a stable ``code`` and a diagnostic JSON object."""

    state: ClassVar[AttemptState] = AttemptState.FAILED
    code: str = attrs.field(validator=text)
    _details: bytes = attrs.field(alias="details", converter=canonical_object_bytes, repr=False)

    @property
    def details(self) -> dict[str, JSON]:
        return decode_object(self._details)


TerminalOutcome: TypeAlias = Accepted | Censored | Superseded | Failed


# --- guards and receipts ---------------------------------------------------------------


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
