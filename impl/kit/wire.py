"""The driver protocol's value forms (SPEC.md section 18.1, "Values on the wire"): this
package's values to and from the JSON a request or response carries.

Rules of this file: pure functions, no I/O. ``*_wire`` functions write a value's form and
``*_of`` functions read one back, refusing a malformed form with the ``RunStoreError`` a
store would raise for that field (``invalid_record``; the store's own checks run after,
so an out-of-range time reaches them as the integer it is). Value descriptions are the
vector files' (``vectors/README.md``, "Value descriptions").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.errors import InvalidRecordError
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration
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

_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|NaN|-?Infinity")

PROTOCOL = 1
"""The protocol version this package speaks (SPEC.md section 18.1, ``hello``)."""


# --- value descriptions --------------------------------------------------------------------


def describe(value: object) -> list[Any]:
    """The description of a Python value, JSON or not (a float, a lone surrogate)."""
    if value is None:
        return ["null"]
    if type(value) is bool:
        return ["bool", value]
    if type(value) is int:
        return ["int", str(value)]
    if type(value) is float:
        special = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
        return ["float", special.get(repr(value), repr(value))]
    if type(value) is str:
        if any(0xD800 <= ord(char) <= 0xDFFF for char in value):
            return ["string_code_points", [ord(char) for char in value]]
        return ["string", value.encode("utf-8").hex()]
    if type(value) is list:
        return ["array", *(describe(item) for item in value)]
    if type(value) is dict:
        return ["object", *([describe(key), describe(item)] for key, item in value.items())]
    raise TypeError(f"no description for {type(value).__name__}")


def value_of(description: object) -> Any:
    """The Python value ``description`` denotes. Its shape is checked before its value: a
    malformed description (not a tagged array, an unknown tag or arity, string bytes that
    are not UTF-8, a code point outside 0..0x10FFFF, a float literal that is not one, a
    repeated object key) is ``invalid_record`` (SPEC.md section 18.1), even where the value
    would also be one canonical JSON refuses. An object key may be any described value (a
    refused encoding's integer key); an unhashable one becomes a tuple, which encoding
    refuses as a key all the same."""
    if not isinstance(description, list) or not description or not isinstance(description[0], str):
        raise InvalidRecordError("a value description is a nonempty array with a tag first")
    tag, *rest = description
    if tag == "null" and not rest:
        return None
    if tag == "bool" and len(rest) == 1 and type(rest[0]) is bool:
        return rest[0]
    if tag == "int" and len(rest) == 1:
        return integer(rest[0], "int")
    if tag == "string" and len(rest) == 1:
        try:
            return hex_bytes(rest[0], "string").decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordError("a string description's bytes are not UTF-8") from None
    if tag == "string_code_points" and len(rest) == 1 and isinstance(rest[0], list):
        points = rest[0]
        if all(type(p) is int and 0 <= p <= 0x10FFFF for p in points):
            return "".join(map(chr, points))
    if tag == "float" and len(rest) == 1 and isinstance(rest[0], str) and _FLOAT.fullmatch(rest[0]):
        return float(rest[0])
    if tag == "array":
        return [value_of(item) for item in rest]
    if tag == "object" and all(isinstance(m, list) and len(m) == 2 for m in rest):
        members: dict[Any, Any] = {}
        seen: set[tuple[str, Any]] = set()
        for key_description, item in rest:
            key = value_of(key_description)
            if isinstance(key, list | dict):
                key = tuple(repr(key))
            if (type(key).__name__, key) in seen:
                raise InvalidRecordError("an object description repeats a key")
            seen.add((type(key).__name__, key))
            members[key] = value_of(item)
        return members
    raise InvalidRecordError(f"malformed value description {str(description)[:60]}")


def same(left: object, right: object) -> bool:
    """JSON equality: ``true`` is not ``1``, and object key order does not matter."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


# --- scalars -------------------------------------------------------------------------------


def integer(text: object, field: str) -> int:
    """A decimal string (any sign and size) as an int; else ``invalid_record``."""
    if not isinstance(text, str) or _INTEGER.fullmatch(text) is None or len(text) > 40:
        raise InvalidRecordError(f"{field} must be a decimal string, got {str(text)[:40]}")
    return int(text)


def hex_bytes(text: object, field: str) -> bytes:
    """Lowercase hex as bytes; else ``invalid_record``."""
    if not isinstance(text, str) or re.fullmatch(r"(?:[0-9a-f]{2})*", text) is None:
        raise InvalidRecordError(f"{field} must be lowercase hex")
    return bytes.fromhex(text)


def member(document: object, key: str) -> Any:
    """``document[key]`` of a JSON object; a missing key or a non-object is
    ``invalid_record``."""
    if not isinstance(document, dict) or key not in document:
        raise InvalidRecordError(f"missing field {key!r}")
    return document[key]


# --- requests ------------------------------------------------------------------------------


def guard_wire(guard: OwnedAttempt) -> dict[str, Any]:
    """The whole guard, owner token and lease ids included (SPEC.md section 18.1)."""
    return {
        "attempt_id": guard.attempt_id,
        "slot_id": guard.slot_id,
        "retry_index": str(guard.retry_index),
        "state": guard.state.value,
        "revision": str(guard.revision),
        "owner_token": guard.owner_token,
        "lease_id": guard.lease_id,
        "claim_lease_id": guard.claim_lease_id,
    }


def guard_of(document: object) -> OwnedAttempt:
    state = member(document, "state")
    if state not in {s.value for s in AttemptState}:
        raise InvalidRecordError(f"unknown attempt state {str(state)[:40]}")
    return OwnedAttempt(
        attempt_id=member(document, "attempt_id"),
        slot_id=member(document, "slot_id"),
        retry_index=integer(member(document, "retry_index"), "retry_index"),
        state=AttemptState(state),
        revision=integer(member(document, "revision"), "revision"),
        owner_token=member(document, "owner_token"),
        lease_id=member(document, "lease_id"),
        claim_lease_id=member(document, "claim_lease_id"),
    )


def lease_wire(lease: LeaseRequest) -> dict[str, Any]:
    return {
        "lease_id": lease.lease_id,
        "owner_token": lease.owner_token,
        "expires_at_ns": str(lease.expires_at_ns),
    }


def lease_of(document: object) -> LeaseRequest:
    return LeaseRequest(
        lease_id=member(document, "lease_id"),
        owner_token=member(document, "owner_token"),
        expires_at_ns=integer(member(document, "expires_at_ns"), "expires_at_ns"),
    )


def authorization_wire(authorization: RetryAuthorization) -> dict[str, Any]:
    if isinstance(authorization, FirstAttempt):
        return {"kind": "first_attempt"}
    if isinstance(authorization, Next):
        return {"kind": "next", "retry": authorization.retry}
    return {
        "kind": "retry",
        "next_index": authorization.next_index,
        "max_index": authorization.max_index,
    }


def authorization_of(document: object) -> RetryAuthorization:
    kind = member(document, "kind")
    if kind == "first_attempt":
        return FirstAttempt()
    if kind == "next":
        return Next(retry=member(document, "retry"))
    if kind == "retry":
        return Retry(
            next_index=member(document, "next_index"), max_index=member(document, "max_index")
        )
    raise InvalidRecordError(f"unknown authorization kind {str(kind)[:40]}")


def outcome_wire(outcome: TerminalOutcome) -> dict[str, Any]:
    if isinstance(outcome, Failed):
        return {"state": "failed", "code": outcome.code, "details": outcome.details}
    if isinstance(outcome, Censored):
        return {"state": "censored", "reason": outcome.reason}
    if isinstance(outcome, Superseded):
        return {"state": "superseded"}
    return {"state": "accepted"}


def outcome_of(document: object) -> TerminalOutcome:
    state = member(document, "state")
    if state == "failed":
        return Failed(code=member(document, "code"), details=member(document, "details"))
    if state == "censored":
        return Censored(reason=member(document, "reason"))
    if state == "superseded":
        return Superseded()
    if state == "accepted":
        return Accepted()
    raise InvalidRecordError(f"unknown outcome state {str(state)[:40]}")


def references_wire(references: Sequence[Reference]) -> list[list[str]]:
    return [[r.role, r.artifact_id] for r in references]


def references_of(document: object) -> list[Reference]:
    if not isinstance(document, list) or not all(
        isinstance(pair, list) and len(pair) == 2 for pair in document
    ):
        raise InvalidRecordError("references must be an array of [role, artifact_id] pairs")
    return [Reference(role, artifact_id) for role, artifact_id in document]


def artifact_of(document: object) -> ArtifactRegistration:
    if not isinstance(document, dict):
        raise InvalidRecordError("an artifact must be an object")
    return ArtifactRegistration.from_json(document)


def kind_of(text: object) -> ArtifactKind:
    if text not in {k.value for k in ArtifactKind}:
        raise InvalidRecordError(f"unknown artifact kind {str(text)[:40]}")
    return ArtifactKind(text)


def clock_wire(samples: Sequence[int]) -> list[str]:
    return [str(sample) for sample in samples]


def clock_of(document: object) -> tuple[int, ...]:
    """A clock's readings (SPEC.md section 18.3: past the last, 1 ns apart)."""
    if not isinstance(document, list) or not document:
        raise InvalidRecordError("a clock must be a nonempty array of decimal strings")
    return tuple(integer(sample, "clock") for sample in document)
