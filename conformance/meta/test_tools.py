"""Every command under tools/ loads and shows its help: a tool no test runs (a benchmark,
the soak, the mutation drivers) still fails here when a module it reaches into moves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
COMMANDS = sorted(
    path.name
    for path in TOOLS.iterdir()
    if path.is_file()
    and (path.suffix == ".py" or path.read_bytes().startswith(b"#!/usr/bin/env python"))
    and b'if __name__ == "__main__":' in path.read_bytes()
)


def test_the_commands_are_found() -> None:
    assert {"regen", "nightly", "bench_recover.py", "writer_mutations.py"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_shows_its_help(command: str) -> None:
    done = subprocess.run(
        [sys.executable, str(TOOLS / command), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower(), done.stdout[:500]
