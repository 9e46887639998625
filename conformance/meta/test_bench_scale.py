"""tools/bench_scale.py runs: a smoke of its quick mode in a subprocess (no timing is
asserted, only that it builds both stores, measures every reading command on both and
prints one table row per command and its verdicts)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import bench_scale

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "bench_scale.py"


def test_the_quick_benchmark_prints_a_row_per_command(tmp_path: Path) -> None:
    command = [sys.executable, str(SCRIPT), "--quick", "--cache", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("command "))
    assert lines[header].split() == [
        "command",
        "small",
        "s",
        "large",
        "s",
        "per-slot",
        "small",
        "MB",
        "large",
        "MB",
    ]
    rows = lines[header + 2 : header + 2 + len(bench_scale.COMMANDS)]
    number = r"(\d+\.\d+|\d+|n/a)"
    for (label, _), row in zip(bench_scale.COMMANDS, rows, strict=True):
        assert re.fullmatch(re.escape(label) + rf" +{number}(?: +{number}){{4}}", row), row
    for label in ("status", "status --json", "status --slots", "explain", "export", "audit"):
        row = rows[[name for name, _ in bench_scale.COMMANDS].index(label)]
        assert "n/a" not in row, row  # commands this CLI has are measured
    assert re.search(r"status at small: [\d.]+ s \(<= 1 s\)", done.stdout)
    assert re.search(r"status at large: [\d.]+ s \(<= 5 s\)", done.stdout)
    assert "FAILED" not in done.stdout
    built = sorted(path.name for path in tmp_path.iterdir())
    assert len([name for name in built if name.endswith(".json")]) == 2
