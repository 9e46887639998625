"""``validate``'s fifth part, the artifacts (SPEC.md section 16.1, *Artifacts*): each
registered artifact's address and its directory.

Rules of this file: the artifact rows are streamed from the raw snapshot's connection;
the directories are read in place under the store root, never written, synced or
followed through a symbolic link (:func:`runstore.store.publication.inventory.walk` and
:func:`runstore.store.publication.objects.verify` with ``sync=False``, and ``O_NOFOLLOW`` reads).
The address comes from :func:`runstore.store.publication.objects.address`, the manifest format from
:mod:`runstore.manifest`: nothing is re-implemented. A full check reads every byte; a quick
one reads only the directory listing and ``manifest.json``. Findings go to the ``report``
callback; subjects are the artifact id for a row defect and the artifact's store path for
an on-disk one.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterable
from typing import Final

from runstore.enums import ArtifactKind
from runstore.errors import ArtifactCorruptError
from runstore.errors import RunStoreError
from runstore.errors import UnsafeEntryError
from runstore.inspection.validate.findings import Report
from runstore.inspection.validate.reading import stream
from runstore.inspection.validate.records import RECORD_INVALID
from runstore.manifest import MANIFEST_NAME
from runstore.manifest import ManifestFile
from runstore.manifest import manifest_sha256
from runstore.manifest import parse_manifest
from runstore.manifest import path_order
from runstore.records import ArtifactRegistration
from runstore.store.publication import objects
from runstore.store.publication.inventory import Inventory
from runstore.store.publication.inventory import InventoryFile
from runstore.store.publication.inventory import walk
from runstore.store.publication.staging import ARTIFACTS_DIR

ARTIFACT_ADDRESS: Final = "artifact_address"
ARTIFACT_MISSING: Final = "artifact_missing"
ARTIFACT_CORRUPT: Final = "artifact_corrupt"
ARTIFACT_CONTENT_MISMATCH: Final = "artifact_content_mismatch"
ARTIFACT_MANIFEST_MISMATCH: Final = "artifact_manifest_mismatch"

CODES: Final = (
    ARTIFACT_ADDRESS,
    ARTIFACT_MISSING,
    ARTIFACT_CORRUPT,
    ARTIFACT_CONTENT_MISMATCH,
    ARTIFACT_MANIFEST_MISMATCH,
)

_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK: Final = 1 << 20


def check_artifacts(
    connection: sqlite3.Connection, root: str, *, quick: bool, report: Report
) -> int:
    """Check every row of ``artifacts``: its id and path are the address of its kind and
    content digest, and its directory at that address is a completed object whose tree
    hash is ``content_sha256`` and whose manifest hashes to ``manifest_sha256``. With
    ``quick`` the directory's listing (names, sizes, types) is compared with its manifest
    and the manifest is hashed, but no other file is read. A missing ``artifacts``
    directory makes every artifact missing; one that is a symbolic link or not a
    directory is one ``artifact_corrupt`` finding and no artifact is read. Returns the
    number of rows checked."""
    parent = os.path.join(root, ARTIFACTS_DIR)
    readable = _parent_readable(parent, report)
    query = (
        "SELECT id, kind, path, content_sha256, manifest_sha256, verified_at_ns "
        "FROM artifacts ORDER BY rowid"
    )
    count = 0
    for row in stream(connection, query):
        count += 1
        address = _checked_address(row, report)
        if address is not None and readable:
            _check_directory(root, address, row[3], row[4], quick=quick, report=report)
    return count


def _parent_readable(parent: str, report: Report) -> bool:
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        return True  # each artifact is then reported missing
    if stat.S_ISDIR(info.st_mode):
        return True
    report(ARTIFACT_CORRUPT, ARTIFACTS_DIR, "artifacts is a symbolic link or not a directory")
    return False


def _checked_address(row: tuple[object, ...], report: Report) -> str | None:
    """The store path the row's kind and content digest address, after checking the row
    against it (None when the row has no address at all)."""
    artifact_id, kind, path, content, manifest, verified_at = row
    subject = str(artifact_id)
    try:
        expected_id, expected_path = objects.address(str(kind), str(content))
        ArtifactRegistration(
            kind=ArtifactKind(str(kind)),
            path=expected_path,
            content_sha256=content,  # type: ignore[arg-type]
            manifest_sha256=manifest,  # type: ignore[arg-type]
            verified_at_ns=verified_at,  # type: ignore[arg-type]
        )
    except (RunStoreError, ValueError) as error:
        report(RECORD_INVALID, subject, f"artifact row: {error}")
        return None
    if (artifact_id, path) != (expected_id, expected_path):
        report(
            ARTIFACT_ADDRESS,
            subject,
            f"id and path must be {expected_id} and {expected_path}, not {path!r:.200}",
        )
    return expected_path


def _check_directory(
    root: str, path: str, content: object, manifest: object, *, quick: bool, report: Report
) -> None:
    directory = os.path.join(root, path)
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        report(ARTIFACT_MISSING, path, "the artifact directory does not exist")
        return
    except OSError as error:
        report(ARTIFACT_CORRUPT, path, f"the artifact directory cannot be read: {error}")
        return
    if not stat.S_ISDIR(info.st_mode):
        report(ARTIFACT_CORRUPT, path, "the artifact is a symbolic link or not a directory")
        return
    try:
        if quick:
            tree, digest = None, manifest_sha256(quick_manifest(directory)[1])
        else:
            completed = objects.verify(directory, sync=False)
            tree, digest = completed.tree_sha256, completed.manifest_sha256
    except ArtifactCorruptError as error:
        report(ARTIFACT_CORRUPT, path, error.message)
        return
    except OSError as error:
        report(ARTIFACT_CORRUPT, path, f"the artifact cannot be read: {error}")
        return
    if tree is not None and tree != content:
        report(ARTIFACT_CONTENT_MISMATCH, path, f"its tree hash is {tree}, not {content}")
    if digest != manifest:
        report(ARTIFACT_MANIFEST_MISMATCH, path, f"its manifest hashes to {digest}, not {manifest}")


def quick_manifest(directory: str) -> tuple[tuple[ManifestFile, ...], bytes]:
    """The files ``directory``'s manifest lists and the manifest's bytes, after comparing
    its listing with the manifest (every listed file present with its size, nothing else,
    no empty directory, link or special file), reading no file but ``manifest.json``.
    Refuses a difference with ``artifact_corrupt``."""
    try:
        found, _ = walk(directory, ())
    except UnsafeEntryError as error:
        raise ArtifactCorruptError(error.message) from None
    if not any(file.path == MANIFEST_NAME for file in found.files):
        raise ArtifactCorruptError("manifest.json is missing")
    data = _read_manifest(os.path.join(directory, MANIFEST_NAME))
    listed = parse_manifest(data)
    executable = {file.path: file.executable for file in found.files}
    files = [
        InventoryFile(path=f.path, size=f.size_bytes, executable=executable.get(f.path, False))
        for f in listed
    ]
    files.append(
        InventoryFile(path=MANIFEST_NAME, size=len(data), executable=executable[MANIFEST_NAME])
    )
    expected = Inventory(
        directories=tuple(sorted(_parents(f.path for f in listed), key=path_order)),
        files=tuple(sorted(files, key=lambda f: path_order(f.path))),
    )
    if found != expected:
        raise ArtifactCorruptError(
            f"object does not match its manifest: {objects.first_difference(expected, found)}"
        )
    return tuple(listed), data


def _read_manifest(path: str) -> bytes:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as error:
        raise ArtifactCorruptError(f"manifest.json cannot be read: {error.strerror}") from None
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _parents(paths: Iterable[str]) -> set[str]:
    """Every directory the listed file paths imply."""
    parents: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        parents.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return parents
