"""``runstore conformance`` as a user runs it (SPEC.md section 18.4): the report on stdout
(text or ``--json``), exit 0 when no check failed and 1 when one did, 2 for wrong options
or a driver that cannot start, and the shrunk transcript written with ``--transcript`` and
replayed with ``--replay``.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from conformance.cli.world import runstore

DRIVER = shlex.join([sys.executable, "-m", "runstore.kit.driver"])


def test_the_values_level_passes_with_a_json_report() -> None:
    done = runstore("conformance", "--impl", DRIVER, "--level", "values", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {"protocol", "implementation", "level", "checks"}
    assert report["level"] == "values" and report["protocol"] == 1
    assert {check["status"] for check in report["checks"]} == {"pass"}
    assert all(set(c) == {"name", "status", "cases", "detail"} for c in report["checks"])


def test_a_failed_check_exits_1_and_names_the_first_differing_byte() -> None:
    done = runstore(
        "conformance", "--impl", f"{DRIVER} --defect unsorted_keys", "--level", "values"
    )
    assert done.returncode == 1, done.stderr
    line = next(x for x in done.stdout.splitlines() if "canonical_json.json encode " in x)
    assert "FAIL" in line
    assert "first difference at byte" in done.stdout
    assert "1 failed" in done.stdout.splitlines()[-1]
    lines = done.stdout.splitlines()
    assert lines[0] == "conformance of runstore (Python reference) 1 at level values"
    assert done.stderr == ""


def test_usage_errors_and_an_unstartable_driver_exit_2(tmp_path: Path) -> None:
    cases = [
        (("--impl", DRIVER, "--level", "everything"), "option_invalid"),
        (("--impl", DRIVER, "--check", "no such check", "--level", "values"), "option_invalid"),
        (("--impl", DRIVER, "--scenario", "no_such_scenario"), "option_invalid"),
        (("--impl", DRIVER, "--kills", "0"), "option_invalid"),
        (("--impl", DRIVER, "--vectors", str(tmp_path)), "option_invalid"),
        (("--impl", str(tmp_path / "missing-driver")), "implementation_unavailable"),
        (("--impl", ""), "implementation_unavailable"),
    ]
    for arguments, code in cases:
        done = runstore("conformance", *arguments)
        assert done.returncode == 2, (arguments, done.stdout, done.stderr)
        assert code in done.stderr, (arguments, done.stderr)
        assert done.stdout == ""


def test_a_shrunk_transcript_is_written_and_replays(tmp_path: Path) -> None:
    transcript = tmp_path / "failure.txt"
    defective = f"{DRIVER} --defect stale_revision_accepted"
    done = runstore(
        "conformance",
        "--impl",
        defective,
        "--level",
        "writer",
        "--check",
        "writer lockstep",
        "--examples",
        "150",
        "--shrink-seconds",
        "2",
        "--transcript",
        str(transcript),
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "shrunk transcript:" in done.stdout
    lines = transcript.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("> ") and lines[1].startswith("< ")
    same = runstore("conformance", "--impl", defective, "--replay", str(transcript))
    assert (same.returncode, same.stdout) == (0, "the driver answered every request as recorded\n")
    other = runstore("conformance", "--impl", DRIVER, "--replay", str(transcript))
    assert other.returncode == 1
    assert "advance: got ('refused'" in other.stdout
