"""Canonical JSON (SPEC.md section 2): round trips, uniqueness, refusals and pinned bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runstore import canonical
from runstore.canonical import JSON
from runstore.canonical import MAX_DEPTH
from runstore.canonical import MAX_NS
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import decode
from runstore.canonical import decode_object
from runstore.canonical import encode
from runstore.canonical import escape_string
from runstore.canonical import ns_from_json
from runstore.canonical import ns_to_json
from runstore.errors import InvalidCanonicalJsonError
from runstore.errors import OutOfRangeError

# Strings without lone surrogates (Hypothesis' default alphabet excludes them).
json_text = st.text()
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.sampled_from([0, -1, 1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER])
    | json_text
)
json_values: st.SearchStrategy[JSON] = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(json_text, children, max_size=5)
    ),
    max_leaves=25,
)


def same(left: JSON, right: JSON) -> bool:
    """JSON equality: unlike Python's ``==``, ``true`` is not ``1`` and ``false`` is not ``0``."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        assert isinstance(right, list)
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict):
        assert isinstance(right, dict)
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return left == right


@given(json_values)
def test_decode_inverts_encode(value: JSON) -> None:
    assert same(decode(encode(value)), value)


@given(json_values)
def test_encode_inverts_decode_on_canonical_bytes(value: JSON) -> None:
    data = encode(value)
    assert encode(decode(data)) == data


# Control characters, quotes, backslashes, U+007F and U+2028 are where an encoder's escapes
# could differ from the canonical ones.
TRICKY = '\x00\x01\x08\t\n\x0b\x0c\r\x1f "\\/\x7f\u2028é€😀a'
tricky_text = st.text(alphabet=st.sampled_from(TRICKY))
built_values: st.SearchStrategy[JSON] = st.recursive(
    json_scalars | tricky_text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(json_text | tricky_text, children, max_size=5)
    ),
    max_leaves=25,
)


@given(built_values)
def test_the_built_value_encoder_writes_exactly_the_canonical_bytes(value: JSON) -> None:
    """encode_built (the C encoder, for values the store assembled) and encode agree byte
    for byte, and decode (which compares through the C encoder) inverts both."""
    data = canonical.encode(value)
    assert canonical.encode_built(value) == data
    assert same(decode(data), value)


def test_the_built_value_encoder_still_refuses_a_lone_surrogate() -> None:
    with pytest.raises(InvalidCanonicalJsonError, match="lone surrogate"):
        canonical.encode_built({"a": ["ok", "\ud800"]})


@given(json_values, json_values)
def test_distinct_values_encode_differently(left: JSON, right: JSON) -> None:
    assert same(left, right) == (encode(left) == encode(right))


def test_bool_and_int_encode_differently() -> None:
    # The case the property above must not miss: Python says True == 1.
    assert encode(True) != encode(1)
    assert encode([False]) != encode([0])
    assert encode({"a": True}) != encode({"a": 1})


@given(st.binary(max_size=40))
def test_arbitrary_bytes_are_refused_or_canonical(data: bytes) -> None:
    try:
        value = decode(data)
    except (InvalidCanonicalJsonError, OutOfRangeError):
        return
    assert encode(value) == data


@given(json_values, st.integers(min_value=0), st.sampled_from([b" ", b"\n", b"\t", b"\r"]))
def test_inserted_whitespace_is_refused(value: JSON, position: int, blank: bytes) -> None:
    data = encode(value)
    cut = position % (len(data) + 1)
    mutated = data[:cut] + blank + data[cut:]
    try:
        decoded = decode(mutated)
    except InvalidCanonicalJsonError:
        return
    # Only whitespace inside a string literal can survive, and then the value changed.
    assert encode(decoded) == mutated
    assert not same(decoded, value)


@given(st.dictionaries(json_text, json_scalars, min_size=2, max_size=6))
def test_keys_come_out_in_code_point_order(value: dict[str, JSON]) -> None:
    decoded = decode_object(encode(value))
    assert list(decoded) == sorted(value)


@given(st.integers(0, MAX_NS))
def test_ns_round_trip(ns: int) -> None:
    text = ns_to_json(ns)
    assert ns_from_json(text) == ns
    assert text == str(ns)


# --- pinned bytes: each case names what it pins -----------------------------------------------

PINNED: list[tuple[str, JSON, bytes]] = [
    (
        "scalars",
        [None, True, False, 0, -1, MAX_SAFE_INTEGER],
        b"[null,true,false,0,-1,9007199254740991]",
    ),
    ("empty containers", {"a": [], "b": {}}, b'{"a":[],"b":{}}'),
    ("keys sorted", {"b": 1, "a": 2, "B": 3, "": 4}, b'{"":4,"B":3,"a":2,"b":1}'),
    # U+FFFF sorts before U+1F600 by code point (UTF-16 code-unit order would swap them).
    ("keys by code point", {"\U0001f600": 1, "\uffff": 2}, '{"\uffff":2,"\U0001f600":1}'.encode()),
    ("short escapes", '"\\\b\f\n\r\t', b'"\\"\\\\\\b\\f\\n\\r\\t"'),
    ("other controls lowercase hex", "\x00\x1f\x0b", b'"\\u0000\\u001f\\u000b"'),
    ("raw non-ASCII", "\x7f/\u00e9\u2028\U0001f600", '"\x7f/\u00e9\u2028\U0001f600"'.encode()),
    ("nested", {"x": [{"y": None}]}, b'{"x":[{"y":null}]}'),
]


