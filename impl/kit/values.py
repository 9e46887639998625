"""Level ``values`` (SPEC.md section 18.4): every case of ``canonical_json.json``,
``identities.json`` and ``content.json`` as requests of section 18.2, one check per file
section.

Rules of this file: cases are read from the committed vector files only (as another
implementation reads them), and each check is named ``<file> <section>``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .cases import Case
from .cases import Drivers
from .cases import Request
from .cases import fields
from .cases import refused
from .cases import run_cases
from .cases import succeeds
from .cases import value
from .report import Check

Builder = Callable[[dict[str, Any]], tuple[Request, ...]]


def read_vectors(directory: Path, name: str) -> dict[str, Any]:
    """``<directory>/<name>`` decoded (an ASCII JSON object)."""
    data = (directory / name).read_bytes()
    data.decode("ascii")
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError(f"{name} is not a JSON object")
    return document


def _encode(c: dict[str, Any]) -> tuple[Request, ...]:
    return (
        Request(
            "canonical.encode", {"value": c["value"]}, fields({"canonical_hex": c["canonical_hex"]})
        ),
        Request("canonical.decode", {"input_hex": c["canonical_hex"]}, value(c["value"])),
    )


def _timestamp(c: dict[str, Any]) -> tuple[Request, ...]:
    return (
        Request("timestamp.parse", {"text_hex": c["text_hex"]}, fields({"ns": c["ns"]})),
        Request("timestamp.format", {"ns": c["ns"]}, fields({"text_hex": c["text_hex"]})),
    )


def _record(c: dict[str, Any]) -> tuple[Request, ...]:
    expected = {k: c[k] for k in ("identity_input_hex", "id", "record_json_hex")}
    read = {"type": c["type"], "record_json_hex": c["record_json_hex"]}
    return (
        Request("record.identity", {"type": c["type"], "fields": c["fields"]}, fields(expected)),
        Request("record.read", read, fields({"id": c["id"]})),
    )


def _attempt(c: dict[str, Any]) -> tuple[Request, ...]:
    args = {"slot_id": c["slot_id"], "retry_index": c["retry_index"]}
    expected = {"identity_input_hex": c["identity_input_hex"], "id": c["id"]}
    return (Request("attempt.id", args, fields(expected)),)


def _manifest(c: dict[str, Any]) -> tuple[Request, ...]:
    expected = {k: c[k] for k in ("manifest_hex", "manifest_sha256", "tree_sha256")}
    return (
        Request("manifest.build", {"files": c["files"]}, fields(expected)),
        Request("manifest.read", {"manifest_hex": c["manifest_hex"]}, succeeds),
    )


def _refusing(op: str, *keys: str) -> Builder:
    return lambda c: (Request(op, {k: c[k] for k in keys}, refused(c["error_code"])),)


def _artifact_refused(c: dict[str, Any]) -> tuple[Request, ...]:
    # The op's ``fields`` are a registration's fields as in ``artifacts``: the case's
    # document without its "id" (which names the same kind and digest).
    registration = {k: v for k, v in c["fields"].items() if k != "id"}
    args = {"fields": registration}
    return (Request("artifact.document", args, refused(c["error_code"])),)


def _one(op: str, keys: tuple[str, ...], expected: tuple[str, ...]) -> Builder:
    return lambda c: (Request(op, {k: c[k] for k in keys}, fields({k: c[k] for k in expected})),)


SECTIONS: tuple[tuple[str, str, Builder], ...] = (
    ("canonical_json.json", "encode", _encode),
    ("canonical_json.json", "encode_refused", _refusing("canonical.encode", "value")),
    ("canonical_json.json", "decode_refused", _refusing("canonical.decode", "input_hex")),
    ("canonical_json.json", "timestamps", _timestamp),
    ("canonical_json.json", "timestamps_refused", _refusing("timestamp.parse", "text_hex")),
    ("identities.json", "records", _record),
    ("identities.json", "records_refused", _refusing("record.read", "type", "record_json_hex")),
    ("identities.json", "attempt_ids", _attempt),
    ("identities.json", "attempt_ids_refused", _refusing("attempt.id", "slot_id", "retry_index")),
    (
        "identities.json",
        "artifacts",
        _one("artifact.document", ("fields",), ("id", "document_hex")),
    ),
    ("identities.json", "artifacts_refused", _artifact_refused),
    ("content.json", "tree_hashes", _one("tree.hash", ("entries",), ("tree_sha256",))),
    ("content.json", "manifests", _manifest),
    ("content.json", "manifests_refused", _refusing("manifest.read", "manifest_hex")),
    (
        "content.json",
        "names_accepted",
        lambda c: (Request("name.check", {"path": c["path"]}, succeeds),),
    ),
    ("content.json", "names_refused", _refusing("name.check", "path")),
    ("content.json", "entries_refused", _refusing("payload.check", "entries")),
)
"""Every value check: its file, section and how a case becomes requests."""


def value_checks(
    drivers: Drivers, vectors: Path, wanted: Callable[[str], bool] = lambda name: True
) -> Iterator[Check]:
    """Run every value check (those ``wanted`` by name), yielding each as it finishes."""
    documents: dict[str, dict[str, Any]] = {}
    for file, section, build in SECTIONS:
        if not wanted(f"{file} {section}"):
            continue
        if file not in documents:
            documents[file] = read_vectors(vectors, file)
        cases = (Case(c["name"], build(c)) for c in documents[file][section])
        yield run_cases(drivers, Check(f"{file} {section}"), cases)
