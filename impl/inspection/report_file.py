"""Writing the HTML report of a snapshot to one file (SPEC.md section 16.4).

Rules of this file: the page comes from :func:`runstore.inspection.report.render_report`
over :func:`runstore.inspection.reader.status`, the pairs' statistics
(:func:`runstore.inspection.results.pair_results`) and, with a baseline, ``compare``'s
:func:`runstore.inspection.comparison.against_candidate` (so its refusals are
``compare --baseline``'s); everything is read and every refusal made before the file is
touched. It is written with
:class:`~runstore.inspection.atomic_file.AtomicFiles` (a temporary beside the target,
fsync, replacing rename, directory fsync), never inside the store root. Nothing else.
"""

from __future__ import annotations

import os

from runstore.errors import InvalidRecordError
from runstore.errors import UnsafePathError
from runstore.inspection.atomic_file import AtomicFiles
from runstore.inspection.atomic_file import refuse_inside_store
from runstore.inspection.comparison import against_candidate
from runstore.inspection.reader import Revision
from runstore.inspection.reader import status
from runstore.inspection.report import render_report
from runstore.inspection.results import pair_results
from runstore.inspection.snapshot import Snapshot


def write_report(
    snapshot: Snapshot,
    path: str,
    *,
    campaign: str | None = None,
    title: str | None = None,
    baseline: str | None = None,
    revision: Revision = None,
) -> str:
    """Render ``snapshot``'s report (one ``campaign``'s slots, or all, each pair in the
    ``revision`` in view, default its latest; with ``baseline``,
    every other candidate of the campaign against that one) and install it at ``path``,
    replacing an older file; returns the absolute path.

    Refusals, each leaving ``path`` as it was: ``invalid_record`` (``path`` not a nonempty
    str without NUL, ``campaign``, ``title`` or ``baseline`` not a str or None, an empty or
    multi-line title); ``unsafe_path`` (``path`` lies inside the store root, is a directory
    or a link, or its directory is missing); ``comparison_invalid`` (with ``baseline``: no
    campaign with results, several without ``campaign``, an unknown campaign or a
    candidate the campaign does not have, the message listing what the store holds);
    ``durability_failed`` (a write, fsync or rename failed)."""
    target = _target(snapshot, path, campaign, title)
    if baseline is not None and not isinstance(baseline, str):
        raise InvalidRecordError(f"baseline must be a str or None, not {type(baseline).__name__}")
    heading = title if title is not None else f"runstore report: {campaign or snapshot.root}"
    comparison = None
    if baseline is None:
        results = pair_results(snapshot.connection, campaign=campaign, revision=revision)
    else:
        # compare's refusals list every campaign and candidate, so read them all once.
        every = pair_results(snapshot.connection, revision=revision)
        comparison = against_candidate(every, campaign=campaign, baseline=baseline)
        results = tuple(r for r in every if campaign is None or r.group.campaign == campaign)
    page = render_report(
        status(snapshot, campaign=campaign, revision=revision),
        results,
        title=heading,
        comparison=comparison,
    )
    with AtomicFiles(os.path.dirname(target)) as files:
        files.create(os.path.basename(target)).write(page.encode("utf-8"))
        files.commit()
    return target


def _target(snapshot: Snapshot, path: object, campaign: object, title: object) -> str:
    if not isinstance(path, str) or not path or "\x00" in path:
        raise InvalidRecordError(
            f"the report path must be a nonempty str, not {path!r:.80}", argument="path"
        )
    if campaign is not None and not isinstance(campaign, str):
        raise InvalidRecordError(f"campaign must be a str or None, not {type(campaign).__name__}")
    if title is not None and (not isinstance(title, str) or not title.strip() or "\n" in title):
        raise InvalidRecordError(f"title must be one nonempty line, not {title!r:.80}")
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    refuse_inside_store(directory, snapshot.root, f"the report {target}", argument="path")
    if not os.path.isdir(directory):
        raise UnsafePathError(
            f"the report's directory does not exist: {directory}", argument="path"
        )
    if os.path.islink(target) or os.path.isdir(target):
        raise UnsafePathError(f"the report path {target} is a link or a directory", argument="path")
    return target
