"""Regenerate the generated blocks of SPEC.md from their sources of truth.

Today there is one block, ``legal-edges``: the attempt state machine's edge table, built
from ``runstore.edges.LEGAL_EDGES``. Only the text between
``<!-- BEGIN GENERATED: NAME -->`` and ``<!-- END GENERATED: NAME -->`` is rewritten.

Usage (from anywhere)::

    python tools/gen_spec.py            # rewrite SPEC.md in place if a block is stale
    python tools/gen_spec.py --check    # exit 1 if a block is stale, change nothing
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from runstore import edges

SPEC = Path(__file__).resolve().parents[1] / "SPEC.md"


def legal_edges_block() -> str:
    """The edge table, one row per state, plus how revisions count."""
    return (
        "Generated from `runstore.edges.LEGAL_EDGES` by `tools/gen_spec.py`; do not edit.\n"
        "Every edge raises the attempt's revision by one. Revision 0 is the reservation "
        "itself (no state -> `reserved`). `advance` takes the edges between execution phases; "
        "only `begin_finalization` (or recovery) enters `finalizing`, and only "
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if SPEC.md is stale")
    parser.add_argument("--spec", type=Path, default=SPEC, help="the SPEC.md to process")
    options = parser.parse_args(argv)
    current = options.spec.read_text(encoding="utf-8")
    wanted = regenerate(current)
    if wanted == current:
        return 0
    if options.check:
        print(f"{options.spec}: generated blocks are stale; run tools/gen_spec.py", file=sys.stderr)
        return 1
    options.spec.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
