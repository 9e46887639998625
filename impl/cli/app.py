"""The ``runstore`` command: a thin typer layer over the runner and the inspection reader.

Rules of this file: parse options, call one library function, render, and map errors to
exit statuses (SPEC.md section 15, "Exit statuses"). No decisions and no store logic live
here. ``run`` and ``recover`` open the store; ``status``, ``explain``, ``validate``,
``audit``, ``export`` and ``report`` only read a private copy of it
(``runstore.inspection``) and never open, initialize, recover or write it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated
from typing import Any
from typing import NoReturn
from typing import TextIO

import typer
from rich.table import Table
from runstore.canonical import JSON
from runstore.cli import output
from runstore.cli import render
from runstore.errors import ComparisonInvalidError
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
    "registration_conflict": EXIT_CONFLICT,
}
"""Error codes with their own exit status; every other store refusal exits 3."""

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
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
        help="The store root directory (or $RUNSTORE_STORE).",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


@app.command(
    epilog=(
        "Examples:\n\n"
        "  runstore run examples/codecs/campaign.toml --store /tmp/codecs --init\n\n"
        "  runstore run campaign.toml --store /tmp/codecs --resume --retry-failed 2"
    )
)
def run(
    campaign: Annotated[Path, typer.Argument(help="The campaign file (TOML).")],
    store: Store,
    init: Annotated[bool, typer.Option("--init", help="Create the store root if missing.")] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            max=256,
            help="Workers at once [default: the cores, or the Dask workers' threads].",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Recover interrupted attempts first (waiting for their leases)."
        ),
    ] = False,
    retry_failed: Annotated[
        int | None,
        typer.Option(
            "--retry-failed",
            min=1,
            help="Retry slots whose attempts failed, up to this retry index.",
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor", help="Where workers run: local processes, or tasks on a Dask cluster."
        ),
    ] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="With --executor dask: the scheduler's address (default: a new local cluster).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=256,
            help="With --executor dask and no --scheduler: the local cluster's worker processes.",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Register CAMPAIGN's slots and run every unsatisfied one to a terminal outcome."""
    from runstore.runner.campaign_file import load_campaign
    from runstore.runner.coordinator import RunOptions
    from runstore.runner.coordinator import run_campaign
    from runstore.runner.executors import open_executor
    from runstore.store import RunStore
    from runstore.store.store_root import check_adoptable
    from runstore.store.store_root import create_root

    with _errors(as_json):
        loaded = load_campaign(campaign)
        root = os.path.abspath(store)
        reporter = output.JsonLines() if as_json else output.ProgressReporter()
        reported = sys.stdout if as_json else sys.stderr
        chosen = open_executor(
            executor, jobs=jobs, scheduler=scheduler, workers=workers, lease_ns=loaded.lease_ns
        )
        with chosen as (work, width):
            if init:
                create_root(root)
            check_adoptable(root)
            with RunStore.open(root) as opened, _stoppable() as stop:
                options = RunOptions(jobs=width, resume=resume, retry_failed=retry_failed)
                guarded = output.StopWhenClosed(reporter, reported, stop)
                with guarded.watching():
                    try:
                        summary = run_campaign(opened, loaded, work, options, guarded, stop=stop)
                    finally:
                        reporter.close()
    if guarded.closed:
        _note_closed(reported)
        raise typer.Exit(EXIT_OUTPUT_CLOSED)
    if summary.stopped:
        raise typer.Exit(EXIT_STOPPED)
    raise typer.Exit(EXIT_UNSATISFIED if summary.unsatisfied else EXIT_OK)


@app.command()
def recover(store: Store, as_json: Json = False) -> None:
    """Run explicit recovery once and print its report."""
    import time

    from runstore.store import RunStore

    with _errors(as_json), RunStore.open(os.path.abspath(store)) as opened:
        report = opened.recover(time.time_ns)
    if as_json:
        output.print_json(render.recovery_summary(report))
        return
    output.print_tables(render.recovery_tables(report))
    for line in render.recovery_lines(report):
        typer.echo(line)


