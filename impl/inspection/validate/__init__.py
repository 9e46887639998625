"""``runstore validate``: check a store's database and artifacts and list what is wrong
(SPEC.md section 16.1).

Rules of this package: it reads only through the inspection reader's raw snapshot
(:meth:`~runstore.inspection.snapshot.Snapshot.take` with ``strict=False``), so it never
opens SQLite on the store's own files and never writes the store; artifact directories are
read in place under the snapshot's root, read-only (the names of ``attempt-*`` objects are
listed just before the copy is taken, so that only objects older than the copy are judged
against it). Damage is reported, never refused:
every check hands ``(code, subject, message)`` to one :class:`~.findings.Log`. The
refusals are the reader's (``unsafe_path``, ``inspection_unsafe``,
``inspection_unstable``) and ``invalid_record`` for ill-typed arguments. One module per
part of SPEC's list, run in its order by :func:`validate_store`: :mod:`.database`,
:mod:`.records`, :mod:`.history`, :mod:`.invariants`, :mod:`.artifacts`,
:mod:`.unregistered`; the report and
the log are :mod:`.findings`, streamed reading :mod:`.reading`.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from runstore.errors import InvalidRecordError
from runstore.inspection.snapshot import DEFAULT_TRIES
from runstore.inspection.snapshot import Snapshot
from runstore.inspection.validate import artifacts
from runstore.inspection.validate import database
from runstore.inspection.validate import history
from runstore.inspection.validate import invariants
from runstore.inspection.validate import records
from runstore.inspection.validate import unregistered
from runstore.inspection.validate.database import DATABASE_UNREADABLE
from runstore.inspection.validate.findings import FINDINGS_TRUNCATED
from runstore.inspection.validate.findings import Finding
from runstore.inspection.validate.findings import Log
from runstore.inspection.validate.findings import ValidationReport
from runstore.inspection.validate.reading import lenient_text

__all__ = [
    "DEFAULT_TRIES",
    "FINDING_CAP",
    "FINDING_CODES",
    "Finding",
    "ValidationReport",
    "validate_store",
]

FINDING_CAP: Final = 1000
"""At most this many findings of one code are listed; the rest are counted."""

FINDING_CODES: Final = (
    *database.CODES,
    *records.CODES,
    *history.CODES,
    *invariants.CODES,
    *artifacts.CODES,
    *unregistered.CODES,
    FINDINGS_TRUNCATED,
)
"""Every finding code, in the order the checks run."""


def validate_store(
    root: str, *, quick: bool = False, tries: int = DEFAULT_TRIES
) -> ValidationReport:
    """Check the store at ``root`` (SPEC.md section 16.1) and report every finding.

    Takes a raw inspection snapshot (at most ``tries`` copies), then checks in order: the
    database (readable, ``integrity_check``, ``user_version``, the exact schema,
    ``foreign_key_check``); every identified record and attempt; the attempts' history and
    the event log; the invariants of slots, outcomes, claims, leases and selections; every
    registered artifact on disk (``quick``: existence, inventory and manifest digest only,
    no content hashing); every complete attempt object no row registers whose
    ``outcome.json`` names records the database lacks. An unreadable database or a foreign
    ``user_version`` ends the checks after its finding. Refuses ``unsafe_path`` (not a
    store, or a database without any schema), ``inspection_unsafe``,
    ``inspection_unstable``, and ``invalid_record`` for a non-bool ``quick`` or a
    ``tries`` that is not a positive int. Writes nothing.
    """
    if not isinstance(quick, bool):
        raise InvalidRecordError(f"quick must be a bool, not {quick!r:.40}")
    log = Log(FINDING_CAP)
    checked: dict[str, int] = {}
    # Before the copy: an object renamed after it is not judged against it.
    with (
        unregistered.list_attempt_objects(str(root)) as listed,
        Snapshot.take(root, tries=tries, strict=False) as snapshot,
    ):
        connection = snapshot.connection
        connection.text_factory = lenient_text
        try:
            if database.check_database(connection, snapshot.root, log):
                _check_rest(connection, snapshot.root, listed, quick, log, checked)
        except sqlite3.DatabaseError as error:
            log(DATABASE_UNREADABLE, "database", f"reading the copy failed: {error}")
        store = snapshot.root
    return ValidationReport(root=store, quick=quick, checked=checked, findings=log.findings())


def _check_rest(
    connection: sqlite3.Connection,
    root: str,
    listed: unregistered.ObjectNames,
    quick: bool,
    log: Log,
    checked: dict[str, int],
) -> None:
    """The checks after the database's, in order; ``checked`` grows with each, so after an
    unreadable page it shows how far they got."""
    checked.update(records.check_records(connection, log))
    checked["attempts"] = records.check_attempts(connection, log)
    history.check_revisions(connection, log)
    checked["attempt_transitions"] = history.check_transitions(connection, log)
    checked["events"] = history.check_events(connection, log)
    checked.update(invariants.check_invariants(connection, log))
    checked["artifacts"] = artifacts.check_artifacts(connection, root, quick=quick, report=log)
    checked["unregistered_objects"] = unregistered.check_unregistered(
        connection, root, listed, quick=quick, report=log
    )
