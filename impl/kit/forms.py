"""The driver protocol's result forms, payloads and the comparable projection (SPEC.md
section 18.3).

Rules of this file: pure functions, no I/O. A result is its value's ``to_json()`` (SPEC.md
section 10, "Values"), a registration's slot id as ``{slot_id}`` and a recovery report's
rejections as ``[path, code]`` pairs; a projection (table -> sorted rows, as
``runstore.audit.projection`` reads it) is written with every integer as a decimal string
and every byte column as hex, and compared only in that form, so both sides of a
comparison go through :func:`projection_wire`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from runstore.audit.projection import TABLES  # the order SPEC.md 18.3 lists them in
from runstore.errors import InvalidRecordError
from runstore.errors import UnsafeEntryError
from runstore.receipts import ClaimDisposition
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedArtifact
from runstore.receipts import PublishedFinalization
from runstore.receipts import TerminalAttempt
from runstore.recovery_report import RecoveryReport

from .wire import hex_bytes
from .wire import member

RECEIPTS = (
    OwnedAttempt,
    ClaimDisposition,
    ObservationReceipt,
    TerminalAttempt,
    PublishedArtifact,
    PublishedFinalization,
    RecoveryReport,
)


def result_wire(result: object) -> dict[str, Any]:
    """The response ``result`` of a store operation that returned ``result``."""
    if isinstance(result, str):
        return {"slot_id": result}
    if not isinstance(result, RECEIPTS):
        raise TypeError(f"no result form for {type(result).__name__}")
    document: dict[str, Any] = result.to_json()
    if isinstance(result, RecoveryReport):
        document["rejected_artifacts"] = [
            [r["path"], r["code"]] for r in document["rejected_artifacts"]
        ]
    return document


def row_key(row: list[str | None]) -> list[tuple[bool, str]]:
    """Rows of cells sort with null before any text (the order both sides use)."""
    return [(c is not None, c or "") for c in row]


def _cell(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.hex()
    if type(value) is int:
        return str(value)
    raise TypeError(f"no projection cell for {type(value).__name__}")


def projection_wire(projection: Mapping[str, Any]) -> dict[str, list[list[str | None]]]:
    """A projection (``runstore.audit.projection``'s shape) as the protocol writes it,
    rows sorted in their written form."""
    return {
        table: sorted(([_cell(value) for value in row] for row in projection[table]), key=row_key)
        for table in TABLES
    }


def projection_of(document: object) -> dict[str, list[list[str | None]]]:
    """A ``projection`` response read back, rows sorted; a table missing or a cell of
    another type is ``invalid_record``."""
    tables = member(document, "tables")
    read: dict[str, list[list[str | None]]] = {}
    for table in TABLES:
        rows = member(tables, table)
        if not isinstance(rows, list) or not all(
            isinstance(row, list) and all(c is None or isinstance(c, str) for c in row)
            for row in rows
        ):
            raise InvalidRecordError(f"projection table {table} is not an array of rows")
        read[table] = sorted(rows, key=row_key)
    return read


def contained(entries: list[tuple[bytes, str]]) -> None:
    """Refuse (``unsafe_entry``), before anything is created, an entry that would land
    outside its directory: a path with a leading ``/`` or an empty, ``.`` or ``..``
    segment, or one below an earlier symbolic link entry (creating it would follow the
    link). ``entries`` are (path bytes, type) in creation order (SPEC.md section 18.2)."""
    links: set[bytes] = set()
    for name, kind in entries:
        parts = name.split(b"/")
        if name.startswith(b"/") or any(part in (b"", b".", b"..") for part in parts):
            raise UnsafeEntryError(f"{name!r:.80} would leave the payload's directory")
        if any(b"/".join(parts[:n]) in links for n in range(1, len(parts))):
            raise UnsafeEntryError(f"{name!r:.80} lies below a symbolic link")
        if kind == "symlink":
            links.add(name)


def entries_of(document: object) -> list[dict[str, Any]]:
    """A payload's ``entries`` (``content.json``'s entry descriptions), checked for shape:
    each a ``directory``, ``file`` (``data_hex``, ``executable``), ``symlink``
    (``target``) or ``fifo``, with a string ``path``."""
    if not isinstance(document, list):
        raise InvalidRecordError("entries must be an array")
    for item in document:
        kind, path = member(item, "type"), member(item, "path")
        if not isinstance(path, str) or kind not in ("directory", "file", "symlink", "fifo"):
            raise InvalidRecordError("an entry needs a string path and a known type")
        if kind == "file":
            hex_bytes(member(item, "data_hex"), "data_hex")
            if type(member(item, "executable")) is not bool:
                raise InvalidRecordError("a file's executable is a boolean")
        if kind == "symlink" and not isinstance(member(item, "target"), str):
            raise InvalidRecordError("a symlink's target is a string")
    contained([(os.fsencode(item["path"]), item["type"]) for item in document])
    return list(document)
