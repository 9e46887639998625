"""The version-1 completion manifest (``manifest.json``) and the entry name rules.

Rules of this file: pure functions over bytes and strings, no I/O. The manifest bytes are
metewand's version-1 artifact manifest, so a change to any byte produced here is a
compatibility break (SPEC.md section 12.2, "The completion manifest").

The manifest is canonical JSON (:func:`runstore.canonical.encode`) of::

    {"complete": true, "files": [...], "schema_version": 1}

each file ``{"media_type": "application/octet-stream", "path": ..., "sha256": ...,
"size_bytes": N}``, sorted by the UTF-8 bytes of ``path``, without duplicates, and never
listing ``manifest.json`` itself.

Writing refuses a size above 2**53-1 with ``out_of_range`` (JSON cannot carry it exactly,
so such a file cannot be listed) and a defective file list with ``invalid_record``.
Reading (:func:`parse_manifest`) is strict and refuses every defect with
``artifact_corrupt``, a path that is also another listed path's directory included (``a``
beside ``a/b``: no tree holds both; SPEC.md 12.2, "Reading is strict"). Decision: it
accepts exactly the bytes :func:`manifest_bytes` writes. metewand's optional
``representation`` object and other ``media_type`` values are refused on read, because
this store never writes them; so every accepted manifest is the unique manifest of its
file list, ``manifest_bytes(parse_manifest(data)) == data``.

Entry names (:func:`check_entry_name`, ``unsafe_entry``): a relative path of UTF-8 text in
Unicode NFC (so the manifest path, the on-disk name and the tree-hash path are the same
bytes), no backslash, no control character (U+0000..U+001F, U+007F..U+009F), no empty,
``.`` or ``..`` segment (so no leading, trailing or doubled ``/``), and no segment longer
than 255 UTF-8 bytes. Any other character, non-ASCII included, is allowed.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Final

import attrs
from runstore.canonical import JSON
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import decode_object
from runstore.canonical import encode_built
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import RunStoreError
from runstore.errors import UnsafeEntryError
from runstore.validation import check_digest
from runstore.validation import is_control

MANIFEST_NAME: Final = "manifest.json"
"""The runtime-owned completion manifest at an object's root."""

OUTCOME_NAME: Final = "outcome.json"
"""The runtime-owned outcome document at an attempt object's root."""

RESERVED_NAMES: Final = frozenset({MANIFEST_NAME, OUTCOME_NAME})
"""Root-level names a caller's payload may not contain."""

MEDIA_TYPE: Final = "application/octet-stream"
"""The one ``media_type`` this store writes (and accepts)."""

SCHEMA_VERSION: Final = 1

MAX_SEGMENT_BYTES: Final = 255
"""Longest path segment, in UTF-8 bytes (the common filesystem name limit)."""

_FILE_KEYS: Final = frozenset({"media_type", "path", "sha256", "size_bytes"})
_TOP_KEYS: Final = frozenset({"complete", "files", "schema_version"})


_CONTROLS: Final = frozenset(chr(code) for code in range(0xA0) if is_control(chr(code)))
"""The C0 and C1 controls and DEL (lone surrogates never pass the UTF-8 check before)."""


def check_entry_name(relative_path: str) -> None:
    """Refuse (``unsafe_entry``, naming the path) a relative path that breaks the name
    rules of the module docstring; return None for a safe one."""
    if type(relative_path) is not str:
        raise UnsafeEntryError(f"entry name must be text, got {type(relative_path).__name__}")
    shown = repr(relative_path)[:120]
    try:
        relative_path.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeEntryError(f"entry {shown} is not UTF-8") from None
    if "\\" in relative_path:
        raise UnsafeEntryError(f"entry {shown} contains a backslash")
    if not _CONTROLS.isdisjoint(relative_path):
        raise UnsafeEntryError(f"entry {shown} contains a control character")
    for segment in relative_path.split("/"):
        if segment in ("", ".", ".."):
            raise UnsafeEntryError(f"entry {shown} has an empty, '.' or '..' segment")
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise UnsafeEntryError(f"entry {shown} has a segment over {MAX_SEGMENT_BYTES} bytes")
    if not unicodedata.is_normalized("NFC", relative_path):
        raise UnsafeEntryError(f"entry {shown} is not in Unicode NFC")


def path_order(path: str) -> bytes:
    """The order of manifest files and tree entries: the path's UTF-8 bytes."""
    return path.encode("utf-8")


@attrs.frozen(kw_only=True)
class ManifestFile:
    """One listed file: its relative ``path``, lowercase hex ``sha256`` and ``size_bytes``."""

    path: str
    sha256: str
    size_bytes: int

    def to_json(self) -> dict[str, JSON]:
        return {
            "media_type": MEDIA_TYPE,
            "path": self.path,
            "sha256": self.sha256,
            "size_bytes": self.size_bytes,
        }


