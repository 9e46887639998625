"""``status``'s per-pair statistics and ``compare`` (SPEC.md sections 15.7 and 17), end to end
through the installed command: a campaign with repetitions is run, and the numbers the
command prints are recomputed independently from the exported ``metrics.csv`` with pandas,
numpy and scipy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conformance.cli.world import runstore

pandas = pytest.importorskip("pandas")
numpy = pytest.importorskip("numpy")
stats = pytest.importorskip("scipy.stats")

WORKER = """\
import json, os
scale = {"fast": 1.0, "mid": 1.5, "slow": 3.0}[os.environ["RUNSTORE_CANDIDATE"]]
repetition = int(os.environ["RUNSTORE_REPETITION"])
size = json.loads(os.environ["RUNSTORE_PARAMETERS"])["size"]
noise = [0.0, 0.02, -0.01, 0.05, -0.03, 0.01, 0.04, -0.02][repetition % 8]
time_s = scale * size * (1 + noise) / 1000
metrics = {"time_s": time_s, "size": size}
with open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json"), "w") as out:
    json.dump({"metrics": metrics}, out)
"""


def campaign(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "w.py").write_text(WORKER)
    lines = [
        "[campaign]",
        f'name = "{name}"',
        "repetitions = 6",
        "seed = 3",
        "lease_seconds = 3",
        "[metrics]",
        'time_s = { direction = "lower", unit = "s", threshold = 0.05 }',
        'size = { direction = "higher" }',
    ]
    for candidate in ("fast", "mid", "slow"):
        lines += ["[[candidates]]", f'name = "{candidate}"', 'command = ["{python}", "w.py"]']
        lines += ['files = ["w.py"]']
    lines += ["[[problems]]", 'name = "p"', "grid = { size = [10, 20] }"]
    path = directory / "campaign.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compare")
    target = root / "store"
    for name in ("after", "before"):
        done = runstore("run", str(campaign(root / name, name)), "--store", str(target), "--init")
        assert done.returncode == 0, done.stderr
    return target


def exported(store: Path, tmp_path: Path) -> pandas.DataFrame:
    out = tmp_path / "export"
    done = runstore("export", "--store", str(store), "--out", str(out), "--campaign", "after")
    assert done.returncode == 0, done.stderr
    frame = pandas.read_csv(out / "metrics.csv")
    frame["candidate"] = frame["candidate_id"].str.split("/").str[1]
    frame["problem"] = frame["problem_id"].str.split("/").str[1]
    return frame


def test_status_gives_each_pair_its_statistics(store: Path, tmp_path: Path) -> None:
    shown = runstore("status", "--store", str(store), "--campaign", "after", "--json")
    assert shown.returncode == 0, shown.stderr
    results = json.loads(shown.stdout)["results"]
    assert len(results) == 6
    frame = exported(store, tmp_path)
    times = frame[frame["metric"] == "time_s"]
    for result in results:
        values = times[
            (times["candidate"] == result["candidate"]) & (times["problem"] == result["problem"])
        ]["value"].to_numpy(dtype=float)
        statistics = result["metrics"]["time_s"]["statistics"]
        assert statistics["n"] == len(values) == 6
        assert statistics["median"] == pytest.approx(numpy.median(values), rel=1e-12)
        mad = numpy.median(numpy.abs(values - numpy.median(values)))
        assert statistics["mad"] == pytest.approx(mad, rel=1e-9, abs=1e-15)
        assert statistics["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert statistics["stdev"] == pytest.approx(values.std(ddof=1), rel=1e-9)
        assert result["metrics"]["time_s"]["unit"] == "s"
        assert result["slots"] == result["accepted"] == 6
    plain = runstore("status", "--store", str(store), "--campaign", "after")
    assert "results (median ± MAD)" in plain.stdout and "time_s ↓" in plain.stdout


def test_compare_ratios_match_an_independent_computation(store: Path, tmp_path: Path) -> None:
    shown = runstore(
        "compare", "--store", str(store), "--campaign", "after", "--baseline", "fast", "--json"
    )
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    frame = exported(store, tmp_path)
    times = frame[frame["metric"] == "time_s"]
    rows = [row for row in document["rows"] if row["metric"] == "time_s"]
    assert {(row["problem"], row["candidate"]) for row in rows} == {
        (problem, candidate) for problem in ("p-10", "p-20") for candidate in ("mid", "slow")
    }
    for row in rows:

        def values(candidate: str, problem: str = row["problem"]) -> numpy.ndarray:
            chosen = times[(times["candidate"] == candidate) & (times["problem"] == problem)]
            return chosen["value"].to_numpy(dtype=float)

        base, mine = values("fast"), values(row["candidate"])
        pairwise = numpy.log(mine)[:, None] - numpy.log(base)[None, :]
        ratio = math.exp(numpy.median(pairwise))
        comparison = row["comparison"]
        assert comparison["ratio"] == pytest.approx(ratio, rel=1e-9)
        assert comparison["ratio_low"] <= comparison["ratio"] <= comparison["ratio_high"]
        expected_p = stats.mannwhitneyu(mine, base, alternative="two-sided").pvalue
        assert comparison["p_value"] == pytest.approx(expected_p, rel=1e-9)
        factor = 1.5 if row["candidate"] == "mid" else 3.0
        assert ratio == pytest.approx(factor, rel=0.05)
        assert row["words"].endswith("]") and " slower [" in row["words"]
        assert comparison["verdict"] == "worse" and comparison["significant"] is True
    sizes = [row for row in document["rows"] if row["metric"] == "size"]
    assert sizes and all(row["words"].startswith("no significant difference") for row in sizes)
    plain = runstore("compare", "--store", str(store), "--campaign", "after", "--baseline", "fast")
    assert plain.returncode == 0 and "x slower [" in plain.stdout


def test_compare_two_campaigns_pair_by_pair(store: Path) -> None:
    shown = runstore(
        "compare",
        "--store",
        str(store),
        "--campaign",
        "after",
        "--baseline-campaign",
        "before",
        "--metric",
        "time_s",
        "--json",
    )
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert len(document["rows"]) == 6
    for row in document["rows"]:
        assert row["baseline"] == f"before/{row['candidate']}"
        # the same worker measured the same values: no difference
        assert row["comparison"]["ratio"] == pytest.approx(1.0)
        assert row["words"].startswith("no significant difference")


EXACTLY_ONE = "exactly one of --baseline, --baseline-campaign or --baseline-revision"


@pytest.mark.parametrize(
    ("arguments", "fragment", "code"),
    [
        (["--baseline", "nobody", "--campaign", "after"], "no candidate 'nobody' in campaign", ""),
        (["--baseline", "fast"], "the store holds 2 campaigns; pick one with --campaign", ""),
        (
            ["--baseline", "fast", "--campaign", "typo"],
            "no campaign 'typo' in the store; campaigns: after, before",
            "unknown_campaign",
        ),
        (["--baseline", "fast", "--campaign", "after", "--metric", "x"], "no metric 'x'", ""),
        (["--campaign", "after"], EXACTLY_ONE, ""),
        (["--baseline", "fast", "--baseline-campaign", "before"], EXACTLY_ONE, ""),
        (["--baseline", "fast", "--baseline-revision", "0"], EXACTLY_ONE, ""),
        (["--baseline-campaign", "gone", "--campaign", "after"], "no campaign 'gone'", ""),
        (
            ["--baseline-revision", "3", "--campaign", "after"],
            "no revision 3 in campaign after; revisions: 0",
            "unknown_revision",
        ),
    ],
)
def test_compare_refuses_names_the_store_does_not_hold(
    store: Path, arguments: list[str], fragment: str, code: str
) -> None:
    code = code or "comparison_invalid"
    refused = runstore("compare", "--store", str(store), *arguments)
    assert refused.returncode == 2, refused.stderr
    assert f"error: {code}: " in refused.stderr and fragment in refused.stderr
    as_json = runstore("compare", "--store", str(store), *arguments, "--json")
    assert json.loads(as_json.stdout)["error"] == code


HUGE_WORKER = """\
import json, os
repetition = int(os.environ["RUNSTORE_REPETITION"])
# Repetition 0 reports a value past the statistics' bound of 1e300 (SPEC.md 17.2).
base = {"a": 5.0, "b": 7.0}[os.environ["RUNSTORE_CANDIDATE"]]
x = 1e305 if repetition == 0 else base + repetition
with open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json"), "w") as out:
    json.dump({"metrics": {"x": x}}, out)
