"""Issue 29's "done when": a benchmark campaign of 3 candidates x 4 problems x 10
repetitions (120 measurement slots) run by the real ``runstore run`` in a subprocess,
SIGKILLed mid-run, finished by ``run --resume``, and then read back four ways:

- the store, through a fresh read-only connection: exactly 120 measurement slots, each
  with exactly one accepted attempt, the killed attempts committed as
  ``interrupted_attempt``, and every slot's first attempt started in the order SPEC 15.1
  ("Order") prescribes: round by round, each round's candidates on each problem sorted by
  the SHA-256 of ``"<seed>/<round>/<problem>/<candidate>"``;
- ``runstore validate`` and ``runstore audit``;
- ``runstore export``: ``metrics.csv`` (read with pandas as text, then as floats) holds
  exactly the values the worker computed for each repetition;
- ``runstore compare --json``: every problem x candidate x metric row is recomputed here
  from ``metrics.csv`` as SPEC 17.3 defines it, with numpy (pairwise differences and log
  ratios, the Hodges-Lehmann median, the Moses order statistics), the exact null
  distribution of U counted by a recurrence written here, and
  ``scipy.stats.mannwhitneyu`` for the p-value; the verdict and its words must agree
  with that p-value and the metric's threshold.

The worker is stdlib only and sleeps nowhere: its metric values are a function of the
candidate's parameters, the problem's size and the repetition, with noise from a PRNG
seeded by all three, so the ratios are known (0.8 and 1.25 for ``time_s``) but noisy, a
retried attempt measures what the killed one would have, and the test knows every value.
The metrics cover both rank-test methods (``bytes`` is tied, the rest untied), results
with and without a ratio (``delta_ms`` goes negative), all three verdicts, and a shift the
rank test finds but the threshold dismisses (``heavy``'s ``score`` is 3% higher, with
0.5% noise, under a 5% threshold).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import random
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from conformance.analysis.reference import moses_index
from conformance.cli.world import RUNSTORE
from conformance.cli.world import json_lines
from conformance.cli.world import runstore
from conformance.closed_store import rows

pandas = pytest.importorskip("pandas")
numpy = pytest.importorskip("numpy")
stats = pytest.importorskip("scipy.stats")

ORDER_SEED = 2929  # the campaign's `seed`: the interleaved order of repetitions
REPETITIONS = 10
BASELINE = "base"
# candidate -> its parameters (floats reach the worker as decimal text, SPEC 15.1)
CANDIDATES: dict[str, dict[str, float | int]] = {
    "base": {"factor": 1.0, "offset": 0.0, "bytes_per_unit": 1000, "score": 1.0},
    "lean": {"factor": 0.8, "offset": -1.5, "bytes_per_unit": 900, "score": 1.0},
    "heavy": {"factor": 1.25, "offset": 0.3, "bytes_per_unit": 1000, "score": 1.03},
}
SIZES = (10, 20, 40, 80)  # problems n-10 .. n-80, in file order
# metric -> (direction, unit, threshold)
METRICS: dict[str, tuple[str, str, float | None]] = {
    "time_s": ("lower", "s", 0.05),
    "score": ("higher", "", 0.05),
    "delta_ms": ("lower", "ms", None),
    "bytes": ("lower", "bytes", 0.01),
}
SLOTS = len(CANDIDATES) * len(SIZES) * REPETITIONS
KILL_AFTER_STARTS = 45  # attempt_started lines read before the SIGKILL
TOLERANCE = 1e-9  # relative (and absolute, for p-values) between compare and this file


def synthetic_metrics(
    candidate: str, problem: str, repetition: int, size: int, parameters: dict[str, Any]
) -> dict[str, float | int]:
    """One measurement (the worker runs this very function; see :data:`WORKER`)."""
    rng = random.Random(f"noise-29/{candidate}/{problem}/{repetition}")
    factor, offset = float(parameters["factor"]), float(parameters["offset"])
    return {
        "time_s": size * factor * math.exp(rng.gauss(0.0, 0.08)) / 1000,
        "score": 50 * float(parameters["score"]) * math.exp(rng.gauss(0.0, 0.005)),
        "delta_ms": offset + rng.gauss(0.0, 1.0),
        "bytes": size * int(parameters["bytes_per_unit"]),
    }


WORKER = f"""\
from __future__ import annotations
import json, math, os, random
from typing import Any

