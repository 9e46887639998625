"""``status`` on a store too big to list (SPEC.md section 15.6, "What `status` prints"):
by default it summarizes in bounded tables (the candidates and problems with the most
unsatisfied slots, the first pairs, the unsatisfied slots by code, the totals), ``--all``
shows every row, ``--slots`` one line per slot, and ``--json`` keeps its document, with
per-slot rows only under ``--slots``. Run through the console script on a store of
``tools/scale_store.py`` (26 + 4 candidates, 24 + 5 problems, two campaigns); every
expected figure is read from the store's database through a fresh read-only connection.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import scale_store
from scale_store import Shape

from conformance.cli.test_terminal import COLUMNS
from conformance.cli.test_terminal import on_terminal
from conformance.cli.world import RUNSTORE
from conformance.cli.world import runstore
from conformance.closed_store import rows

STATES = ("pending", "running", "accepted", "failed", "interrupted", "censored", "superseded")
SLOT_HEADER = ("candidate", "problem", "slot", "state", "attempts", "latest failure")
STATE_OF_SLOT = """
SELECT r.candidate_id, d.problem_id, s.logical_slot,
       CASE WHEN EXISTS (SELECT 1 FROM attempts a WHERE a.slot_id = s.id AND a.state = 'accepted')
            THEN 'accepted'
            WHEN NOT EXISTS (SELECT 1 FROM attempts a WHERE a.slot_id = s.id) THEN 'pending'
            ELSE (SELECT a.state FROM attempts a WHERE a.slot_id = s.id
                  ORDER BY a.retry_index DESC LIMIT 1) END,
       (SELECT count(*) FROM attempts a WHERE a.slot_id = s.id),
       (SELECT a.failure_code FROM attempts a WHERE a.slot_id = s.id
        ORDER BY a.retry_index DESC LIMIT 1)
FROM attempt_slots s JOIN resolved_runs r ON r.id = s.run_id
JOIN applicability_decisions d ON d.id = r.decision_id
"""
"""Each slot's candidate, problem, logical slot, state (no slot of the fixture runs or is
interrupted), attempts and latest failure code, as SPEC 15.6 defines them."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("status") / "store"
    scale_store.build(str(root), Shape(candidates=26, problems=24, repetitions=1))
    return root


@pytest.fixture(scope="module")
def slots(store: Path) -> list[tuple[Any, ...]]:
    return rows(store, STATE_OF_SLOT)


def status(store: Path, *options: str) -> subprocess.CompletedProcess[str]:
    done = runstore("status", "--store", str(store), *options)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done


