"""``runstore explain``, ``failures`` and ``logs``: one slot's history and why slots
failed, read from a private copy of the store (SPEC.md section 15.6).

Rules of this file: parse options, call the inspection reader, render; never open the
store.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from runstore.cli import output
from runstore.cli import render
from runstore.cli import views
from runstore.cli.common import EXIT_OK
from runstore.cli.common import EXIT_UNSATISFIED
from runstore.cli.common import Campaign
from runstore.cli.common import Json
from runstore.cli.common import Store
from runstore.cli.common import app
from runstore.cli.common import document_or_tables
from runstore.cli.common import errors
from runstore.cli.common import examples


@app.command(
    epilog=examples(
        "runstore explain codecs/zlib-6/text-1m/measurement-2 --store .demo-store",
        "runstore explain codecs/lzma-6/json-1m/measurement --store .demo-store --json",
    )
)
def explain(
    target: Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="An attempt slot id, an attempt id, CAMPAIGN/CANDIDATE/PROBLEM (a pair with one"
            " slot) or CAMPAIGN/CANDIDATE/PROBLEM/SLOT (measurement-2: its third repetition).",
        ),
    ],
    store: Store,
    as_json: Json = False,
) -> None:
    """One slot's attempts, transitions, events, artifacts and outcome."""
    from runstore.inspection.explain import explain as read_explanation
    from runstore.inspection.snapshot import Snapshot

    with errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        explanation = read_explanation(snapshot, target)
    document_or_tables(explanation, render.explain_tables, as_json=as_json)


@app.command(
    epilog=examples(
        "runstore failures --store .demo-store",
        "runstore failures --store .demo-store --campaign codecs --json",
    )
)
def failures(
    store: Store,
    campaign: Campaign = None,
    as_json: Json = False,
) -> None:
    """Every unsatisfied slot (failed, interrupted, censored, superseded) grouped by its
    latest attempt's failure code, each cause with its count, its slots and one slot's
    stderr tail and log path. Exit 0 when there are none, 1 when there are."""
    from runstore.cli import render_triage
    from runstore.inspection.failures import failures as read_failures
    from runstore.inspection.snapshot import Snapshot

    with errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        views.checked(snapshot.connection, campaign, None)
        report = read_failures(snapshot, campaign=campaign)
    document = report.to_json()
    if as_json:
        output.print_json(document)
    else:
        width = output.console(sys.stdout).width
        for line in render_triage.failures_lines(document, width):
            typer.echo(line)
    raise typer.Exit(EXIT_UNSATISFIED if report.groups else EXIT_OK)


@app.command(
    epilog=examples(
        "runstore logs codecs/zlib-6/text-1m/measurement-2 --store .demo-store",
        "runstore logs codecs/zlib-6/text-1m/measurement-2 --store .demo-store --stdout --json",
    )
)
def logs(
    target: Annotated[
        str,
        typer.Argument(
            metavar="SLOT",
            help="The slot, as explain takes it: CAMPAIGN/CANDIDATE/PROBLEM/SLOT,"
            " CAMPAIGN/CANDIDATE/PROBLEM (a pair with one slot), a slot id or an attempt id.",
        ),
    ],
    store: Store,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            min=0,
            metavar="N",
            help="The attempt's retry index (explain's attempt N).",
            show_default="the latest attempt",
        ),
    ] = None,
    stdout: Annotated[
        bool, typer.Option("--stdout", help="Print the worker's stdout.log.")
    ] = False,
    stderr: Annotated[
        bool, typer.Option("--stderr", help="Print the worker's stderr.log (the default).")
    ] = False,
    as_json: Json = False,
) -> None:
    """Print one attempt's worker log (stderr.log, or stdout.log) byte for byte, once its
    attempt artifact has verified; a log that does not verify is refused, and nothing of
    it is printed."""
    from runstore.inspection.logs import attempt_log
    from runstore.inspection.snapshot import Snapshot

    if stdout and stderr:
        raise typer.BadParameter("give at most one of --stdout and --stderr")
    stream = "stdout" if stdout else "stderr"
    with errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        found = attempt_log(snapshot, target, attempt=attempt, stream=stream)
    if as_json:
        output.print_json(found.to_json())
        return
    try:
        sys.stdout.buffer.write(found.data)
        sys.stdout.flush()
    except BrokenPipeError:  # `runstore logs ... | head`: the reader has what it wanted
        output.silence(sys.stdout)
