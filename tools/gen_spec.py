"""The generated blocks of SPEC.md, built from their sources of truth.

Three blocks, each between ``<!-- BEGIN GENERATED: NAME -->`` and
``<!-- END GENERATED: NAME -->`` (only that text is rewritten):

* ``contents``: every ``##`` and ``###`` heading of SPEC.md itself, as a nested list of
  links to the anchors GitHub gives them (:func:`headings`, :func:`slug`);
* ``legal-edges``: the attempt state machine's edge table, from ``runstore.edges.LEGAL_EDGES``;
* ``commands``: one row per command of the typer app ``runstore.cli.app.app``, read from the
  app object (its registered commands and their parameters), never from a list kept here.

This module owns the blocks' content (:data:`BLOCKS`, :func:`regenerate`) and the reading
of SPEC's headings the blocks and the SPEC tests share (:func:`headings`); ``tools/regen``
writes SPEC.md (or, with ``--check``, reports it stale) together with the other generated
files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Iterator

import attrs
import typer
from runstore import edges
from runstore.cli.app import app as runstore_app
from typer.core import TyperArgument
from typer.core import TyperGroup
from typer.core import TyperOption


@attrs.frozen
class Heading:
    """One ATX heading of a Markdown text: ``level`` 1-6, ``text`` as written (after the
    ``#`` marks), ``anchor`` the id GitHub renders for it, ``line`` its 0-based line."""

    level: int
    text: str
    anchor: str
    line: int


HEADING = re.compile(r"(#{1,6}) +(.+?)(?: +#+)? *$")
FENCE = re.compile(r" {0,3}(```|~~~)")


def slug(text: str) -> str:
    """GitHub's anchor for a heading, before de-duplication (github-slugger): the rendered
    text lowercased, every character that is not a letter, a digit, ``-``, ``_`` or a space
    dropped, each space a ``-``. Code spans render as their content, so backticks go."""
    kept = (ch for ch in text.lower() if ch.isalnum() or ch in "-_ ")
    return "".join(kept).replace(" ", "-")


def headings(text: str) -> list[Heading]:
    """Every heading of ``text`` in order, outside fenced code blocks. A slug already taken
    by an earlier heading gets ``-1``, ``-2``, ... appended, as GitHub does."""
    found: list[Heading] = []
    taken: dict[str, int] = {}
    fenced = False
    for number, line in enumerate(text.split("\n")):
        if FENCE.match(line):
            fenced = not fenced
            continue
        matched = None if fenced else HEADING.fullmatch(line)
        if matched is None:
            continue
        base = slug(matched.group(2))
        anchor = base
        while anchor in taken:
            taken[base] += 1
            anchor = f"{base}-{taken[base]}"
        taken[anchor] = 0
        found.append(Heading(len(matched.group(1)), matched.group(2), anchor, number))
    return found


def contents_block(text: str) -> str:
    """A nested list of links to every ``##`` and ``###`` heading of ``text``."""
    lines = [
        "Contents, generated from the `##` and `###` headings by `tools/gen_spec.py`; do not edit.",
        "",
    ]
    for heading in headings(text):
        if heading.level in (2, 3):
            indent = "  " * (heading.level - 2)
            label = heading.text.replace("[", "\\[").replace("]", "\\]")
            lines.append(f"{indent}- [{label}](#{heading.anchor})")
    return "\n".join(lines) + "\n"


def legal_edges_block(text: str) -> str:
    """The edge table, one row per state, plus how revisions count."""
    return (
        "Generated from `runstore.edges.LEGAL_EDGES` by `tools/gen_spec.py`; do not edit.\n"
        "Every edge raises the attempt's revision by one. Revision 0 is the reservation "
        "itself (no state -> `reserved`). `advance` takes the edges between execution phases "
        "and enters `finalizing` without contending for the slot's claim; "
        "`begin_finalization` enters it as a success contender; only "
        "`commit_finalization` (or recovery) leaves it.\n\n" + edges.edge_table_markdown()
    )


@attrs.frozen
class Command:
    """What SPEC's command table says of one command of a typer app."""

    name: str
    summary: str
    arguments: tuple[str, ...]
    """The positional arguments' names, upper case (as ``--help`` shows them)."""
    options: tuple[str, ...]
    """Each option other than ``--json`` and ``--help``, rendered for the table."""
    has_json: bool


def commands(app: typer.Typer) -> Iterator[Command]:
    """The commands registered on ``app``, in registration order, read from the click
    command typer builds for it."""
    group = typer.main.get_command(app)
    if not isinstance(group, TyperGroup):  # an app of one command has no command names
        raise TypeError(f"{app!r} is not an app of named commands")
    for name, command in group.commands.items():
        arguments: list[str] = []
        options: list[str] = []
        has_json = False
        for param in command.params:
            if isinstance(param, TyperArgument):
                arguments.append((param.name or "").upper())
            elif isinstance(param, TyperOption):
                if "--json" in param.opts:
                    has_json = True
                    continue
                options.append(_option(param))
        yield Command(name, summary(command.help), tuple(arguments), tuple(options), has_json)


def summary(help_text: str | None) -> str:
    """The first sentence of a command's help (empty when it has none)."""
    paragraph = (help_text or "").strip().split("\n\n")[0]
    joined = " ".join(paragraph.split())
    return re.split(r"(?<=\.) (?=[A-Z])", joined)[0]


def _option(param: TyperOption) -> str:
    names = "/".join(f"`{name}`" for name in (*param.opts, *param.secondary_opts))
    notes = []
    if param.required:
        notes.append("required")
    envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    notes += [f"or `${name}`" for name in envvars]
    return f"{names} ({', '.join(notes)})" if notes else names


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def command_table(app: typer.Typer) -> str:
    """The Markdown table of ``app``'s commands: name, summary, arguments, options, --json."""
    rows = [
        "| command | summary | arguments | options | `--json` |",
        "| --- | --- | --- | --- | --- |",
    ]
    for command in commands(app):
        arguments = ", ".join(f"`{name}`" for name in command.arguments) or "none"
        cells = (
            f"`{command.name}`",
            _cell(command.summary),
            arguments,
            _cell(", ".join(command.options)) or "none",
            "yes" if command.has_json else "no",
        )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def commands_block(text: str) -> str:
    """The command table of ``runstore.cli.app.app``."""
    return (
        "Generated from the typer app `runstore.cli.app.app` by `tools/gen_spec.py`; do not "
        "edit. One row per registered command: the first sentence of its help, its "
        "arguments, its options other than `--help` and `--json` (a required one marked so, "
        "with the environment variable that can stand for it), and whether it has "
        "`--json`.\n\n" + command_table(runstore_app)
    )


BLOCKS: dict[str, Callable[[str], str]] = {
    "contents": contents_block,
    "legal-edges": legal_edges_block,
    "commands": commands_block,
}
"""Each block's name and its builder, which receives the whole SPEC text."""


def _span(text: str, name: str) -> tuple[int, int]:
    """Where block ``name``'s content starts and stops in ``text`` (ValueError when the
    block is missing)."""
    begin = f"<!-- BEGIN GENERATED: {name} -->\n"
    start = text.index(begin) + len(begin)
    return start, text.index(f"<!-- END GENERATED: {name} -->", start)


def block(text: str, name: str) -> str:
    """The current content of block ``name`` in ``text``."""
    start, stop = _span(text, name)
    return text[start:stop]


def regenerate(text: str) -> str:
    """``text`` with every generated block replaced by its current content."""
    for name, build in BLOCKS.items():
        start, stop = _span(text, name)
        text = text[:start] + build(text) + text[stop:]
    return text
