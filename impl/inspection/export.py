"""``runstore export``: a snapshot's attempts, observations and accepted results as plain
files for analysis tools (SPEC.md section 16.3).

Rules of this file: the store is only read (through a snapshot's private copy, and its
artifacts with plain reads); files are written only in the output directory, which may
not lie inside the store root. Every artifact an exported row names is verified (every
byte read, the tree hash and manifest digest compared with its registration) before the
export can succeed, by the row of ``attempts.csv`` or ``observations.csv`` that names it
(no set of ids is kept, so an artifact two observations share is read twice); any
failure refuses the whole export with
``artifact_corrupt`` and leaves the output directory as it was (a directory this call
created is removed again). The files are written as temporaries and renamed into place
only when all five are complete (:mod:`runstore.inspection.atomic_file`), in the order
the temporaries were created: :data:`FILE_NAMES`' order. Formats and row order live in
:mod:`runstore.inspection.export_rows` (with :mod:`~runstore.inspection.export_runs` and
:mod:`~runstore.inspection.export_json`) and :mod:`runstore.inspection.export_summary`;
the same store always exports to the same bytes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sqlite3
import stat
from collections.abc import Iterable
from typing import BinaryIO
from typing import Final

import attrs
from runstore import durable
from runstore.canonical import JSON
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.errors import InvalidRecordError
from runstore.errors import UnsafePathError
from runstore.inspection.atomic_file import AtomicFiles
from runstore.inspection.atomic_file import refuse_inside_store
from runstore.inspection.export_rows import ATTEMPT_COLUMNS
from runstore.inspection.export_rows import METRIC_COLUMNS
from runstore.inspection.export_rows import OBSERVATION_COLUMNS
from runstore.inspection.export_rows import ArtifactRef
from runstore.inspection.export_rows import CsvRow
from runstore.inspection.export_rows import accepted_results
from runstore.inspection.export_rows import attempt_rows
from runstore.inspection.export_rows import named_artifacts
from runstore.inspection.export_rows import observation_rows
from runstore.inspection.export_runs import ParameterColumns
from runstore.inspection.export_runs import parameter_columns
from runstore.inspection.export_summary import SUMMARY_COLUMNS
from runstore.inspection.export_summary import summary_rows
from runstore.inspection.reader import Revision
from runstore.inspection.reader import View
from runstore.inspection.snapshot import Snapshot
from runstore.store.publication import objects

ATTEMPTS_FILE: Final = "attempts.csv"
OBSERVATIONS_FILE: Final = "observations.csv"
INDEX_FILE: Final = "index.jsonl"
METRICS_FILE: Final = "metrics.csv"
SUMMARY_FILE: Final = "summary.csv"
FILE_NAMES: Final = (ATTEMPTS_FILE, INDEX_FILE, METRICS_FILE, OBSERVATIONS_FILE, SUMMARY_FILE)
"""The files of an export, in the order their temporaries are created and renamed into
place."""

ARTIFACTS_DIR: Final = "artifacts"
_DIRECTORY_MODE: Final = 0o777  # narrowed by the umask, like any directory the user creates


@attrs.frozen(kw_only=True)
class ExportSummary:
    """What an export wrote: the absolute output directory, the data rows of each file
    (JSON lines for ``index.jsonl``; header rows not counted) and the number of distinct
    artifacts verified."""

    out_dir: str
    files: dict[str, int]
    verified_artifacts: int

    def to_json(self) -> dict[str, JSON]:
        return {
            "out_dir": self.out_dir,
            "files": {name: self.files[name] for name in sorted(self.files)},
            "verified_artifacts": self.verified_artifacts,
        }


def export(
    snapshot: Snapshot, out_dir: str, *, campaign: str | None = None, revision: Revision = None
) -> ExportSummary:
    """Write ``attempts.csv``, ``observations.csv``, ``index.jsonl``, ``metrics.csv`` and
    ``summary.csv`` for every campaign of ``snapshot`` (or for ``campaign``'s candidates:
    ids starting with ``"<campaign>/"``), each pair in the revision in view (default its
    latest; ``"all"`` every revision), into ``out_dir``, replacing files of those names.

    ``out_dir`` may be relative (to the working directory); a missing one is created (its
    parent must exist) and its parent synced. Refusals, each leaving ``out_dir`` as it was:
    ``invalid_record`` (``snapshot`` not a Snapshot, ``out_dir`` not a nonempty str without
    NUL, ``campaign`` not a str or None); ``unsafe_path`` (``out_dir`` is or lies inside the
    store root, is not a directory, or its parent is missing; the store's ``artifacts`` is
    a link or not a directory); ``artifact_corrupt`` (an artifact a row names does not
    verify; the message names it); ``durability_failed`` (a write, fsync or rename
    failed); ``store_closed`` (the snapshot is closed).
    """
    _check_arguments(snapshot, out_dir, campaign)
    view = View(campaign=campaign, revision=revision)
    view.clause()  # refuses an ill-typed revision before anything is written
    connection = snapshot.connection
    target = _output_directory(out_dir, snapshot.root)
    created = _create_missing(target)
    verifier = ArtifactVerifier(snapshot.root)
    try:
        with AtomicFiles(target) as files:
            counts = _write_files(files, connection, verifier, view)
            verified = named_artifacts(connection, view)  # each one verified by its row
            files.commit()
    except BaseException:
        if created:
            _remove_created(target)
        raise
    return ExportSummary(out_dir=target, files=counts, verified_artifacts=verified)


def _check_arguments(snapshot: object, out_dir: object, campaign: object) -> None:
    if not isinstance(snapshot, Snapshot):
        raise InvalidRecordError(f"snapshot must be a Snapshot, not {type(snapshot).__name__}")
    if not isinstance(out_dir, str):
        raise InvalidRecordError(f"out_dir must be a str, not {type(out_dir).__name__}")
    if not out_dir or "\x00" in out_dir:
        raise InvalidRecordError(
            f"out_dir must be a nonempty path without NUL: {out_dir!r}", argument="out_dir"
        )
    if campaign is not None and not isinstance(campaign, str):
        raise InvalidRecordError(f"campaign must be a str or None, not {type(campaign).__name__}")


# --- the output directory ----------------------------------------------------------------------


def _output_directory(out_dir: str, root: str) -> str:
    """``out_dir`` made absolute, refused (``unsafe_path``) when it resolves (links
    followed) to the store root or anything beneath it, or exists but is no directory."""
    target = os.path.abspath(out_dir)
    refuse_inside_store(target, root, f"the export directory {target}", argument="out_dir")
    if os.path.lexists(target) and not os.path.isdir(target):
        raise UnsafePathError(
            f"the export directory {target} exists and is not a directory", argument="out_dir"
        )
    return target


def _create_missing(target: str) -> bool:
    """Create ``target`` when missing, its parent synced; True when this call created it."""
    if os.path.isdir(target):
        return False
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise UnsafePathError(
            f"the parent of the export directory does not exist: {parent}", argument="out_dir"
        )
    try:
        durable.mkdir(target, _DIRECTORY_MODE)
    except FileExistsError:
        if not os.path.isdir(target):  # created concurrently as something else
            raise UnsafePathError(
                f"the export directory {target} is not a directory", argument="out_dir"
            ) from None
        return False
    except OSError as exc:
        raise DurabilityError(f"cannot create the export directory {target}: {exc}") from exc
    return True


def _remove_created(target: str) -> None:
    """Remove the directory this export created, if it is still empty (best effort)."""
    with contextlib.suppress(OSError):
        os.rmdir(target)
        durable.fsync_dir(os.path.dirname(target))


# --- verification ------------------------------------------------------------------------------


class ArtifactVerifier:
    """Verifies artifacts of a store root. No id is kept (an export names one or two per
    slot): each row verifies the artifact it names, and a file that names only artifacts
    another file named before verifies none (:func:`_write_results`)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._checked_directory = False

    def verify(self, artifact: ArtifactRef) -> None:
        """Read every byte of ``artifact``'s directory and compare its tree hash and manifest
        digest with the registration; ``artifact_corrupt`` naming the artifact otherwise."""
        self._check_directory()
        try:
            completed = objects.verify(os.path.join(self.root, artifact.path), sync=False)
        except ArtifactCorruptError as error:
            raise ArtifactCorruptError(
                f"artifact {artifact.id} ({artifact.path}) does not verify: {error.message}"
            ) from None
        if completed.tree_sha256 != artifact.content_sha256:
            raise ArtifactCorruptError(
                f"artifact {artifact.id} ({artifact.path}) has tree hash "
                f"{completed.tree_sha256}, not its registered {artifact.content_sha256}"
            )
        if completed.manifest_sha256 != artifact.manifest_sha256:
            raise ArtifactCorruptError(
                f"artifact {artifact.id} ({artifact.path}) has manifest digest "
                f"{completed.manifest_sha256}, not its registered {artifact.manifest_sha256}"
            )

    def _check_directory(self) -> None:
        """The store's ``artifacts`` must be a real directory (a missing one leaves each
        artifact to fail on its own)."""
        if self._checked_directory:
            return
        path = os.path.join(self.root, ARTIFACTS_DIR)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            mode = stat.S_IFDIR
        if not stat.S_ISDIR(mode):
            raise UnsafePathError(f"{path} is a symbolic link or not a directory")
        self._checked_directory = True


