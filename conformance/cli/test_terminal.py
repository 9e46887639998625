"""``status`` and ``compare`` on a real 80-column terminal (SPEC.md sections 15.7 and 17.5):
the installed command runs in a pseudo-terminal of 80 x 50, and what it draws must fit, with
no word broken across two lines (a folded header such as ``interru`` / ``pted`` or a note
cut as ``thresh`` / ``old`` is what people saw before).

The store holds long candidate names and metrics noisy enough to be unstable, so the notes
under the tables are longer than a line.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from conformance.cli.world import RUNSTORE
from conformance.cli.world import runstore

COLUMNS = 80
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LONG = "a-candidate-with-a-rather-long-name"

WORKER = """\
import json, os, random
candidate = os.environ["RUNSTORE_CANDIDATE"]
repetition = int(os.environ["RUNSTORE_REPETITION"])
scale = 1.0 if candidate == "base" else 2.0
noise = random.Random(f"{candidate}/{repetition}").uniform(0.5, 1.5)
metrics = {"time_s": scale * noise, "throughput_mb_s": 100 * noise / scale}
with open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json"), "w") as out:
    json.dump({"metrics": metrics}, out)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("terminal")
    (root / "w.py").write_text(WORKER)
    lines = ["[campaign]", 'name = "wide"', "repetitions = 5", "[metrics]"]
    lines += ['time_s = { direction = "lower", unit = "s", threshold = 0.01 }']
    lines += ['throughput_mb_s = { direction = "higher", unit = "MB/s", threshold = 0.01 }']
    for name in ("base", LONG):
        lines += ["[[candidates]]", f'name = "{name}"', 'command = ["{python}", "w.py"]']
        lines += ['files = ["w.py"]']
    lines += ["[[problems]]", 'name = "p"', "grid = { size = [1, 2] }"]
    (root / "campaign.toml").write_text("\n".join(lines) + "\n")
    target = root / "store"
    done = runstore("run", str(root / "campaign.toml"), "--store", str(target), "--init", "-j", "2")
    assert done.returncode == 0, done.stderr
    return target


def on_terminal(*arguments: str) -> list[str]:
    """The lines ``runstore ARGUMENTS`` draws on an 80 x 50 pseudo-terminal, escapes removed."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen(
        [RUNSTORE, *arguments],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**environment, "TERM": "xterm"},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the follower side was closed by the exiting process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=60) == 0
    text = ANSI.sub("", b"".join(chunks).decode("utf-8"))
    return text.replace("\r\n", "\n").split("\n")


def words_whole(lines: list[str], words: list[str]) -> None:
    """Every line fits the terminal, and each of ``words`` appears unbroken."""
    for line in lines:
        assert len(line.rstrip()) <= COLUMNS, line
    joined = "\n".join(lines)
    for word in words:
        assert word in joined, (word, joined)


def test_status_fits_eighty_columns_with_no_broken_word(store: Path) -> None:
    lines = on_terminal("status", "--store", str(store))
    words_whole(lines, ["candidate", "accepted", "failed", "interrupted", "superseded", LONG])
    joined = "\n".join(lines)
    # A state no slot is in has no column in the per-candidate table (the total shows all).
    by_candidate = joined.split("by candidate", 1)[1].split("by problem", 1)[0]
    assert "accepted" in by_candidate and "failed" in by_candidate
    assert "pending" not in by_candidate and "interrupted" not in by_candidate
    total = joined.split("total", 1)[1]
    assert all(state in total for state in ("pending", "interrupted", "superseded"))
    notes = [line for line in lines if line.startswith("! ")]
    assert notes, joined  # the threshold of 1% makes every noisy metric unstable
    for index, line in enumerate(lines):
        if line.startswith("! ") and index + 1 < len(lines) and lines[index + 1].startswith("  "):
            break
    else:
        pytest.fail("no note was long enough to wrap: the test does not test wrapping")
    assert "exceeds the 1% threshold" in joined


def test_compare_fits_eighty_columns_with_no_broken_word(store: Path) -> None:
    lines = on_terminal("compare", "--store", str(store), "--baseline", "base")
    words_whole(lines, ["Mann-Whitney", "Hodges-Lehmann", "baseline", "higher is better"])
