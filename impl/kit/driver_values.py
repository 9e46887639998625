"""This package's answers to the value operations of the driver protocol (SPEC.md section
18.2), for :mod:`runstore.kit.driver`.

Rules of this file: each operation is a function of its ``args`` returning its ``result``
and raising the library's ``RunStoreError`` as its refusal; the library computes every
byte (nothing is re-implemented here). ``payload.check`` is the one operation that touches
the filesystem: a temporary directory of its own, removed after.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

from runstore import canonical
from runstore.errors import InvalidCanonicalJsonError
from runstore.errors import InvalidRecordError
from runstore.errors import UnsafeEntryError
from runstore.identity import attempt_identity_document
from runstore.identity import identity_input
from runstore.identity import run_attempt_id
from runstore.identity import typed_identity
from runstore.manifest import ManifestFile
from runstore.manifest import check_entry_name
from runstore.manifest import manifest_bytes
from runstore.manifest import parse_manifest
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.store.publication import inventory
from runstore.tree_hash import Entry
from runstore.tree_hash import tree_sha256

from .forms import contained
from .wire import describe
from .wire import hex_bytes
from .wire import integer
from .wire import member
from .wire import value_of

RESERVED = ("manifest.json", "outcome.json")
"""The runtime-owned root names of a payload (SPEC.md section 11)."""

RECORD_TYPES: dict[str, Any] = {
    "decision": ApplicabilityDecision,
    "run": ResolvedRun,
    "attempt-slot": AttemptSlot,
    "observation-slot": ObservationSlot,
    "observation": Observation,
}

Args = dict[str, Any]


def _record_type(name: object) -> Any:
    if name not in RECORD_TYPES:
        raise InvalidRecordError(f"unknown record type {str(name)[:40]}")
    return RECORD_TYPES[str(name)]


def encode(args: Args) -> Args:
    return {"canonical_hex": canonical.encode(value_of(member(args, "value"))).hex()}


def decode(args: Args) -> Args:
    return {"value": describe(canonical.decode(hex_bytes(member(args, "input_hex"), "input")))}


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidCanonicalJsonError("the text is not UTF-8") from None


def timestamp_parse(args: Args) -> Args:
    text = _text(hex_bytes(member(args, "text_hex"), "text_hex"))
    return {"ns": str(canonical.ns_from_json(text))}


def timestamp_format(args: Args) -> Args:
    ns = integer(member(args, "ns"), "ns")
    return {"text_hex": canonical.ns_to_json(ns).encode("utf-8").hex()}


def record_identity(args: Args) -> Args:
    prefix, fields = member(args, "type"), member(args, "fields")
    record_type = _record_type(prefix)
    if not isinstance(fields, dict):
        raise InvalidRecordError("fields must be an object")
    record = record_type.from_json({**fields, "id": typed_identity(prefix, fields)})
    return {
        "identity_input_hex": identity_input(prefix, fields).hex(),
        "id": record.id,
        "record_json_hex": record.to_bytes().hex(),
    }


def record_read(args: Args) -> Args:
    record_type = _record_type(member(args, "type"))
    record = record_type.from_bytes(hex_bytes(member(args, "record_json_hex"), "record_json"))
    return {"id": record.id}


def attempt_id(args: Args) -> Args:
    slot_id = member(args, "slot_id")
    retry_index = integer(member(args, "retry_index"), "retry_index")
    attempt = run_attempt_id(slot_id, retry_index)
    document = attempt_identity_document(slot_id, retry_index)
    return {"identity_input_hex": identity_input("attempt", document).hex(), "id": attempt}


def artifact_document(args: Args) -> Args:
    fields = member(args, "fields")
    if not isinstance(fields, dict):
        raise InvalidRecordError("fields must be an object")
    artifact = ArtifactRegistration.from_json(
        {**fields, "id": f"run-store-v1:{fields.get('kind')}-{fields.get('content_sha256')}"}
    )
    return {"id": artifact.id, "document_hex": canonical.encode(artifact.to_json()).hex()}


def _entry(item: object) -> Entry:
    kind, path = member(item, "type"), member(item, "path")
    if kind not in ("directory", "file", "symlink") or not isinstance(path, str):
        raise InvalidRecordError("a tree entry is a directory, file or symlink with a path")
    if kind == "file":
        executable = member(item, "executable")
        if type(executable) is not bool:
            raise InvalidRecordError("a file's executable is a boolean")
        data = hex_bytes(member(item, "data_hex"), "data_hex")
        return Entry(path=path, type=kind, data=data, executable=executable)
    if kind == "symlink":
        target = member(item, "target")
        if not isinstance(target, str):
            raise InvalidRecordError("a symlink's target is a string")
        return Entry(path=path, type=kind, target=target)
    return Entry(path=path, type=kind)


def tree_hash(args: Args) -> Args:
    entries = member(args, "entries")
    if not isinstance(entries, list):
        raise InvalidRecordError("entries must be an array")
    return {"tree_sha256": tree_sha256(_entry(item) for item in entries)}


def manifest_build(args: Args) -> Args:
    files = member(args, "files")
    if not isinstance(files, list):
        raise InvalidRecordError("files must be an array")
    entries: list[Entry] = []
    listed: list[ManifestFile] = []
    directories: set[str] = set()
    paths = [member(item, "path") for item in files]
    for path in paths:
        check_entry_name(path)
    parents = {"/".join(p.split("/")[:n]) for p in paths for n in range(1, p.count("/") + 1)}
    runtime = {p for p in paths if p.split("/")[0] == "manifest.json"}
    clash = sorted(runtime | parents & set(paths))
    if clash or len(set(paths)) != len(paths):
        raise UnsafeEntryError(f"the payload cannot hold {clash[:1] or 'a repeated path'}")
    for item in files:
        path, data = member(item, "path"), hex_bytes(member(item, "data_hex"), "data_hex")
        listed.append(
            ManifestFile(path=path, sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
        )
        entries.append(
            Entry(path=path, type="file", data=data, executable=bool(member(item, "executable")))
        )
        parts = path.split("/")
        directories.update("/".join(parts[:n]) for n in range(1, len(parts)))
    manifest = manifest_bytes(listed)
    entries += [Entry(path=d, type="directory") for d in directories]
    entries.append(Entry(path="manifest.json", type="file", data=manifest))
    return {
        "manifest_hex": manifest.hex(),
        "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
        "tree_sha256": tree_sha256(entries),
    }


def manifest_read(args: Args) -> Args:
    parse_manifest(hex_bytes(member(args, "manifest_hex"), "manifest_hex"))
    return {}


def name_check(args: Args) -> Args:
    check_entry_name(member(args, "path"))
    return {}


def _name(item: object) -> bytes:
    if isinstance(item, dict) and "path_hex" in item:
        return hex_bytes(member(item, "path_hex"), "path_hex")
    path = member(item, "path")
    if not isinstance(path, str):
        raise InvalidRecordError("an entry's path is a string")
    return os.fsencode(path)


def _create(root: bytes, name: bytes, item: object) -> None:
    path, kind = os.path.join(root, name), member(item, "type")
    if kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        os.symlink(os.fsencode(member(item, "target")), path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, hex_bytes(member(item, "data_hex"), "data_hex"))
        finally:
            os.close(fd)
        os.chmod(path, 0o755 if member(item, "executable") else 0o644)


def payload_check(args: Args) -> Args:
    entries = member(args, "entries")
    if not isinstance(entries, list):
        raise InvalidRecordError("entries must be an array")
    named = [(_name(item), member(item, "type")) for item in entries]
    if any(kind not in ("directory", "file", "symlink", "fifo") for _, kind in named):
        raise InvalidRecordError("an entry's type is directory, file, symlink or fifo")
    contained(named)
    with tempfile.TemporaryDirectory(prefix="runstore-payload-") as root:
        for (name, _), item in zip(named, entries, strict=True):
            try:
                _create(os.fsencode(root), name, item)
            except OSError as error:
                raise UnsafeEntryError(
                    f"{name!r:.80} cannot be created: {error.strerror}"
                ) from None
        inventory.scan(root, reserved=RESERVED)
    return {}


OPERATIONS: dict[str, Callable[[Args], Args]] = {
    "canonical.encode": encode,
    "canonical.decode": decode,
    "timestamp.parse": timestamp_parse,
    "timestamp.format": timestamp_format,
    "record.identity": record_identity,
    "record.read": record_read,
    "attempt.id": attempt_id,
    "artifact.document": artifact_document,
    "tree.hash": tree_hash,
    "manifest.build": manifest_build,
    "manifest.read": manifest_read,
    "name.check": name_check,
    "payload.check": payload_check,
}
"""The value operations, by protocol name."""
