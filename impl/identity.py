"""Typed identities: how a record's canonical document becomes its ``<prefix>:v1:<sha256>`` id.

Rules of this file: pure functions only; imports :mod:`runstore.canonical` and
:mod:`runstore.errors`, nothing else from the package. The hashed bytes are normative
(SPEC.md section 3) and pinned by conformance vectors.

A record of type ``prefix`` with identity document ``body`` (a JSON object holding exactly the
record's identity fields) has the id::

    prefix + ":v1:" + sha256(encode({"record": body, "type": prefix, "version": 1})).hexdigest()

``encode`` is canonical JSON, so the hashed bytes are
``{"record":<body>,"type":"<prefix>","version":1}``. Carrying the prefix and version inside
the hashed bytes separates the domains: two record types (or versions) never share an input
even when their bodies coincide.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Final

from runstore.canonical import JSON
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import encode
from runstore.canonical import encode_checked_types
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError

IDENTITY_VERSION: Final = 1

DECISION: Final = "decision"
RUN: Final = "run"
ATTEMPT_SLOT: Final = "attempt-slot"
OBSERVATION_SLOT: Final = "observation-slot"
ATTEMPT: Final = "attempt"
OBSERVATION: Final = "observation"

PREFIXES: Final = frozenset({DECISION, RUN, ATTEMPT_SLOT, OBSERVATION_SLOT, ATTEMPT, OBSERVATION})

_DIGEST = re.compile("[0-9a-f]{64}")

ATTEMPT_ID_CACHE_SIZE: Final = 4096
"""How many attempt ids :func:`run_attempt_id` keeps (least recently used first out)."""


def identity_input(prefix: str, body: dict[str, JSON]) -> bytes:
    """Return the exact bytes hashed for a ``prefix`` record with identity document ``body``.

    Refuses an unknown prefix with ``invalid_record``; ``body`` must be canonical-encodable
    (``invalid_canonical_json`` / ``out_of_range`` otherwise).
    """
    if prefix not in PREFIXES:
        raise InvalidRecordError(f"unknown identity prefix {prefix!r}")
    return encode({"record": body, "type": prefix, "version": IDENTITY_VERSION})


def typed_identity(prefix: str, body: dict[str, JSON]) -> str:
    """Return the typed id ``<prefix>:v1:<64 lowercase hex>`` of a record document."""
    digest = hashlib.sha256(identity_input(prefix, body)).hexdigest()
    return f"{prefix}:v{IDENTITY_VERSION}:{digest}"


def typed_identity_of_checked(prefix: str, body: dict[str, JSON]) -> str:
    """:func:`typed_identity` of a body whose every node already has an exact JSON type (a
    record's identity document built from its validated fields): the same id, the body
    written by :func:`~runstore.canonical.encode_checked_types` instead of checked node by
    node again."""
    if prefix not in PREFIXES:
        raise InvalidRecordError(f"unknown identity prefix {prefix!r}")
    document: dict[str, JSON] = {"record": body, "type": prefix, "version": IDENTITY_VERSION}
    digest = hashlib.sha256(encode_checked_types(document)).hexdigest()
    return f"{prefix}:v{IDENTITY_VERSION}:{digest}"


def is_typed_id(value: object, prefix: str) -> bool:
    """Tell whether ``value`` has the shape of a version-1 typed id with this prefix.

    post: not __return__ or (isinstance(value, str) and value.startswith(prefix + ":v1:"))
    post: not __return__ or len(value) == len(prefix) + 68
    post: not __return__ or set(value[len(prefix) + 4 :]) <= set("0123456789abcdef")
    """
    if type(value) is not str:
        return False
    head = f"{prefix}:v{IDENTITY_VERSION}:"
    return value.startswith(head) and _DIGEST.fullmatch(value, len(head)) is not None


def check_typed_id(value: object, prefix: str, field: str) -> str:
    """Return ``value`` if it is a typed id with this prefix; else refuse with
    ``invalid_record`` naming ``field``."""
    if not is_typed_id(value, prefix):
        raise InvalidRecordError(f"{field} must be a {prefix}:v1:<sha256> id, got {value!r:.80}")
    assert isinstance(value, str)
    return value


def check_index(value: object, field: str) -> int:
    """Return ``value`` if it is an ``int`` (not ``bool``) in 0..2**53-1.

    Refuses a non-integer with ``invalid_record`` and a value outside the range with
    ``out_of_range``.
    """
    if type(value) is not int:
        raise InvalidRecordError(f"{field} must be an integer, got {type(value).__name__}")
    if not 0 <= value <= MAX_SAFE_INTEGER:
        raise OutOfRangeError(f"{field} {value} outside 0..2**53-1")
    return value


def attempt_identity_document(slot_id: str, retry_index: int) -> dict[str, JSON]:
    """Return the identity document of the attempt ``retry_index`` of attempt slot ``slot_id``."""
    return {
        "retry_index": check_index(retry_index, "retry_index"),
        "slot_id": check_typed_id(slot_id, ATTEMPT_SLOT, "slot_id"),
    }


def run_attempt_id(slot_id: str, retry_index: int) -> str:
    """Return the deterministic id of attempt ``retry_index`` of attempt slot ``slot_id``.

    Depends on nothing else (no clock, no owner), so a reservation, a terminal outcome and a
    recovery pass all derive the same id. Refuses a malformed ``slot_id`` or a non-integer
    ``retry_index`` (of any type, an unhashable one included) with ``invalid_record`` and an
    index outside 0..2**53-1 with ``out_of_range``.

    Being pure, it is memoized: every guard and receipt of an attempt checks its id against
    this function, so one lifecycle asks for the same id about ten times. Only an exact
    ``str`` and an exact ``int`` reach the cache: anything else is refused by the checks,
    so ``True`` never shares ``1``'s entry, an unhashable argument never reaches the cache's
    hashing (a ``TypeError``), and a refusal is never cached.
    """
    if type(slot_id) is str and type(retry_index) is int:
        return _cached_attempt_id(slot_id, retry_index)
    return _attempt_id(slot_id, retry_index)


def _attempt_id(slot_id: str, retry_index: int) -> str:
    return typed_identity(ATTEMPT, attempt_identity_document(slot_id, retry_index))


_cached_attempt_id = functools.lru_cache(maxsize=ATTEMPT_ID_CACHE_SIZE)(_attempt_id)
