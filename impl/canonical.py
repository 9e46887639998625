"""Canonical JSON: the one byte encoding of every record, identity input and event payload.

Rules of this file: pure functions only (no I/O, no clock); imports nothing from the package
but :mod:`runstore.errors`. The rules here are normative (SPEC.md section 2 restates them) and
are pinned by conformance vectors, so a change to any byte this module produces is a
compatibility break.

The encoding of a value is unique:

* UTF-8, no byte-order mark, no whitespace outside strings;
* object keys are strings, sorted by Unicode code point (equivalently by their UTF-8 bytes),
  and never repeated;
* integers are plain decimal (``-`` only for negatives, no leading zeros, no ``-0``) within
  ``-(2**53-1) .. 2**53-1``; ``true``/``false``/``null`` are distinct from integers;
* no floats, exponents, NaN or infinities;
* strings escape exactly ``"`` and ``\\`` and U+0000..U+001F: the short forms ``\\b \\f \\n
  \\r \\t`` where JSON has them and ``\\u00xx`` (lowercase hex) for the other control
  characters; every other character, U+007F and U+2028/U+2029 included, is raw UTF-8; lone
  surrogates are refused;
* containers nest at most :data:`MAX_DEPTH` deep.

:func:`decode` is a canonical-only parser: it refuses any input that is not exactly
``encode`` of the value it denotes. Integers out of range are refused with
:class:`~runstore.errors.OutOfRangeError` (``out_of_range``); every other violation with
:class:`~runstore.errors.InvalidCanonicalJsonError` (``invalid_canonical_json``).
"""

from __future__ import annotations

import json
import re
from typing import TypeAlias

from runstore.errors import InvalidCanonicalJsonError
from runstore.errors import OutOfRangeError

JSON: TypeAlias = bool | int | str | list["JSON"] | dict[str, "JSON"] | None
"""A canonical JSON value. ``bool`` is a distinct JSON value, never an integer."""

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer magnitude canonical JSON carries (exactly representable as a double)."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects; the top-level container is depth 1."""

MAX_NS = 2**63 - 1
"""Largest nanosecond timestamp (SQLite's signed 64-bit INTEGER)."""

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_ESCAPE_TABLE: dict[int, str] = {
    **{code: f"\\u{code:04x}" for code in range(0x20)},
    **{ord(char): escape for char, escape in _SHORT_ESCAPES.items()},
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE_OR_SURROGATE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')
"""A character that needs an escape or is a lone surrogate: a string without one is its
own canonical body."""
_NS_DECIMAL = re.compile("0|[1-9][0-9]*")


def escape_string(text: str) -> str:
    """Return the canonical body of the JSON string literal for ``text`` (without quotes).

    Refuses a lone surrogate with ``invalid_canonical_json``.

    pre: not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    post: all(ord(c) >= 0x20 for c in __return__)
    post: (__return__ == text) == (not any(c in '"\\\\' or ord(c) < 0x20 for c in text))
    post: len(__return__) >= len(text)
    """
    if _ESCAPE_OR_SURROGATE.search(text) is None:
        return text  # the common case, decided by one scan
    if _SURROGATE.search(text) is not None:
        raise InvalidCanonicalJsonError("string contains a lone surrogate")
    return text.translate(_ESCAPE_TABLE)


def sorted_keys(keys: list[str]) -> list[str]:
    """Return object keys in canonical order: ascending Unicode code point, which for
    surrogate-free strings is also ascending UTF-8 byte order.

    post: all(__return__[i] <= __return__[i + 1] for i in range(len(__return__) - 1))
    post: len(__return__) == len(keys) and set(__return__) == set(keys)
    post: __return__ == sorted(keys, key=lambda k: k.encode("utf-8", "surrogatepass"))
    """
    return sorted(keys)


_C_ENCODER = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
)
"""The standard library's C encoder set up to write the canonical form of a value that has
only exact :data:`JSON` types, safe integers, string keys and no lone surrogates: keys
sorted by code point, no whitespace, raw UTF-8, and the same escapes as
:func:`escape_string` (``\\"``, ``\\\\``, the short forms, lowercase ``\\u00xx``).
``conformance/values/test_canonical.py`` compares it with :func:`encode` on generated values."""


