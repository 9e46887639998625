"""tools/bench_lifecycle.py runs: a smoke of its quick mode in a subprocess (no timing is
asserted, only that it measures both stores and prints its mix, ratios and verdicts)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "bench_lifecycle.py"


def test_the_quick_benchmark_prints_both_stores_mixes_and_ratios(tmp_path: Path) -> None:
    command = [sys.executable, str(SCRIPT), "--quick", "--slots", "2", "--rounds", "1"]
    command += ["--big-slots", "20", "--dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "fresh store: 1 rounds of 2 lifecycles" in out
    assert "big store (20 slots): 1 rounds of 2 lifecycles" in out
    mixes = re.findall(r"mix per lifecycle \(store\): (\d+) commits .* (\d+) renames", out)
    assert len(mixes) == 2 and all(int(c) > 0 and int(r) == 2 for c, r in mixes), out
    assert len(re.findall(r"mix per lifecycle \(replay, measured", out)) == 2
    assert len(re.findall(r"store  median +[\d.]+ lifecycle/s", out)) == 2
    assert len(re.findall(r"ratio store/replay [\d.]+ \(per round min-max", out)) == 2
    assert re.search(r"fresh ratio [\d.]+, target >= 0\.8: (met|NOT met)", out)
    assert re.search(r"big/fresh [\d.]+, target >= 0\.9: (met|NOT met)", out)
    assert list(tmp_path.iterdir()) == []  # the work directory is removed