# --- writing -----------------------------------------------------------------------------------


def _write_files(
    files: AtomicFiles,
    connection: sqlite3.Connection,
    verifier: ArtifactVerifier,
    view: View,
) -> dict[str, int]:
    """Write the five temporaries (verifying as rows come); data rows per file. Every
    temporary is created first, so the set renames in :data:`FILE_NAMES`' order."""
    streams = {name: files.create(name) for name in FILE_NAMES}
    columns = parameter_columns(connection, view)
    try:
        counts = {
            ATTEMPTS_FILE: _write_attempts(streams[ATTEMPTS_FILE], connection, verifier, view),
            OBSERVATIONS_FILE: _write_observations(
                streams[OBSERVATIONS_FILE], connection, verifier, view
            ),
        }
        counts[INDEX_FILE], counts[METRICS_FILE] = _write_results(
            streams[INDEX_FILE], streams[METRICS_FILE], connection, verifier, view, columns
        )
        counts[SUMMARY_FILE] = _write_summary(streams[SUMMARY_FILE], connection, view, columns)
    except OSError as exc:
        raise DurabilityError(f"cannot write the export in {files.directory}: {exc}") from exc
    return {name: counts[name] for name in FILE_NAMES}


class _CsvFile:
    """CSV rows on a binary stream: UTF-8, ``,`` between fields, ``\\n`` after each row,
    None as an empty field, and a field holding ``,``, ``"``, CR or LF quoted (``"``
    doubled). Python 3.11's ``csv`` quotes a CR only when the line terminator holds one,
    so each row is formatted with ``\\r\\n`` and written with ``\\n`` in its place."""

    def __init__(self, stream: BinaryIO, header: Iterable[str]) -> None:
        self._stream = stream
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
        self._emit(list(header))
        self.rows = 0

    def write(self, row: CsvRow) -> None:
        self._emit(row)
        self.rows += 1

    def _emit(self, row: CsvRow | list[str]) -> None:
        self._writer.writerow(row)
        text = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        self._stream.write(text[:-2].encode("utf-8") + b"\n")