{inspect.getsource(synthetic_metrics)}

metrics = synthetic_metrics(
    os.environ["RUNSTORE_CANDIDATE"],
    os.environ["RUNSTORE_PROBLEM"],
    int(os.environ["RUNSTORE_REPETITION"]),
    json.loads(os.environ["RUNSTORE_PARAMETERS"])["size"],
    json.loads(os.environ["RUNSTORE_CANDIDATE_PARAMETERS"]),
)
with open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json"), "w") as out:
    json.dump({{"metrics": metrics}}, out)
"""


def write_campaign(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "worker.py").write_text(WORKER, encoding="utf-8")
    lines = [
        "[campaign]",
        'name = "bench"',
        f"repetitions = {REPETITIONS}",
        f"seed = {ORDER_SEED}",
        "lease_seconds = 3",  # the minimum: the resume waits little for the dead owner
        "timeout_seconds = 30",
        "[metrics]",
    ]
    for metric, (direction, unit, threshold) in METRICS.items():
        declared = [f'direction = "{direction}"']
        declared += [f'unit = "{unit}"'] if unit else []
        declared += [f"threshold = {threshold}"] if threshold is not None else []
        lines.append(f"{metric} = {{ {', '.join(declared)} }}")
    for candidate, parameters in CANDIDATES.items():
        values = ", ".join(f"{key} = {value!r}" for key, value in parameters.items())
        lines += [
            "[[candidates]]",
            f'name = "{candidate}"',
            'command = ["{python}", "worker.py"]',
            'files = ["worker.py"]',
            f"parameters = {{ {values} }}",
        ]
    lines += ["[[problems]]", 'name = "n"', f"grid = {{ size = {list(SIZES)} }}"]
    path = directory / "campaign.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@attrs.frozen(kw_only=True)
class Benchmarked:
    """The store after the kill and the resume, with what the test saw on the way."""

    store: Path
    export: Path
    killed_accepted: int  # accepted attempts in the store just after the kill
    killed_in_progress: int  # attempts the kill left nonterminal
    resume: subprocess.CompletedProcess[str]
    run_seconds: float


@contextlib.contextmanager
def started(*arguments: str) -> Iterator[subprocess.Popen[str]]:
    """``runstore`` in the background, its JSON lines readable as they come; SIGKILLed on
    the way out if it is still running (a failed assertion leaves nothing behind)."""
    process = subprocess.Popen(
        [RUNSTORE, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


def count_attempts(store: Path, where: str) -> int:
    return int(rows(store, f"SELECT count(*) FROM attempts WHERE {where}")[0][0])


@pytest.fixture(scope="module")
def benchmarked(tmp_path_factory: pytest.TempPathFactory) -> Benchmarked:
    root = tmp_path_factory.mktemp("benchmark")
    campaign = write_campaign(root / "campaign")
    store = root / "store"
    began = time.monotonic()
    run = ["run", str(campaign), "--store", str(store), "-j", "2", "--json"]
    with started(*run, "--init") as process:
        assert process.stdout is not None
        starts = 0
        for line in process.stdout:
            event = json.loads(line)
            assert event["event"] != "summary", f"the run finished before its kill: {event}"
            starts += event["event"] == "attempt_started"
            if starts == KILL_AFTER_STARTS:
                process.send_signal(signal.SIGKILL)
                break
        assert process.wait(timeout=30) == -signal.SIGKILL
    killed_accepted = count_attempts(store, "state = 'accepted'")
    killed_in_progress = count_attempts(store, "finished_at_ns IS NULL")
    resume = runstore(*run, "--resume", "--retry-failed", "1", timeout=120)
    run_seconds = time.monotonic() - began
    export = root / "export"
    exported = runstore("export", "--store", str(store), "--out", str(export))
    assert exported.returncode == 0, exported.stderr
    return Benchmarked(
        store=store,
        export=export,
        killed_accepted=killed_accepted,
        killed_in_progress=killed_in_progress,
        resume=resume,
        run_seconds=run_seconds,
    )


def test_the_killed_run_resumes_to_one_accepted_attempt_in_each_of_120_slots(
    benchmarked: Benchmarked,
) -> None:
    store = benchmarked.store
    print(
        f"killed with {benchmarked.killed_accepted} accepted and "
        f"{benchmarked.killed_in_progress} in progress; run + resume took "
        f"{benchmarked.run_seconds:.1f} s"
    )
    # The kill landed mid-run, with an attempt under way.
    assert 0 < benchmarked.killed_accepted < SLOTS
    assert benchmarked.killed_in_progress >= 1
    resume = benchmarked.resume
    assert resume.returncode == 0, resume.stderr
    events = json_lines(resume.stdout)
    summary = events[-1]
    assert summary["event"] == "summary"
    assert (summary["slots"], summary["satisfied"], summary["unsatisfied"]) == (SLOTS, SLOTS, [])
    # Recovery settled every attempt the kill left in progress (in one pass or in several,
    # as their leases expired).
    recovered = [event for event in events if event["event"] == "recovered"]
    assert sum(event["terminals"] for event in recovered) == benchmarked.killed_in_progress
    # The store, through a fresh read-only connection: every slot a measurement slot with
    # exactly one accepted attempt; nothing in progress; every other attempt is one the
    # kill interrupted, committed by recovery.
    assert rows(store, "SELECT role, count(*) FROM attempt_slots GROUP BY role") == [
        ("measurement", SLOTS)
    ]
    accepted_per_slot = rows(
        store,
        "SELECT s.id, (SELECT count(*) FROM attempts AS a "
        "WHERE a.slot_id = s.id AND a.state = 'accepted') FROM attempt_slots AS s",
    )
    assert len(accepted_per_slot) == SLOTS
    assert {count for _, count in accepted_per_slot} == {1}
    # (recovery may instead import an outcome a killed attempt published but never
    # committed: an accepted one, so there may be fewer of them than it settled)
    others = rows(store, "SELECT state, failure_code FROM attempts WHERE state != 'accepted'")
    assert set(others) <= {("failed", "interrupted_attempt")}
    assert len(others) <= benchmarked.killed_in_progress
    assert count_attempts(store, "true") == SLOTS + len(others)
    status = json.loads(runstore("status", "--store", str(store), "--json").stdout)
    assert status["totals"]["accepted"] == SLOTS
    assert all(result["accepted"] == result["slots"] == REPETITIONS for result in status["results"])


def test_validate_and_audit_pass(benchmarked: Benchmarked) -> None:
    for command in ("validate", "audit"):
        checked = runstore(command, "--store", str(benchmarked.store))
        assert checked.returncode == 0, f"{command}: {checked.stdout}{checked.stderr}"


def test_repetitions_ran_round_by_round_in_the_seeded_interleaved_order(
    benchmarked: Benchmarked,
) -> None:
    """Each slot's first attempt (retry 0, started by the killed run or the resume) in
    start-time order is the planned order, computed here from SPEC 15.1's rule."""
    started_at = rows(
        benchmarked.store,
        "SELECT r.logical_spec_id, s.logical_slot, a.started_at_ns FROM attempts AS a "
        "JOIN attempt_slots AS s ON s.id = a.slot_id "
        "JOIN resolved_runs AS r ON r.id = s.run_id WHERE a.retry_index = 0",
    )
    assert len(started_at) == SLOTS
    ran = [
        (repetition_of(slot), spec.split("/")[2], spec.split("/")[1])
        for spec, slot, _ in sorted(started_at, key=lambda row: row[2])
    ]
    planned = [
        (repetition, problem, candidate)
        for repetition in range(REPETITIONS)
        for problem in (f"n-{size}" for size in SIZES)
        for candidate in sorted(
            CANDIDATES,
            key=lambda c, r=repetition, p=problem: hashlib.sha256(
                f"{ORDER_SEED}/{r}/{p}/{c}".encode()
            ).hexdigest(),
        )
    ]
    assert ran == planned
    # The candidates do alternate: their order on a problem changes from round to round.
    orders = {tuple(c for r, p, c in planned if (r, p) == (rep, "n-10")) for rep in range(10)}
    assert len(orders) > 1


