"""``runstore validate``, ``audit``, ``export`` and ``report``: checking a store and
reusing its results, from a private copy of it (SPEC.md section 16).

Rules of this file: parse options, call one library function, render or write; never
open the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from runstore.cli import output
from runstore.cli import render
from runstore.cli import views
from runstore.cli.common import Campaign
from runstore.cli.common import Json
from runstore.cli.common import Store
from runstore.cli.common import app
from runstore.cli.common import errors
from runstore.cli.common import examples
from runstore.cli.common import verdict


@app.command(
    epilog=examples(
        "runstore validate --store .demo-store", "runstore validate --store .demo-store --quick"
    )
)
def validate(
    store: Store,
    quick: Annotated[
        bool, typer.Option("--quick", help="Check artifacts' presence, not their content.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Check a private copy of the store: SQLite integrity, the exact schema, every id,
    the invariants, and every artifact against its manifest and address. Exit 0 only when
    nothing is found, 1 with findings."""
    from runstore.inspection.validate import validate_store

    with errors(as_json):
        report = validate_store(os.path.abspath(store), quick=quick)
    verdict(report.to_json(), render.validation_lines(report), as_json=as_json)


@app.command(epilog=examples("runstore audit --store .demo-store"))
def audit(store: Store, as_json: Json = False) -> None:
    """Replay the committed event log through the executable model from an empty state and
    require the model's projection to equal the store's. Exit 0 when they agree, 1 with
    the first divergent event."""
    from runstore.audit import audit as replay
    from runstore.inspection.snapshot import Snapshot

    with errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        report = replay(snapshot)
    verdict(report.to_json(), render.audit_lines(report), as_json=as_json)


@app.command(
    epilog=examples("runstore export --store .demo-store --out codecs-export --campaign codecs")
)
def export(
    store: Store,
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="OUTDIR", help="The export directory (created when missing)."
        ),
    ],
    campaign: Campaign = None,
    revision: views.RevisionOption = None,
    as_json: Json = False,
) -> None:
    """Write index.jsonl, attempts.csv, observations.csv and metrics.csv from a private copy
    of the store, naming only artifacts that verify; rebuildable byte for byte. With them,
    summary.csv: each candidate x problem x metric's statistics, as status prints them."""
    from runstore.inspection.export import export as write_export
    from runstore.inspection.snapshot import Snapshot

    with (
        errors(as_json, options={"out_dir": "--out"}),
        Snapshot.take(os.path.abspath(store)) as snapshot,
    ):
        chosen = views.checked(snapshot.connection, campaign, revision)
        summary = write_export(snapshot, str(out), campaign=campaign, revision=chosen)
    if as_json:
        output.print_json(summary.to_json())
        return
    for name, count in summary.files.items():
        typer.echo(f"{os.path.join(summary.out_dir, name)}: {count} rows")
    typer.echo(f"verified artifacts: {summary.verified_artifacts}")


@app.command(
    epilog=examples(
        "runstore report --store .demo-store --html codecs.html",
        "runstore report --store .demo-store --html codecs.html --baseline zlib-6 "
        "--title 'Codecs against zlib-6'",
    )
)
def report(
    store: Store,
    html: Annotated[
        Path, typer.Option("--html", metavar="FILE", help="The page to write (replaced).")
    ],
    campaign: Campaign = None,
    title: Annotated[
        str | None,
        typer.Option(
            "--title",
            metavar="TEXT",
            help="The page's title.",
            show_default="runstore report: NAME, else DIR",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="CANDIDATE",
            help="Add each other candidate's ratio to this one, per problem and metric.",
            show_default="no ratios",
        ),
    ] = None,
    revision: views.RevisionOption = None,
    as_json: Json = False,
) -> None:
    """One self-contained HTML page: each pair's median ± MAD per metric with charts, the
    status, and with --baseline every candidate's ratio to a baseline candidate."""
    from runstore.inspection.report_file import write_report
    from runstore.inspection.snapshot import Snapshot

    with (
        errors(as_json, options={"path": "--html"}),
        Snapshot.take(os.path.abspath(store)) as snapshot,
    ):
        chosen = views.checked(snapshot.connection, campaign, revision)
        written = write_report(
            snapshot,
            str(html),
            campaign=campaign,
            title=title,
            baseline=baseline,
            revision=chosen,
        )
    if as_json:
        output.print_json({"html": written})
    else:
        typer.echo(f"wrote {written}")
