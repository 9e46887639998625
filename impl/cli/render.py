"""Human-readable tables and lines for the reading commands (``explain``, ``validate``,
``audit``; ``status`` is :mod:`runstore.cli.render_status`'s, ``failures``
:mod:`runstore.cli.render_triage`'s) and for ``recover``, and
``recover``'s ``--json`` summary.

Rules of this file: rendering only, from the reader's JSON documents (the same ones
``--json`` prints), so the tables can never show something ``--json`` does not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from rich.markup import escape
from rich.table import Table
from runstore.cli import wording
from runstore.cli.output import table


class Documented(Protocol):
    def to_json(self) -> Any: ...


class Counted(Protocol):
    def counts(self) -> dict[str, int]: ...


def _short(identifier: str) -> str:
    """``campaign/name`` -> ``name`` (the campaign is in the title of the run)."""
    return identifier.split("/", 1)[-1]


def explain_tables(explanation: Documented) -> list[Table]:
    """``explain``'s tables: the slot, then per attempt its fields (with its end in words,
    its duration and its logs' paths), environment, ``stderr.log``'s tail (or why it is
    not shown), transitions, events, leases, artifacts and observations. Instants are
    ISO 8601 UTC and durations words (:mod:`runstore.cli.wording`); every cell is shown as
    text, never as markup."""
    document = explanation.to_json()
    slot = document["slot"]
    tables = [_plain("slot", ["field", "value"], sorted(slot.items()))]
    for item in document["attempts"]:
        title = f"attempt {item['retry_index']}"
        shown = _humane(item)
        shown["cause"] = wording.cause(
            item.get("state"), item.get("failure_code"), item.get("details"), item.get("reason")
        )
        shown["duration"] = _span(item.get("started_at_ns"), item.get("finished_at_ns"))
        logs = item.get("logs")
        if isinstance(logs, dict):
            shown.update({"stdout.log": logs.get("stdout"), "stderr.log": logs.get("stderr")})
        fields = [
            (key, value)
            for key, value in sorted(shown.items())
            if not isinstance(value, list | dict) or key == "details"
        ]
        tables.append(_plain(title, ["field", "value"], fields))
        if item.get("environment"):
            lines = _environment_rows(item["environment"])
            tables.append(_plain(f"{title} environment", ["field", "value"], lines))
        if isinstance(logs, dict):
            tables.append(_tail_table(title, logs))
        _add_steps(shown, item)
        for key in ("transitions", "events", "leases", "artifacts", "observations"):
            rows = shown.get(key) or []
            if rows:
                tables.append(_rows(f"{title} {key}", rows))
    return tables


def _plain(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A table whose cells are text (a worker's ``[bold]`` stays as written), at least as
    wide as its title."""
    grid = table(title, columns, [[escape(_cell(cell)) for cell in row] for row in rows])
    grid.min_width = len(title)
    return grid


def _humane(value: Any) -> Any:
    """``value`` (a reader's JSON) with every instant (``at_ns``, ``*_at_ns``) as ``at``,
    ``*_at`` in ISO 8601 UTC and every ``duration_ns`` and ``timeout_ns`` as a
    ``duration``/``timeout`` in words."""
    if isinstance(value, list):
        return [_humane(item) for item in value]
    if not isinstance(value, dict):
        return value
    shown: dict[str, Any] = {}
    for key, item in value.items():
        if key == "at_ns" or key.endswith("_at_ns"):
            shown[key[:-3]] = wording.instant(item)
        elif key in ("duration_ns", "timeout_ns"):
            shown[key[:-3]] = wording.duration(item)
        else:
            shown[key] = _humane(item)
    return shown


def _span(start: object, end: object) -> str:
    if isinstance(start, int) and isinstance(end, int):
        return wording.duration(end - start)
    return ""


def _add_steps(shown: dict[str, Any], item: Mapping[str, Any]) -> None:
    """Each transition's ``after``: the time since the one before it."""
    previous: object = None
    for row, raw in zip(shown.get("transitions") or [], item.get("transitions") or [], strict=True):
        row["after"] = _span(previous, raw.get("at_ns")) if previous is not None else ""
        previous = raw.get("at_ns")


def _tail_table(title: str, logs: Mapping[str, Any]) -> Table:
    """The last lines of an attempt's ``stderr.log``, or why they are not shown."""
    tail = logs.get("stderr_tail")
    if not isinstance(tail, list):
        return _plain(f"{title} stderr.log", ["not shown"], [[logs.get("problem")]])
    lines = [[line] for line in tail] or [["(stderr.log is empty)"]]
    return _plain(f"{title} stderr.log (last lines)", ["stderr"], lines)


