"""Which writer-table rows cosmic-ray generates on its own, decided mechanically.

Rules of this file: it reads the writer mutant table (through the driver,
``tools/writer_mutations.py``, and so through the one table loader) and the files under
``impl/`` the rows name, and asks cosmic-ray's own library which sources its default
operator set makes of each file; it never writes a file and runs no test. A row is
*generated* when applying its edit to its file gives a source equal to one cosmic-ray
mutant of that file: equal text, or, where cosmic-ray rewrites a token's spacing (its
number replacer prefixes one space), the same sequence of parso tokens. Such a row is
redundant with ``tools/mutate`` (the cosmic-ray driver) and is not kept in the table;
rows cosmic-ray cannot make (a deleted statement, a changed call argument, swapped lines,
a condition replaced by a constant, an edit inside SQL text) stay.

The default operator set is what ``cosmic-ray init`` uses with no operator configuration:
every operator of :func:`cosmic_ray.plugins.operator_names` that takes no arguments
(``core/VariableReplacer`` and ``core/VariableInserter`` need arguments, so they are not
in it), less the operators ``tools/mutate`` filters. Occurrences are counted as cosmic-ray
counts them (a pre-order walk of the parso tree, :func:`cosmic_ray.ast.ast_nodes`), and
only the occurrences on the lines the row changes are made, each with
:func:`cosmic_ray.mutating.mutate_code`.

Usage, from the repository root::

    python tools/generated_mutants.py               # every row: kept, or which mutant
    python tools/generated_mutants.py --only NAME   # a subset (repeatable)
    python tools/generated_mutants.py --table PATH  # another table file

Output: one line per row (``kept NAME`` or ``GENERATED NAME <- OPERATOR #OCCURRENCE``),
then ``rows=N generated=G``. Exit status 1 when a row is generated (retire it), else 0.
``conformance/meta/test_writer_mutations.py`` fails on the same condition.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cosmic_ray.plugins
import mutation_table
import parso
import writer_mutations
from cosmic_ray.ast import ast_nodes
from cosmic_ray.ast import get_ast
from cosmic_ray.mutating import mutate_code
from mutation.settings import load_settings

ROOT = writer_mutations.ROOT
SLACK_LINES = 1
"""Lines either side of a row's change whose cosmic-ray occurrences are also made (a change
at a line break belongs to both lines)."""


@dataclass(frozen=True)
class Generated:
    """The cosmic-ray mutant a row duplicates: its operator and occurrence in the file."""

    operator: str
    occurrence: int

    def __str__(self) -> str:
        return f"{self.operator} #{self.occurrence}"


@functools.cache
def default_operators() -> tuple[tuple[str, Any], ...]:
    """``(name, operator instance)`` of cosmic-ray's default set, in its own order, less
    the operators ``tools/mutate`` filters (tools/mutation.toml): a row only such an
    operator makes is not run by ``tools/mutate``, so it stays in the table."""
    filters = load_settings().filters
    chosen = []
    for name in cosmic_ray.plugins.operator_names():
        operator_class = cosmic_ray.plugins.get_operator(name)
        if any(rule.matches(name) for rule in filters):
            continue
        if not operator_class.arguments():
            chosen.append((name, operator_class()))
    return tuple(chosen)


def changed_lines(before: str, after: str) -> tuple[int, int]:
    """The first and last line (1-based, of ``before``) that the edit ``before`` ->
    ``after`` touches, found by their longest common prefix and suffix."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    end = max(prefix, len(before) - suffix)
    return before.count("\n", 0, prefix) + 1, before.count("\n", 0, end) + 1


@functools.cache
def mutation_positions(source: str) -> tuple[tuple[str, int, int, int], ...]:
    """``(operator name, occurrence, first line, last line)`` of every mutant cosmic-ray's
    default set makes of ``source``, counted as ``cosmic-ray init`` counts them."""
    nodes = list(ast_nodes(get_ast(source)))
    found = []
    for name, operator in default_operators():
        positions = (position for node in nodes for position in operator.mutation_positions(node))
        for occurrence, (start, end) in enumerate(positions):
            found.append((name, occurrence, start[0], end[0]))
    return tuple(found)


def cosmic_ray_mutants(
    source: str, lines: tuple[int, int] | None = None
) -> Iterator[tuple[Generated, str]]:
    """Each mutant cosmic-ray's default set makes of ``source`` (only those whose position
    overlaps ``lines``, first and last, when given), with its mutated source."""
    operators = dict(default_operators())
    for name, occurrence, first, last in mutation_positions(source):
        if lines is not None and (last < lines[0] or first > lines[1]):
            continue
        mutated = mutate_code(source, operators[name], occurrence)
        if mutated is not None:
            yield Generated(name, occurrence), mutated


def normalized(code: str) -> tuple[tuple[str, str], ...]:
    """``code`` as parso's leaves (type, value), without the whitespace before each."""
    leaves = []
    leaf = parso.parse(code).get_first_leaf()
    while leaf is not None:
        leaves.append((leaf.type, leaf.value))
        leaf = leaf.get_next_leaf()
    return tuple(leaves)


def generating_mutant(source: str, mutated: str) -> Generated | None:
    """The cosmic-ray mutant of ``source`` whose source is ``mutated`` (equal text, or
    equal parso tokens), or None if its default operator set makes no such mutant."""
    if mutated == source:
        return None
    lines = changed_lines(source, mutated)
    window = (max(1, lines[0] - SLACK_LINES), lines[1] + SLACK_LINES)
    bare = "".join(mutated.split())
    for generated, code in cosmic_ray_mutants(source, window):
        if code == mutated:
            return generated
        # Equal parso tokens need equal text once whitespace is dropped (a cheap filter).
        if "".join(code.split()) == bare and normalized(code) == normalized(mutated):
            return generated
    return None


def generated_by(mutant: writer_mutations.Mutant, root: Path = ROOT) -> Generated | None:
    """The cosmic-ray mutant that row ``mutant`` of the writer table duplicates, if any
    (None also when the row no longer applies: the table's own checks report that)."""
    source = (root / mutant.file).read_text(encoding="utf-8")
    if source.count(mutant.old) != 1:
        return None
    return generating_mutant(source, mutant.apply(source))


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = mutation_table.say) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Exit status 1 when a row is one cosmic-ray generates.",
    )
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--table", type=Path, default=None, help="a writer table file")
    args = parser.parse_args(argv)
    entries = writer_mutations.load_table(args.table).entries
    mutants = mutation_table.select(entries, args.only, "mutant")
    generated = 0
    for mutant in mutants:
        found = generated_by(mutant)
        generated += found is not None
        out(f"GENERATED {mutant.name} <- {found}" if found else f"kept {mutant.name}")
    out(f"rows={len(mutants)} generated={generated}")
    return 1 if generated else 0


if __name__ == "__main__":
    sys.exit(main())
