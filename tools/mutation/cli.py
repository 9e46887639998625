"""``tools/mutate``'s command line: choose the modules, run their sessions, report.

Rules of this file: the order of a run is fixed (copies, workers, then each module: map,
session, result line), the workers are stopped whatever happens, and the exit status is
the module docstring's of ``tools/mutate``.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mutation import changes
from mutation import report
from mutation import results
from mutation import scratch
from mutation import selection
from mutation import session as sessions
from mutation import settings as config
from mutation import shards
from mutation.workers import Workers


def _parser(doc: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tools/mutate",
        description=doc.split("\n\n")[0],
        epilog=doc.split("\n\n", 1)[1] if "\n\n" in doc else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "modules",
        nargs="*",
        metavar="MODULE",
        help="impl/x.py, runstore.x or a glob such as 'impl/store/recovery/*'",
    )
    parser.add_argument("--changed-since", metavar="REV", help="only lines changed since REV")
    parser.add_argument(
        "--lines",
        metavar="N[-M],...",
        help="with one MODULE: only mutants on these lines (to check a new test kills them)",
    )
    parser.add_argument("--core", action="store_true", help="every core module")
    parser.add_argument("--all", action="store_true", help="every module of impl/")
    parser.add_argument("--nightly", action="store_true", help="tonight's rotation shard")
    parser.add_argument("--date", help="with --nightly: the night (YYYY-MM-DD) to pick for")
    parser.add_argument("--list", action="store_true", help="print the modules, run nothing")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers")
    parser.add_argument("--fresh", action="store_true", help="never resume a session")
    parser.add_argument(
        "--update-baseline",
        action="store_true",
        help="record each whole module's score in tools/mutation_baseline.toml",
    )
    parser.add_argument("--out", type=Path, help="report directory (default WORK/report)")
    parser.add_argument(
        "--work", type=Path, default=config.WORK, help="sessions and copies (default .mutate)"
    )
    parser.add_argument(
        "--config", type=Path, default=config.CONFIG, help="instead of tools/mutation.toml"
    )
    return parser


def _choose(
    args: argparse.Namespace, settings: config.Settings
) -> tuple[list[str], dict[str, set[int]] | None]:
    if args.changed_since:
        changed = changes.changed_lines(args.changed_since)
        if args.modules:
            wanted = set(config.select_modules(args.modules))
            changed = {m: lines for m, lines in changed.items() if m in wanted}
        return sorted(changed), changed
    if args.lines:
        (module,) = config.select_modules(args.modules) if len(args.modules) == 1 else [None]
        if module is None:
            raise ValueError("--lines takes exactly one MODULE")
        return [module], {module: _line_set(args.lines)}
    if args.nightly:
        day = datetime.date.fromisoformat(args.date) if args.date else datetime.date.today()
        modules = config.impl_modules()
        baseline = config.load_baseline()
        cost = {m: baseline[m].seconds if m in baseline else _lines(m) for m in modules}
        rest = [m for m in modules if not settings.is_core(m)]
        return shards.tonight(day, settings.core, rest, cost), None
    chosen = sorted(settings.core, key=_lines) if args.core else []
    if args.all:
        chosen = config.impl_modules()
    chosen += [m for m in config.select_modules(args.modules) if m not in chosen]
    return chosen, None


def _line_set(text: str) -> set[int]:
    lines: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"--lines: {part!r} is not N or N-M")
        lines.update(range(int(first), int(last or first) + 1))
    return lines


def _lines(module: str) -> float:
    return float(len((config.ROOT / module).read_text(encoding="utf-8").splitlines()))


class Progress:
    """Progress on stderr: one rewritten line on a terminal, a line a minute otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, module: str, counts: sessions.Counts) -> None:
        now = time.monotonic()
        text = f"{module}: {counts.done}/{counts.total} mutants, killed {counts.killed}"
        text += f", survived {counts.survived}, skipped {counts.skipped}"
        if counts.errors:
            text += f", ERRORS {counts.errors}"
        text += f", {report.duration(now - self.started)}"
        ran = counts.done - counts.skipped
        if ran and counts.done < counts.total:
            left = (now - self.started) / ran * (counts.total - counts.done)
            text += f", about {report.duration(left)} left"
        if self.tty:
            sys.stderr.write("\r" + text[: os.get_terminal_size(2).columns - 1] + "\x1b[K")
            sys.stderr.flush()
        elif now - self.last >= 60 or counts.done == counts.total:
            print(text, file=sys.stderr, flush=True)
            self.last = now

    def end(self) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
        self.started = time.monotonic()
        self.last = 0.0


def main(argv: Sequence[str], doc: str) -> int:
    parser = _parser(doc)
    args = parser.parse_args(argv)
    try:
        settings = config.load_settings(args.config)
        modules, changed = _choose(args, settings)
    except (config.ConfigError, changes.ChangeError, ValueError) as exc:
        parser.exit(2, f"tools/mutate: {exc}\n")
    if not (modules or args.changed_since or args.nightly):
        parser.exit(
            2, "tools/mutate: name modules, or give --core, --all, --nightly or --changed-since\n"
        )
    if args.jobs < 1:
        parser.exit(2, "tools/mutate: --jobs must be at least 1\n")
    if args.list:
        print("\n".join(modules))
        return 0
    if not modules:
        print("tools/mutate: no module of impl/ changed: nothing to mutate")
        return 0
    try:
        import cosmic_ray  # noqa: F401
        import coverage  # noqa: F401
        import pytest_cov  # noqa: F401
    except ImportError as exc:
        parser.exit(2, f"tools/mutate: {exc.name} is missing: pip install -e '.[dev,mutation]'\n")
    return _run(args, settings, modules, changed)


