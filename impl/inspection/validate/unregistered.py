"""``validate``'s sixth part: completed attempt objects no row registers (SPEC.md section
16.1, *Unregistered objects*): ``artifact_unregistered`` when an object's ``outcome.json``
says more than the database holds, so commits were lost after it was published (a deleted
or truncated WAL rolls a stopped store back to its last checkpoint; the objects stay).

Rules of this file: reads only. The ``attempt-*`` names are listed by
:func:`list_attempt_objects` *before* the snapshot is copied (spooled to a temporary file,
not held), and only those are judged, so
every object judged was renamed into place before the copy was taken: one that a
publisher renames while ``validate`` runs is not listed, and for one renamed earlier
everything its document relies on was committed before the copy. Objects are read in
place without following links, never written or synced; a full check verifies every byte
(:func:`runstore.store.publication.objects.verify`), a quick one the listing against the
manifest; ``outcome.json`` is read only up to :data:`OUTCOME_LIMIT` bytes, and decoded by
the canonical reader, which bounds nesting. Hostile bytes are a finding, never an error.
An object that does not verify is not judged: only a complete object is the runtime's
claim, and recovery rejects the others (``corrupt``).

Why an object consistent with the database is no finding: a publisher (or recovery) that
dies between the rename and its commit leaves exactly such an orphan, which recovery
imports or rejects (section 14); the document was read from the database while the
attempt was finalizing, and a database that loses no commit only moves on from there.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import stat
import tempfile
from collections.abc import Iterable
from collections.abc import Iterator
from typing import IO
from typing import Final

import attrs
from runstore.canonical import JSON
from runstore.canonical import decode_object
from runstore.canonical import ns_from_json
from runstore.enums import ArtifactKind
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.inspection.validate.artifacts import quick_manifest
from runstore.inspection.validate.findings import Report
from runstore.inspection.validate.reading import TERMINAL_VALUES
from runstore.inspection.validate.reading import Row
from runstore.inspection.validate.reading import stream
from runstore.manifest import ManifestFile
from runstore.outcome_json import member
from runstore.outcome_json import outcome_claim
from runstore.store.publication import objects
from runstore.store.publication.staging import ARTIFACTS_DIR

ARTIFACT_UNREGISTERED: Final = "artifact_unregistered"
CODES: Final = (ARTIFACT_UNREGISTERED,)

OUTCOME_NAME: Final = "outcome.json"
OUTCOME_LIMIT: Final = 16 << 20
"""The largest ``outcome.json`` read (16 MiB); a larger one is a finding, not read."""
_ATTEMPT_ADDRESS: Final = re.compile(f"{ArtifactKind.ATTEMPT.value}-[0-9a-f]{{64}}", re.ASCII)
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY_FLAGS: Final = _READ_FLAGS | os.O_DIRECTORY


@attrs.frozen(kw_only=True)
class _Claims:
    """What an outcome document says the database held when it was written."""

    attempt_id: str
    slot_id: str
    retry_index: int
    finalizing_revision: int
    started_at_ns: int
    finished_at_ns: int
    dependencies: tuple[str, ...]
    produced: tuple[tuple[str, str], ...]
    """(observation id, its artifact id) of every observation the attempt produced."""
    selected: tuple[tuple[str, str], ...]
    """(observation slot id, observation id) of every selection the snapshot lists."""


class ObjectNames:
    """The ``attempt-*`` names of ``artifacts/`` as listed at one moment, spooled one per
    line to an anonymous temporary file, so memory does not grow with the store; iterating
    reads them back in the directory's order. Close it (or use ``with``) to discard them."""

    def __init__(self, spool: IO[str] | None) -> None:
        self._spool = spool

    def __iter__(self) -> Iterator[str]:
        if self._spool is None:
            return
        self._spool.seek(0)
        for line in self._spool:
            yield line.rstrip("\n")

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def __enter__(self) -> ObjectNames:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def list_attempt_objects(root: str) -> ObjectNames:
    """The names of the entries of ``root``'s ``artifacts/`` that are attempt addresses
    (``attempt-<64 lowercase hex>``); none when ``artifacts/`` cannot be listed (missing,
    a link, not a directory: :mod:`.artifacts` reports the last two). Called before the
    snapshot is taken and tolerant of any root: the snapshot's refusals come after it."""
    try:
        fd = os.open(os.path.join(root, ARTIFACTS_DIR), _DIRECTORY_FLAGS)
    except (OSError, ValueError):
        return ObjectNames(None)
    # Not a ``with``: the returned ObjectNames owns the file and closes it.
    spool = tempfile.TemporaryFile("w+", encoding="ascii")  # noqa: SIM115
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if _ATTEMPT_ADDRESS.fullmatch(entry.name):
                    spool.write(entry.name + "\n")
    except OSError:
        spool.close()
        return ObjectNames(None)
    finally:
        os.close(fd)
    return ObjectNames(spool)


