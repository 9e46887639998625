"""``runstore export``'s tidy side (SPEC.md section 16.3): ``summary.csv``, the parameter
and ``repetition`` columns of ``metrics.csv`` and ``summary.csv``, and ``index.jsonl``'s
``metric_numbers``.

One store is built in-process (module-scoped) from a campaign file with repetitions, a
candidate grid over float and string values, a problem grid, fixed parameters of every
kind (a float, a boolean, a string needing CSV quoting, a nested table), a problem without
parameters, a ``[metrics]`` table, a pair whose repetitions fail and a metric that never
varies. Every expectation comes from the store (plain SQL on the snapshot), from an
independent computation (pandas and numpy over ``metrics.csv``) or from the statistics
``status`` reports, never from numbers pinned here.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.inspection import atomic_file
from runstore.inspection import export as export_module
from runstore.inspection import export_rows
from runstore.inspection.export import FILE_NAMES
from runstore.inspection.export import ExportSummary
from runstore.inspection.export import export
from runstore.inspection.export_summary import SUMMARY_COLUMNS
from runstore.inspection.results import pair_results
from runstore.inspection.snapshot import Snapshot
from runstore.runner.campaign_file import load_campaign
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

from conformance.inspection.test_export import hand_made_store
from conformance.inspection.test_export import json_numbers
from conformance.inspection.test_export import read_csv
from conformance.inspection.test_export import read_index
from conformance.inspection.test_export import stored_specifications
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import result
from conformance.runner.world import succeeded

pandas = pytest.importorskip("pandas")
numpy = pytest.importorskip("numpy")

CAMPAIGN = """\
[campaign]
name = "grid"
repetitions = 5
seed = 11

[[candidates]]
name = "sgd"
command = ["{python}", "w.py"]
grid = { alpha = [0.0001, 1e-7], loss = ["hinge", "log"] }
parameters = { tol = 0.5 }

[[candidates]]
name = "plain"
command = ["{python}", "w.py"]
repetitions = 3
parameters = { level = 6, fast = true, note = 'a,b "q"', shape = { dims = [2, 3] } }

[[problems]]
name = "p"
grid = { size = [10, 2000] }
parameters = { kind = "text" }

[[problems]]
name = "bare"

[metrics]
time_s = { direction = "lower", unit = "s", threshold = 0.05 }
score = { direction = "higher" }
"""

NOISE = (0.0, 0.013, -0.021, 0.3, 0.007)
"""Relative noise by repetition; 0.3 is an outlier in most pairs."""


def _script(order: WorkOrder, nth: int) -> WorkResult:
    env = dict(order.env)
    candidate, problem = env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"]
    repetition = int(env["RUNSTORE_REPETITION"])
    if candidate == "plain" and problem == "bare" and repetition > 0:
        return result(WorkStatus.EXITED, 1)  # one value left: no stdev
    base = 0.1 * (1 + len(candidate)) * (3 if problem == "p-2000" else 1)
    metrics = {
        "time_s": base * (1 + NOISE[repetition]),
        "score": repetition * 0.1 + len(problem),
        "bytes": 7,
    }
    return succeeded(metrics)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("tidy")
    (base / "campaign.toml").write_text(CAMPAIGN, encoding="utf-8")
    path = base / "store"
    path.mkdir()
    clock = Clock()
    with RunStore.open(str(path)) as store:
        run_campaign(
            store,
            load_campaign(base / "campaign.toml"),
            ScriptedExecutor(_script, clock),
            RunOptions(jobs=1, retry_failed=0),
            Events(),
            clock=clock,
        )
    return path


def canonical_text(value: object) -> str:
    """How a parameter cell holds a stored value, stated independently of the export."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def text(value: float | None) -> str:
    """How ``summary.csv`` holds a statistic: the shortest round-trip text, empty for None."""
    return "" if value is None else repr(value)


