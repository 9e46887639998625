"""What callers hand the writer (and the model): lease requests, retry authorizations,
terminal outcomes and the references that name an attempt's or an observation's artifacts.

Rules of this file: value layer; validated frozen values only (no I/O, no SQLite, no clock).
Each class validates at construction, so code that holds one can trust it. What the writer
hands back (the ``OwnedAttempt`` guard and the receipts) lives in :mod:`runstore.receipts`.
"""

from __future__ import annotations

from typing import Any
from typing import ClassVar
from typing import Final
from typing import TypeAlias

import attrs
from runstore.canonical import JSON
from runstore.canonical import decode_trusted_object
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.errors import InvalidRecordError
from runstore.validation import MAX_REASON_LENGTH
from runstore.validation import boolean
from runstore.validation import canonical_object_bytes
from runstore.validation import check_text
from runstore.validation import index
from runstore.validation import ns
from runstore.validation import text


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
        return decode_trusted_object(self._details)


TerminalOutcome: TypeAlias = Accepted | Censored | Superseded | Failed


FINAL_ROLE: Final = "final"
"""The role name reserved for the final artifact; references may not use it."""

LEASED_ROOT_ROLE: Final = "leased_root"
"""The reference role under which a recovered failure retains its leases' artifact roots."""


def _str(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        kind = type(value).__name__
        raise InvalidRecordError(f"a reference's {attribute.name} must be a str, not {kind}")


def _role(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _str(instance, attribute, value)
    if not value or value == FINAL_ROLE:
        raise InvalidRecordError("reference roles must be nonempty and not 'final'")


@attrs.frozen(order=True)
class Reference:
    """One ``(role, artifact_id)`` reference of an observation or a terminal commit (SPEC.md
    section 6): ``role`` is a nonempty str other than ``final``, ``artifact_id`` a str
    (``invalid_record`` otherwise). Whether the artifact is registered is the writer's
    check (``unknown_artifact``), and a repeated reference in one list is
    :func:`runstore.shapes.references_refusal`'s. Hashable, and ordered as the pair
    ``(role, artifact_id)``, which is the order payloads and documents list references in.
    """

    role: str = attrs.field(validator=_role)
    artifact_id: str = attrs.field(validator=_str)

    @property
    def pair(self) -> tuple[str, str]:
        """``(role, artifact_id)``: the reference as the store's rows and payloads hold it."""
        return (self.role, self.artifact_id)


INTERRUPTED_ATTEMPT: Final = "interrupted_attempt"
"""The failure code recovery commits for an attempt without an importable outcome."""


def interrupted_outcome(cause: str, interrupted_state: AttemptState) -> Failed:
    """The outcome recovery commits: ``Failed(code="interrupted_attempt")`` whose details
    name the cause (a :func:`runstore.rules.recovery_cause`) and the state the attempt was
    interrupted in."""
    details: dict[str, JSON] = {"cause": cause, "interrupted_state": interrupted_state.value}
    return Failed(code=INTERRUPTED_ATTEMPT, details=details)


def interrupted_claims(outcome: TerminalOutcome) -> tuple[str, AttemptState] | None:
    """``(cause, interrupted_state)`` when ``outcome`` is exactly the shape
    :func:`interrupted_outcome` builds (code ``interrupted_attempt``, details with exactly a
    string ``cause`` and a nonterminal ``interrupted_state``), else None. Recovery reads
    its own published failures back with this (SPEC.md section 14)."""
    if not isinstance(outcome, Failed) or outcome.code != INTERRUPTED_ATTEMPT:
        return None
    details = outcome.details
    cause, state = details.get("cause"), details.get("interrupted_state")
    if set(details) != {"cause", "interrupted_state"} or type(cause) is not str:
        return None
    if type(state) is not str:
        return None
    try:
        interrupted = AttemptState(state)
    except ValueError:
        return None
    if interrupted in TERMINAL_STATES:
        return None
    return cause, interrupted
