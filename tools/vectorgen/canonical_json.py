"""The canonical JSON vectors (``vectors/canonical_json.json``, SPEC.md section 2): values
and their canonical bytes, refused values, refused inputs, and ``*_ns`` strings.

The cases are data here; the bytes and refusal codes come from :mod:`runstore.canonical`.
``tools/regen`` writes :func:`build`'s text.
"""

from __future__ import annotations

from typing import Any

from runstore.canonical import JSON
from runstore.canonical import MAX_DEPTH
from runstore.canonical import MAX_NS
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.canonical import ns_from_json

from . import describe
from . import header
from . import refusal_code
from . import render


def _nested(depth: int, *, objects: bool) -> JSON:
    """``depth`` containers around ``0``: all arrays, or arrays and ``{"a": ...}`` objects
    alternating (outermost an object). An object costs two levels of nesting in its
    description and an array one, so the vector file stays within the 128 levels that some
    JSON parsers allow by default."""
    value: JSON = 0
    for level in range(depth):
        value = {"a": value} if objects and (depth - level) % 2 == 1 else [value]
    return value


ALL_CONTROLS = "".join(chr(code) for code in range(0x20))

ENCODE: list[tuple[str, JSON]] = [
    ("null", None),
    ("true", True),
    ("false", False),
    ("zero", 0),
    ("minus one", -1),
    ("largest integer", MAX_SAFE_INTEGER),
    ("smallest integer", -MAX_SAFE_INTEGER),
    ("empty string", ""),
    ("empty array", []),
    ("empty object", {}),
    ("scalars in an array", [None, True, False, 0, -1, MAX_SAFE_INTEGER]),
    ("booleans are not integers", {"bool": True, "int": 1, "false": False, "zero": 0}),
    ("keys sorted (uppercase before lowercase, empty first)", {"b": 1, "a": 2, "B": 3, "": 4}),
    ("keys sorted (prefix first)", {"ab": 1, "b": 2, "a": 3}),
    ("keys sorted by code point, not UTF-16", {"\U0001f600": 1, "\uffff": 2, "\ue000": 3}),
    ("keys sorted by raw text, not escaped form", {"\\": 1, '"': 2, "\n": 3, "\x7f": 4}),
    ("keys with non-ASCII", {"z": 1, "\u00e9": 2, "e": 3}),
    ("short escapes", '"\\\b\f\n\r\t'),
    ("every control character", ALL_CONTROLS),
    ("control escapes use lowercase hex", "\x00\x1f\x0b\x1a"),
    ("solidus and DEL raw", "/\x7f"),
    ("C1 controls raw", "\x80\x85\x9f"),
    ("line and paragraph separators raw", "\u2028\u2029"),
    ("non-ASCII raw", "\u00e9\u4e2d\ufeff\uffff"),
    ("astral character raw", "\U0001f600\U0010ffff"),
    ("nested containers", {"x": [{"y": None}, [], {}], "w": {"v": [1, [2, [3]]]}}),
    ("arrays keep their order", [3, 1, 2, "b", "a"]),
    ("deepest arrays", _nested(MAX_DEPTH, objects=False)),
    ("deepest nesting of objects and arrays", _nested(MAX_DEPTH, objects=True)),
]

ENCODE_REFUSED: list[tuple[str, object]] = [
    ("integer above range", MAX_SAFE_INTEGER + 1),
    ("integer below range", -MAX_SAFE_INTEGER - 1),
    ("64-bit integer", 2**63),
    ("out-of-range integer in an array", [10**30]),
    ("float with integral value", 1.0),
    ("fraction", 0.5),
    ("negative zero float", -0.0),
    ("NaN", float("nan")),
    ("Infinity", float("inf")),
    ("-Infinity", float("-inf")),
    ("integer key", {1: "a"}),
    ("boolean key", {True: "a"}),
    ("lone high surrogate", "\ud800"),
    ("lone low surrogate", "a\udfff"),
    ("reversed surrogate pair", "\ude00\ud83d"),
    # A UTF-16 language would join these into U+1F600; as code points they are two lone
    # surrogates (SPEC.md section 2, "Strings").
    ("high then low surrogate as two code points", "\ud83d\ude00"),
    ("lone surrogate in a key", {"\udfff": 1}),
    ("arrays one level too deep", _nested(MAX_DEPTH + 1, objects=False)),
    ("objects and arrays one level too deep", _nested(MAX_DEPTH + 1, objects=True)),
]

