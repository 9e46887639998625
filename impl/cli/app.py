"""The ``runstore`` command: a thin typer layer over the runner and the inspection reader.

Rules of this file: it gives the app of :mod:`runstore.cli.common` its ``--version`` and
registers the commands by importing their modules, then puts them in the order
``--help`` lists them (:data:`COMMAND_ORDER`).
The commands parse options, call one library function, render, and map errors to exit
statuses (SPEC.md section 15, "Exit statuses"); no decisions and no store logic live in
them. ``run`` and ``recover`` open the store; every other command only reads a private
copy of it (``runstore.inspection``) and never opens, initializes, recovers or writes it.
"""

from __future__ import annotations

from typing import Annotated
from typing import NoReturn

import typer
from runstore.cli import check_commands
from runstore.cli import conformance_command
from runstore.cli import read_commands
from runstore.cli import run_command
from runstore.cli import triage_commands
from runstore.cli.common import EXIT_OK
from runstore.cli.common import EXIT_STOPPED
from runstore.cli.common import app

COMMAND_MODULES = (
    run_command,
    read_commands,
    triage_commands,
    check_commands,
    conformance_command,
)
"""The modules whose commands ``app`` holds (importing one registers its commands)."""

COMMAND_ORDER = (
    "run",
    "recover",
    "status",
    "campaigns",
    "compare",
    "explain",
    "failures",
    "logs",
    "validate",
    "audit",
    "export",
    "report",
    "conformance",
)
"""The order ``--help`` lists the commands in (every command is named here)."""

app.registered_commands.sort(
    key=lambda command: COMMAND_ORDER.index(getattr(command.callback, "__name__", ""))
)

__all__ = ["COMMAND_MODULES", "COMMAND_ORDER", "app", "main"]


def _print_version(wanted: bool) -> None:
    """``--version``: print ``runstore <version>`` and exit 0."""
    if wanted:
        from runstore.runner.environment import runstore_version

        typer.echo(f"runstore {runstore_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print runstore's version and exit.",
        ),
    ] = False,
) -> None:
    """The options before the command's name (``--version``)."""


def main() -> NoReturn:
    """The console script's entry point."""
    try:
        app()
    except KeyboardInterrupt:
        raise SystemExit(EXIT_STOPPED) from None
    raise SystemExit(EXIT_OK)
