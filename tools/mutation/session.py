"""One module's cosmic-ray session: its directory, its initialisation, its filters, and its
execution on the workers with progress.

A session lives in ``.mutate/sessions/{whole,changed}/<module>/``: ``config.toml``
(cosmic-ray's), the resumable ``session.sqlite``, ``map.json`` (:mod:`mutation.selection`)
and ``meta.json`` (the tree digest, the scope and the settings it was made for). A session
whose meta matches the current ones is resumed: only its mutants without a result run. Any
other is made anew. Mutants are marked skipped, before anything runs, when their operator
is filtered or lies in an annotation or is a keyword-only marker (the reasons from
``tools/mutation.toml``) or, for
``--changed-since``, when they change no changed line. Rules of this file: cosmic-ray's
own commands do the work (``init``, and ``exec`` through :mod:`mutation.exec_session`);
reading the session for progress goes through stdlib ``sqlite3``, read-only.
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import shutil
import sqlite3
import subprocess
import sys
import time
import tokenize
from collections import Counter
from collections.abc import Callable
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutation.results import ARGUED
from mutation.results import changed_text
from mutation.results import enclosing_names
from mutation.results import equivalent_of
from mutation.results import fate_of
from mutation.settings import Equivalents
from mutation.settings import Settings

EXEC = Path(__file__).resolve().with_name("exec_session.py")


@dataclass(frozen=True)
class Session:
    module: str
    directory: Path

    @property
    def database(self) -> Path:
        return self.directory / "session.sqlite"

    @property
    def map_file(self) -> Path:
        return self.directory / "map.json"


def session_for(module: str, changed: Collection[int] | None, work: Path) -> Session:
    name = module.replace("/", "__")
    kind = "changed" if changed is not None else "whole"
    return Session(module, work / "sessions" / kind / name)


def _meta(
    session: Session, digest: str, changed: Collection[int] | None, settings: Settings
) -> dict[str, object]:
    """What a session's results depend on: the tree, the scope, the module's candidate
    tests, the filters and the limits."""
    return {
        "tree": digest,
        "changed": sorted(changed) if changed is not None else None,
        "candidates": list(settings.tests_of(session.module)),
        "filters": [rule.pattern for rule in settings.filters],
        "timeout": [settings.timeout_floor, settings.timeout_factor, settings.mutant_floor],
    }


def resumable(
    session: Session, digest: str, changed: Collection[int] | None, settings: Settings
) -> bool:
    meta = session.directory / "meta.json"
    if not (meta.exists() and session.database.exists() and session.map_file.exists()):
        return False
    return bool(json.loads(meta.read_text()) == _meta(session, digest, changed, settings))


BACKSTOP_MARGIN_S = 30.0
"""How much longer cosmic-ray's own timeout is than the longest limit a mutant can have."""


def write_config(session: Session, urls: list[str], seconds: float, settings: Settings) -> Path:
    """The session's cosmic-ray config. ``seconds``: how long every candidate test took in
    the map run (the larger of its wall time and the sum of the tests' times). Each mutant
    stops itself at its own limit (:mod:`mutation.run_mutant`: ``mutant_floor`` + factor x
    its tests' seconds, never more than ``mutant_floor`` + factor x ``seconds``);
    cosmic-ray's timeout, a backstop that kills the mutant's command (and with it its
    pytest, see run_mutant), is longer than any such limit."""
    timeout = (
        max(settings.timeout_floor, settings.timeout_factor * seconds)
        + settings.mutant_floor
        + BACKSTOP_MARGIN_S
    )
    command = (
        f"{sys.executable} tools/mutation/run_mutant.py --module {session.module}"
        f" --map {session.map_file}"
        f" --floor {settings.mutant_floor:g} --factor {settings.timeout_factor:g}"
    )
    lines = [
        "[cosmic-ray]",
        f'module-path = "{session.module}"',
        f"timeout = {timeout:.0f}",
        "excluded-modules = []",
        f"test-command = {json.dumps(command)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "http"',
        "",
        "[cosmic-ray.distributor.http]",
        f"worker-urls = {json.dumps(urls)}",
        "",
    ]
    path = session.directory / "config.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def initialise(
    session: Session,
    copy: Path,
    config: Path,
    digest: str,
    changed: Collection[int] | None,
    settings: Settings,
    equivalents: Equivalents,
) -> None:
    """Make the session anew in ``copy`` (its mutants) and mark the skipped ones, and the
    ones argued equivalent (never run: skipped with the diff, so the results read them as
    equivalent while their entry still matches)."""
    session.database.unlink(missing_ok=True)
    subprocess.run(
        [sys.executable, "-m", "cosmic_ray.cli", "init", str(config), str(session.database)],
        cwd=copy,
        check=True,
        capture_output=True,
    )
    from cosmic_ray.work_db import WorkDB
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome
    from cosmic_ray.work_item import WorkResult

    source = (copy / session.module).read_text(encoding="utf-8")
    postponed = "from __future__ import annotations" in source
    annotations = (
        annotation_spans(source) if postponed and settings.skips_annotations(session.module) else []
    )
    markers = keyword_markers(source) if settings.marker_reason else set()
    places = enclosing_names(source)
    with use_db(str(session.database), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            reason = None
            diff = None
            for mutation in item.mutations:
                for rule in settings.filters:
                    if rule.matches(mutation.operator_name):
                        reason = f"filtered operator: {rule.reason}"
                if reason is None and any(
                    start <= tuple(mutation.start_pos) < end for start, end in annotations
                ):
                    reason = f"in an annotation: {settings.annotation_reason}"
                if reason is None and tuple(mutation.start_pos) in markers:
                    reason = f"the keyword-only marker: {settings.marker_reason}"
                rows = range(mutation.start_pos[0], mutation.end_pos[0] + 1)
                if reason is None and changed is not None and not set(rows) & set(changed):
                    reason = "outside the changed lines"
                if reason is None:
                    code, reason = made(source, mutation)
                    if code is not None:
                        diff = unified_diff(source, code, session.module)
                        key = (session.module, mutation.operator_name, *changed_text(diff))
                        entry = equivalent_of(
                            equivalents, key, places.get(mutation.start_pos[0], ())
                        )
                        reason = f"{ARGUED}{entry.reason}" if entry is not None else None
                        diff = diff if entry is not None else None
            if reason is not None:
                db.set_result(
                    item.job_id,
                    WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=reason, diff=diff),
                )
    meta = _meta(session, digest, changed, settings)
    (session.directory / "meta.json").write_text(json.dumps(meta))