def repetition_of(logical_slot: str) -> int:
    """``measurement`` is repetition 0, ``measurement-<r>`` repetition r (SPEC 15.2)."""
    return 0 if logical_slot == "measurement" else int(logical_slot.removeprefix("measurement-"))


def exported_values(export: Path) -> dict[tuple[str, str, str], list[float]]:
    """(candidate, problem, metric) -> the values in repetition order, read from
    ``metrics.csv`` as text (SPEC 16.3's way) and only then parsed as floats."""
    frame = pandas.read_csv(export / "metrics.csv", dtype=str, keep_default_na=False)
    assert len(frame) == SLOTS * len(METRICS)
    frame["candidate"] = frame["candidate_id"].str.split("/").str[1]
    frame["problem"] = frame["problem_id"].str.split("/").str[1]
    frame["repetition"] = frame["logical_slot"].map(repetition_of)
    frame["number"] = frame["value"].astype(float)
    found: dict[tuple[str, str, str], list[float]] = {}
    for key, group in frame.sort_values("repetition").groupby(["candidate", "problem", "metric"]):
        assert list(group["repetition"]) == list(range(REPETITIONS)), key
        found[key] = list(group["number"])
    return found


def test_the_export_holds_exactly_what_the_worker_measured(benchmarked: Benchmarked) -> None:
    found = exported_values(benchmarked.export)
    expected: dict[tuple[str, str, str], list[float]] = {}
    for candidate, parameters in CANDIDATES.items():
        for size in SIZES:
            problem = f"n-{size}"
            for repetition in range(REPETITIONS):
                measured = synthetic_metrics(candidate, problem, repetition, size, parameters)
                for metric, value in measured.items():
                    expected.setdefault((candidate, problem, metric), []).append(value)
    assert found == expected