def encode_built(value: JSON) -> bytes:
    """The canonical bytes of a value the store assembled itself from parts it already
    checked (an event payload, an attempt record, an outcome document, a manifest): the
    same bytes as :func:`encode`, without checking every node again. A lone surrogate still
    fails (``invalid_canonical_json``, raised by :func:`encode`). Never for a value a
    caller passed in."""
    try:
        return _C_ENCODER.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return encode(value)


def encode(value: JSON) -> bytes:
    """Return the canonical UTF-8 bytes of ``value``.

    Refuses with ``invalid_canonical_json``: floats and any type outside :data:`JSON`
    (tuples included), non-string keys, lone surrogates, nesting deeper than
    :data:`MAX_DEPTH`. Refuses integers beyond +/-(2**53-1) with ``out_of_range``.
    """
    parts: list[str] = []
    _encode_into(value, parts, 0)
    return "".join(parts).encode("utf-8")


def _encode_into(value: JSON, parts: list[str], depth: int) -> None:
    # bool before int: bool is a subclass of int in Python but a distinct JSON value.
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif type(value) is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise OutOfRangeError(f"integer {value} outside +/-(2**53-1)")
        parts.append(str(value))
    elif type(value) is str:
        parts.append('"')
        parts.append(escape_string(value))
        parts.append('"')
    elif type(value) is list:
        _check_depth(depth)
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _encode_into(item, parts, depth + 1)
        parts.append("]")
    elif type(value) is dict:
        _check_depth(depth)
        keys = list(value)
        for key in keys:
            if type(key) is not str:
                raise InvalidCanonicalJsonError(f"object key {key!r} is not a string")
        parts.append("{")
        for index, key in enumerate(sorted_keys(keys)):
            if index:
                parts.append(",")
            parts.append('"')
            parts.append(escape_string(key))
            parts.append('":')
            _encode_into(value[key], parts, depth + 1)
        parts.append("}")
    else:
        raise InvalidCanonicalJsonError(f"{type(value).__name__} is not a canonical JSON type")


def _check_depth(depth: int) -> None:
    if depth >= MAX_DEPTH:
        raise InvalidCanonicalJsonError(f"containers nest deeper than {MAX_DEPTH}")


def decode(data: bytes) -> JSON:
    """Parse canonical JSON bytes; refuse anything that is not exactly ``encode(value)``.

    Refuses with ``invalid_canonical_json``: non-``bytes`` input, invalid UTF-8, syntax errors,
    whitespace, unsorted or duplicate keys, non-canonical escapes or numbers (leading zeros,
    ``-0``, fractions, exponents), NaN and infinities, nesting deeper than :data:`MAX_DEPTH`.
    Refuses integers beyond +/-(2**53-1) with ``out_of_range``.
    """
    if type(data) is not bytes:
        raise InvalidCanonicalJsonError(f"expected bytes, got {type(data).__name__}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidCanonicalJsonError(f"invalid UTF-8 at byte {error.start}") from None
    try:
        value: JSON = json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_float=_refuse_float,
            parse_int=_parse_int,
            parse_constant=_refuse_constant,
        )
    except (InvalidCanonicalJsonError, OutOfRangeError):
        raise
    except RecursionError:
        raise InvalidCanonicalJsonError(f"containers nest deeper than {MAX_DEPTH}") from None
    except ValueError as error:  # json.JSONDecodeError and int-size limits
        raise InvalidCanonicalJsonError(f"not JSON: {error}") from None
    # The parser is lenient about whitespace, key order and escapes; equality with the
    # re-encoding is what makes decode canonical-only.
    if _encode_parsed(value) != data:
        raise InvalidCanonicalJsonError("input is not in canonical form")
    return value


def encode_checked_types(value: JSON) -> bytes:
    """:func:`encode` of a value whose every node already has an exact :data:`JSON` type,
    with safe integers and string keys: a document a parser produced, or one a record
    assembled from fields it validated at construction. The same bytes and the same
    refusals (nesting, lone surrogates), written by the C encoder."""
    return _encode_parsed(value)


