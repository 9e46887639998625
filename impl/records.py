"""Domain records: the identified, immutable facts the store registers.

Rules of this file: value layer; values only (no I/O, no SQLite, no clock). Every class validates at
construction, so code that holds one can trust it; a refusal is a typed
:class:`~runstore.errors.RunStoreError` (``invalid_record``, ``out_of_range``,
``invalid_canonical_json``, ``identity_mismatch``). Field names and JSON documents are
normative (SPEC.md section 4).

Identified records (:class:`ApplicabilityDecision`, :class:`ResolvedRun`, :class:`AttemptSlot`,
:class:`ObservationSlot`, :class:`Observation`) compute ``.id`` from their identity document
(see :mod:`runstore.identity`). ``to_json()`` is that document plus ``"id"``; it is what
``record_json`` stores. ``from_json(doc)`` rebuilds the record, recomputes the id and refuses a
differing ``"id"`` with ``identity_mismatch``.

JSON-object fields (``evidence``, ``specification``, ``result``, ``details``) are passed as
dicts, validated, and kept as their canonical bytes, so a record stays immutable and
hashable; the attribute returns a fresh decoded copy on every access (parsed without
re-checking: the bytes were canonical when the record took them).
"""

from __future__ import annotations

import abc
import enum
from typing import Any
from typing import ClassVar
from typing import Self
from typing import cast

import attrs
from attrs import AttrsInstance
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.canonical import decode_trusted_object
from runstore.canonical import encode
from runstore.canonical import ns_from_json
from runstore.enums import ArtifactKind
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import ObservationSlotKind
from runstore.enums import SlotRole
from runstore.errors import IdentityMismatchError
from runstore.errors import InvalidRecordError
from runstore.identity import ATTEMPT
from runstore.identity import ATTEMPT_SLOT
from runstore.identity import DECISION
from runstore.identity import OBSERVATION
from runstore.identity import OBSERVATION_SLOT
from runstore.identity import RUN
from runstore.identity import check_index
from runstore.identity import typed_identity
from runstore.identity import typed_identity_of_checked
from runstore.validation import boolean
from runstore.validation import canonical_object_bytes
from runstore.validation import check_digest
from runstore.validation import check_store_path
from runstore.validation import member
from runstore.validation import ns
from runstore.validation import text
from runstore.validation import typed_id

__all__ = [
    "ApplicabilityDecision",
    "ArtifactRegistration",
    "AttemptSlot",
    "Observation",
    "ObservationSlot",
    "ResolvedRun",
]


