"""The generated blocks of SPEC.md, built from their sources of truth.

Today there is one block, ``legal-edges``: the attempt state machine's edge table, built
from ``runstore.edges.LEGAL_EDGES``. Only the text between
``<!-- BEGIN GENERATED: NAME -->`` and ``<!-- END GENERATED: NAME -->`` is rewritten.

This module owns the blocks' content (:data:`BLOCKS`, :func:`regenerate`); ``tools/regen``
writes SPEC.md (or, with ``--check``, reports it stale) together with the other generated
files.
"""

from __future__ import annotations

from collections.abc import Callable

from runstore import edges


def legal_edges_block() -> str:
    """The edge table, one row per state, plus how revisions count."""
    return (
        "Generated from `runstore.edges.LEGAL_EDGES` by `tools/gen_spec.py`; do not edit.\n"
        "Every edge raises the attempt's revision by one. Revision 0 is the reservation "
        "itself (no state -> `reserved`). `advance` takes the edges between execution phases "
        "and enters `finalizing` without contending for the slot's claim; "
        "`begin_finalization` enters it as a success contender; only "
        "`commit_finalization` (or recovery) leaves it.\n\n" + edges.edge_table_markdown()
    )


BLOCKS: dict[str, Callable[[], str]] = {"legal-edges": legal_edges_block}


def regenerate(text: str) -> str:
    """``text`` with every generated block replaced by its current content."""
    for name, build in BLOCKS.items():
        begin = f"<!-- BEGIN GENERATED: {name} -->\n"
        end = f"<!-- END GENERATED: {name} -->"
        start = text.index(begin) + len(begin)
        stop = text.index(end, start)
        text = text[:start] + build() + text[stop:]
    return text