def _write_attempts(
    stream: BinaryIO,
    connection: sqlite3.Connection,
    verifier: ArtifactVerifier,
    view: View,
) -> int:
    out = _CsvFile(stream, ATTEMPT_COLUMNS)
    for row, final in attempt_rows(connection, view):
        if final is not None:
            verifier.verify(final)
        out.write(row)
    return out.rows


def _write_observations(
    stream: BinaryIO,
    connection: sqlite3.Connection,
    verifier: ArtifactVerifier,
    view: View,
) -> int:
    out = _CsvFile(stream, OBSERVATION_COLUMNS)
    for row, artifact in observation_rows(connection, view):
        verifier.verify(artifact)
        out.write(row)
    return out.rows


def _write_results(
    index: BinaryIO,
    metrics: BinaryIO,
    connection: sqlite3.Connection,
    verifier: ArtifactVerifier,
    view: View,
    columns: ParameterColumns,
) -> tuple[int, int]:
    """``index.jsonl`` and ``metrics.csv`` in one pass over the accepted slots. Their
    artifacts were verified with ``attempts.csv`` (every attempt of a slot in view) and
    ``observations.csv`` (every observation whose row names a slot in view); only an
    observation whose row names another slot than the one selecting it (a row edited past
    the schema's keys) is verified here, so no line names an unverified artifact."""
    lines = 0
    out = _CsvFile(metrics, [*METRIC_COLUMNS, *columns.header()])
    for result in accepted_results(connection, view):
        for observation in result.observations:
            if observation.attempt_slot_id != result.summary.slot_id:
                verifier.verify(observation.artifact)
        index.write(result.index_line())
        lines += 1
        for row in result.metric_rows(columns):
            out.write(row)
    return lines, out.rows


def _write_summary(
    stream: BinaryIO,
    connection: sqlite3.Connection,
    view: View,
    columns: ParameterColumns,
) -> int:
    """``summary.csv``. It names no artifact: its values are those of the selected
    observations ``observations.csv`` and ``index.jsonl`` name, verified by then."""
    out = _CsvFile(stream, [*SUMMARY_COLUMNS, *columns.header()])
    for row in summary_rows(connection, view, columns):
        out.write(row)
    return out.rows
