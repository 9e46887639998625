"""The ``--campaign`` and ``--revision`` options the reading commands share, parsed and
checked against the store (SPEC.md section 15.9).

Rules of this file: option parsing only; what a revision means lives in
:mod:`runstore.inspection.reader` and :mod:`runstore.inspection.campaigns`.
"""

from __future__ import annotations

import sqlite3
from typing import Annotated
from typing import Final

import typer
from runstore.errors import OptionInvalidError
from runstore.inspection.campaigns import check_view
from runstore.inspection.reader import ALL_REVISIONS
from runstore.inspection.reader import Revision

MAX_REVISION: Final = 2**53 - 1

RevisionOption = Annotated[
    str | None,
    typer.Option(
        "--revision",
        metavar="N|all",
        help="Each pair as it stood in revision N of its campaign, or every revision.",
        show_default="each pair's latest revision",
    ),
]


def parse_revision(text: str | None, option: str = "--revision") -> Revision:
    """``None`` (each pair's latest), ``"all"``, or a revision number."""
    if text is None:
        return None
    if text == ALL_REVISIONS:
        return ALL_REVISIONS
    if not text.isascii() or not text.isdigit() or int(text) > MAX_REVISION:
        raise OptionInvalidError(
            f"{option} takes a revision number (0, 1, ...) or 'all', not {text!r}"
        )
    return int(text)


def checked(connection: sqlite3.Connection, campaign: str | None, revision: str | None) -> Revision:
    """The parsed ``--revision``, after refusing an unknown ``--campaign`` or revision
    (``unknown_campaign``, ``unknown_revision``: usage errors naming what exists)."""
    parsed = parse_revision(revision)
    check_view(connection, campaign, parsed)
    return parsed