@pytest.mark.parametrize(("case", "value", "data"), PINNED, ids=[case for case, _, _ in PINNED])
def test_pinned_bytes(case: str, value: JSON, data: bytes) -> None:
    assert encode(value) == data
    assert same(decode(data), value)


# --- refusals ------------------------------------------------------------------------------

NOT_CANONICAL: list[tuple[str, bytes]] = [
    ("unsorted keys", b'{"b":1,"a":2}'),
    ("duplicate keys", b'{"a":1,"a":1}'),
    ("space after colon", b'{"a": 1}'),
    ("leading space", b" 1"),
    ("trailing newline", b"1\n"),
    ("space in array", b"[1, 2]"),
    ("leading zero", b"01"),
    ("negative zero", b"-0"),
    ("plus sign", b"+1"),
    ("fraction", b"1.0"),
    ("exponent", b"1e3"),
    ("NaN", b"NaN"),
    ("Infinity", b"Infinity"),
    ("-Infinity", b"-Infinity"),
    ("escaped solidus", b'"\\/"'),
    ("needless unicode escape", b'"\\u0041"'),
    ("uppercase hex escape", b'"\\u001F"'),
    ("unicode escape for short form", b'"\\u000a"'),
    ("escaped DEL", b'"\\u007f"'),
    ("escaped surrogate pair", b'"\\ud83d\\ude00"'),
    ("escaped lone surrogate", b'"\\ud800"'),
    ("raw control character", b'"\x01"'),
    ("invalid UTF-8", b'"\xff"'),
    ("overlong UTF-8", b'"\xc0\xaf"'),
    ("encoded surrogate", b'"\xed\xa0\x80"'),
    ("byte-order mark", b"\xef\xbb\xbf1"),
    ("trailing comma", b"[1,]"),
    ("single quotes", b"'a'"),
    ("empty input", b""),
    ("two values", b"1 2"),
]


@pytest.mark.parametrize(("case", "data"), NOT_CANONICAL, ids=[case for case, _ in NOT_CANONICAL])
def test_non_canonical_input_is_refused(case: str, data: bytes) -> None:
    with pytest.raises(InvalidCanonicalJsonError):
        decode(data)


@pytest.mark.parametrize(
    "data", [b"9007199254740992", b"-9007199254740992", b"1" * 40, b"[123456789012345678]"]
)
def test_out_of_range_integer_literal_is_refused(data: bytes) -> None:
    with pytest.raises(OutOfRangeError):
        decode(data)


@pytest.mark.parametrize("value", [2**53, -(2**53), 2**63, [10**30]])
def test_out_of_range_integer_is_not_encoded(value: JSON) -> None:
    with pytest.raises(OutOfRangeError):
        encode(value)


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        float("nan"),
        float("inf"),
        (1, 2),
        {1: "a"},
        {True: "a"},
        {"a"},
        b"x",
        "\ud800",
        {"\udfff": 1},
    ],
    ids=repr,
)
def test_unencodable_value_is_refused(value: object) -> None:
    with pytest.raises(InvalidCanonicalJsonError):
        encode(value)  # type: ignore[arg-type]


def nested(depth: int) -> JSON:
    value: JSON = 0
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_limit() -> None:
    assert decode(encode(nested(MAX_DEPTH))) == nested(MAX_DEPTH)
    with pytest.raises(InvalidCanonicalJsonError):
        encode(nested(MAX_DEPTH + 1))
    with pytest.raises(InvalidCanonicalJsonError):
        decode(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    with pytest.raises(InvalidCanonicalJsonError):
        decode(b"[" * 100_000 + b"]" * 100_000)


def test_decode_takes_bytes_only() -> None:
    with pytest.raises(InvalidCanonicalJsonError):
        decode("1")  # type: ignore[arg-type]


def test_decode_object_refuses_non_objects() -> None:
    assert decode_object(b'{"a":1}') == {"a": 1}
    with pytest.raises(InvalidCanonicalJsonError):
        decode_object(b"[]")


def test_escape_string_leaves_plain_text_alone() -> None:
    assert escape_string("plain \u00e9 text") == "plain \u00e9 text"
    with pytest.raises(InvalidCanonicalJsonError):
        escape_string("\ud800")


@pytest.mark.parametrize(
    "text", ["", "-1", "01", "00", "+1", " 1", "1 ", "1.0", "1e3", "\u0661", "0x1"]
)
def test_non_canonical_ns_string_is_refused(text: str) -> None:
    with pytest.raises(InvalidCanonicalJsonError):
        ns_from_json(text)


@pytest.mark.parametrize("text", [str(MAX_NS + 1), "1" * 40])
def test_out_of_range_ns_string_is_refused(text: str) -> None:
    with pytest.raises(OutOfRangeError):
        ns_from_json(text)


def test_ns_bounds() -> None:
    assert ns_to_json(0) == "0"
    assert ns_to_json(MAX_NS) == "9223372036854775807"
    assert ns_from_json("9223372036854775807") == MAX_NS
    for bad in (-1, MAX_NS + 1):
        with pytest.raises(OutOfRangeError):
            ns_to_json(bad)
    with pytest.raises(InvalidCanonicalJsonError):
        ns_to_json(True)
    with pytest.raises(InvalidCanonicalJsonError):
        ns_from_json(5)  # type: ignore[arg-type]
