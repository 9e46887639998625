"""Depth counts arrays and objects together (SPEC.md section 2, "Depth": arrays and objects
nest at most 64 deep, the outermost container is depth 1).

The depth check runs only when the bytes hold more opening brackets than the limit, and a
value alternating arrays and objects has few of each kind: these tests nest the two kinds
in turn, so a check that looked at either kind alone, or combined the counts any other
way than adding them, would let a 65-deep value through.
"""

from __future__ import annotations

import pytest
from runstore.canonical import JSON
from runstore.canonical import MAX_DEPTH
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.errors import InvalidCanonicalJsonError


def alternating(depth: int) -> JSON:
    """``depth`` containers, arrays and objects in turn (an array outermost)."""
    value: JSON = 0
    for level in range(depth, 0, -1):
        value = [value] if level % 2 == 1 else {"a": value}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH])
def test_mixed_nesting_up_to_64_deep_is_canonical(depth: int) -> None:
    """SPEC 2: nesting of arrays and objects up to 64 deep is a value like any other."""
    value = alternating(depth)
    assert decode(encode(value)) == value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, MAX_DEPTH + 2, 2 * MAX_DEPTH])
def test_mixed_nesting_past_64_deep_is_refused_both_ways(depth: int) -> None:
    """SPEC 2: past 64, whichever kinds of container make up the depth, encoding refuses the
    value and decoding refuses its bytes, with ``invalid_canonical_json``."""
    value = alternating(depth)
    with pytest.raises(InvalidCanonicalJsonError, match="deeper than 64"):
        encode(value)
    data = (b'[{"a":' * (depth // 2)) + (b"[" if depth % 2 else b"") + b"0"
    data += (b"]" if depth % 2 else b"") + b"}]" * (depth // 2)
    with pytest.raises(InvalidCanonicalJsonError, match="deeper than 64"):
        decode(data)
