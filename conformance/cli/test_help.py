"""``runstore --help`` and every command's ``--help``, as the installed console script
prints them (``COLUMNS=100``), checked against the typer app's own declarations, and
``--version``.

- Every help text an option or argument declares is printed whole (a help text once lost
  "[default: ...]" to rich markup), and every example line of the epilog prints on one line.
- Every option that is neither required nor a plain switch shows its default: its value,
  or the words its ``show_default`` gives when it has no value (``--jobs``: the cores).
- Every boolean option is a plain switch: its entry shows its names and no metavar
  (``--init``, not ``--init <bool>``), ``--help`` and ``--version`` included.
- Every command's epilog has at least one ``runstore`` example, and each runs as written
  from a directory laid out as the repository's root after the README's first command
  (``demo_workdir``: a private copy of the demo store as ``.demo-store``; relative outputs
  land there). The demo store is a finished campaign without failures, so no reading
  command has a finding and every example exits 0.

The commands are read from the app object (``runstore.cli.app.app``), so a command added to
it is covered without a change here.
"""

from __future__ import annotations

import enum
import functools
import importlib.metadata
import re
import shlex
from pathlib import Path

import attrs
import pytest
import typer
from runstore.cli.app import app
from typer.core import TyperArgument
from typer.core import TyperCommand
from typer.core import TyperGroup
from typer.core import TyperOption

from conformance.cli.world import runstore

GROUP = typer.main.get_command(app)
assert isinstance(GROUP, TyperGroup)
COMMANDS: dict[str, TyperCommand] = {
    name: command for name, command in GROUP.commands.items() if isinstance(command, TyperCommand)
}
assert len(COMMANDS) == len(GROUP.commands)
HELPS = ["", *COMMANDS]
"""What ``--help`` is asked of: the top level ("") and each command."""


def command_of(name: str) -> TyperCommand | TyperGroup:
    return COMMANDS[name] if name else GROUP


def parameters(name: str) -> list[TyperOption | TyperArgument]:
    """The parameters ``--help`` lists for ``name``, its help option included."""
    command = command_of(name)
    context = command.context_class(command, info_name=name or "runstore")
    found = [p for p in command.get_params(context) if isinstance(p, TyperOption | TyperArgument)]
    assert len(found) == len(command.get_params(context))
    return found


