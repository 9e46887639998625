"""HTML pieces the report's sections share: tables in scroll boxes, name cells, the
candidates' colour legend (SPEC.md section 16.4).

Rules of this file: string building only; every text from the store goes through
:func:`html.escape` here or arrives escaped (arguments documented as HTML). Names are never
squeezed: a header cell does not wrap, and a name longer than :data:`NAME_LIMIT`
characters is cut with ``…`` and keeps the full id as its tooltip (every name cell carries
the full id in ``title`` anyway).
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Final

from runstore.inspection import svg
from runstore.inspection.report_grid import Grid

NAME_LIMIT: Final = 28
"""Longest name a header cell shows in full."""


def name_cell(grid: Grid, identifier: str, scope: str = "row") -> str:
    """A header cell: the display name (cut after :data:`NAME_LIMIT` characters), with the
    full id as its tooltip."""
    shown = svg.truncate(grid.name(identifier), NAME_LIMIT)
    return f'<th scope="{scope}" title="{escape(identifier)}">{escape(shown)}</th>'


def table(caption: str, header: Iterable[str], rows: Iterable[Iterable[str]], css: str) -> str:
    """A table in a horizontally scrolling box (its first column stays in view);
    ``caption``, ``header`` and ``rows`` are HTML already (escaped by the caller)."""
    lines = [
        f'<div class="scroll"><table class="{css}">',
        f"<caption>{caption}</caption>",
        f"<thead><tr>{''.join(header)}</tr></thead>",
        "<tbody>",
        *(f"<tr>{''.join(row)}</tr>" for row in rows),
        "</tbody></table></div>",
    ]
    return "\n".join(lines)


def corner(text: str) -> str:
    """The top-left header cell of a problems x candidates table (``text`` is HTML)."""
    return f'<th scope="col" class="corner">{text}</th>'


def count(value: int) -> str:
    return f'<td class="zero">{value}</td>' if value == 0 else f"<td>{value}</td>"


def swatch(colour: str) -> str:
    return (
        f'<svg class="swatch" width="12" height="12" aria-hidden="true">'
        f'<rect width="12" height="12" fill="{colour}"/></svg>'
    )


def legend(grid: Grid, candidates: Iterable[str]) -> str:
    """The candidates' colours (the same in every chart), with their names in full."""
    items = "".join(
        f'<li title="{escape(candidate)}">'
        f"{swatch(svg.colour(grid.candidates.index(candidate), len(grid.candidates)))}"
        f"{escape(grid.name(candidate))}</li>"
        for candidate in candidates
    )
    return f'<ul class="legend">{items}</ul>'