def parameter_header(snapshot: Snapshot) -> list[str]:
    runs = stored_specifications(snapshot, "resolved_runs").values()
    problem = sorted({name for spec in runs for name in spec.get("parameters", {})})
    candidate = sorted({name for spec in runs for name in spec.get("candidate_parameters", {})})
    return [f"param.{name}" for name in problem] + [f"candidate_param.{name}" for name in candidate]


def expected_cells(specification: dict[str, object], header: list[str]) -> dict[str, str]:
    cells = {}
    for column in header:
        key, _, name = column.partition(".")
        owner = specification.get("parameters" if key == "param" else "candidate_parameters")
        found = isinstance(owner, dict) and name in owner
        cells[column] = canonical_text(owner[name]) if found else ""  # type: ignore[index]
    return cells


# --- the store ---------------------------------------------------------------------------------


def test_the_store_has_what_the_export_must_show(snapshot: Snapshot) -> None:
    results = pair_results(snapshot.connection)
    assert len(results) == (4 + 1) * 3  # sgd's grid of four and plain, on p-10, p-2000, bare
    counts = {(r.group.candidate, r.group.problem): r.group.accepted for r in results}
    assert counts[("plain", "bare")] == 1 and counts[("sgd-1e-07-log", "p-10")] == 5
    assert any(r.unstable for r in results) and not all(r.unstable for r in results)
    header = parameter_header(snapshot)
    assert "param.size" in header and "candidate_param.alpha" in header


# --- summary.csv -------------------------------------------------------------------------------


