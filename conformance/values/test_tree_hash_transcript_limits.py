"""What the version-1 local-tree hash has no transcript for (SPEC.md section 12.3).

SPEC 12.3: ``u64`` is an unsigned 64-bit big-endian integer, entries are directories, files
and symlinks only ("a special file has no transcript"), paths and link targets are UTF-8
text, ``exec`` is one byte for a yes/no flag and the entry count comes first. A description
the transcript cannot spell is ``invalid_record``, never a Python error from inside the
encoding, and never a digest of some other tree.
"""

from __future__ import annotations

import pytest
from runstore.errors import InvalidRecordError
from runstore.tree_hash import Entry
from runstore.tree_hash import TreeHasher
from runstore.tree_hash import tree_sha256
from runstore.tree_hash import u64

MAX_U64 = 0xFFFF_FFFF_FFFF_FFFF  # 2^64-1, written out apart from the module's constant


def test_u64_spells_every_value_from_zero_to_two_to_the_64_minus_one() -> None:
    """SPEC 12.3: ``u64(n)`` is ``n`` as 8 unsigned big-endian bytes, its whole range
    included: 2^64-1 is eight 0xff bytes, 2^63 sets only the top bit."""
    assert u64(0) == bytes(8)
    assert u64(MAX_U64) == b"\xff" * 8
    assert u64(MAX_U64 - 1) == b"\xff" * 7 + b"\xfe"
    assert u64(2**63) == b"\x80" + bytes(7)


@pytest.mark.parametrize("value", [-1, MAX_U64 + 1, MAX_U64 + 2, 2**65 - 1, 3**64 - 1])
def test_a_count_or_size_outside_u64_is_invalid_record(value: int) -> None:
    """SPEC 12.3: a count or size outside 0..2^64-1 has no ``u64`` spelling, so announcing
    that many entries or starting a file of that size is ``invalid_record``."""
    with pytest.raises(InvalidRecordError):
        u64(value)
    with pytest.raises(InvalidRecordError):
        TreeHasher(value)
    with pytest.raises(InvalidRecordError):
        TreeHasher(1).file("x", False, value)


def test_the_largest_u64_count_and_size_are_accepted() -> None:
    """SPEC 12.3: 2^64-1 is still a ``u64``: a stream may announce that many entries and a
    file that size (the stream is only begun here, not fed)."""
    TreeHasher(MAX_U64)
    TreeHasher(1).file("x", True, MAX_U64)


def test_a_symlink_target_that_is_not_utf8_is_invalid_record() -> None:
    """SPEC 12.3: a symlink is hashed by ``bytes(target)`` of its UTF-8 spelling; a target
    holding a lone surrogate has none."""
    with pytest.raises(InvalidRecordError, match="not UTF-8"):
        TreeHasher(1).symlink("link", "bin/\udc80")
    with pytest.raises(InvalidRecordError):
        tree_sha256([Entry(path="link", type="symlink", target="\ud800")])


@pytest.mark.parametrize(
    ("executable", "size"),
    [(1, 0), (0, 0), (None, 3), ("yes", 3), (True, 3.0), (False, "3"), (True, True), (1, 1.0)],
    ids=repr,
)
def test_an_exec_flag_that_is_not_a_bool_or_a_size_that_is_not_an_int_is_invalid_record(
    executable: object, size: object
) -> None:
    """SPEC 12.3: ``exec`` is the yes/no of the execute bits and ``size`` an integer; a
    file entry given anything else (``1`` for ``True``, ``3.0`` for ``3``) is refused."""
    with pytest.raises(InvalidRecordError, match="executable must be a bool and size an int"):
        TreeHasher(1).file("x", executable, size)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kind", ["block_device", "character_device", "fifo", "socket", "door", "whiteout", ""]
)
def test_an_entry_of_a_special_type_has_no_transcript(kind: str) -> None:
    """SPEC 12.3: "A special file has no transcript": an in-memory entry whose type is not
    ``directory``, ``file`` or ``symlink`` is ``invalid_record``, whichever way its name
    sorts against those three, never hashed as one of them."""
    with pytest.raises(InvalidRecordError, match="is not hashable"):
        tree_sha256([Entry(path="special", type=kind)])  # type: ignore[arg-type]


def test_no_digest_follows_a_surplus_entry() -> None:
    """SPEC 12.3: the entry count comes first, and a stream that gives more entries than it
    announced is refused; a caller that goes on after that refusal gets no digest either
    (the count is still wrong)."""
    hasher = TreeHasher(1)
    hasher.directory("a")
    with pytest.raises(InvalidRecordError):
        hasher.directory("b")
    with pytest.raises(InvalidRecordError, match="announced"):
        hasher.hexdigest()


def test_entries_are_described_by_field_name() -> None:
    """CONVENTIONS 5 (value types are keyword-only where it reads better) and the module's
    ``Entry`` docstring: ``path`` and ``target`` are both text and ``data`` follows
    ``type``, so a positional description could hash a link's target as file content or a
    path; ``Entry`` takes its fields by name only."""
    with pytest.raises(TypeError):
        Entry("link", "symlink")  # type: ignore[misc]
    with pytest.raises(TypeError):
        Entry("x", "file", b"data")  # type: ignore[misc]
    by_name = Entry(path="link", type="symlink", target="x")
    streamed = TreeHasher(1)
    streamed.symlink("link", "x")
    assert tree_sha256([by_name]) == streamed.hexdigest()