def _encode_parsed(value: JSON) -> bytes:
    """:func:`encode` of a value :func:`decode`'s parser produced. Its types are exact and
    its integers safe by construction (the parser's hooks), so only nesting and lone
    surrogates can still be refused: the C encoder writes it, and :func:`encode` runs
    instead when the value nests too deep or holds a lone surrogate, to refuse it exactly
    as before. Nesting is walked only when the bytes hold more opening brackets than
    :data:`MAX_DEPTH` (no value nests deeper than its count of them)."""
    try:
        data = _C_ENCODER.encode(value).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):
        return encode(value)
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        return encode(value)
    return data


def _deeper_than(value: JSON, limit: int) -> bool:
    """Whether containers nest more than ``limit`` deep in ``value`` (the top one is 1)."""
    if type(value) is dict:
        children: list[JSON] = [v for v in value.values() if type(v) in (dict, list)]
    elif type(value) is list:
        children = [v for v in value if type(v) in (dict, list)]
    else:
        return False
    return limit <= 0 or any(_deeper_than(child, limit - 1) for child in children)


def decode_object(data: bytes) -> dict[str, JSON]:
    """Like :func:`decode`, and also refuse (``invalid_canonical_json``) a non-object value."""
    value = decode(data)
    if type(value) is not dict:
        raise InvalidCanonicalJsonError("canonical document is not a JSON object")
    return value


def decode_trusted_object(data: bytes) -> dict[str, JSON]:
    """Parse the canonical bytes of a JSON object that are canonical by construction: what
    :func:`encode` returned for a dict, or what :func:`decode_object` already accepted.

    Such bytes pass every check of :func:`decode_object`, whose result this equals, so they
    are only parsed, not checked again (no re-encoding, no range or duplicate checks). Never
    for bytes from anywhere else (a file, a database row, a caller): use
    :func:`decode_object`.
    """
    value = json.loads(data)
    assert type(value) is dict
    return value


def _object_without_duplicates(pairs: list[tuple[str, JSON]]) -> dict[str, JSON]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise InvalidCanonicalJsonError("object has a duplicate key")
    return result


def _refuse_float(literal: str) -> JSON:
    raise InvalidCanonicalJsonError(f"number {literal[:40]} is not an integer")


def _refuse_constant(literal: str) -> JSON:
    raise InvalidCanonicalJsonError(f"{literal} is not canonical JSON")


def _parse_int(literal: str) -> int:
    # Reject long literals before int() so a huge number costs nothing.
    if len(literal.lstrip("-")) > 16:
        raise OutOfRangeError(f"integer {literal[:40]} outside +/-(2**53-1)")
    number = int(literal)
    if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        raise OutOfRangeError(f"integer {literal} outside +/-(2**53-1)")
    return number


def ns_to_json(ns: int) -> str:
    """Encode a nanosecond timestamp as its canonical decimal string.

    JSON integers stop at 2**53-1, so ``*_ns`` values travel as strings to keep SQLite's full
    range. Refuses a non-``int`` (``bool`` included) with ``invalid_canonical_json`` and a value
    outside 0..2**63-1 with ``out_of_range``.

    pre: 0 <= ns <= 2**63 - 1
    post: ns_from_json(__return__) == ns
    """
    if type(ns) is not int:
        raise InvalidCanonicalJsonError(f"timestamp must be an int, got {type(ns).__name__}")
    if not 0 <= ns <= MAX_NS:
        raise OutOfRangeError(f"timestamp {ns} outside 0..2**63-1")
    return str(ns)


def ns_from_json(text: str) -> int:
    """Parse a canonical decimal nanosecond string (ASCII digits, no sign, no leading zeros).

    Refuses other strings with ``invalid_canonical_json`` and values above 2**63-1 with
    ``out_of_range``.

    raises: InvalidCanonicalJsonError, OutOfRangeError
    post: ns_to_json(__return__) == text
    """
    if type(text) is not str or _NS_DECIMAL.fullmatch(text) is None:
        raise InvalidCanonicalJsonError(f"{repr(text)[:40]} is not a canonical decimal timestamp")
    if len(text) > len(str(MAX_NS)) or int(text) > MAX_NS:
        raise OutOfRangeError(f"timestamp {text[:40]} outside 0..2**63-1")
    return int(text)