def check_unregistered(
    connection: sqlite3.Connection,
    root: str,
    names: Iterable[str],
    *,
    quick: bool,
    report: Report,
) -> int:
    """Judge each of ``names`` (listed before the snapshot) that no artifact row
    registers, in name order: a complete object whose ``outcome.json`` is missing,
    unreadable, not an outcome document, or names records the database lacks is
    ``artifact_unregistered`` (subject: its store path). Returns how many unregistered
    objects were judged. Only the unregistered names are held (a store's few leftovers)."""
    judged = 0
    unregistered = sorted(
        name
        for name in names
        if not _registered(connection, objects.address(ArtifactKind.ATTEMPT, _digest(name))[0])
    )
    for name in unregistered:
        path = objects.address(ArtifactKind.ATTEMPT, _digest(name))[1]
        read = _outcome_bytes(root, path, name, quick=quick)
        if read is None:
            continue
        judged += 1
        problem = read if isinstance(read, str) else _judge(connection, read)
        if problem is not None:
            report(ARTIFACT_UNREGISTERED, path, f"no artifact row registers it, and {problem}")
    return judged


def _digest(name: str) -> str:
    return name.split("-", 1)[1]


def _registered(connection: sqlite3.Connection, artifact_id: str) -> bool:
    return _one(connection, "SELECT 1 FROM artifacts WHERE id = ?", artifact_id) is not None