def test_summary_csv_lays_out_the_statistics_status_reports(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, summary = exported
    rows = read_csv(out / "summary.csv")
    header = parameter_header(snapshot)
    assert list(rows[0]) == [*SUMMARY_COLUMNS, *header]
    runs = stored_specifications(snapshot, "resolved_runs")
    expected = []
    for pair in pair_results(snapshot.connection):
        group = pair.group
        for metric in pair.metrics:
            statistics = metric.summary
            expected.append(
                {
                    "campaign": group.campaign,
                    "candidate": group.candidate,
                    "problem": group.problem,
                    "candidate_id": group.candidate_id,
                    "problem_id": group.problem_id,
                    "run_id": group.run_id,
                    "slots": str(group.slots),
                    "accepted": str(group.accepted),
                    "metric": metric.name,
                    "direction": metric.info.direction,
                    "unit": metric.info.unit,
                    "threshold": metric.info.threshold_text or "",
                    "n": str(statistics.n),
                    "mean": text(statistics.mean),
                    "stdev": text(statistics.stdev),
                    "median": text(statistics.median),
                    "mad": text(statistics.mad),
                    "min": text(statistics.minimum),
                    "max": text(statistics.maximum),
                    "ci_low": text(statistics.ci_low),
                    "ci_high": text(statistics.ci_high),
                    "ci_level": text(statistics.ci_level),
                    "outliers": str(statistics.outliers),
                    "unstable": str(int(statistics.unstable)),
                    "reasons": "; ".join(statistics.reasons),
                    **expected_cells(runs[group.run_id], header),
                }
            )
    assert rows == expected and summary.files["summary.csv"] == len(rows)
    keys = [(r["campaign"], r["candidate"], r["problem"], r["run_id"], r["metric"]) for r in rows]
    assert keys == sorted(keys)
    declared = {r["metric"]: (r["direction"], r["unit"], r["threshold"]) for r in rows}
    assert declared == {
        "bytes": ("lower", "", ""),
        "score": ("higher", "", ""),
        "time_s": ("lower", "s", "0.05"),
    }
    assert {r["stdev"] for r in rows if r["n"] == "1"} == {""}
    assert any(r["reasons"] for r in rows) and any(r["unstable"] == "0" for r in rows)


def test_summary_csv_agrees_with_pandas_over_metrics_csv(
    exported: tuple[Path, ExportSummary],
) -> None:
    """The statistics recomputed by numpy from the long-form values, the exact ones
    (count, order statistics, MAD) bit for bit and the sums to within rounding."""
    out, _ = exported
    metrics = pandas.read_csv(out / "metrics.csv")
    summary = pandas.read_csv(out / "summary.csv", keep_default_na=False, na_values=[""])
    assert len(summary) == metrics.groupby(["candidate_id", "problem_id", "metric"]).ngroups
    for _, row in summary.iterrows():
        chosen = metrics[
            (metrics["candidate_id"] == row["candidate_id"])
            & (metrics["problem_id"] == row["problem_id"])
            & (metrics["metric"] == row["metric"])
        ]
        values = chosen["value"].to_numpy(dtype=float)
        median = numpy.median(values)
        assert row["n"] == len(values) == row["accepted"] <= row["slots"]
        assert row["median"] == median
        assert row["min"] == values.min() and row["max"] == values.max()
        assert row["mad"] == numpy.median(numpy.abs(values - median))
        assert row["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert row["ci_low"] <= row["median"] <= row["ci_high"]
        if len(values) == 1:
            assert math.isnan(row["stdev"])
        else:
            assert row["stdev"] == pytest.approx(values.std(ddof=1), rel=1e-9, abs=1e-300)
        assert sorted(chosen["repetition"]) == sorted(set(chosen["repetition"]))
    assert str(summary["unstable"].dtype) == "int64" and set(summary["unstable"]) == {0, 1}


def test_summary_csv_numbers_read_back_to_the_same_doubles(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, _ = exported
    frame = pandas.read_csv(out / "summary.csv")
    by_pair = {
        (p.group.run_id, m.name): m.summary
        for p in pair_results(snapshot.connection)
        for m in p.metrics
    }
    for _, row in frame.iterrows():
        statistics = by_pair[(row["run_id"], row["metric"])]
        for column, value in (
            ("mean", statistics.mean),
            ("median", statistics.median),
            ("ci_level", statistics.ci_level),
            ("mad", statistics.mad),
        ):
            assert row[column] == value and isinstance(row[column], float), column


# --- metrics.csv -------------------------------------------------------------------------------


def test_metrics_csv_rows_carry_their_repetition_and_their_runs_parameters(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, _ = exported
    rows = read_csv(out / "metrics.csv")
    header = parameter_header(snapshot)
    assert list(rows[0])[-len(header) - 1 :] == ["repetition", *header]
    runs = stored_specifications(snapshot, "resolved_runs")
    slots = stored_specifications(snapshot, "attempt_slots")
    run_of = dict(snapshot.connection.execute("SELECT id, run_id FROM attempt_slots").fetchall())
    for row in rows:
        assert row["repetition"] == str(slots[row["slot_id"]].get("repetition", 0))
        cells = {column: row[column] for column in header}
        assert cells == expected_cells(runs[run_of[row["slot_id"]]], header)
    # Spot checks of the encodings: exact float text, booleans, nested tables, quoting.
    sgd = next(row for row in rows if row["candidate_id"] == "grid/sgd-1e-07-hinge")
    assert (sgd["candidate_param.alpha"], sgd["candidate_param.tol"]) == ("1e-07", "0.5")
    assert sgd["candidate_param.level"] == "" and sgd["candidate_param.fast"] == ""
    plain = next(row for row in rows if row["candidate_id"] == "grid/plain")
    assert plain["candidate_param.fast"] == "true"
    assert plain["candidate_param.shape"] == '{"dims":[2,3]}'
    assert plain["candidate_param.note"] == 'a,b "q"' and plain["candidate_param.alpha"] == ""
    bare = next(row for row in rows if row["problem_id"] == "grid/bare")
    assert bare["param.size"] == bare["param.kind"] == ""
    assert b'"a,b ""q"""' in (out / "metrics.csv").read_bytes()
    # Every pair's accepted repetitions, pivoted by pandas.
    frame = pandas.read_csv(out / "metrics.csv")
    times = frame[frame["metric"] == "time_s"]
    wide = times.pivot_table(
        index=["candidate_id", "problem_id"], columns="repetition", values="value"
    )
    assert wide.loc[("grid/sgd-0.0001-log", "grid/p-10")].notna().sum() == 5
    assert wide.loc[("grid/plain", "grid/p-2000")].notna().sum() == 3
    assert wide.loc[("grid/plain", "grid/bare")].notna().sum() == 1


# --- index.jsonl -------------------------------------------------------------------------------


def raw_numbers(line: bytes) -> dict[str, object]:
    """A line parsed with every number kept as its literal text."""
    document: dict[str, object] = json.loads(line, parse_float=str, parse_int=str)
    return document


def test_index_jsonl_numbers_are_the_stored_text_verbatim(
    exported: tuple[Path, ExportSummary],
) -> None:
    out, _ = exported
    data = (out / "index.jsonl").read_bytes()
    lines = data.split(b"\n")[:-1]
    assert lines and len(lines) == len(read_index(out / "index.jsonl"))
    for raw in lines:
        line = json.loads(raw)
        metrics: dict[str, str] = line["metrics"]
        assert line["metric_numbers"] == json_numbers(metrics)
        assert set(line["metric_numbers"]) == set(metrics)  # every runner value is a number
        for name, number in line["metric_numbers"].items():
            assert number == float(metrics[name])
        assert raw_numbers(raw)["metric_numbers"] == metrics  # the literal is the stored text
        for observation, literal in zip(
            line["observations"], raw_numbers(raw)["observations"], strict=True
        ):
            assert observation["metric_numbers"] == json_numbers(observation["metrics"])
            assert literal["metric_numbers"] == observation["metrics"]
        # Sorted keys, no whitespace (a runner's values are their own shortest form).
        layout = json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert raw == layout.encode("utf-8")


NUMBERISH = {
    "exp": "1E+2",
    "neg_zero": "-0.0",
    "int": "12",
    "huge_int": "123456789012345678901234567890",
    "tiny": "1e-999",
    "too_big": "1e999",
    "hex": "0x10",
    "plus": "+1",
    "lead": "01",
    "dot": "1.",
    "bare_dot": ".5",
    "nan": "NaN",
    "inf": "Infinity",
    "space": " 1",
    "empty": "",
    "under": "1_000",
    "arabic": "\u0661",
}
"""Stored texts another writer may register: JSON numbers and near misses."""


def test_metric_numbers_hold_exactly_the_texts_that_are_finite_json_numbers(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    hand_made_store(store, NUMBERISH)
    with Snapshot.take(store) as taken:
        export(taken, str(tmp_path / "out"))
    (raw,) = (tmp_path / "out" / "index.jsonl").read_bytes().split(b"\n")[:-1]
    line = json.loads(raw)
    expected = json_numbers(NUMBERISH)
    assert set(expected) == {"exp", "neg_zero", "int", "huge_int", "tiny"}
    assert line["metric_numbers"] == expected
    literals = raw_numbers(raw)["metric_numbers"]
    assert literals == {name: NUMBERISH[name] for name in expected}
    assert line["observations"][0]["metric_numbers"] == expected


# --- analysis tools ----------------------------------------------------------------------------


def test_duckdb_reads_every_file_as_text_and_with_types(
    exported: tuple[Path, ExportSummary],
) -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    out, summary = exported
    connection = duckdb.connect()
    for name in FILE_NAMES:
        if not name.endswith(".csv"):
            continue
        path = str(out / name)
        text = connection.execute(
            "SELECT * FROM read_csv(?, header = true, all_varchar = true)", [path]
        )
        columns = [column[0] for column in text.description]
        expected = read_csv(out / name)
        assert columns == list(expected[0])
        found = [
            {
                column: "" if cell is None else cell
                for column, cell in zip(columns, row, strict=True)
            }
            for row in text.fetchall()
        ]
        assert found == expected, name
        typed = connection.execute("SELECT * FROM read_csv(?, header = true)", [path]).fetchall()
        assert len(typed) == summary.files[name]
    types = dict(
        connection.execute(
            "SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_csv(?))",
            [str(out / "summary.csv")],
        ).fetchall()
    )
    assert types["mean"] == types["ci_level"] == types["stdev"] == "DOUBLE"
    assert types["n"] == "BIGINT" and types["candidate_param.alpha"] == "DOUBLE"
    means = connection.execute(
        "SELECT run_id, metric, mean FROM read_csv(?)", [str(out / "summary.csv")]
    ).fetchall()
    texts = {(r["run_id"], r["metric"]): r["mean"] for r in read_csv(out / "summary.csv")}
    assert {(run, metric): float(texts[(run, metric)]) for run, metric, _ in means} == {
        (run, metric): mean for run, metric, mean in means
    }
    (count,) = connection.execute(
        "SELECT count(*) FROM read_json(?, format = 'newline_delimited') "
        "WHERE metric_numbers.time_s IS NOT NULL",
        [str(out / "index.jsonl")],
    ).fetchone()
    assert count == summary.files["index.jsonl"]


# --- determinism, order, refusals --------------------------------------------------------------


@pytest.mark.parametrize("slots", [1, 4])
def test_a_second_export_gives_the_same_bytes(
    snapshot: Snapshot,
    exported: tuple[Path, ExportSummary],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slots: int,
) -> None:
    monkeypatch.setattr(export_rows, "PAGE_SLOTS", slots)
    first, summary = exported
    again = export(snapshot, str(tmp_path / "again"))
    assert again.files == summary.files and set(again.files) == set(FILE_NAMES)
    for name in FILE_NAMES:
        assert (tmp_path / "again" / name).read_bytes() == (first / name).read_bytes(), name


def test_the_files_are_renamed_in_the_stated_order(
    snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renamed: list[str] = []
    replace = os.replace

    def recording(source: str, target: str) -> None:
        renamed.append(os.path.basename(target))
        replace(source, target)

    monkeypatch.setattr(atomic_file.os, "replace", recording)
    export(snapshot, str(tmp_path / "out"))
    assert (
        renamed
        == list(FILE_NAMES)
        == [
            "attempts.csv",
            "index.jsonl",
            "metrics.csv",
            "observations.csv",
            "summary.csv",
        ]
    )


def test_a_corrupt_artifact_leaves_no_summary_and_no_temporaries(
    root: Path, exported: tuple[Path, ExportSummary], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(root, store, symlinks=True)
    victim = read_csv(exported[0] / "observations.csv")[-1]["artifact_id"]
    path = store / "artifacts" / victim.split(":", 1)[1] / "result.json"
    path.chmod(0o644)
    path.write_bytes(path.read_bytes() + b" ")
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.csv").write_bytes(b"an older export\n")
    with Snapshot.take(store) as taken, pytest.raises(ArtifactCorruptError, match=victim):
        export(taken, str(out))
    assert os.listdir(out) == ["metrics.csv"]
    assert (out / "metrics.csv").read_bytes() == b"an older export\n"


def test_a_failure_while_writing_the_summary_leaves_the_directory_as_it_was(
    snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = export_module.summary_rows

    def failing(*arguments: object) -> Iterator[list[str | int | None]]:
        rows = real(*arguments)  # type: ignore[arg-type]
        yield next(rows)
        raise OSError(28, "injected: no space left on device")

    monkeypatch.setattr(export_module, "summary_rows", failing)
    out = tmp_path / "out"
    with pytest.raises(DurabilityError) as caught:
        export(snapshot, str(out))
    assert caught.value.code == "durability_failed"
    assert not out.exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "summary.csv").write_bytes(b"an older export\n")
    with pytest.raises(DurabilityError):
        export(snapshot, str(existing))
    assert os.listdir(existing) == ["summary.csv"]
    assert (existing / "summary.csv").read_bytes() == b"an older export\n"


def test_a_campaign_without_runs_gives_headers_without_parameter_columns(
    snapshot: Snapshot, tmp_path: Path
) -> None:
    summary = export(snapshot, str(tmp_path / "none"), campaign="nothing")
    assert summary.files == {name: 0 for name in FILE_NAMES}
    with open(tmp_path / "none" / "summary.csv", newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == [list(SUMMARY_COLUMNS)]