def section(text: str, title: str, header: str) -> list[str]:
    """The rows of the table titled ``title`` (a title may wrap), after its header line
    (the one starting with ``header``), up to the blank line after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    first = next(i for i in range(start, len(lines)) if lines[i].split()[:1] == [header])
    end = next(i for i in range(first, len(lines)) if not lines[i].strip())
    return lines[first + 1 : end]


def test_the_default_summary_is_bounded_and_adds_up(
    store: Path, slots: list[tuple[Any, ...]]
) -> None:
    text = status(store).stdout
    unsatisfied: Counter[str] = Counter()
    for candidate, _, _, state, _, _ in slots:
        unsatisfied[candidate] += state != "accepted"
    by_candidate = section(text, "by candidate", "candidate")
    # 20 rows (named with their campaign: the store has two) and the row for the rest.
    shown = [line.split()[0] for line in by_candidate[:-1]]
    assert len(shown) == 20 and by_candidate[-1].split()[:4] == ["...", "and", "10", "more"]
    least_shown = min(unsatisfied[name] for name in shown)
    assert all(unsatisfied[name] <= least_shown for name in set(unsatisfied) - set(shown))
    assert len(section(text, "results (median", "candidate")) == 30
    codes = section(text, "unsatisfied by code", "state")
    expected = Counter(
        (state, code) for *_, state, _, code in slots if state not in ("accepted", "pending")
    )
    assert {tuple(line.split()[:2]): int(line.split()[2]) for line in codes} == expected
    (totals,) = [line.split() for line in section(text, "total", "pending")]
    states = Counter(state for *_, state, _, _ in slots)
    assert totals == [str(states[state]) for state in STATES]
    pairs = len({(candidate, problem) for candidate, problem, *_ in slots})
    assert f"... and {pairs - 30} more pairs ({pairs} in all, " in " ".join(text.split())
    assert "status --all shows every row" in " ".join(text.split())


def test_all_shows_every_row(store: Path, slots: list[tuple[Any, ...]]) -> None:
    text = status(store, "--all").stdout
    candidates = {candidate for candidate, *_ in slots}
    assert len(section(text, "by candidate", "candidate")) == len(candidates)
    problems = {problem for _, problem, *_ in slots}
    assert len(section(text, "by problem", "problem")) == len(problems)
    measured = rows(store, "SELECT count(DISTINCT slot_id) FROM observations")[0][0]
    assert len(section(text, "results (median", "candidate")) == measured  # one repetition
    assert "more pairs" not in text and "... and" not in text


def test_on_a_terminal_every_line_fits(store: Path) -> None:
    for options in ([], ["--slots"]):
        lines = on_terminal("status", "--store", str(store), *options)
        assert all(len(line.rstrip()) <= COLUMNS for line in lines), lines
        joined = " ".join(" ".join(lines).split())
        if not options:
            assert "status --all shows every row" in joined and "... and 10 more" in joined
        else:
            assert len(lines) >= 600 and "~" in joined  # names cut to fit, marked


def test_slots_prints_one_line_per_slot(store: Path, slots: list[tuple[Any, ...]]) -> None:
    lines = status(store, "--slots").stdout.splitlines()
    assert lines[0].split() == [word for column in SLOT_HEADER for word in column.split()]
    assert len(lines) == 1 + len(slots)
    expected = sorted(
        (candidate, problem, slot, state, str(attempts), code or "")
        for candidate, problem, slot, state, attempts, code in slots
    )
    shown = sorted(tuple([*line.split(), ""][:6]) for line in lines[1:])
    assert shown == expected


def test_json_keeps_its_document_and_lists_slots_only_when_asked(
    store: Path, slots: list[tuple[Any, ...]]
) -> None:
    plain = status(store, "--json").stdout
    document = json.loads(plain)
    assert plain == json.dumps(document, sort_keys=True, ensure_ascii=False) + "\n"
    assert "slots" not in document
    assert sorted(document) == [
        "attempts_by_state",
        "by_candidate",
        "by_problem",
        "excluded",
        "failures",
        "results",
        "totals",
    ]
    assert len(document["by_candidate"]) == len({candidate for candidate, *_ in slots})
    assert len(document["results"]) == len({(c, p) for c, p, *_ in slots})
    failures = Counter(
        (state, code) for *_, state, _, code in slots if state not in ("accepted", "pending")
    )
    assert {(f["state"], f["code"]): f["slots"] for f in document["failures"]} == failures
    listed = json.loads(status(store, "--json", "--slots").stdout)
    assert {key: value for key, value in listed.items() if key != "slots"} == document
    assert sorted(
        (s["candidate_id"], s["problem_id"], s["logical_slot"], s["state"]) for s in listed["slots"]
    ) == sorted((c, p, s, state) for c, p, s, state, _, _ in slots)
    stored = dict(
        rows(
            store,
            "SELECT a.slot_id, json_extract(o.record_json, '$.result.metrics.time_s') "
            "FROM attempts a JOIN observations o ON o.attempt_id = a.id WHERE a.state = 'accepted'",
        )
    )
    assert {s["slot_id"]: s["metrics"]["time_s"] for s in listed["slots"] if s["metrics"]} == {
        slot: str(value) if not isinstance(value, str) else value for slot, value in stored.items()
    }


def test_a_reader_that_stops_early_ends_the_output_quietly(store: Path) -> None:
    for options in (["--slots"], ["--json", "--slots"]):
        done = subprocess.run(
            f"{RUNSTORE} status --store {store} {' '.join(options)} | head -c 10",
            shell=True,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and len(done.stdout) == 10
        assert not re.search(r"Traceback|Exception", done.stderr), done.stderr