# --- the statistics, recomputed (SPEC 17.1 and 17.3) ---


def expected_comparison(
    baseline: list[float], candidate: list[float], direction: str, threshold: float | None
) -> dict[str, Any]:
    base, mine = numpy.asarray(baseline), numpy.asarray(candidate)
    m, n = len(base), len(mine)
    k, coverage = moses_index(m, n)
    differences = numpy.sort(numpy.subtract.outer(mine, base).ravel())
    found: dict[str, Any] = {
        "difference": float(numpy.median(differences)),
        "difference_low": float(differences[k - 1]),
        "difference_high": float(differences[m * n - k]),
        "ci_level": coverage,
        "ratio": None,
        "ratio_low": None,
        "ratio_high": None,
    }
    h = None
    if (base > 0).all() and (mine > 0).all():
        logs = numpy.sort(numpy.subtract.outer(numpy.log(mine), numpy.log(base)).ravel())
        h = float(numpy.median(logs))
        found["ratio"] = math.exp(h)
        found["ratio_low"] = math.exp(logs[k - 1])
        found["ratio_high"] = math.exp(logs[m * n - k])
    pooled = numpy.concatenate([base, mine])
    if len(numpy.unique(pooled)) == 1:
        found["p_value"], found["method"] = 1.0, "normal"  # s2 = 0: every value equal
    elif len(numpy.unique(pooled)) == len(pooled):
        found["p_value"] = stats.mannwhitneyu(mine, base, method="exact").pvalue
        found["method"] = "exact"
    else:
        found["p_value"] = stats.mannwhitneyu(mine, base, method="asymptotic").pvalue
        found["method"] = "normal"
    if h is not None:
        change = math.expm1(abs(h))
    else:
        largest = max(abs(numpy.median(base)), abs(numpy.median(mine)))
        change = 0.0 if found["difference"] == 0 else abs(found["difference"]) / largest
    found["change"] = change
    found["significant"] = bool(found["p_value"] < 0.05 and change > (threshold or 0.0))
    moved_down = (h if h is not None else found["difference"]) < 0
    better = moved_down == (direction == "lower")
    found["verdict"] = ("better" if better else "worse") if found["significant"] else "same"
    return found


SPEED_UNITS = ("s", "ms", "us", "µs", "μs", "ns", "min", "h")