def manifest_bytes(files: Iterable[ManifestFile]) -> bytes:
    """The exact manifest bytes listing ``files`` (in any order; they are sorted here).

    Refuses with ``invalid_record``: an unsafe path (the name rules), ``manifest.json``
    itself or a path under it, a repeated path, a path that is also another path's
    directory (``a`` beside ``a/b``, which :func:`parse_manifest` refuses), a malformed
    digest, a non-integer or negative size; with ``out_of_range``: a size above 2**53-1.
    """
    listed = sorted(files, key=lambda file: path_order(file.path))
    seen: set[str] = set()
    for file in listed:
        try:
            check_entry_name(file.path)
        except UnsafeEntryError as error:
            raise InvalidRecordError(error.message) from None
        if file.path.split("/")[0] == MANIFEST_NAME:
            raise InvalidRecordError("the manifest lists nothing at or under manifest.json")
        if file.path in seen:
            raise InvalidRecordError(f"path {file.path!r:.100} is listed twice")
        seen.add(file.path)
        check_digest(file.sha256, "sha256")
        if type(file.size_bytes) is not int or file.size_bytes < 0:
            raise InvalidRecordError(f"size_bytes of {file.path!r:.100} must be an int >= 0")
        if file.size_bytes > MAX_SAFE_INTEGER:
            raise OutOfRangeError(
                f"{file.path!r:.100} has {file.size_bytes} bytes, over 2**53-1: not listable"
            )
    clash = _listed_directory(listed)
    if clash is not None:
        raise InvalidRecordError(f"path {clash!r:.100} is also another listed path's directory")
    return built_manifest_bytes(listed)


def built_manifest_bytes(listed: Sequence[ManifestFile]) -> bytes:
    """The exact manifest bytes of a file list the store assembled from checked parts:
    already sorted by path, without duplicates or ``manifest.json``, each path a scanned
    entry name, each digest a SHA-256 it computed, each size an ``lstat`` size checked
    against 2**53-1. The same bytes as :func:`manifest_bytes` (which checks, then calls
    this), without checking every entry again. Never for a list a caller passed in."""
    document: dict[str, JSON] = {
        "complete": True,
        "files": [
            {
                "media_type": MEDIA_TYPE,
                "path": f.path,
                "sha256": f.sha256,
                "size_bytes": f.size_bytes,
            }
            for f in listed
        ],
        "schema_version": SCHEMA_VERSION,
    }
    return encode_built(document)


def manifest_sha256(data: bytes) -> str:
    """The manifest digest: SHA-256 of the exact manifest bytes."""
    return hashlib.sha256(data).hexdigest()


def parse_manifest(data: bytes) -> tuple[ManifestFile, ...]:
    """The files a manifest lists, in manifest order; refuses anything that is not exactly
    ``manifest_bytes`` of some file list with ``artifact_corrupt`` and a one-line reason."""
    try:
        document = decode_object(data)
    except RunStoreError as error:
        raise ArtifactCorruptError(f"manifest is not canonical JSON: {error.message}") from None
    if set(document) != _TOP_KEYS:
        raise ArtifactCorruptError(f"manifest must have exactly the keys {sorted(_TOP_KEYS)}")
    if type(document["schema_version"]) is not int or document["schema_version"] != 1:
        raise ArtifactCorruptError("manifest schema_version must be the integer 1")
    if document["complete"] is not True:
        raise ArtifactCorruptError("manifest complete must be true")
    listed = document["files"]
    if type(listed) is not list:
        raise ArtifactCorruptError("manifest files must be an array")
    files = tuple(_parse_file(index, item) for index, item in enumerate(listed))
    for index in range(1, len(files)):
        if path_order(files[index - 1].path) >= path_order(files[index].path):
            raise ArtifactCorruptError(
                f"manifest files are not sorted and unique at {files[index].path!r:.100}"
            )
    clash = _listed_directory(files)
    if clash is not None:
        raise ArtifactCorruptError(
            f"manifest lists {clash!r:.100} both as a file and as another path's directory"
        )
    return files


def _listed_directory(files: Sequence[ManifestFile]) -> str | None:
    """The first listed path that is also a directory of another listed path (``a`` beside
    ``a/b``: no tree holds both), or None. Byte order does not put ``a/b`` right after
    ``a`` (``a-x`` and ``a.txt`` sort between them), so this collects every parent
    directory instead of comparing neighbours; each path stops at its first ancestor
    already collected, so every directory is collected once."""
    directories: set[str] = set()
    for file in files:
        parent = file.path
        while (cut := parent.rfind("/")) > 0:
            parent = parent[:cut]
            if parent in directories:
                break
            directories.add(parent)
    if not directories:
        return None
    return next((file.path for file in files if file.path in directories), None)


def _parse_file(index: int, item: JSON) -> ManifestFile:
    if type(item) is not dict or set(item) != _FILE_KEYS:
        raise ArtifactCorruptError(
            f"manifest file {index} must have exactly the keys {sorted(_FILE_KEYS)}"
        )
    path, digest, size = item["path"], item["sha256"], item["size_bytes"]
    if type(path) is not str:
        raise ArtifactCorruptError(f"manifest file {index} path must be a string")
    try:
        check_entry_name(path)
    except UnsafeEntryError as error:
        raise ArtifactCorruptError(f"manifest file {index}: {error.message}") from None
    if path.split("/")[0] == MANIFEST_NAME:  # the runtime's name at the root, whatever its type
        raise ArtifactCorruptError("manifest lists manifest.json itself or a path under it")
    if item["media_type"] != MEDIA_TYPE:
        raise ArtifactCorruptError(f"manifest file {path!r:.100} media_type must be {MEDIA_TYPE}")
    try:
        check_digest(digest, "sha256")
    except InvalidRecordError:
        raise ArtifactCorruptError(f"manifest file {path!r:.100} sha256 is malformed") from None
    if type(size) is not int or size < 0:
        raise ArtifactCorruptError(f"manifest file {path!r:.100} size_bytes must be an int >= 0")
    assert type(digest) is str  # checked above; narrows for the type checker
    return ManifestFile(path=path, sha256=digest, size_bytes=size)