"""


def test_a_value_past_the_statistics_bound_is_left_out_and_every_reader_still_answers(
    tmp_path: Path,
) -> None:
    """A worker may write any finite number; one the statistics cannot take (over 1e300) is
    left out of its pair's values (n counts one fewer than the slots) instead of failing
    status, compare, report and export with invalid_record, as it did."""
    (tmp_path / "w.py").write_text(HUGE_WORKER)
    lines = ["[campaign]", 'name = "huge"', "repetitions = 4"]
    for name in ("a", "b"):
        lines += ["[[candidates]]", f'name = "{name}"', 'command = ["{python}", "w.py"]']
        lines += ['files = ["w.py"]']
    lines += ["[[problems]]", 'name = "p"']
    (tmp_path / "c.toml").write_text("\n".join(lines) + "\n")
    store = str(tmp_path / "store")
    done = runstore("run", str(tmp_path / "c.toml"), "--store", store, "--init")
    assert done.returncode == 0, done.stderr
    shown = runstore("status", "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    for result in json.loads(shown.stdout)["results"]:
        assert result["slots"] == 4
        metric = result["metrics"]["x"]
        assert metric["statistics"]["n"] == 3 and "1e+305" not in metric["values"]
    compared = runstore("compare", "--store", store, "--baseline", "a", "--json")
    assert compared.returncode == 0, compared.stderr
    (row,) = json.loads(compared.stdout)["rows"]
    # Hodges-Lehmann over the three values each side kept: a 6, 7, 8 and b 8, 9, 10.
    ratios = sorted(mine / theirs for mine in (8.0, 9.0, 10.0) for theirs in (6.0, 7.0, 8.0))
    assert row["comparison"]["ratio"] == pytest.approx(ratios[4], rel=1e-12)
    page = runstore("report", "--store", store, "--html", str(tmp_path / "r.html"))
    assert page.returncode == 0, page.stderr
    exported = runstore("export", "--store", store, "--out", str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr
    summary = (tmp_path / "out" / "summary.csv").read_text().splitlines()
    assert len(summary) == 3 and all(",x," in line for line in summary[1:])
