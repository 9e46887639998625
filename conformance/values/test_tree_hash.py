"""The version-1 local-tree hash (runstore.tree_hash): the source project's golden digests,
prefix-freedom (trees that differ only in nesting, emptiness, type or the executable bit
hash differently), the streaming hasher's contract, and its refusals."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.tree_hash import DOMAIN
from runstore.tree_hash import Entry
from runstore.tree_hash import TreeHasher
from runstore.tree_hash import tree_sha256

# metewand-v1-formats.md, "Golden digests".
GOLDEN_DATA = [
    Entry(path="empty", type="directory"),
    Entry(path="data.bin", type="file", data=b"\x00data"),
]
GOLDEN_DATA_SHA256 = "bcf747bafaea76059fbc0c7e16a8e5be01f94ecbce155a85db1c99458293b848"
GOLDEN_TOOL = [
    Entry(path="empty", type="directory"),
    Entry(path="bin", type="directory"),
    Entry(path="bin/tool", type="file", data=b"#!/bin/sh\nexit 0\n", executable=True),
    Entry(path="tool", type="symlink", target="bin/tool"),
]
GOLDEN_TOOL_SHA256 = "f8abaea4758185deb72f163f1adb3c9993cb060a20a9a2a544c2e97b0745a1c6"


def test_golden_tree_with_an_empty_directory_and_a_file() -> None:
    assert tree_sha256(GOLDEN_DATA) == GOLDEN_DATA_SHA256


def test_golden_tree_with_an_executable_and_a_symlink() -> None:
    assert tree_sha256(GOLDEN_TOOL) == GOLDEN_TOOL_SHA256


def test_the_empty_tree_is_the_bare_header() -> None:
    header = DOMAIN + (1).to_bytes(4, "big") + (0).to_bytes(8, "big")
    assert tree_sha256([]) == hashlib.sha256(header).hexdigest()


def test_entry_order_is_by_utf8_bytes_not_input_order() -> None:
    assert tree_sha256(list(reversed(GOLDEN_TOOL))) == GOLDEN_TOOL_SHA256


def d(path: str) -> Entry:
    return Entry(path=path, type="directory")


def f(path: str, data: bytes = b"", executable: bool = False) -> Entry:
    return Entry(path=path, type="file", data=data, executable=executable)


PREFIX_FREE_PAIRS = {
    "file a/b vs file a holding the bytes a/b would carry": (
        [d("a"), f("a/b", b"x")],
        [f("a", b"\x00\x00\x00\x00\x00\x00\x00\x03a/b" + b"f\x00" + b"\x00" * 7 + b"\x01x")],
    ),
    "nested a/b vs sibling names a and b": ([d("a"), f("a/b")], [f("a"), f("b")]),
    "empty file vs missing file": ([f("x")], []),
    "empty file vs empty directory": ([f("x")], [d("x")]),
    "empty directory vs missing directory": ([d("x"), f("y")], [f("y")]),
    "executable vs plain file": ([f("x", b"#!", True)], [f("x", b"#!", False)]),
    "bytes moved between two files": ([f("a", b"12"), f("b", b"3")], [f("a", b"1"), f("b", b"23")]),
    "name bytes moved into content": ([f("ab", b"")], [f("a", b"b")]),
    "symlink vs file holding the target": (
        [Entry(path="l", type="symlink", target="t")],
        [f("l", b"t")],
    ),
    "deeper nesting of the same file": ([d("a"), d("a/a"), f("a/a/x")], [d("a"), f("a/x")]),
}


@pytest.mark.parametrize("name", sorted(PREFIX_FREE_PAIRS))
def test_trees_that_differ_only_in_structure_hash_differently(name: str) -> None:
    left, right = PREFIX_FREE_PAIRS[name]
    assert tree_sha256(left) != tree_sha256(right)


def test_streaming_in_any_chunking_equals_the_one_shot_hash() -> None:
    hasher = TreeHasher(4)
    hasher.directory("bin")
    hasher.file("bin/tool", True, 17)
    for chunk in (b"#!/bin/", b"", b"sh\nexit", b" 0\n"):
        hasher.update(chunk)
    hasher.directory("empty")
    hasher.symlink("tool", "bin/tool")
    assert hasher.hexdigest() == GOLDEN_TOOL_SHA256


@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=6))
def test_chunk_boundaries_do_not_matter(data: bytes, cuts: list[int]) -> None:
    hasher = TreeHasher(1)
    hasher.file("x", False, len(data))
    start = 0
    for cut in sorted(min(c, len(data)) for c in cuts):
        hasher.update(data[start:cut])
        start = cut
    hasher.update(data[start:])
    assert hasher.hexdigest() == tree_sha256([f("x", data)])


def test_non_ascii_paths_hash_their_utf8_bytes_in_byte_order() -> None:
    # "z" (0x7a) sorts before "é" (0xc3 0xa9) by bytes, as by code point.
    entries = [f("\u00e9", b"1"), f("z", b"2"), d("\u65e5"), f("\u65e5/\U0001f600", b"")]
    hasher = TreeHasher(4)
    hasher.file("z", False, 1)
    hasher.update(b"2")
    hasher.file("\u00e9", False, 1)
    hasher.update(b"1")
    hasher.directory("\u65e5")
    hasher.file("\u65e5/\U0001f600", False, 0)
    assert hasher.hexdigest() == tree_sha256(entries)


def test_more_bytes_than_the_size_is_artifact_corrupt() -> None:
    hasher = TreeHasher(1)
    hasher.file("x", False, 2)
    with pytest.raises(ArtifactCorruptError):
        hasher.update(b"abc")


def test_fewer_bytes_than_the_size_is_artifact_corrupt() -> None:
    hasher = TreeHasher(2)
    hasher.file("x", False, 2)
    hasher.update(b"a")
    with pytest.raises(ArtifactCorruptError):
        hasher.file("y", False, 0)
    short = TreeHasher(1)
    short.file("x", False, 1)
    with pytest.raises(ArtifactCorruptError):
        short.hexdigest()


def test_out_of_order_repeated_and_orphaned_entries_are_refused() -> None:
    hasher = TreeHasher(3)
    hasher.file("b", False, 0)
    with pytest.raises(InvalidRecordError):
        hasher.file("a", False, 0)
    with pytest.raises(InvalidRecordError):
        hasher.directory("b")
    with pytest.raises(InvalidRecordError):
        TreeHasher(1).file("a/b", False, 0)  # no directory entry "a"
    with pytest.raises(InvalidRecordError):
        tree_sha256([f("a"), f("a/b")])  # "a" is a file, not a directory


def test_the_announced_entry_count_is_enforced() -> None:
    hasher = TreeHasher(1)
    hasher.directory("a")
    with pytest.raises(InvalidRecordError):
        hasher.directory("b")
    with pytest.raises(InvalidRecordError):
        TreeHasher(2).hexdigest()


@pytest.mark.parametrize("path", ["", "/a", "a/", "a//b", ".", "a/..", "a\\b", "\udc80"])
def test_paths_the_hash_is_not_defined_for_are_refused(path: str) -> None:
    with pytest.raises(InvalidRecordError):
        tree_sha256([f(path)])
