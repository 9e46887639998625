"""``runstore status``, ``campaigns`` and ``compare``: what a store holds, read from a
private copy of it (SPEC.md sections 15.6, 15.9 and 17.5).

Rules of this file: parse options, call the inspection reader, render; never open the
store.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from runstore.cli import output
from runstore.cli import views
from runstore.cli.common import Campaign
from runstore.cli.common import Json
from runstore.cli.common import Store
from runstore.cli.common import app
from runstore.cli.common import errors
from runstore.cli.common import examples
from runstore.cli.common import one_revision
from runstore.cli.common import stream


@app.command(epilog=examples("runstore status --store .demo-store --campaign codecs"))
def status(
    store: Store,
    campaign: Campaign = None,
    revision: views.RevisionOption = None,
    slots: Annotated[
        bool,
        typer.Option(
            "--slots",
            help="One line per slot: candidate, problem, slot, state, attempts, latest failure"
            " (with --json: the document's slots, each with its metrics).",
        ),
    ] = False,
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Every row of every table (by default each shows its first rows and what it"
            " left out).",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Counts by state in total, per candidate and per problem, each pair's metrics as
    median ± MAD over its accepted repetitions, and the unsatisfied slots by failure code,
    read from a private copy of the store."""
    from runstore.cli import render_status
    from runstore.inspection import status_summary
    from runstore.inspection.results import iter_pair_results
    from runstore.inspection.snapshot import Snapshot

    width = output.console(sys.stdout).width
    limit = None if every or as_json else render_status.MAX_PAIRS
    with errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        connection = snapshot.connection
        chosen = views.checked(connection, campaign, revision)
        counts = status_summary.status_counts(connection, campaign=campaign, revision=chosen)
        results = (
            result.to_json()
            for result in iter_pair_results(
                connection,
                campaign=campaign,
                revision=chosen,
                limit=limit,
                accepted=limit is not None,
            )
        )
        lines = (
            line.to_json()
            for line in status_summary.slot_lines(
                connection, campaign=campaign, revision=chosen, metrics=as_json
            )
        )
        document = counts.to_json()
        if as_json or slots:
            if as_json:
                streamed = {"results": results, **({"slots": lines} if slots else {})}
                chunks = render_status.json_chunks(document, streamed)
            else:
                shown = render_status.slot_lines(lines, document, width, counts.longest_slot)
                chunks = (text + "\n" for text in shown)
            stream(chunks)
            results.close()  # before the snapshot closes: their cursors are on it
            lines.close()
            return
        summary = {**document, "pairs": counts.pairs, "incomplete_pairs": counts.incomplete_pairs}
        digest = render_status.PairDigest.of(results, summary)
    tables, notes = render_status.status_tables(document, digest, width, every=every)
    output.print_tables(tables)
    output.print_lines(notes)


@app.command(epilog=examples("runstore campaigns --store .demo-store"))
def campaigns(store: Store, as_json: Json = False) -> None:
    """The store's campaigns: each one's revisions and, in its latest revision, its pairs
    and slots by state, read from a private copy of the store."""
    from runstore.cli.render_campaigns import campaign_tables
    from runstore.inspection.campaigns import list_campaigns
    from runstore.inspection.snapshot import Snapshot

    with errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        listed = list_campaigns(snapshot.connection)
    if as_json:
        output.print_json(listed.to_json())
        return
    tables, lines = campaign_tables(listed.to_json())
    output.print_tables(tables)
    output.print_lines(lines)


@app.command(
    epilog=examples(
        "runstore compare --store .demo-store --baseline zlib-6",
        "runstore compare --store .demo-store --campaign codecs --baseline zlib-6 --metric ratio",
    )
)
def compare(
    store: Store,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="CANDIDATE",
            help="The candidate every other one is compared with.",
            show_default="none: give this or --baseline-campaign",
        ),
    ] = None,
    baseline_campaign: Annotated[
        str | None,
        typer.Option(
            "--baseline-campaign",
            metavar="NAME",
            help="Compare each pair with the same candidate and problem of this campaign.",
            show_default="none: give this or --baseline",
        ),
    ] = None,
    campaign: Annotated[
        str | None,
        typer.Option(
            "--campaign",
            metavar="NAME",
            help="The campaign compared (needed when there are several).",
            show_default="the store's one campaign",
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            metavar="M",
            help="Only this metric (repeatable).",
            show_default="every metric",
        ),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision",
            metavar="N",
            help="Compare the campaign as it stood in revision N.",
            show_default="each pair's latest revision",
        ),
    ] = None,
    baseline_revision: Annotated[
        str | None,
        typer.Option(
            "--baseline-revision",
            metavar="N",
            help="Compare each pair with the same pair in revision N of the campaign.",
            show_default="none: give this, --baseline or --baseline-campaign",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Each candidate against a baseline, per problem and metric: the ratio with a 95%
    interval and a significance verdict, in words."""
    from runstore.cli import render_compare
    from runstore.inspection.compare_store import check_baselines
    from runstore.inspection.compare_store import compare_store
    from runstore.inspection.snapshot import Snapshot

    with errors(as_json):
        check_baselines(baseline, baseline_campaign, baseline_revision)
        chosen = one_revision(revision, "--revision")
        before = one_revision(baseline_revision, "--baseline-revision")
        with Snapshot.take(os.path.abspath(store)) as snapshot:
            report = compare_store(
                snapshot.connection,
                campaign=campaign,
                revision=chosen,
                baseline=baseline,
                baseline_campaign=baseline_campaign,
                baseline_revision=before,
                metrics=metric,
            )
    if as_json:
        output.print_json(report.to_json())
        return
    tables, lines = render_compare.compare_tables(report.to_json())
    output.print_tables(tables)
    output.print_lines(lines)
