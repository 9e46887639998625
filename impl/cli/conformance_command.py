"""``runstore conformance``: the conformance kit against another implementation's driver
(SPEC.md section 18).

Rules of this file: options in, :func:`runstore.kit.run.run_kit` (or
:func:`~runstore.kit.run.replay_transcript`) called, the report printed; exit 0 when no
check failed, 1 when one did, 2 for options or a driver that cannot be started.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from runstore.cli import output
from runstore.cli.common import EXIT_OK
from runstore.cli.common import EXIT_UNSATISFIED
from runstore.cli.common import Json
from runstore.cli.common import app
from runstore.cli.common import errors
from runstore.cli.common import examples

Impl = Annotated[
    str,
    typer.Option(
        "--impl",
        metavar="COMMAND",
        help="The driver command, split as a shell splits words (run without a shell).",
        show_default=False,
    ),
]


@app.command(
    epilog=examples('runstore conformance --impl "python -m runstore.kit.driver" --level values')
)
def conformance(
    impl: Impl,
    level: Annotated[
        str, typer.Option("--level", metavar="LEVEL", help="values, writer or store.")
    ] = "store",
    as_json: Json = False,
    vectors: Annotated[
        Path | None,
        typer.Option(
            "--vectors",
            metavar="DIR",
            help="The vector files.",
            show_default="this checkout's vectors/",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help="Longest wait for one answer.")
    ] = 30.0,
    examples_count: Annotated[
        int, typer.Option("--examples", metavar="N", help="Lockstep programs per level.")
    ] = 100,
    kills: Annotated[
        int, typer.Option("--kills", metavar="N", help="Kills per step of each crash scenario.")
    ] = 1,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            metavar="NAME",
            help="Only this crash scenario (repeatable).",
            show_default="every eligible scenario",
        ),
    ] = None,
    check: Annotated[
        list[str] | None,
        typer.Option(
            "--check",
            metavar="NAME",
            help="Only this check, by its report name (repeatable).",
            show_default="every check of the level",
        ),
    ] = None,
    shrink_seconds: Annotated[
        float,
        typer.Option(
            "--shrink-seconds", metavar="SECONDS", help="How long a failed lockstep is shrunk."
        ),
    ] = 20.0,
    transcript: Annotated[
        Path | None,
        typer.Option(
            "--transcript",
            metavar="FILE",
            help="Write a failed lockstep's shrunk transcript here.",
            show_default="not written",
        ),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            metavar="FILE",
            help="Replay a transcript instead of running the checks.",
            show_default="no replay",
        ),
    ] = None,
) -> None:
    """Check another implementation of SPEC.md through its driver: replay every vector
    file, run the model-as-oracle lockstep and, at level store, kill it mid-request and
    check what it recovers. Exit 0 when no check failed, 1 when one did."""
    from runstore.kit.report import Check
    from runstore.kit.report import Report
    from runstore.kit.run import VECTORS
    from runstore.kit.run import KitOptions
    from runstore.kit.run import replay_transcript
    from runstore.kit.run import run_kit

    with errors(as_json):
        if replay is not None:
            differences = replay_transcript(impl, replay.read_text(encoding="utf-8"), timeout)
            for line in differences or ["the driver answered every request as recorded"]:
                typer.echo(line)
            raise typer.Exit(EXIT_UNSATISFIED if differences else EXIT_OK)
        options = KitOptions(
            level=level,
            timeout=timeout,
            examples=examples_count,
            kills=kills,
            scenarios=tuple(scenario or ()),
            only=tuple(check or ()),
            shrink_seconds=shrink_seconds,
            vectors=vectors.resolve() if vectors is not None else VECTORS,
        )

        shown: list[Check] = []
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None

        def progress(done: Check, report: Report) -> None:
            """The text report is written as it grows: a row as each check ends (its
            detail wrapped to the terminal's width, whole when the output is not one)."""
            if not as_json:
                row = report.row(done, width)
                typer.echo(("" if shown else report.header()) + row, nl=False)
                shown.append(done)

        report = run_kit(impl, options, progress)
    if transcript is not None:
        shrunk = [c.detail for c in report.checks if c.name.endswith("lockstep") and c.detail]
        if shrunk:
            transcript.write_text(shrunk[0].split("shrunk transcript:\n", 1)[-1], encoding="utf-8")
    if as_json:
        output.print_json(report.to_json())
    else:
        typer.echo(report.summary(), nl=False)
    raise typer.Exit(EXIT_UNSATISFIED if report.failed else EXIT_OK)
