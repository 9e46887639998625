"""``runstore validate``, ``audit``, ``export`` and ``report`` through the console script, on
the demo campaign (examples/codecs) and on damaged copies of it: exit statuses, JSON
documents, and that none of them ever changes a byte of the store (SPEC.md section 16)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.cli.world import runstore
from conformance.inspection.corrupt_world import edited

Demo = tuple[Path, subprocess.CompletedProcess[str]]


def fingerprint(store: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under the store: size, mtime and content (the store is small)."""
    found = {}
    for path in sorted(store.rglob("*")):
        if path.is_file():
            info = path.stat()
            name = str(path.relative_to(store))
            found[name] = (info.st_size, info.st_mtime_ns, path.read_bytes())
    return found


@pytest.fixture
def demo(demo_store: Demo) -> Iterator[Path]:
    store, done = demo_store
    assert done.returncode == 0, done.stderr
    before = fingerprint(store)
    yield store
    assert fingerprint(store) == before, "a reading command changed the store"


@pytest.fixture
def damaged(demo_store: Demo, tmp_path: Path) -> Path:
    store, _ = demo_store
    return Path(shutil.copytree(store, tmp_path / "copy"))


def test_validate_and_audit_pass_on_the_demo_campaign(demo: Path) -> None:
    validated = runstore("validate", "--store", str(demo))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert validated.stdout.strip().endswith(validated.stdout.strip().splitlines()[-1])
    assert ": ok; checked " in validated.stdout and "140 attempts" in validated.stdout
    document = json.loads(runstore("validate", "--store", str(demo), "--json", "--quick").stdout)
    assert (document["ok"], document["quick"], document["findings"]) == (True, True, [])
    # 7 candidates x 4 problems x 5 repetitions = 140 slots: 140 attempt artifacts, 140
    # observations and the run's one environment artifact
    assert document["checked"]["artifacts"] == 281
    audited = runstore("audit", "--store", str(demo), "--json")
    assert audited.returncode == 0, audited.stdout
    report = json.loads(audited.stdout)
    assert (report["ok"], report["attempts"], report["divergence"]) == (True, 140, None)
    assert report["events"] == 140 * 9  # reserve, 4 advances, validating, 2 finalization, 1 obs


def test_a_flipped_artifact_byte_fails_validate_with_its_finding(damaged: Path) -> None:
    victim = sorted(damaged.glob("artifacts/attempt-*/worker.json"))[0]
    data = bytearray(victim.read_bytes())
    data[0] ^= 0xFF
    victim.write_bytes(bytes(data))
    found = runstore("validate", "--store", str(damaged), "--json")
    assert found.returncode == 1
    document = json.loads(found.stdout)
    assert document["ok"] is False
    assert {f["code"] for f in document["findings"]} == {"artifact_corrupt"}
    assert victim.parent.name in document["findings"][0]["subject"]
    quick = runstore("validate", "--store", str(damaged), "--quick")
    assert quick.returncode == 0, "--quick hashes no content, so a same-size edit passes"
    text = runstore("validate", "--store", str(damaged))
    assert text.stdout.startswith("artifact_corrupt: ") and "1 findings" in text.stdout


def test_a_row_edited_outside_the_writer_fails_audit_at_its_event(damaged: Path) -> None:
    with edited(damaged) as connection:  # triggers dropped and re-created around it
        connection.execute("UPDATE attempts SET started_at_ns = started_at_ns - 1 WHERE rowid = 1")
    audited = runstore("audit", "--store", str(damaged))
    assert audited.returncode == 1
    first, summary = audited.stdout.splitlines()
    assert first.startswith("attempt_differs: at event ") and "diverged" in summary
    document = json.loads(runstore("audit", "--store", str(damaged), "--json").stdout)
    assert document["divergence"]["code"] == "attempt_differs"
    assert isinstance(document["divergence"]["sequence"], int)


def test_export_writes_the_five_files_and_rebuilds_them_byte_for_byte(
    demo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "export"
    done = runstore("export", "--store", str(demo), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    status = json.loads(runstore("status", "--store", str(demo), "--json", "--slots").stdout)
    accepted = [slot for slot in status["slots"] if slot["state"] == "accepted"]
    assert accepted and summary["files"]["index.jsonl"] == len(accepted)
    # Every accepted slot's attempt artifact and its one observation's, all verified.
    assert summary["verified_artifacts"] == 2 * len(accepted)
    assert summary["files"]["summary.csv"] == sum(len(r["metrics"]) for r in status["results"])
    assert sorted(os.listdir(out)) == [
        "attempts.csv",
        "index.jsonl",
        "metrics.csv",
        "observations.csv",
        "summary.csv",
    ]
    first = {name: (out / name).read_bytes() for name in os.listdir(out)}
    again = runstore("export", "--store", str(demo), "--out", str(out))
    assert again.returncode == 0 and f"index.jsonl: {len(accepted)} rows" in again.stdout
    assert "summary.csv: " in again.stdout
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == first
    ratios = {slot["slot_id"]: slot["metrics"]["ratio"] for slot in accepted}
    with open(out / "metrics.csv", newline="", encoding="utf-8") as handle:
        exported = {
            row["slot_id"]: row["value"]
            for row in csv.DictReader(handle)
            if row["metric"] == "ratio"
        }
    assert exported == ratios


def test_report_renders_the_demo_campaign(demo: Path, tmp_path: Path) -> None:
    page = tmp_path / "codecs.html"
    done = runstore("report", "--store", str(demo), "--html", str(page), "--campaign", "codecs")
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    assert "http://" not in html and "https://" not in html
    status = json.loads(runstore("status", "--store", str(demo), "--json", "--slots").stdout)
    metrics = sorted({name for slot in status["slots"] for name in slot["metrics"]})
    assert html.count("<svg") >= len(metrics) == 4
    for slot in status["slots"]:
        assert slot["metrics"]["ratio"] in html
        assert slot["candidate_id"].split("/", 1)[1] in html
    assert "runstore report: codecs" in html


def test_the_reading_commands_refuse_cleanly(demo: Path, tmp_path: Path) -> None:
    inside = runstore("report", "--store", str(demo), "--html", str(demo / "r.html"), "--json")
    assert inside.returncode == 3
    assert json.loads(inside.stdout)["error"] == "unsafe_path"
    into = runstore("export", "--store", str(demo), "--out", str(demo / "out"))
    assert into.returncode == 3 and "unsafe_path" in into.stderr
    for command in ("validate", "audit"):
        missing = runstore(command, "--store", str(tmp_path / "nothing"), "--json")
        assert missing.returncode == 3, command
        assert json.loads(missing.stdout)["error"] == "unsafe_path"
    assert not (tmp_path / "nothing").exists()
