"""``runstore run`` and ``runstore recover``: the two commands that open a store (SPEC.md
section 15.7).

Rules of this file: parse options, call one library function, render, map errors to exit
statuses; a signal sets the stop event the coordinator watches.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated
from typing import TextIO

import typer
from runstore.cli import output
from runstore.cli import render
from runstore.cli.common import EXIT_OK
from runstore.cli.common import EXIT_OUTPUT_CLOSED
from runstore.cli.common import EXIT_STOPPED
from runstore.cli.common import EXIT_UNSATISFIED
from runstore.cli.common import Json
from runstore.cli.common import Store
from runstore.cli.common import app
from runstore.cli.common import errors
from runstore.cli.common import examples


@app.command(
    epilog=examples(
        "runstore run examples/codecs/campaign.toml --store .demo-store --init",
        "runstore run examples/codecs/campaign.toml --store .demo-store --resume --retry-failed 2",
    )
)
def run(
    campaign: Annotated[Path, typer.Argument(metavar="CAMPAIGN", help="The campaign file (TOML).")],
    store: Store,
    init: Annotated[bool, typer.Option("--init", help="Create the store root if missing.")] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            max=256,
            metavar="N",
            help="Workers at once.",
            show_default="the cores; with --executor dask, --workers or the scheduler's threads",
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
            metavar="N",
            help="Retry slots whose attempts failed, up to this retry index.",
            show_default="none: failed slots are not retried",
        ),
    ] = None,
    retry_code: Annotated[
        list[str] | None,
        typer.Option(
            "--retry-code",
            metavar="CODE",
            help="With --retry-failed: retry only slots whose latest attempt failed with this"
            " code (repeatable).",
            show_default="every failure code",
        ),
    ] = None,
    resume_retries: Annotated[
        int,
        typer.Option(
            "--resume-retries",
            min=0,
            max=1000,
            metavar="N",
            help="With --resume: retry a slot whose latest attempt was cut off (interrupted,"
            " cancelled, worker lost) while at most N of its attempts were.",
        ),
    ] = 3,
    revise: Annotated[
        bool,
        typer.Option(
            "--revise",
            help="Register the pairs that changed since they were registered as the"
            " campaign's next revision (the others keep their results).",
        ),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            metavar="local|dask",
            help="Where workers run: local processes, or tasks on a Dask cluster.",
        ),
    ] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            metavar="ADDRESS",
            help="With --executor dask: the scheduler's address.",
            show_default="a new local cluster",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=256,
            metavar="N",
            help="With --executor dask and no --scheduler: the local cluster's worker processes.",
            show_default="--jobs, else the cores",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Register CAMPAIGN's slots and run every unsatisfied one to a terminal outcome."""
    from runstore.cli.progress import ProgressReporter
    from runstore.runner.campaign_file import load_campaign
    from runstore.runner.coordinator import RunOptions
    from runstore.runner.coordinator import run_campaign
    from runstore.runner.executors import open_executor
    from runstore.runner.schedule import retry_codes
    from runstore.store import RunStore
    from runstore.store.store_root import check_adoptable
    from runstore.store.store_root import create_root

    with errors(as_json):
        codes = retry_codes(retry_code, retry_failed)
        loaded = load_campaign(campaign)
        root = os.path.abspath(store)
        reporter = output.JsonLines() if as_json else ProgressReporter()
        reported = sys.stdout if as_json else sys.stderr
        chosen = open_executor(
            executor, jobs=jobs, scheduler=scheduler, workers=workers, lease_ns=loaded.lease_ns
        )
        with chosen as (work, width):
            if init:
                create_root(root)
            check_adoptable(root)
            with RunStore.open(root) as opened, stoppable() as stop:
                options = RunOptions(
                    jobs=width,
                    resume=resume,
                    retry_failed=retry_failed,
                    retry_codes=codes,
                    resume_retries=resume_retries,
                    revise=revise,
                )
                guarded = output.StopWhenClosed(reporter, reported, stop)
                with guarded.watching():
                    try:
                        summary = run_campaign(opened, loaded, work, options, guarded, stop=stop)
                    finally:
                        reporter.close()
    if guarded.closed:
        note_closed(reported)
        raise typer.Exit(EXIT_OUTPUT_CLOSED)
    if summary.stopped:
        raise typer.Exit(EXIT_STOPPED)
    raise typer.Exit(EXIT_UNSATISFIED if summary.unsatisfied else EXIT_OK)


@app.command(epilog=examples("runstore recover --store .demo-store"))
def recover(store: Store, as_json: Json = False) -> None:
    """Run explicit recovery once and print its report."""
    import time

    from runstore.store import RunStore

    with errors(as_json), RunStore.open(os.path.abspath(store)) as opened:
        report = opened.recover(time.time_ns)
    if as_json:
        output.print_json(render.recovery_summary(report))
        return
    output.print_tables(render.recovery_tables(report))
    for line in render.recovery_lines(report):
        typer.echo(line)


def note_closed(closed: TextIO) -> None:
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
def stoppable() -> Iterator[threading.Event]:
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