def check_words(row: dict[str, Any], expected: dict[str, Any]) -> None:
    """17.3's words say what the p-value and the threshold decided."""
    words = row["words"]
    p = expected["p_value"]
    if not expected["significant"]:
        match = re.fullmatch(r"no significant difference \(p = ([0-9.e-]+)(, .*)?\)", words)
        assert match, words
        assert float(match[1]) == pytest.approx(p, rel=0.05), words  # two digits shown
        if p < 0.05:  # significant by the test alone: the change is within the threshold
            assert match[2] and "within the" in match[2], words
        return
    verdict = expected["verdict"]
    if expected["ratio"] is None:
        assert words.endswith(f", {verdict}"), words
        assert words.startswith("+" if expected["difference"] > 0 else "-"), words
        return
    ratio = expected["ratio"]
    down = ratio < 1
    factor = 1 / ratio if down else ratio
    unit, direction = row["unit"], row["direction"]
    speedy = (unit in SPEED_UNITS and direction == "lower") or (
        unit.endswith("/s") and direction == "higher"
    )
    if speedy:
        word = "faster" if verdict == "better" else "slower"
    else:
        word = f"{verdict} ({'lower' if down else 'higher'})"
    assert words.startswith(f"{factor:.2f}x {word} ["), words


def test_compare_matches_an_independent_computation_from_the_export(
    benchmarked: Benchmarked,
) -> None:
    assert moses_index(10, 10)[0] == 24  # published tables: U's two-sided 5% value is 23
    found = exported_values(benchmarked.export)
    shown = runstore("compare", "--store", str(benchmarked.store), "--baseline", BASELINE, "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["missing"] == []
    rows_by_key = {(r["problem"], r["candidate"], r["metric"]): r for r in document["rows"]}
    others = [candidate for candidate in CANDIDATES if candidate != BASELINE]
    expected_keys = {(f"n-{s}", c, m) for s in SIZES for c in others for m in METRICS}
    assert set(rows_by_key) == expected_keys and len(document["rows"]) == len(expected_keys)
    verdicts = set()
    methods = set()
    within = set()  # significant by the rank test, dismissed by the threshold
    for (problem, candidate, metric), row in sorted(rows_by_key.items()):
        direction, unit, threshold = METRICS[metric]
        assert (row["direction"], row["unit"], row["baseline"]) == (direction, unit, BASELINE)
        comparison = row["comparison"]
        assert comparison["threshold"] == threshold
        expected = expected_comparison(
            found[(BASELINE, problem, metric)],
            found[(candidate, problem, metric)],
            direction,
            threshold,
        )
        where = f"{candidate} vs {BASELINE} on {problem}, {metric}: {comparison}"
        assert (comparison["n_baseline"], comparison["n_candidate"]) == (10, 10), where
        for field in ("difference", "difference_low", "difference_high", "ci_level", "change"):
            assert comparison[field] == pytest.approx(expected[field], rel=TOLERANCE, abs=1e-12), (
                f"{field}: {where}"
            )
        for field in ("ratio", "ratio_low", "ratio_high"):
            if expected[field] is None:
                assert comparison[field] is None, f"{field}: {where}"
            else:
                assert comparison[field] == pytest.approx(expected[field], rel=TOLERANCE), (
                    f"{field}: {where}"
                )
        assert comparison["p_value"] == pytest.approx(
            expected["p_value"], rel=TOLERANCE, abs=TOLERANCE
        ), where
        assert comparison["method"] == expected["method"], where
        assert comparison["significant"] is expected["significant"], where
        assert comparison["verdict"] == expected["verdict"], where
        check_words(row, expected)
        verdicts.add(expected["verdict"])
        if expected["p_value"] < 0.05 and not expected["significant"]:
            within.add((problem, candidate, metric))
        methods.add((expected["method"], expected["ratio"] is None))
    # The campaign exercised what it was built to: every verdict, both methods, and
    # results with and without a ratio.
    assert verdicts == {"better", "worse", "same"}
    assert {method for method, _ in methods} == {"exact", "normal"}
    assert {no_ratio for _, no_ratio in methods} == {True, False}
    assert {(f"n-{size}", "heavy", "score") for size in SIZES} <= within
    # The known ratios of time_s come out: lean is 0.8 and heavy 1.25 times the baseline.
    for size in SIZES:
        lean = rows_by_key[(f"n-{size}", "lean", "time_s")]["comparison"]
        heavy = rows_by_key[(f"n-{size}", "heavy", "time_s")]["comparison"]
        assert lean["ratio"] == pytest.approx(0.8, rel=0.1)
        assert heavy["ratio"] == pytest.approx(1.25, rel=0.1)
        assert (lean["verdict"], heavy["verdict"]) == ("better", "worse")
    plain = runstore("compare", "--store", str(benchmarked.store), "--baseline", BASELINE)
    assert plain.returncode == 0 and "x faster [" in plain.stdout and "x slower [" in plain.stdout
