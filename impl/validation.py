"""Field checks shared by the records, requests and guards.

Rules of this file: pure functions; each check returns its value or refuses with a typed error
that names the field (``invalid_record`` for a wrong type or shape, ``out_of_range`` for an
integer outside its range). The attrs validators at the end are thin adapters over the checks.
"""

from __future__ import annotations

import enum
import re
from typing import Any
from typing import Final
from typing import TypeVar

import attrs
from runstore.canonical import JSON
from runstore.canonical import MAX_NS
from runstore.canonical import decode_object
from runstore.canonical import encode
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.identity import check_index
from runstore.identity import check_typed_id

_E = TypeVar("_E", bound=enum.Enum)

MAX_NAME_LENGTH: Final = 256
"""Longest plain string field (ids supplied by callers, tokens, codes), in code points."""

MAX_REASON_LENGTH: Final = 4096
"""Longest censoring reason, in code points."""


def is_control(char: str) -> bool:
    """C0 and C1 controls and DEL (Unicode category Cc), and lone surrogates (never valid in
    UTF-8). Spelled as ranges so the rule does not move with Python's Unicode database."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF


_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""The characters :func:`is_control` accepts, as one class: scanning a whole string with it
costs one C call instead of a Python call per character."""


def has_control(value: str) -> bool:
    """Whether any character of ``value`` is a control character or lone surrogate
    (:func:`is_control`)."""
    return _CONTROL.search(value) is not None


def check_text(value: object, field: str, max_length: int = MAX_NAME_LENGTH) -> str:
    """A nonempty string of at most ``max_length`` code points with no control characters
    and no lone surrogates."""
    if type(value) is not str:
        raise InvalidRecordError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidRecordError(f"{field} must be nonempty")
    if len(value) > max_length:
        raise InvalidRecordError(f"{field} is longer than {max_length} characters")
    if has_control(value):
        raise InvalidRecordError(f"{field} contains a control character or lone surrogate")
    return value


def check_optional_text(value: object, field: str) -> str | None:
    return None if value is None else check_text(value, field)


def check_bool(value: object, field: str) -> bool:
    if type(value) is not bool:
        raise InvalidRecordError(f"{field} must be a bool, got {type(value).__name__}")
    return value


def check_ns(value: object, field: str) -> int:
    if type(value) is not int:
        raise InvalidRecordError(f"{field} must be an integer, got {type(value).__name__}")
    if not 0 <= value <= MAX_NS:
        raise OutOfRangeError(f"{field} {value} outside 0..2**63-1")
    return value


def check_enum(value: object, kind: type[_E], field: str) -> _E:
    if not isinstance(value, kind):
        raise InvalidRecordError(f"{field} must be a {kind.__name__}, got {value!r:.80}")
    return value


_LOWER_HEX: Final = frozenset("0123456789abcdef")


def check_digest(value: object, field: str) -> str:
    if type(value) is not str or len(value) != 64 or not _LOWER_HEX.issuperset(value):
        raise InvalidRecordError(f"{field} must be 64 lowercase hex characters")
    return value


def canonical_object_bytes(value: dict[str, JSON] | bytes) -> bytes:
    """Converter for JSON-object fields: validate, detach from the caller, keep the bytes.

    Takes a dict, or the canonical bytes of one (what the record stores, so ``attrs.evolve``
    works); non-canonical bytes are refused by :func:`decode_object`.
    """
    if type(value) is bytes:
        decode_object(value)
        return value
    if type(value) is not dict:
        raise InvalidRecordError(f"expected a JSON object, got {type(value).__name__}")
    return encode(value)


def check_store_path(path: object, field: str = "path") -> str:
    """Return ``path`` if it is a normalized store-relative POSIX path.

    Refuses with ``invalid_record``: a non-string, the empty string, a leading or trailing
    ``/``, an empty segment (``//``), a ``.`` or ``..`` segment, a backslash, NUL or any other
    control character.
    """
    if type(path) is not str or not path:
        raise InvalidRecordError(f"{field} must be a nonempty string")
    if "\\" in path or has_control(path):
        raise InvalidRecordError(f"{field} contains a backslash or control character")
    if any(segment in ("", ".", "..") for segment in path.split("/")):
        raise InvalidRecordError(f"{field} {path!r:.80} is not a normalized relative path")
    return path


# attrs validators: thin adapters over the checks above.


def text(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_text(value, attribute.name)


def optional_text(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_optional_text(value, attribute.name)


def boolean(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_bool(value, attribute.name)


def index(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_index(value, attribute.name)


def ns(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_ns(value, attribute.name)


def typed_id(prefix: str) -> Any:
    def validate(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check_typed_id(value, prefix, attribute.name)

    return validate


def member(kind: type[enum.Enum]) -> Any:
    def validate(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check_enum(value, kind, attribute.name)

    return validate
