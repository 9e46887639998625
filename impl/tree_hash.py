"""The version-1 local-tree hash (metewand's), as pure transcript primitives.

Rules of this file: pure functions and one streaming hasher; no I/O (the filesystem walk
lives in :mod:`runstore.store.publication.objects`, which feeds bytes in). The transcript is fixed
by the source project's golden digests (SPEC.md section 12.3, "The local-tree hash"), so any change
to a byte produced here is a compatibility break.

The input to SHA-256 is::

    "metewand-local-tree\\0" || u32(1) || u64(entry_count) || entry_1 || ... || entry_n

with ``u32``/``u64`` unsigned big-endian and ``bytes(v) = u64(len(v)) || v``. Entries are
every descendant of the root (never the root), sorted by the UTF-8 bytes of their
``/``-joined paths, each one of::

    directory: bytes(path) || "d"
    file:      bytes(path) || "f" || exec || u64(size) || file bytes
    symlink:   bytes(path) || "l" || bytes(target)

``exec`` is ``0x01`` when any execute bit is set, else ``0x00``. The transcript is
prefix-free: every variable-length field is length-prefixed, each entry is typed, and the
entry count is fixed up front, so two different trees never produce the same input.

Refusals: a path or transcript that does not describe a tree (not UTF-8, an empty, ``.`` or
``..`` segment, a backslash, out of order or repeated, an entry whose parent is not a
directory entry before it, the wrong number of entries) is ``invalid_record``; a file fed
more or fewer bytes than its declared size is ``artifact_corrupt`` (that is what a file
changing while it is read looks like).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final
from typing import Literal

import attrs
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError

DOMAIN: Final = b"metewand-local-tree\x00"
"""The transcript's domain-separation prefix."""

VERSION: Final = 1
"""The transcript version (``u32`` after the domain prefix)."""

MAX_U64: Final = 2**64 - 1


def u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def u64(value: int) -> bytes:
    if not 0 <= value <= MAX_U64:
        raise InvalidRecordError(f"{value} does not fit in an unsigned 64-bit integer")
    return value.to_bytes(8, "big")


def length_prefixed(value: bytes) -> bytes:
    """``bytes(v)`` of the transcript: ``u64(len(v)) || v``."""
    return u64(len(value)) + value


def path_bytes(path: str) -> bytes:
    """The UTF-8 bytes of a relative entry path, refusing (``invalid_record``) a path the
    hash is not defined for: not a string, not UTF-8 (a lone surrogate), a backslash, an
    empty, ``.`` or ``..`` segment (which also covers leading, trailing and doubled ``/``)."""
    if type(path) is not str:
        raise InvalidRecordError(f"entry path must be a string, got {type(path).__name__}")
    try:
        data = path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRecordError(f"entry path {path!r:.80} is not UTF-8") from None
    if "\\" in path or any(segment in ("", ".", "..") for segment in path.split("/")):
        raise InvalidRecordError(f"entry path {path!r:.80} is not a normalized relative path")
    return data


class TreeHasher:
    """The streaming transcript: announce ``entry_count`` entries, then give each entry in
    ascending UTF-8 byte order of its path: :meth:`directory`, :meth:`symlink`, or
    :meth:`file` followed by :meth:`update` calls totalling exactly ``size`` bytes. Finish
    with :meth:`hexdigest` (which checks the count). Memory: the set of directory paths."""

    def __init__(self, entry_count: int) -> None:
        self._hash = hashlib.sha256(DOMAIN + u32(VERSION) + u64(entry_count))
        self._expected = entry_count
        self._seen = 0
        self._last: bytes | None = None
        self._directories: set[bytes] = set()
        self._remaining = 0
        self._open_file: str | None = None

    def _entry(self, path: str, kind: bytes) -> bytes:
        self._finish_file()
        data = path_bytes(path)
        if self._last is not None and data <= self._last:
            raise InvalidRecordError(f"entry {path!r:.80} is out of order or repeated")
        parent, slash, _ = data.rpartition(b"/")
        if slash and parent not in self._directories:
            raise InvalidRecordError(f"entry {path!r:.80} has no directory entry for its parent")
        self._seen += 1
        if self._seen > self._expected:
            raise InvalidRecordError(f"more than the announced {self._expected} entries")
        self._last = data
        self._hash.update(length_prefixed(data) + kind)
        return data

    def directory(self, path: str) -> None:
        self._directories.add(self._entry(path, b"d"))

    def symlink(self, path: str, target: str) -> None:
        if type(target) is not str:
            raise InvalidRecordError("symlink target must be a string")
        try:
            spelled = target.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRecordError(f"symlink target {target!r:.80} is not UTF-8") from None
        self._entry(path, b"l")
        self._hash.update(length_prefixed(spelled))

    def file(self, path: str, executable: bool, size: int) -> None:
        """Begin a file entry; its ``size`` bytes follow through :meth:`update`."""
        if type(executable) is not bool or type(size) is not int:
            raise InvalidRecordError("executable must be a bool and size an int")
        header = b"f" + (b"\x01" if executable else b"\x00") + u64(size)
        self._entry(path, header)
        self._remaining = size
        self._open_file = path

    def update(self, chunk: bytes) -> None:
        """The next bytes of the open file entry."""
        if self._open_file is None:
            raise InvalidRecordError("file bytes given outside a file entry")
        if len(chunk) > self._remaining:
            raise ArtifactCorruptError(f"{self._open_file} has more bytes than its size")
        self._remaining -= len(chunk)
        self._hash.update(chunk)

    def _finish_file(self) -> None:
        if self._open_file is not None and self._remaining:
            missing, path = self._remaining, self._open_file
            raise ArtifactCorruptError(f"{path} ended {missing} bytes short of its size")
        self._open_file = None

    def hexdigest(self) -> str:
        self._finish_file()
        if self._seen != self._expected:
            raise InvalidRecordError(f"{self._seen} entries given, {self._expected} announced")
        return self._hash.hexdigest()


EntryType = Literal["directory", "file", "symlink"]


@attrs.frozen(kw_only=True)
class Entry:
    """One entry of an in-memory tree description: a ``directory``, a ``file`` (``data``,
    ``executable``) or a ``symlink`` (``target``)."""

    path: str
    type: EntryType
    data: bytes = b""
    executable: bool = False
    target: str = ""


def sort_key(path: str) -> bytes:
    """Entry order: ascending UTF-8 bytes of the path."""
    return path_bytes(path)


def tree_sha256(entries: Iterable[Entry]) -> str:
    """The tree hash of an in-memory description (any order; every parent directory must
    be listed as a ``directory`` entry)."""
    ordered = sorted(entries, key=lambda entry: sort_key(entry.path))
    hasher = TreeHasher(len(ordered))
    for entry in ordered:
        if entry.type == "directory":
            hasher.directory(entry.path)
        elif entry.type == "symlink":
            hasher.symlink(entry.path, entry.target)
        elif entry.type == "file":
            hasher.file(entry.path, entry.executable, len(entry.data))
            hasher.update(entry.data)
        else:
            raise InvalidRecordError(f"entry type {entry.type!r:.40} is not hashable")
    return hasher.hexdigest()
