"""Every command of the ``runstore`` command is documented, as sqlite-utils' tests/test_docs.py
has it: help text, ``--store`` and ``--json``, an example where it takes arguments, a row in
SPEC.md's generated command table and a synopsis in its hand-written one (section 15.7)
naming exactly its options; and the top-level help gives the exit statuses.

The commands are read from the typer app object (``runstore.cli.app.app``), so a command
added to it is covered without a change here; its help is read through the installed
console script, as a user sees it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from runstore.cli.app import app
from typer.core import TyperArgument
from typer.core import TyperCommand
from typer.core import TyperGroup
from typer.core import TyperOption

from conformance.cli.world import runstore

SPEC = Path(__file__).resolve().parents[2] / "SPEC.md"


def registered() -> dict[str, TyperCommand]:
    """The commands registered on the app, in registration order."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    found = {n: c for n, c in group.commands.items() if isinstance(c, TyperCommand)}
    assert len(found) == len(group.commands)
    return found


COMMANDS = registered()
STORELESS = {"conformance"}
"""Commands that take no ``--store``: ``conformance`` drives another implementation's
store, in roots it makes itself (SPEC.md section 18)."""


def long_options(name: str) -> set[str]:
    """The command's long option names, ``--help`` aside."""
    return {
        flag
        for param in COMMANDS[name].params
        if isinstance(param, TyperOption)
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("--")
    }


def commands_section() -> str:
    text = SPEC.read_text(encoding="utf-8")
    return text[text.index("### 15.7 ") : text.index("### 15.8 ")]


def generated_rows() -> dict[str, str]:
    """SPEC's generated command table: each command's row."""
    section = commands_section()
    table = section[
        section.index("<!-- BEGIN GENERATED: commands -->") : section.index(
            "<!-- END GENERATED: commands -->"
        )
    ]
    return {m[1]: m[0] for m in re.finditer(r"^\| `([a-z-]+)` \|.*$", table, re.MULTILINE)}


def synopses() -> dict[str, str]:
    """SPEC's hand-written command table: each command's synopsis."""
    found = re.finditer(r"^\| `runstore ([a-z-]+)([^`]*)` \|", commands_section(), re.MULTILINE)
    return {m[1]: m[2] for m in found}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_help(name: str) -> None:
    command = COMMANDS[name]
    assert (command.help or "").strip(), f"{name} has no help text"
    shown = runstore(name, "--help")
    assert shown.returncode == 0
    first = " ".join(command.help.split("\n\n")[0].split()) if command.help else ""
    assert first in " ".join(shown.stdout.split())
    assert ("--store" in shown.stdout) is (name not in STORELESS)
    assert "--json" in shown.stdout
    assert "--json" in long_options(name)
    if any(isinstance(param, TyperArgument) for param in command.params):
        assert "Example" in shown.stdout, f"{name} takes arguments and shows no example"
    row = generated_rows().get(name)
    assert row is not None, f"SPEC.md 15.7's command table has no row for {name}: tools/regen"
    assert row.endswith("| yes |"), row


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_a_synopsis_in_spec_naming_its_options(name: str) -> None:
    synopsis = synopses().get(name)
    assert synopsis is not None, f"SPEC.md 15.7 has no synopsis `runstore {name} ...`"
    assert set(re.findall(r"--[a-z][a-z-]*", synopsis)) == long_options(name) - {"--help"}


def test_specs_command_tables_name_no_other_command() -> None:
    assert set(generated_rows()) == set(COMMANDS)
    assert set(synopses()) == set(COMMANDS)


def test_the_top_level_help_documents_the_exit_statuses() -> None:
    shown = runstore("--help")
    assert shown.returncode == 0
    for status in ("0 done", "1 some slots", "2 usage", "3 the store", "4 the campaign", "130"):
        assert status in " ".join(shown.stdout.split())
