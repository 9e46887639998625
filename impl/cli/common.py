"""What every ``runstore`` command shares: the typer app, the exit statuses, the common
options, and how a refusal or a document is printed (SPEC.md section 15.7).

Rules of this file: no command lives here (they are in ``run_command``, ``read_commands``,
``triage_commands`` and ``check_commands``, registered on :data:`app` in that order by
:mod:`runstore.cli.app`); no store logic.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated
from typing import Any
from typing import NoReturn

import typer
from rich.table import Table
from runstore.canonical import JSON
from runstore.cli import output
from runstore.cli import render
from runstore.cli import views
from runstore.errors import OptionInvalidError
from runstore.errors import RunStoreError

EXIT_OK = 0
EXIT_UNSATISFIED = 1
EXIT_USAGE = 2
EXIT_STORE = 3
EXIT_CONFLICT = 4
EXIT_STOPPED = 130
EXIT_OUTPUT_CLOSED = 141
"""``run``'s output lost its reader (128 + SIGPIPE, as a shell reports a writer killed by
it); the run stopped as on SIGINT."""

EXIT_BY_CODE = {
    "campaign_invalid": EXIT_USAGE,
    "executor_unavailable": EXIT_USAGE,
    "comparison_invalid": EXIT_USAGE,
    "unknown_campaign": EXIT_USAGE,
    "unknown_revision": EXIT_USAGE,
    "option_invalid": EXIT_USAGE,
    "implementation_unavailable": EXIT_USAGE,
    "registration_conflict": EXIT_CONFLICT,
}
"""Error codes with their own exit status; every other store refusal exits 3."""

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    # Plain help (click's formatter), not typer's rich panels: those read every help text
    # as rich markup (a "[default: ...]" in it vanished as a tag) and, since typer 0.29,
    # print a type such as "<bool>" beside every switch, --help included.
    rich_markup_mode=None,
    help=(
        "Run experiment and benchmark campaigns on a crash-safe run store.\n\n"
        "Exit statuses: 0 done (every slot satisfied), 1 some slots unsatisfied, "
        "2 usage, campaign file or executor error, 3 the store refused, 4 the campaign conflicts "
        "with the store, 130 stopped by a signal, 141 run's output was closed."
    ),
)

Store = Annotated[
    Path,
    typer.Option(
        "--store",
        envvar="RUNSTORE_STORE",
        metavar="DIR",
        help="The store root directory (or $RUNSTORE_STORE).",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
Campaign = Annotated[
    str | None,
    typer.Option(
        "--campaign",
        metavar="NAME",
        help="Only this campaign's slots (an unknown name is a usage error).",
        show_default="every campaign",
    ),
]


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, which run from the repository's root
    on the demo store (README's first command makes ``.demo-store``). The ``\\b`` paragraph
    keeps click from rewrapping them, so each prints on one line to copy."""
    title = "Example:" if len(lines) == 1 else "Examples:"
    return f"{title}\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def one_revision(text: str | None, option: str) -> int | None:
    """A revision number given to ``option`` (``all`` is refused), or None."""
    parsed = views.parse_revision(text, option)
    if parsed == "all":
        raise OptionInvalidError(f"{option} takes one revision number, not 'all'")
    return parsed


def document_or_tables(
    value: render.Documented, tables: Callable[[Any], list[Table]], *, as_json: bool
) -> None:
    """Print a reader's document (``--json``) or the tables ``tables`` draws of it."""
    if as_json:
        output.print_json(value.to_json())
    else:
        output.print_tables(tables(value))


def verdict(document: dict[str, JSON], lines: list[str], *, as_json: bool) -> NoReturn:
    """Print a check's document (``--json``) or its lines, and exit 0 when its ``ok``."""
    if as_json:
        output.print_json(document)
    else:
        for line in lines:
            typer.echo(line)
    raise typer.Exit(EXIT_OK if document["ok"] is True else EXIT_UNSATISFIED)


@contextmanager
def errors(as_json: bool, options: Mapping[str, str] | None = None) -> Iterator[None]:
    """Map a refusal to its exit status after printing its code and message. ``options``
    maps the library's parameter names to this command's options (``{"out_dir":
    "--out"}``): a refusal whose ``argument`` is one of them has its hint name that option
    (SPEC.md 15.7); any other refusal gets its code's hint (``unsafe_path``: ``--store``)."""
    try:
        yield
    except RunStoreError as error:
        option = (options or {}).get(error.argument or "")
        output.print_error(error.code, error.message, as_json=as_json, option=option)
        raise typer.Exit(EXIT_BY_CODE.get(error.code, EXIT_STORE)) from None


def stream(chunks: Iterator[str]) -> None:
    """Write ``chunks`` to stdout as they come (a reader that stops early, as ``head``
    does, ends the output quietly)."""
    try:
        for chunk in chunks:
            sys.stdout.write(chunk)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