def unmakeable(source: str, mutation: Any) -> str | None:
    """Why cosmic-ray cannot make this mutant (its operator raises on this code), or None.
    Such a mutant would fail on the worker before any test ran, every time: it measures
    nothing about the tests, so it is skipped with cosmic-ray's exception as the reason
    (cosmic-ray 8.7's ExceptionReplacer raises AttributeError on a dotted name inside an
    exception tuple, ``except (sqlite3.Error, OSError)``)."""
    return made(source, mutation)[1]


def made(source: str, mutation: Any) -> tuple[str | None, str | None]:
    """The mutant's source as cosmic-ray makes it (None when it makes no change), and why
    it cannot be made (see :func:`unmakeable`), or None."""
    from cosmic_ray.mutating import MutationVisitor
    from cosmic_ray.plugins import get_operator

    operator = get_operator(mutation.operator_name)(**getattr(mutation, "operator_args", {}))
    try:
        code = MutationVisitor.mutate_code(source, operator, mutation.occurrence)
    except Exception as exc:  # any failure of the operator itself
        return None, f"cosmic-ray cannot make this mutant: {type(exc).__name__}: {exc}"
    return code, None


def unified_diff(original: str, mutated: str, module: str) -> str:
    """The mutant's diff as cosmic-ray writes it (the changed lines are what count)."""
    lines = difflib.unified_diff(
        original.splitlines(), mutated.splitlines(), f"a/{module}", f"b/{module}", lineterm=""
    )
    return "\n".join(lines) + "\n"


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where ``source``'s annotations are: ((line, column), (end line, end column)) each,
    lines from 1 and columns from 0, as cosmic-ray's positions count."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            found = [a.annotation for a in every] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            found = [node.annotation]
        for expression in found:
            if expression is not None and expression.end_lineno is not None:
                start = (expression.lineno, expression.col_offset)
                spans.append((start, (expression.end_lineno, expression.end_col_offset or 0)))
    return spans


def keyword_markers(source: str) -> set[tuple[int, int]]:
    """Where ``source``'s bare ``*`` keyword-only markers are (a ``*`` token after ``(``,
    ``,`` or ``lambda`` and before ``,`` or ``)``, which only a parameter list can hold)."""
    tokens = [
        token
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    ]
    return {
        token.start
        for before, token, after in zip(tokens, tokens[1:], tokens[2:], strict=False)
        if token.string == "*"
        and before.string in ("(", ",", "lambda")
        and after.string in (",", ")")
    }


@dataclass(frozen=True)
class Counts:
    """How far a session is: mutants done of ``total``, and the fates so far (errors are
    neither killed nor survived)."""

    done: int
    total: int
    killed: int
    survived: int
    skipped: int
    errors: int


Progress = Callable[[str, Counts], None]
"""``progress(module, counts)``."""


def counts(database: Path) -> Counts:
    """A session's :class:`Counts`, read without writing."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as connection:
        total = connection.execute("SELECT count(*) FROM work_items").fetchone()[0]
        rows = connection.execute(
            "SELECT worker_outcome, test_outcome FROM work_results"
        ).fetchall()
    fates = Counter(fate_of(worker, test) for worker, test in rows)
    return Counts(
        len(rows), int(total), fates["killed"], fates["survived"], fates["skipped"], fates["error"]
    )


def execute(session: Session, copy: Path, config: Path, progress: Progress) -> None:
    """Run the session's pending mutants on the workers named in ``config``."""
    log = (session.directory / "exec.log").open("wb")
    with log:
        process = subprocess.Popen(
            [sys.executable, str(EXEC), str(config), str(session.database)],
            cwd=copy,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            while process.poll() is None:
                time.sleep(1.0)
                progress(session.module, counts(session.database))
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"cosmic-ray exec failed for {session.module}: see {log.name}")
    progress(session.module, counts(session.database))


def reset(session: Session) -> None:
    if session.directory.exists():
        shutil.rmtree(session.directory)
    session.directory.mkdir(parents=True)
