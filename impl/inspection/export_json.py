"""The line format of ``index.jsonl``: canonical JSON with metric values beside it as JSON
numbers written as their stored text (SPEC.md section 16.3, ``index.jsonl``).

Rules of this file: pure functions of values, no I/O. A stored metric value is decimal
text; when that text is a JSON number literal (RFC 8259's grammar, nothing around it)
whose value is finite as a double, it is written verbatim as the number, so no reader's
value depends on a re-rounding here. Every other part of a line is section 2's canonical
JSON (sorted keys, no whitespace, the same string escapes), encoded by
:mod:`runstore.canonical`, which refuses anything canonical JSON refuses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final
from typing import TypeAlias

import attrs
from runstore.canonical import JSON
from runstore.canonical import encode
from runstore.canonical import escape_string
from runstore.canonical import sorted_keys

_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
"""RFC 8259's ``number``: ASCII digits only (``re``'s ``[0-9]`` is ASCII)."""


@attrs.frozen
class Number:
    """A JSON number written as this exact text (a literal :func:`json_number` accepted)."""

    text: str


LineValue: TypeAlias = JSON | Number | list["LineValue"] | dict[str, "LineValue"]
"""A value of an ``index.jsonl`` line: canonical JSON, with :class:`Number` leaves."""


def json_number(text: str) -> Number | None:
    """``text`` as a JSON number when it is a number literal whose value is finite as a
    double (``1e999`` is not); None otherwise (``NaN``, ``0x10``, ``+1``, ``.5``, ``1.``,
    ``01``, text with whitespace, the empty string)."""
    if _JSON_NUMBER.fullmatch(text) is None or not math.isfinite(float(text)):
        return None
    return Number(text)


def metric_numbers(metrics: Iterable[tuple[str, str]]) -> dict[str, LineValue]:
    """The metrics whose stored text is a JSON number (:func:`json_number`), as numbers."""
    return {name: number for name, text in metrics if (number := json_number(text)) is not None}


def encode_line(value: LineValue) -> bytes:
    """The bytes of a line (newline not included): objects with keys sorted by code point,
    no whitespace, :class:`Number` leaves as their text and every other leaf as its
    canonical JSON (which refuses floats and out-of-range integers)."""
    parts: list[str] = []
    _encode_into(value, parts)
    return "".join(parts).encode("utf-8")


def _encode_into(value: LineValue, parts: list[str]) -> None:
    if isinstance(value, Number):
        parts.append(value.text)
    elif isinstance(value, dict):
        parts.append("{")
        for index, key in enumerate(sorted_keys(list(value))):
            parts.append(f'{"," if index else ""}"{escape_string(key)}":')
            _encode_into(value[key], parts)
        parts.append("}")
    elif isinstance(value, list):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _encode_into(item, parts)
        parts.append("]")
    else:
        parts.append(encode(value).decode("utf-8"))