def _run(
    args: argparse.Namespace,
    settings: config.Settings,
    modules: list[str],
    changed: dict[str, set[int]] | None,
) -> int:
    args.work.mkdir(parents=True, exist_ok=True)
    lock = (args.work / "lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"tools/mutate: another run is using {args.work}", file=sys.stderr)
        return 2
    files = scratch.tracked_files()
    digest = scratch.tree_digest(files)
    places = [args.work / "workers" / str(i) for i in range(args.jobs)]
    Workers(places).stop()  # anything a killed run left working in a copy
    copies = [scratch.make_copy(place, files) for place in places]
    baselines = config.load_baseline()
    whole = changed is None
    scope = "whole modules" if whole else f"lines changed since {args.changed_since}"
    if args.lines:
        scope = f"lines {args.lines}"
    out = args.out or args.work / "report"
    workers = Workers(copies)
    workers.start(args.work / "logs")
    progress = Progress()
    done: list[results.ModuleResult] = []
    not_run: list[str] = []
    maps: dict[tuple[str, ...], dict[str, selection.LineMap] | str] = {}
    try:
        for module in modules:
            lines = changed.get(module) if changed is not None else None
            session = sessions.session_for(module, lines, args.work)
            started = time.monotonic()
            if args.fresh or not sessions.resumable(session, digest, lines, settings):
                sessions.reset(session)
                line_map = _map(maps, module, settings, copies[0], modules, args.jobs)
                if isinstance(line_map, str):
                    print(f"{module}: NOT RUN: {line_map}", flush=True)
                    not_run.append(module)
                    continue
                session.map_file.write_text(line_map.to_json())
                config_file = sessions.write_config(
                    session, workers.urls, line_map.all_seconds(), settings
                )
                sessions.initialise(
                    session,
                    copies[0],
                    config_file,
                    digest,
                    lines,
                    settings,
                    config.load_equivalents(),
                )
            else:
                line_map = selection.LineMap.from_json(session.map_file.read_text())
                so_far = sessions.counts(session.database)
                print(
                    f"{module}: resuming, {so_far.done} of {so_far.total} mutants done", flush=True
                )
                config_file = sessions.write_config(
                    session, workers.urls, line_map.all_seconds(), settings
                )
            sessions.execute(session, copies[0], config_file, progress)
            progress.end()
            # Read now, not at the start: survivors argued equivalent during a long run count.
            equivalents = config.load_equivalents()
            source = (copies[0] / scratch.PRISTINE / module).read_text(encoding="utf-8")
            result = results.read_result(
                module, session.database, time.monotonic() - started, equivalents, source
            )
            done.append(result)
            print(report.summary_line(result, baselines.get(module), whole), flush=True)
            # Written after every module: a long run stopped later keeps what it measured.
            report.write_reports(out, done, digest, scope, baselines)
            if args.update_baseline and whole:
                _update_baseline(result, baselines, args.config)
    finally:
        workers.stop()
    json_path, html_path = report.write_reports(out, done, digest, scope, baselines)
    print(f"reports: {json_path} {html_path}")
    return 1 if not_run else _verdict(done, baselines, whole)


def _map(
    maps: dict[tuple[str, ...], dict[str, selection.LineMap] | str],
    module: str,
    settings: config.Settings,
    copy: Path,
    modules: list[str],
    jobs: int,
) -> selection.LineMap | str:
    """The module's line map, or why its candidate tests cannot judge mutants (they fail
    unmutated); each set of candidates runs once per run."""
    candidates = settings.tests_of(module)
    if candidates not in maps:
        sharing = [m for m in modules if settings.tests_of(m) == candidates]
        print(f"mapping {len(sharing)} module(s): running {' '.join(candidates)}", flush=True)
        try:
            maps[candidates] = selection.build_maps(copy, sharing, candidates, jobs)
        except selection.BaselineFailed as exc:
            maps[candidates] = str(exc)
    found = maps[candidates]
    return found if isinstance(found, str) else found[module]


def _verdict(
    done: list[results.ModuleResult],
    baselines: dict[str, config.Baseline],
    whole: bool,
) -> int:
    status = 0
    for result in done:
        if result.fates["error"]:
            status = 1
        if not whole and result.fates["survived"]:
            status = 1
        base = baselines.get(result.module)
        if whole and base and result.score is not None and result.score < base.score - 1e-9:
            status = 1
    return status


def _update_baseline(
    result: results.ModuleResult, baselines: dict[str, config.Baseline], settings_path: Path
) -> None:
    """Record ``result`` as its module's baseline when it is the first or not lower (errors
    never: a run with a mutant that could not run measured nothing); a module recorded
    leaves the configuration's ``baseline_pending``. The file is read again right before
    it is written, so a score another run recorded meanwhile is kept."""
    if result.score is None or result.fates["error"]:
        return
    current = config.load_baseline()
    base = current.get(result.module)
    if base is None or result.score >= base.score:
        today = datetime.date.today().isoformat()
        current[result.module] = config.Baseline(
            result.score, result.killed, result.scored, today, result.seconds
        )
        config.write_baseline(current)
        baselines.update(current)
        config.drop_pending(result.module, settings_path)
