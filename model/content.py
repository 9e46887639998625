"""Object content in the model: the name rules, the completion manifest and the local-tree
hash over an in-memory tree, written independently of :mod:`runstore.manifest` and
:mod:`runstore.tree_hash` (the conformance tests compare the two).

Rules of this file: pure functions over a :data:`Tree`, a mapping from ``/``-joined
relative path to :class:`File`, :class:`Directory`, :class:`Symlink` or :class:`Special`.
Parent directories are implied by their descendants (listing them is allowed); an empty
directory must be listed. A refusal is a :class:`~runstore.model.state.Refusal` value with
the store's code. This module deliberately does not import the store's format modules,
only canonical JSON and the error codes, so a shared mistake needs two authors.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Collection
from collections.abc import Mapping
from typing import TypeAlias

import attrs
from runstore.canonical import JSON
from runstore.canonical import decode
from runstore.canonical import encode
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import RunStoreError
from runstore.errors import UnsafeEntryError
from runstore.model.state import Refusal
from runstore.model.state import refuse


@attrs.frozen
class File:
    data: bytes
    executable: bool = False


@attrs.frozen
class Directory:
    pass


@attrs.frozen
class Symlink:
    target: str


@attrs.frozen
class Special:
    """A FIFO, socket or device: present in a real tree, never publishable or hashable."""


Entry: TypeAlias = File | Directory | Symlink | Special
Tree: TypeAlias = Mapping[str, Entry]

MANIFEST = "manifest.json"
RESERVED = frozenset({"manifest.json", "outcome.json"})
_BAD_CHARACTERS = frozenset(
    [chr(code) for code in range(0x20)] + [chr(code) for code in range(0x7F, 0xA0)] + ["\\"]
)


def with_parents(tree: Tree) -> dict[str, Entry]:
    """``tree`` with every implied parent directory listed as a :class:`Directory`; a
    parent that is listed as something else is ``invalid_record`` (not a tree)."""
    full: dict[str, Entry] = dict(tree)
    for path in tree:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            node = full.setdefault(parent, Directory())
            if not isinstance(node, Directory):
                raise InvalidRecordError(f"{parent!r:.80} has entries but is not a directory")
    return full


def _key(path: str) -> bytes:
    return path.encode("utf-8", "surrogatepass")


def name_refusal(path: str) -> Refusal | None:
    """The name rules: UTF-8 text, NFC, no backslash or control character, no empty, ``.``
    or ``..`` segment, segments of at most 255 UTF-8 bytes."""
    if any(0xD800 <= ord(char) <= 0xDFFF for char in path):
        return refuse(UnsafeEntryError, f"{path!r:.120} is not UTF-8")
    if any(char in _BAD_CHARACTERS for char in path):
        return refuse(UnsafeEntryError, f"{path!r:.120} holds a backslash or control character")
    segments = path.split("/")
    if "" in segments or "." in segments or ".." in segments:
        return refuse(UnsafeEntryError, f"{path!r:.120} is not a normalized relative path")
    if max(len(segment.encode("utf-8")) for segment in segments) > 255:
        return refuse(UnsafeEntryError, f"{path!r:.120} has a segment over 255 bytes")
    if unicodedata.normalize("NFC", path) != path:
        return refuse(UnsafeEntryError, f"{path!r:.120} is not NFC")
    return None


def refusal(tree: Tree, reserved: Collection[str] = RESERVED) -> Refusal | None:
    """What the publisher refuses in a payload tree (``unsafe_entry``), first by path:
    an unsafe name, a root-level reserved name, a symbolic link, a special file, an empty
    directory. None when the tree is publishable."""
    full = with_parents(tree)
    parents = {path.rpartition("/")[0] for path in full}
    for path in sorted(full, key=_key):
        node = full[path]
        problem = name_refusal(path)
        if problem is not None:
            return problem
        if "/" not in path and path in reserved:
            return refuse(UnsafeEntryError, f"{path!r:.120} is runtime-owned")
        if isinstance(node, Symlink):
            return refuse(UnsafeEntryError, f"{path!r:.120} is a symbolic link")
        if isinstance(node, Special):
            return refuse(UnsafeEntryError, f"{path!r:.120} is a special file")
        if isinstance(node, Directory) and path not in parents:
            return refuse(UnsafeEntryError, f"{path!r:.120} is an empty directory")
    return None


def manifest_bytes(tree: Tree) -> bytes:
    """The completion manifest listing every file of ``tree`` except a root
    ``manifest.json``. A file over 2**53-1 bytes would be ``out_of_range``."""
    files: list[JSON] = []
    for path in sorted(tree, key=_key):
        node = tree[path]
        if isinstance(node, File) and path != MANIFEST:
            if len(node.data) > 2**53 - 1:
                raise OutOfRangeError(f"{path!r:.80} is too large to list")
            files.append(
                {
                    "media_type": "application/octet-stream",
                    "path": path,
                    "sha256": hashlib.sha256(node.data).hexdigest(),
                    "size_bytes": len(node.data),
                }
            )
    return encode({"complete": True, "files": files, "schema_version": 1})


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def tree_sha256(tree: Tree) -> str:
    """The version-1 local-tree hash of ``tree`` (symbolic links hashed by target; a
    special file cannot be hashed: ``unsafe_entry``)."""
    full = with_parents(tree)
    transcript = [b"metewand-local-tree\x00", (1).to_bytes(4, "big")]
    transcript.append(len(full).to_bytes(8, "big"))
    for path in sorted(full, key=_key):
        node = full[path]
        transcript.append(_field(path.encode("utf-8")))
        if isinstance(node, Directory):
            transcript.append(b"d")
        elif isinstance(node, File):
            transcript.append(b"f\x01" if node.executable else b"f\x00")
            transcript.append(_field(node.data))  # u64(size) || bytes
        elif isinstance(node, Symlink):
            transcript.append(b"l" + _field(node.target.encode("utf-8")))
        else:
            raise UnsafeEntryError(f"{path!r:.80} is a special file: not hashable")
    return hashlib.sha256(b"".join(transcript)).hexdigest()


def complete(
    tree: Tree,
    runtime_files: Mapping[str, bytes],
    reserved: Collection[str] | None = None,
) -> tuple[Mapping[str, Entry], str, str] | Refusal:
    """Complete a payload: refuse what the publisher refuses (``reserved`` defaults to
    ``manifest.json``, ``outcome.json`` and the runtime names), add the runtime files (not
    executable) and ``manifest.json``. Result: ``(completed tree, tree_sha256,
    manifest_sha256)``."""
    names = set(RESERVED if reserved is None else reserved) | set(runtime_files) | {MANIFEST}
    problem = refusal(tree, names)
    if problem is not None:
        return problem
    for name in runtime_files:
        problem = name_refusal(name)
        if problem is not None or "/" in name or name == MANIFEST:
            return refuse(UnsafeEntryError, f"runtime file {name!r:.80} is not a root name")
    completed: dict[str, Entry] = dict(tree)
    completed.update({name: File(data) for name, data in runtime_files.items()})
    manifest = manifest_bytes(completed)
    completed[MANIFEST] = File(manifest)
    return completed, tree_sha256(completed), hashlib.sha256(manifest).hexdigest()


def manifest_refusal(data: bytes) -> Refusal | None:
    """The strict manifest reader: ``artifact_corrupt`` unless ``data`` is exactly the
    manifest of some file list (so ``representation``, other media types, unsafe or
    unsorted paths, a path that is also another listed path's directory and any
    non-canonical byte are refused)."""

    def corrupt(reason: str) -> Refusal:
        return refuse(ArtifactCorruptError, reason)

    try:
        document = decode(data)
    except RunStoreError as error:
        return corrupt(f"not canonical JSON: {error.message}")
    expected = {"complete": True, "files": None, "schema_version": 1}
    if type(document) is not dict or set(document) != set(expected):
        return corrupt("not an object with exactly complete, files, schema_version")
    if document["complete"] is not True or document["schema_version"] != 1:
        return corrupt("complete must be true and schema_version 1")
    if type(document["schema_version"]) is not int or type(document["files"]) is not list:
        return corrupt("schema_version must be an integer and files an array")
    previous = b""
    paths: set[str] = set()
    for item in document["files"]:
        keys = {"media_type", "path", "sha256", "size_bytes"}
        if type(item) is not dict or set(item) != keys:
            return corrupt("a file must have exactly media_type, path, sha256, size_bytes")
        path, digest, size = item["path"], item["sha256"], item["size_bytes"]
        if (
            type(path) is not str
            or name_refusal(path) is not None
            or path.split("/")[0] == MANIFEST
        ):
            return corrupt(f"file path {path!r:.80} is not a safe, listable name")
        if item["media_type"] != "application/octet-stream":
            return corrupt(f"{path!r:.80} has another media_type")
        if type(digest) is not str or len(digest) != 64 or set(digest) - set("0123456789abcdef"):
            return corrupt(f"{path!r:.80} has a malformed sha256")
        if type(size) is not int or size < 0:
            return corrupt(f"{path!r:.80} has a malformed size_bytes")
        if _key(path) <= previous:
            return corrupt(f"{path!r:.80} is out of order or repeated")
        previous = _key(path)
        paths.add(path)
    for path in sorted(paths, key=_key):
        segments = path.split("/")
        if any("/".join(segments[:depth]) in paths for depth in range(1, len(segments))):
            return corrupt(f"{path!r:.80} lies below another listed file: no tree holds both")
    return None