@functools.cache
def shown(name: str) -> str:
    """``runstore [NAME] --help``'s standard output (exit 0 required)."""
    done = runstore(*([name] if name else []), "--help", env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@attrs.frozen
class Entry:
    """One option's entry in a help's Options section: its names with what follows each
    (a metavar, or ""), and its help text as printed (wrapped lines joined)."""

    names: tuple[tuple[str, str], ...]
    text: str


def entries(help_text: str) -> dict[str, Entry]:
    """Each option's entry in ``help_text``'s Options section (click's layout: an entry's
    first line is indented two spaces, its wrapped lines more; the section ends at the
    first blank line), under each of its names."""
    lines = help_text.splitlines()
    start = lines.index("Options:") + 1
    blocks: list[list[str]] = []
    for line in lines[start:]:
        if not line.strip():
            break
        if re.match(r"  \S", line):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    found: dict[str, Entry] = {}
    for block in blocks:
        column, _, first = block[0].strip().partition("  ")
        names = tuple(
            (token.split(" ", 1)[0], token.partition(" ")[2])
            for token in re.split(r", | / ", column)
        )
        entry = Entry(names=names, text=" ".join([first, *block[1:]]).strip())
        for name, _ in names:
            found[name] = entry
    return found


def squash(text: str) -> str:
    """``text`` without whitespace: wrapping (which may break at a hyphen) is no change."""
    return "".join(text.split())


def swallowed_help(name: str, help_text: str) -> list[str]:
    """Each declared help text that ``help_text`` does not print whole."""
    problems = []
    listed = entries(help_text)
    for param in parameters(name):
        if not param.help:
            continue
        if isinstance(param, TyperOption):
            where = listed.get(param.opts[0])
            printed = where.text if where is not None else ""
        else:
            printed = help_text
        if squash(param.help) not in squash(printed):
            problems.append(f"{param.opts[0]}: {param.help!r} is not printed whole")
    return problems


def expected_default(option: TyperOption) -> str | None:
    """What an option's entry must show as its default, from its declaration; None for a
    required option and a plain switch (off unless given)."""
    if option.required or (option.is_flag and not option.secondary_opts):
        return None
    if option.is_flag:  # --x/--no-x: the name that holds by default
        return "default: " + (option.opts if option.default else option.secondary_opts)[0][2:]
    if isinstance(option.show_default, str):
        return f"default: ({option.show_default})"
    if option.default is None or option.show_default is False:
        return "a default (show_default='what happens without it')"
    values = option.default if isinstance(option.default, list | tuple) else [option.default]
    shown_values = [v.value if isinstance(v, enum.Enum) else v for v in values]
    return "default: " + ", ".join(str(value) for value in shown_values)


def missing_defaults(name: str, help_text: str) -> list[str]:
    """Each option whose entry in ``help_text`` lacks its default."""
    problems = []
    listed = entries(help_text)
    for param in parameters(name):
        if not isinstance(param, TyperOption):
            continue
        expected = expected_default(param)
        if param.is_flag and not param.secondary_opts and param.default not in (False, None):
            problems.append(f"{param.opts[0]}: a switch must be off by default")
        where = listed.get(param.opts[0])
        if expected is not None and (where is None or squash(expected) not in squash(where.text)):
            problems.append(f"{param.opts[0]}: does not show {expected!r}")
    return problems


def switches_with_metavars(name: str, help_text: str) -> list[str]:
    """Each boolean option of ``name`` whose entry in ``help_text`` is missing or shows a
    metavar after one of its names."""
    problems = []
    listed = entries(help_text)
    for param in parameters(name):
        if not isinstance(param, TyperOption):
            continue
        if not (param.is_flag or isinstance(param.default, bool)):
            continue
        where = listed.get(param.opts[0])
        if where is None:
            problems.append(f"{param.opts[0]}: no entry")
            continue
        problems += [f"{n}: shows {metavar!r}" for n, metavar in where.names if metavar]
        if {n for n, _ in where.names} != {*param.opts, *param.secondary_opts}:
            problems.append(f"{param.opts[0]}: shown as {where.names!r}")
    return problems


def example_lines(name: str) -> list[str]:
    """The ``runstore ...`` lines of command ``name``'s epilog."""
    epilog = COMMANDS[name].epilog or ""
    return [line.strip() for line in epilog.splitlines() if line.strip().startswith("runstore ")]


EXAMPLES = [(name, line) for name in COMMANDS for line in example_lines(name)]


def test_version_prints_the_installed_distributions_version() -> None:
    expected = f"runstore {importlib.metadata.version('runstore')}\n"
    for flag in ("--version", "-V"):
        done = runstore(flag)
        assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")


def test_the_checks_catch_a_swallowed_default_a_missing_default_and_a_metavar() -> None:
    """The checks below can fail: on a ``run`` help with the defects of the help it printed
    before (in click's plain layout), each finds its own: a bracketed part of a help text
    eaten as markup, ``--jobs``'s default missing, ``<bool>`` after ``--init``."""
    old = (
        "Usage: runstore run [OPTIONS] CAMPAIGN\n\nOptions:\n"
        "  --store DIR            The store root directory (or ).\n"
        "  --init <bool>          Create the store root if missing.\n"
        "  -j, --jobs <int range>\n"
        "                         Workers at once .\n"
        "  --help                 Show this message and exit.\n\n  Examples:\n"
    )
    assert any(p.startswith("--store:") for p in swallowed_help("run", old))
    assert any(p.startswith("--jobs: does not show") for p in missing_defaults("run", old))
    assert "--init: shows '<bool>'" in switches_with_metavars("run", old)
    assert "--json: no entry" in switches_with_metavars("run", old)


@pytest.mark.parametrize("name", HELPS, ids=lambda name: name or "runstore")
def test_every_help_text_and_example_is_printed_whole(name: str) -> None:
    help_text = shown(name)
    assert swallowed_help(name, help_text) == []
    printed = {line.strip() for line in help_text.splitlines()}
    for line in example_lines(name) if name else []:
        assert line in printed, f"{line!r} is not printed on one line"


@pytest.mark.parametrize("name", HELPS, ids=lambda name: name or "runstore")
def test_every_option_shows_its_default(name: str) -> None:
    assert missing_defaults(name, shown(name)) == []


@pytest.mark.parametrize("name", HELPS, ids=lambda name: name or "runstore")
def test_every_boolean_option_is_a_plain_switch(name: str) -> None:
    assert switches_with_metavars(name, shown(name)) == []


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_an_example_of_itself(name: str) -> None:
    examples = example_lines(name)
    assert examples, f"runstore {name} --help shows no example"
    assert all(shlex.split(line)[1] == name for line in examples), examples


@pytest.mark.parametrize(("name", "line"), EXAMPLES, ids=[line for _, line in EXAMPLES])
def test_every_help_example_runs_on_the_demo_store(
    demo_workdir: Path, name: str, line: str
) -> None:
    arguments = shlex.split(line)[1:]
    assert not [a for a in arguments if a.startswith("/")], "examples use relative paths"
    if "--store" in arguments:
        assert arguments[arguments.index("--store") + 1] == ".demo-store"
    done = runstore(*arguments, cwd=demo_workdir, timeout=300)
    assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stderr}"