# Each input has exactly one defect, so its refusal code is unambiguous.
DECODE_REFUSED: list[tuple[str, bytes]] = [
    ("empty input", b""),
    ("unsorted keys", b'{"b":1,"a":2}'),
    ("keys in UTF-16 order", '{"\U0001f600":1,"\uffff":2}'.encode()),
    ("duplicate keys", b'{"a":1,"a":1}'),
    ("duplicate keys with different values", b'{"a":1,"a":2}'),
    ("space after colon", b'{"a": 1}'),
    ("space after comma", b"[1, 2]"),
    ("leading space", b" 1"),
    ("trailing newline", b"1\n"),
    ("tab between tokens", b"[1,\t2]"),
    ("byte-order mark", b"\xef\xbb\xbf1"),
    ("leading zero", b"01"),
    ("negative leading zero", b"-01"),
    ("negative zero", b"-0"),
    ("plus sign", b"+1"),
    ("lone minus", b"-"),
    ("fraction", b"1.0"),
    ("fraction without integer part", b".5"),
    ("exponent", b"1e3"),
    ("uppercase exponent", b"1E3"),
    ("NaN", b"NaN"),
    ("Infinity", b"Infinity"),
    ("-Infinity", b"-Infinity"),
    ("capitalized literal", b"True"),
    ("truncated literal", b"nul"),
    ("escaped solidus", b'"\\/"'),
    ("needless unicode escape", b'"\\u0041"'),
    ("escaped non-ASCII", b'"\\u00e9"'),
    ("uppercase hex escape", b'"\\u001F"'),
    ("unicode escape for a short form", b'"\\u000a"'),
    ("escaped DEL", b'"\\u007f"'),
    ("escaped surrogate pair", b'"\\ud83d\\ude00"'),
    ("escaped lone surrogate", b'"\\ud800"'),
    ("unknown escape", b'"\\x41"'),
    ("raw control character", b'"\x01"'),
    ("raw newline", b'"\n"'),
    ("invalid UTF-8", b'"\xff"'),
    ("overlong UTF-8", b'"\xc0\xaf"'),
    ("UTF-8 encoded surrogate", b'"\xed\xa0\x80"'),
    ("UTF-8 beyond U+10FFFF", b'"\xf4\x90\x80\x80"'),
    ("truncated UTF-8", b'"\xe4\xb8"'),
    ("unterminated string", b'"abc'),
    ("unterminated array", b"[1,2"),
    ("trailing comma", b"[1,]"),
    ("single quotes", b"'a'"),
    ("unquoted key", b"{a:1}"),
    ("non-string key", b'{1:"a"}'),
    ("two values", b"1 2"),
    ("two values without separator", b"[][]"),
    ("arrays one level too deep", b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)),
    ("objects one level too deep", b'{"a":' * (MAX_DEPTH + 1) + b"0" + b"}" * (MAX_DEPTH + 1)),
    ("integer above range", b"9007199254740992"),
    ("integer below range", b"-9007199254740992"),
    ("64-bit integer", b"9223372036854775807"),
    ("forty digits", b"1" * 40),
    ("out-of-range integer in an array", b"[123456789012345678]"),
    ("out-of-range integer as a member value", b'{"a":18446744073709551616}'),
]

TIMESTAMPS: list[tuple[str, str]] = [
    ("zero", "0"),
    ("one", "1"),
    ("above the JSON integer range", str(MAX_SAFE_INTEGER + 1)),
    ("largest", str(MAX_NS)),
]

TIMESTAMPS_REFUSED: list[tuple[str, str]] = [
    ("empty", ""),
    ("negative", "-1"),
    ("leading zero", "01"),
    ("double zero", "00"),
    ("plus sign", "+1"),
    ("leading space", " 1"),
    ("trailing space", "1 "),
    ("fraction", "1.0"),
    ("exponent", "1e3"),
    ("non-ASCII digit", "\u0661"),
    ("hexadecimal", "0x1"),
    # The content is the digits; the JSON quotes belong to the document (SPEC.md section 2,
    # "Timestamps in JSON"), so content holding quote characters is refused.
    ("quoted digits", '"1"'),
    ("one above the largest", str(MAX_NS + 1)),
    ("forty digits", "1" * 40),
]


def document() -> dict[str, Any]:
    """The document written to ``vectors/canonical_json.json``."""
    encode_cases = []
    for name, value in ENCODE:
        data = encode(value)
        encode_cases.append(
            {
                "name": name,
                "value": describe(value),
                "canonical_hex": data.hex(),
                "canonical_utf8": data.decode("utf-8"),
            }
        )
    return {
        **header("runstore canonical JSON vectors"),
        "encode": encode_cases,
        "encode_refused": [
            {"name": name, "value": describe(value), "error_code": refusal_code(encode, value)}
            for name, value in ENCODE_REFUSED
        ],
        "decode_refused": [
            {"name": name, "input_hex": data.hex(), "error_code": refusal_code(decode, data)}
            for name, data in DECODE_REFUSED
        ],
        "timestamps": [
            {"name": name, "text_hex": text.encode().hex(), "ns": str(ns_from_json(text))}
            for name, text in TIMESTAMPS
        ],
        "timestamps_refused": [
            {
                "name": name,
                "text_hex": text.encode().hex(),
                "error_code": refusal_code(ns_from_json, text),
            }
            for name, text in TIMESTAMPS_REFUSED
        ],
    }


def build() -> str:
    """The text of ``vectors/canonical_json.json``."""
    return render(document())