@app.command()
def status(
    store: Store,
    campaign: Annotated[
        str | None, typer.Option("--campaign", help="Only this campaign's slots.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Counts by state per candidate and per problem, and each pair's metrics as median ±
    MAD over its accepted repetitions, read from a private copy of the store."""
    from runstore.cli import render_status
    from runstore.inspection.reader import status as read_status
    from runstore.inspection.results import StatusView
    from runstore.inspection.results import pair_results
    from runstore.inspection.snapshot import Snapshot

    with _errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        view = StatusView(
            report=read_status(snapshot, campaign=campaign),
            results=pair_results(snapshot.connection, campaign=campaign),
        )
    if as_json:
        output.print_json(view.to_json())
        return
    width = output.console(sys.stdout).width
    tables, lines = render_status.status_tables(view.to_json(), width)
    output.print_tables(tables)
    output.print_lines(lines)


@app.command(
    epilog="Examples:\n\n  runstore compare --store /tmp/codecs --baseline zlib-6\n\n"
    "  runstore compare --store S --campaign after --baseline-campaign before --metric time_s"
)
def compare(
    store: Store,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="The candidate every other one is compared with."),
    ] = None,
    baseline_campaign: Annotated[
        str | None,
        typer.Option(
            "--baseline-campaign",
            help="Compare each pair with the same candidate and problem of this campaign.",
        ),
    ] = None,
    campaign: Annotated[
        str | None,
        typer.Option("--campaign", help="The campaign compared (needed when there are several)."),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", help="Only this metric (repeatable); default every metric."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Each candidate against a baseline, per problem and metric: the ratio with a 95%
    interval and a significance verdict, in words."""
    from runstore.cli import render_compare
    from runstore.inspection import comparison
    from runstore.inspection.results import pair_results
    from runstore.inspection.snapshot import Snapshot

    with _errors(as_json):
        if (baseline is None) == (baseline_campaign is None):
            raise ComparisonInvalidError("give exactly one of --baseline or --baseline-campaign")
        with Snapshot.take(os.path.abspath(store)) as snapshot:
            results = pair_results(snapshot.connection)
        if baseline is not None:
            report = comparison.against_candidate(
                results, campaign=campaign, baseline=baseline, metrics=metric
            )
        else:
            assert baseline_campaign is not None
            report = comparison.against_campaign(
                results, campaign=campaign, baseline_campaign=baseline_campaign, metrics=metric
            )
    if as_json:
        output.print_json(report.to_json())
        return
    tables, lines = render_compare.compare_tables(report.to_json())
    output.print_tables(tables)
    output.print_lines(lines)


@app.command(
    epilog="Example:\n\n  runstore explain codecs/zlib-6/text-1m/measurement-2 --store .demo-store"
)
def explain(
    target: Annotated[
        str,
        typer.Argument(
            help="An attempt slot id, an attempt id, CAMPAIGN/CANDIDATE/PROBLEM (a pair with one"
            " slot) or CAMPAIGN/CANDIDATE/PROBLEM/SLOT (measurement-2: its third repetition)."
        ),
    ],
    store: Store,
    as_json: Json = False,
) -> None:
    """One slot's attempts, transitions, events, artifacts and outcome."""
    from runstore.inspection.explain import explain as read_explanation
    from runstore.inspection.snapshot import Snapshot

    with _errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        explanation = read_explanation(snapshot, target)
    _document_or_tables(explanation, render.explain_tables, as_json=as_json)


@app.command(epilog="Example:\n\n  runstore validate --store /tmp/codecs --quick")
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

    with _errors(as_json):
        report = validate_store(os.path.abspath(store), quick=quick)
    _verdict(report.to_json(), render.validation_lines(report), as_json=as_json)


@app.command(epilog="Example:\n\n  runstore audit --store /tmp/codecs")
def audit(store: Store, as_json: Json = False) -> None:
    """Replay the committed event log through the executable model from an empty state and
    require the model's projection to equal the store's. Exit 0 when they agree, 1 with
    the first divergent event."""
    from runstore.audit import audit as replay
    from runstore.inspection.snapshot import Snapshot

    with _errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        report = replay(snapshot)
    _verdict(report.to_json(), render.audit_lines(report), as_json=as_json)


@app.command(epilog="Example:\n\n  runstore export --store /tmp/codecs --out /tmp/codecs-export")
def export(
    store: Store,
    out: Annotated[
        Path, typer.Option("--out", help="The export directory (created when missing).")
    ],
    campaign: Annotated[
        str | None, typer.Option("--campaign", help="Only this campaign's rows.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Write index.jsonl, attempts.csv, observations.csv and metrics.csv from a private copy
    of the store, naming only artifacts that verify; rebuildable byte for byte. With them,
    summary.csv: each candidate x problem x metric's statistics, as status prints them."""
    from runstore.inspection.export import export as write_export
    from runstore.inspection.snapshot import Snapshot

    with _errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        summary = write_export(snapshot, str(out), campaign=campaign)
    if as_json:
        output.print_json(summary.to_json())
        return
    for name, count in summary.files.items():
        typer.echo(f"{os.path.join(summary.out_dir, name)}: {count} rows")
    typer.echo(f"verified artifacts: {summary.verified_artifacts}")


@app.command(
    epilog="Examples:\n\n  runstore report --store /tmp/codecs --html codecs.html\n\n"
    "  runstore report --store /tmp/codecs --html codecs.html --baseline zlib-6"
)
def report(
    store: Store,
    html: Annotated[Path, typer.Option("--html", help="The page to write (replaced).")],
    campaign: Annotated[
        str | None, typer.Option("--campaign", help="Only this campaign's slots.")
    ] = None,
    title: Annotated[str | None, typer.Option("--title", help="The page's title.")] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="Add each other candidate's ratio to this one, per problem and metric.",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """One self-contained HTML page: each pair's median ± MAD per metric with charts, the
    status, and with --baseline every candidate's ratio to a baseline candidate."""
    from runstore.inspection.report_file import write_report
    from runstore.inspection.snapshot import Snapshot

    with _errors(as_json), Snapshot.take(os.path.abspath(store)) as snapshot:
        written = write_report(
            snapshot, str(html), campaign=campaign, title=title, baseline=baseline
        )
    if as_json:
        output.print_json({"html": written})
    else:
        typer.echo(f"wrote {written}")


def _document_or_tables(
    value: render.Documented, tables: Callable[[Any], list[Table]], *, as_json: bool
) -> None:
    """Print a reader's document (``--json``) or the tables ``tables`` draws of it."""
    if as_json:
        output.print_json(value.to_json())
    else:
        output.print_tables(tables(value))


def _verdict(document: dict[str, JSON], lines: list[str], *, as_json: bool) -> NoReturn:
    """Print a check's document (``--json``) or its lines, and exit 0 when its ``ok``."""
    if as_json:
        output.print_json(document)
    else:
        for line in lines:
            typer.echo(line)
    raise typer.Exit(EXIT_OK if document["ok"] is True else EXIT_UNSATISFIED)


@contextmanager
def _errors(as_json: bool) -> Iterator[None]:
    """Map a refusal to its exit status after printing its code and message."""
    try:
        yield
    except RunStoreError as error:
        output.print_error(error.code, error.message, as_json=as_json)
        raise typer.Exit(EXIT_BY_CODE.get(error.code, EXIT_STORE)) from None


def _note_closed(closed: TextIO) -> None:
    """Say on stderr why the run stopped, unless stderr is the stream that closed."""
    if closed is sys.stderr:
        return
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.write(
            "error: output_closed: the standard output lost its reader; the run stopped as "
            "on Ctrl-C (running attempts committed cancelled)\n"
        )
        sys.stderr.flush()


@contextmanager
def _stoppable() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the returned event (a clean stop); a second one raises
    KeyboardInterrupt (abandon: leases are left to expire)."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {
        number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def main() -> NoReturn:
    """The console script's entry point."""
    try:
        app()
    except KeyboardInterrupt:
        raise SystemExit(EXIT_STOPPED) from None
    raise SystemExit(EXIT_OK)