class _Identified(abc.ABC):
    """Shared identity behaviour. Subclasses set ``PREFIX``, implement ``identity_document``
    and, when a field needs converting, override ``_fields_from_document``.

    The id is a pure function of the record's (immutable) fields, so it is computed on first
    access and kept in the ``_identity`` slot. The slot is no attrs field: equality, hashing,
    ``repr`` and ``attrs.fields`` see only the identity fields, and a copy or unpickled
    record (whose slot is unset) computes its id again on first access."""

    __slots__ = ("_identity",)
    _identity: str
    PREFIX: ClassVar[str]

    @abc.abstractmethod
    def identity_document(self) -> dict[str, JSON]:
        """The JSON object of the identity fields (every field of the record)."""

    @classmethod
    def _fields_from_document(cls, doc: dict[str, JSON]) -> dict[str, Any]:
        """The constructor keywords read back from a stored identity document; records
        with enum fields override this to convert them."""
        return dict(doc)

    @property
    def id(self) -> str:
        """The typed id ``<PREFIX>:v1:<sha256>`` computed from :meth:`identity_document`."""
        try:
            return self._identity
        except AttributeError:
            # This module's own classes build their documents from validated fields, so
            # the C encoder writes them; a subclass's document is checked node by node.
            identify = typed_identity_of_checked if type(self) in _EXACT else typed_identity
            identity = identify(self.PREFIX, self.identity_document())
            # The record is frozen; its one cache slot is written once, bypassing attrs.
            object.__setattr__(self, "_identity", identity)
            return identity

    def to_json(self) -> dict[str, JSON]:
        """The canonical record document stored in ``record_json``: identity fields plus id."""
        return {**self.identity_document(), "id": self.id}

    def to_bytes(self) -> bytes:
        """``encode(self.to_json())``: the exact ``record_json`` text, as UTF-8."""
        return encode(self.to_json())

    @classmethod
    def from_json(cls, doc: object) -> Self:
        """Rebuild a record from its document and check its identity.

        Refuses with ``invalid_record`` a non-object, a missing or unknown key, or a field
        that fails validation; with ``identity_mismatch`` an ``"id"`` that differs from the
        recomputed one.
        """
        if type(doc) is not dict:
            raise InvalidRecordError(f"{cls.__name__} document must be a JSON object")
        body = {key: value for key, value in doc.items() if key != "id"}
        expected = {field.alias for field in attrs.fields(cast("type[AttrsInstance]", cls))}
        if set(body) != expected or "id" not in doc:
            missing = sorted(expected - set(body)) + ([] if "id" in doc else ["id"])
            unknown = sorted(str(key) for key in set(body) - expected)
            raise InvalidRecordError(
                f"{cls.__name__} document keys: missing {missing}, unknown {unknown}"
            )
        record = cls(**cls._fields_from_document(body))
        if doc["id"] != record.id:
            raise IdentityMismatchError(
                f"{cls.__name__} document id {doc['id']!r:.100} is not the recomputed {record.id}"
            )
        return record

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Decode canonical ``record_json`` bytes (refusing non-canonical input) and
        :meth:`from_json` them."""
        return cls.from_json(decode_object(data))


def _enum_from(doc: dict[str, JSON], key: str, kind: type[enum.Enum]) -> object:
    """Map a document string to its enum member; leave anything else for the validator."""
    value = doc[key]
    try:
        return kind(value)
    except (ValueError, TypeError):
        raise InvalidRecordError(f"{key} {value!r:.80} is not a {kind.__name__}") from None


@attrs.frozen(kw_only=True)
class ApplicabilityDecision(_Identified):
    """Whether a candidate applies to a problem, with its full evidence. Exclusions
    (``applicable=False``) are recorded too; only applicable decisions can be resolved."""

    PREFIX: ClassVar[str] = DECISION

    candidate_id: str = attrs.field(validator=text)
    problem_id: str = attrs.field(validator=text)
    applicable: bool = attrs.field(validator=boolean)
    _evidence: bytes = attrs.field(alias="evidence", converter=canonical_object_bytes, repr=False)

    @property
    def evidence(self) -> dict[str, JSON]:
        return decode_trusted_object(self._evidence)

    def identity_document(self) -> dict[str, JSON]:
        return {
            "applicable": self.applicable,
            "candidate_id": self.candidate_id,
            "evidence": self.evidence,
            "problem_id": self.problem_id,
        }


@attrs.frozen(kw_only=True)
class ResolvedRun(_Identified):
    """A resolved run specification for a candidate. Only its own fields are checked here;
    that ``decision_id`` names an applicable decision for the same candidate is the
    writer's (and the schema's) job."""

    PREFIX: ClassVar[str] = RUN

    decision_id: str = attrs.field(validator=typed_id(DECISION))
    candidate_id: str = attrs.field(validator=text)
    logical_spec_id: str = attrs.field(validator=text)
    _specification: bytes = attrs.field(
        alias="specification", converter=canonical_object_bytes, repr=False
    )

    @property
    def specification(self) -> dict[str, JSON]:
        return decode_trusted_object(self._specification)

    def identity_document(self) -> dict[str, JSON]:
        return {
            "candidate_id": self.candidate_id,
            "decision_id": self.decision_id,
            "logical_spec_id": self.logical_spec_id,
            "specification": self.specification,
        }


@attrs.frozen(kw_only=True)
class AttemptSlot(_Identified):
    """An execution slot of a run: what one accepted attempt must satisfy."""

    PREFIX: ClassVar[str] = ATTEMPT_SLOT

    run_id: str = attrs.field(validator=typed_id(RUN))
    logical_slot: str = attrs.field(validator=text)
    execution_kind: ExecutionKind = attrs.field(validator=member(ExecutionKind))
    role: SlotRole = attrs.field(validator=member(SlotRole))
    _specification: bytes = attrs.field(
        alias="specification", converter=canonical_object_bytes, repr=False
    )

    @property
    def specification(self) -> dict[str, JSON]:
        return decode_trusted_object(self._specification)

    def identity_document(self) -> dict[str, JSON]:
        return {
            "execution_kind": self.execution_kind.value,
            "logical_slot": self.logical_slot,
            "role": self.role.value,
            "run_id": self.run_id,
            "specification": self.specification,
        }

    @classmethod
    def _fields_from_document(cls, doc: dict[str, JSON]) -> dict[str, Any]:
        return {
            **doc,
            "execution_kind": _enum_from(doc, "execution_kind", ExecutionKind),
            "role": _enum_from(doc, "role", SlotRole),
        }


def _checkpoint_index(instance: ObservationSlot, _: object, value: int | None) -> None:
    if instance.kind is ObservationSlotKind.RESULT:
        if value is not None:
            raise InvalidRecordError("checkpoint_index must be None for a result slot")
    else:
        check_index(value, "checkpoint_index")


@attrs.frozen(kw_only=True)
class ObservationSlot(_Identified):
    """An observation slot of a run, owned by one attempt slot. ``checkpoint_index`` is None
    exactly for a result slot."""

    PREFIX: ClassVar[str] = OBSERVATION_SLOT

    run_id: str = attrs.field(validator=typed_id(RUN))
    logical_slot: str = attrs.field(validator=text)
    kind: ObservationSlotKind = attrs.field(validator=member(ObservationSlotKind))
    checkpoint_index: int | None = attrs.field(validator=_checkpoint_index)
    attempt_slot_id: str = attrs.field(validator=typed_id(ATTEMPT_SLOT))

    def identity_document(self) -> dict[str, JSON]:
        return {
            "attempt_slot_id": self.attempt_slot_id,
            "checkpoint_index": self.checkpoint_index,
            "kind": self.kind.value,
            "logical_slot": self.logical_slot,
            "run_id": self.run_id,
        }

    @classmethod
    def _fields_from_document(cls, doc: dict[str, JSON]) -> dict[str, Any]:
        return {**doc, "kind": _enum_from(doc, "kind", ObservationSlotKind)}


@attrs.frozen(kw_only=True)
class Observation(_Identified):
    """A published result or checkpoint of an attempt for one observation slot. Validity and
    completion are separate: a valid ``not_reached`` observation can be selected."""

    PREFIX: ClassVar[str] = OBSERVATION

    slot_id: str = attrs.field(validator=typed_id(OBSERVATION_SLOT))
    attempt_id: str = attrs.field(validator=typed_id(ATTEMPT))
    valid: bool = attrs.field(validator=boolean)
    completion: Completion = attrs.field(validator=member(Completion))
    _result: bytes = attrs.field(alias="result", converter=canonical_object_bytes, repr=False)

    @property
    def result(self) -> dict[str, JSON]:
        return decode_trusted_object(self._result)

    def identity_document(self) -> dict[str, JSON]:
        return {
            "attempt_id": self.attempt_id,
            "completion": self.completion.value,
            "result": self.result,
            "slot_id": self.slot_id,
            "valid": self.valid,
        }

    @classmethod
    def _fields_from_document(cls, doc: dict[str, JSON]) -> dict[str, Any]:
        return {**doc, "completion": _enum_from(doc, "completion", Completion)}


_EXACT: frozenset[type[_Identified]] = frozenset(
    {ApplicabilityDecision, ResolvedRun, AttemptSlot, ObservationSlot, Observation}
)
"""The identified records whose identity documents hold only validated fields."""


# --- artifacts -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ArtifactRegistration:
    """A verified, published artifact directory. Its id is
    ``run-store-v1:<kind>-<content_sha256>`` and its path must be exactly
    ``artifacts/<kind>-<content_sha256>`` (``invalid_record`` otherwise)."""

    kind: ArtifactKind = attrs.field(validator=member(ArtifactKind))
    path: str = attrs.field()
    content_sha256: str = attrs.field()
    manifest_sha256: str = attrs.field()
    verified_at_ns: int = attrs.field(validator=ns)

    def __attrs_post_init__(self) -> None:
        check_digest(self.content_sha256, "content_sha256")
        check_digest(self.manifest_sha256, "manifest_sha256")
        check_store_path(self.path)
        expected = f"artifacts/{self.kind.value}-{self.content_sha256}"
        if self.path != expected:
            raise InvalidRecordError(f"path {self.path!r:.100} must be {expected!r}")

    @property
    def id(self) -> str:
        return f"run-store-v1:{self.kind.value}-{self.content_sha256}"

    def indexed_columns(self) -> tuple[str, str, str, str]:
        """``(kind, path, content_sha256, manifest_sha256)``: what registering the same id
        again must match exactly (``verified_at_ns`` may differ; the first one stays)."""
        return (self.kind.value, self.path, self.content_sha256, self.manifest_sha256)

    def to_json(self) -> dict[str, JSON]:
        """Document form; ``verified_at_ns`` is a decimal string (it may exceed 2**53-1)."""
        return {
            "content_sha256": self.content_sha256,
            "id": self.id,
            "kind": self.kind.value,
            "manifest_sha256": self.manifest_sha256,
            "path": self.path,
            "verified_at_ns": str(self.verified_at_ns),
        }

    @classmethod
    def from_json(cls, doc: object) -> ArtifactRegistration:
        """Inverse of :meth:`to_json`; refuses a differing ``"id"`` with
        ``identity_mismatch`` and other defects with ``invalid_record``/``out_of_range``."""
        keys = {"content_sha256", "id", "kind", "manifest_sha256", "path", "verified_at_ns"}
        if type(doc) is not dict or set(doc) != keys:
            raise InvalidRecordError(f"artifact document must have exactly the keys {sorted(keys)}")
        verified = doc["verified_at_ns"]
        if type(verified) is not str:
            raise InvalidRecordError("verified_at_ns must be a decimal string")
        record = cls(
            kind=_enum_from(doc, "kind", ArtifactKind),  # type: ignore[arg-type]
            path=doc["path"],
            content_sha256=doc["content_sha256"],
            manifest_sha256=doc["manifest_sha256"],
            verified_at_ns=ns_from_json(verified),
        )
        if doc["id"] != record.id:
            raise IdentityMismatchError(f"artifact id {doc['id']!r:.100} is not {record.id}")
        return record
