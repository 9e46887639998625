"""Writing the HTML report of a snapshot to one file (SPEC.md section 16.4).

Rules of this file: the page comes from :func:`runstore.inspection.report.render_report`
over :func:`runstore.inspection.reader.status`; it is written with
:class:`~runstore.inspection.atomic_file.AtomicFiles` (a temporary beside the target,
fsync, replacing rename, directory fsync), never inside the store root. Nothing else.
"""

from __future__ import annotations

import os

from runstore.errors import InvalidRecordError
from runstore.errors import UnsafePathError
from runstore.inspection.atomic_file import AtomicFiles
from runstore.inspection.atomic_file import refuse_inside_store
from runstore.inspection.reader import status
from runstore.inspection.report import render_report
from runstore.inspection.snapshot import Snapshot


def write_report(
    snapshot: Snapshot, path: str, *, campaign: str | None = None, title: str | None = None
) -> str:
    """Render ``snapshot``'s report (one ``campaign``'s slots, or all) and install it at
    ``path``, replacing an older file; returns the absolute path.

    Refusals, each leaving ``path`` as it was: ``invalid_record`` (``path`` not a nonempty
    str without NUL, ``campaign`` or ``title`` not a str or None, an empty or multi-line
    title); ``unsafe_path`` (``path`` lies inside the store root, is a directory or a
    link, or its directory is missing); ``durability_failed`` (a write, fsync or rename
    failed)."""
    target = _target(snapshot, path, campaign, title)
    heading = title if title is not None else f"runstore report: {campaign or snapshot.root}"
    page = render_report(status(snapshot, campaign=campaign), title=heading)
    with AtomicFiles(os.path.dirname(target)) as files:
        files.create(os.path.basename(target)).write(page.encode("utf-8"))
        files.commit()
    return target


def _target(snapshot: Snapshot, path: object, campaign: object, title: object) -> str:
    if not isinstance(path, str) or not path or "\x00" in path:
        raise InvalidRecordError(f"the report path must be a nonempty str, not {path!r:.80}")
    if campaign is not None and not isinstance(campaign, str):
        raise InvalidRecordError(f"campaign must be a str or None, not {type(campaign).__name__}")
    if title is not None and (not isinstance(title, str) or not title.strip() or "\n" in title):
        raise InvalidRecordError(f"title must be one nonempty line, not {title!r:.80}")
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    refuse_inside_store(directory, snapshot.root, f"the report {target}")
    if not os.path.isdir(directory):
        raise UnsafePathError(f"the report's directory does not exist: {directory}")
    if os.path.islink(target) or os.path.isdir(target):
        raise UnsafePathError(f"the report path {target} is a link or a directory")
    return target