def _outcome_bytes(root: str, path: str, name: str, *, quick: bool) -> bytes | str | None:
    """The object's ``outcome.json`` bytes; a problem (str) when it has none or one too
    large to read; None when it is not a complete object (it does not verify, its name
    is not its tree hash, or ``outcome.json`` changed after it was verified)."""
    directory = os.path.join(root, path)
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return None
        if quick:
            files = quick_manifest(directory)[0]
        else:
            completed = objects.verify(directory, sync=False)
            if completed.tree_sha256 != name.split("-", 1)[1]:
                return None
            files = completed.files
    except (ArtifactCorruptError, OSError):
        return None
    listed: dict[str, ManifestFile] = {file.path: file for file in files}
    entry = listed.get(OUTCOME_NAME)
    if entry is None:
        return "it holds no outcome.json"
    if entry.size_bytes > OUTCOME_LIMIT:
        return f"its outcome.json is {entry.size_bytes} bytes, more than the {OUTCOME_LIMIT} read"
    try:
        fd = os.open(os.path.join(directory, OUTCOME_NAME), _READ_FLAGS)
    except OSError:
        return None
    try:
        data = _read_at_most(fd, entry.size_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if hashlib.sha256(data).hexdigest() == entry.sha256 else None


def _read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (fewer at its end)."""
    chunks: list[bytes] = []
    remaining = limit
    while remaining and (chunk := os.read(fd, min(remaining, 1 << 20))):
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _judge(connection: sqlite3.Connection, data: bytes) -> str | None:
    """What the document names that the database lacks (the first), or None when the
    database holds it all as a database that lost no commit would."""
    try:
        claims = _claims(data)
    except RunStoreError as error:
        return f"its outcome.json is not an outcome document: {error.message}"
    attempt = claims.attempt_id
    row = _one(
        connection,
        "SELECT slot_id, retry_index, started_at_ns, state, revision FROM attempts WHERE id = ?",
        attempt,
    )
    if row is None:
        return f"its outcome.json names {attempt}, which the database lacks"
    if tuple(row[:3]) != (claims.slot_id, claims.retry_index, claims.started_at_ns):
        return (
            f"its outcome.json names {attempt} reserved at {claims.started_at_ns}; the "
            f"database holds another reservation under that id (at {row[2]})"
        )
    problem = _state_problem(connection, claims, str(row[3]), row[4])
    if problem is not None:
        return problem
    for dependency in claims.dependencies:
        if not _registered(connection, dependency):
            return f"the outcome of {attempt} depends on {dependency}, which the database lacks"
    for observation, artifact in claims.produced:
        held = _one(
            connection, "SELECT attempt_id, artifact_id FROM observations WHERE id = ?", observation
        )
        if held is None or tuple(held) != (attempt, artifact):
            return (
                f"the outcome of {attempt} lists observation {observation}, which the "
                "database lacks"
            )
    for slot, observation in claims.selected:
        held = _one(
            connection, "SELECT observation_id FROM selected_observations WHERE slot_id = ?", slot
        )
        if held is None or held[0] != observation:
            return (
                f"the outcome of {attempt} lists the selection of {observation} in {slot}, "
                "which the database lacks"
            )
    return None


def _state_problem(
    connection: sqlite3.Connection, claims: _Claims, state: str, revision: object
) -> str | None:
    """The attempt must be where the document left it or one step on: finalizing at the
    document's revision, or terminal at the next; and its move to finalizing at that
    revision must be no later than the document's finish time (a later one is another
    move, as recovery's after a rollback)."""
    attempt, at = claims.attempt_id, claims.finalizing_revision
    expected = {"finalizing": at, **{terminal: at + 1 for terminal in TERMINAL_VALUES}}
    if expected.get(state) != revision:
        return (
            f"its outcome.json names {attempt} finalizing at revision {at}; the database "
            f"holds it {state} at revision {revision}"
        )
    moved = _one(
        connection,
        "SELECT to_state, at_ns FROM attempt_transitions WHERE attempt_id = ? AND revision = ?",
        attempt,
        at,
    )
    if (
        moved is None
        or moved[0] != "finalizing"
        or type(moved[1]) is not int  # damage other checks report
        or moved[1] > claims.finished_at_ns
    ):
        return (
            f"its outcome.json names {attempt} finalizing at revision {at} by "
            f"{claims.finished_at_ns}; the database moved it there later or otherwise"
        )
    return None


def _one(connection: sqlite3.Connection, query: str, *params: object) -> Row | None:
    """The first row of ``query``, or None (the stream's cursor is closed as the loop
    leaves it)."""
    for row in stream(connection, query, params):
        return tuple(row)
    return None


# --- reading the document --------------------------------------------------------------------


def _claims(data: bytes) -> _Claims:
    """The claims of a version-1 outcome document (SPEC.md section 13): the shape
    :func:`runstore.outcome_json.read_outcome` checks, plus the attempt's slot, retry index,
    finalizing revision and start, and the ids of the snapshot's observations and
    selections. Refuses anything else with ``invalid_record`` or the canonical reader's
    code."""
    document = decode_object(data)
    claim = outcome_claim(document)
    attempt = member(document, "attempt", dict)
    snapshot = member(document, "snapshot", dict)
    produced = []
    for entry in _entries(snapshot, "produced_observations"):
        record = member(entry, "observation", dict)
        produced.append(
            (member(record, "id", str), member(member(entry, "artifact", dict), "id", str))
        )
    selected = []
    for entry in _entries(snapshot, "selected_observations"):
        record = member(entry, "observation", dict)
        selected.append((member(record, "slot_id", str), member(record, "id", str)))
    return _Claims(
        attempt_id=claim.attempt_id,
        slot_id=member(attempt, "slot_id", str),
        retry_index=member(attempt, "retry_index", int),
        finalizing_revision=member(attempt, "finalizing_revision", int),
        started_at_ns=ns_from_json(member(document, "started_at_ns", str)),
        finished_at_ns=claim.finished_at_ns,
        dependencies=tuple(sorted({reference.artifact_id for reference in claim.references})),
        produced=tuple(produced),
        selected=tuple(selected),
    )


def _entries(snapshot: dict[str, JSON], key: str) -> list[dict[str, JSON]]:
    """The objects of the snapshot's list ``key`` (an absent key is an empty list:
    failed and superseded snapshots hold no selections)."""
    items = snapshot.get(key, [])
    if type(items) is not list or any(type(item) is not dict for item in items):
        raise InvalidRecordError(f"snapshot.{key} must be a list of objects")
    return [item for item in items if isinstance(item, dict)]