def _environment_rows(environment: Mapping[str, Any]) -> list[list[str]]:
    """An attempt's environment, a line per aspect: host, CPU, OS, Python, runstore,
    executor (and Dask worker), packages, artifact; a document that could not be read
    is its problem."""
    document = environment.get("document")
    artifact = ["artifact", _cell(environment.get("artifact_id"))]
    if not isinstance(document, dict):
        return [["problem", _cell(environment.get("problem"))], artifact]

    def part(key: str) -> dict[str, Any]:
        value = document.get(key)
        return value if isinstance(value, dict) else {}

    def joined(*values: object, sep: str = " ") -> str:
        return sep.join(str(value) for value in values if value not in (None, ""))

    cpu, system, python = part("cpu"), part("os"), part("python")
    cores = joined(f"{cpu.get('count')} cores", f"{cpu.get('affinity')} usable", sep=", ")
    worker = document.get("worker")
    packages = ", ".join(
        f"{name} {'not installed' if version is None else version}"
        for name, version in sorted(part("packages").items())
    )
    return [
        ["host", _cell(document.get("host"))],
        ["cpu", joined(cpu.get("model"), f"({cores})")],
        ["os", joined(system.get("name"), "/", system.get("system"), system.get("release"))],
        ["python", joined(python.get("implementation"), python.get("executable"))],
        ["runstore", _cell(document.get("runstore"))],
        ["executor", joined(document.get("executor"), worker and f"worker {worker}")],
        ["packages", packages],
        artifact,
    ]


def _rows(title: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    columns = sorted({key for row in rows for key in row})
    return _plain(title, columns, [[row.get(key, "") for key in columns] for row in rows])


def _cell(value: object) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return "" if value is None else str(value)


def validation_lines(report: Documented) -> list[str]:
    """``validate``'s text: one line per finding, then a summary line."""
    document = report.to_json()
    lines = [
        f"{finding['code']}: {finding['subject']}: {finding['message']}"
        for finding in document["findings"]
    ]
    checked = ", ".join(f"{count} {name}" for name, count in document["checked"].items())
    mode = " (quick: artifact content not hashed)" if document["quick"] else ""
    verdict = "ok" if document["ok"] else f"{len(document['findings'])} findings"
    lines.append(f"validate {document['root']}: {verdict}; checked {checked}{mode}")
    return lines


def audit_lines(report: Documented) -> list[str]:
    """``audit``'s text: the divergence (if any), then a summary line."""
    document = report.to_json()
    divergence = document["divergence"]
    replayed = f"{document['events']} events of {document['attempts']} attempts"
    if divergence is None:
        return [f"audit {document['root']}: ok; replayed {replayed} to the stored projection"]
    where = "after the last event" if divergence["sequence"] is None else "at event "
    where += "" if divergence["sequence"] is None else str(divergence["sequence"])
    attempt = "" if divergence["attempt_id"] is None else f" (attempt {divergence['attempt_id']})"
    return [
        f"{divergence['code']}: {where}{attempt}: {divergence['message']}",
        f"audit {document['root']}: diverged; {replayed} in the log",
    ]


def recovery_summary(report: Documented) -> dict[str, Any]:
    """What ``recover --json`` prints: the report's document (``RecoveryReport.to_json``)
    with each terminal receipt cut to ``{attempt, state}`` (its attempt id and state) and
    each imported artifact to its id, the summary the command has always printed."""
    document = report.to_json()
    terminals = document["terminals"]
    return {
        **document,
        "imported_artifacts": [artifact["id"] for artifact in document["imported_artifacts"]],
        "terminals": [{"attempt": t["attempt_id"], "state": t["state"]} for t in terminals],
    }


def recovery_tables(report: Counted) -> list[Table]:
    """``recover``'s table: how many items each list of the report holds."""
    rows = [[key, count] for key, count in report.counts().items()]
    return [table("recovery", ["item", "count"], rows)]


def recovery_lines(report: Documented) -> list[str]:
    """``recover``'s text after its table: one line per rejected object."""
    return [
        f"rejected {rejected['path']}: {rejected['code']}: {rejected['message']}"
        for rejected in report.to_json()["rejected_artifacts"]
    ]
