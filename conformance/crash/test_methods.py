"""The image method leaves what the kill method leaves, and checks each distinct copy once.

The image method photographs the store while the scenario's one execution is stopped at a
boundary; the kill method kills a fresh execution there. These tests compare the two copies
point by point (:mod:`runstore.crashsim.equivalence`), show that the comparison sees what
matters in a WAL and nothing else, and that sharing a check between identical photographs
gives each point the finding of an identical copy.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest
from runstore.crashsim import processes
from runstore.crashsim.equivalence import comparable
from runstore.crashsim.equivalence import compare_methods
from runstore.crashsim.equivalence import difference_lines
from runstore.crashsim.equivalence import wal_checksum
from runstore.crashsim.equivalence import wal_content
from runstore.crashsim.images import IMAGE
from runstore.crashsim.points import Point
from runstore.crashsim.points import Selector
from runstore.crashsim.results import SweepResult
from runstore.crashsim.scenarios import SCENARIOS
from runstore.crashsim.suite import default_directory
from runstore.crashsim.suite import sampler
from runstore.crashsim.suite import steps_only
from runstore.crashsim.sweep import run_sweep

from conformance.crash.fresh import fresh


def _wal(tmp_path: Path) -> bytes:
    """A WAL with two committed transactions, left by a process that died holding it."""
    path = str(tmp_path / "db")

    def write() -> int:
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA wal_autocheckpoint=0")
        connection.execute("CREATE TABLE t (x TEXT)")
        connection.execute("INSERT INTO t VALUES ('one')")
        os._exit(0)

    assert processes.run(write) == 0
    return (tmp_path / "db-wal").read_bytes()


def _reseal(data: bytes, salts: bytes, page_size: int = 4096) -> bytes:
    """``data`` with new salts and every checksum recomputed (a WAL SQLite accepts)."""
    order = "<" if struct.unpack(">I", data[:4])[0] == 0x377F0682 else ">"
    header = data[:16] + salts
    s0, s1 = wal_checksum(header, order, 0, 0)
    out = [header, struct.pack(">2I", s0, s1)]
    offset = 32
    while offset + 24 + page_size <= len(data):
        frame = data[offset : offset + 8]
        page = data[offset + 24 : offset + 24 + page_size]
        s0, s1 = wal_checksum(frame + page, order, s0, s1)
        out += [frame, salts, struct.pack(">2I", s0, s1), page]
        offset += 24 + page_size
    return b"".join(out)


def test_a_wal_compares_by_what_sqlite_replays_from_it(tmp_path: Path) -> None:
    data = _wal(tmp_path)
    frames = (len(data) - 32) // (24 + 4096)
    assert frames >= 2
    content = wal_content(data)
    assert len(content) == 16 + frames * (8 + 4096)  # every frame is committed and valid
    # Other salts (another process's random draw), same frames: the same content.
    resalted = _reseal(data, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    assert resalted != data and wal_content(resalted) == content
    # A changed byte of a page, checksums made valid again: another content.
    last_page = len(data) - 100
    changed = bytearray(data)
    changed[last_page] ^= 0xFF
    assert wal_content(_reseal(bytes(changed), data[16:24])) != content
    # The same change without fixing the checksums: SQLite stops at that frame.
    assert len(wal_content(bytes(changed))) < len(content)
    # A frame left by an older WAL generation (other salts) ends the valid prefix.
    stale = _reseal(data, b"\x09" * 8)
    mixed = data[: 32 + 24 + 4096] + stale[32 + 24 + 4096 :]
    first_commits = struct.unpack(">I", data[36:40])[0] != 0
    assert len(wal_content(mixed)) == 16 + (8 + 4096 if first_commits else 0)
    # A missing last frame drops the transaction it committed.
    assert wal_content(data[: 32 + (frames - 1) * (24 + 4096)]) != content


def test_the_comparison_sees_every_other_file_whole(tmp_path: Path) -> None:
    tree = [
        ("run.sqlite3", "f", 0o644, b"db"),
        ("run.sqlite3-shm", "f", 0o644, b"index"),
        ("artifacts", "d", 0o755, b""),
    ]
    same_shm_aside = [*tree[:1], ("run.sqlite3-shm", "f", 0o644, b"other index"), tree[2]]
    assert comparable(same_shm_aside) == comparable(tree)
    for changed in (
        [("run.sqlite3", "f", 0o644, b"dB"), *tree[1:]],
        [("run.sqlite3", "f", 0o600, b"db"), *tree[1:]],
        [*tree[:2], ("artifacts", "d", 0o700, b"")],
        tree[:2],
    ):
        assert comparable(changed) != comparable(tree)


def compare(name: str, points: str) -> SweepResult:
    """Both methods at ``points`` ("steps": every step boundary; "sample": the subset's
    sample; "landmarks": the sample with every landmark) of scenario ``name``."""
    select: Selector[int] = (
        steps_only if points == "steps" else sampler(0, name, landmarks=points == "landmarks")
    )
    return compare_methods(SCENARIOS[name], select, directory=default_directory())


@pytest.mark.parametrize(
    ("name", "points"),
    [
        ("commit_accepted", "steps"),
        ("reopen", "sample"),
        ("publish_finalization_accepted", "landmarks"),
        ("recover_stage_quarantine", "landmarks"),
    ],
)
def test_a_photograph_is_what_a_killed_process_leaves(name: str, points: str) -> None:
    comparison = fresh("conformance.crash.test_methods:compare", name=name, points=points)
    assert difference_lines(comparison) == [] and comparison.failed == 0
    assert comparison.checked == len(comparison.results) >= 20
    assert comparison.images >= 2  # the points leave different stores: not vacuous


def test_points_with_identical_photographs_share_one_check() -> None:
    seen: list[Point] = []

    def every_step(points: Sequence[Point]) -> list[int]:
        seen.extend(points)
        return steps_only(points)

    result = run_sweep(
        SCENARIOS["commit_accepted"], every_step, method=IMAGE, directory=default_directory()
    )
    assert result.problem is None and not result.failures and not result.mismatches
    step = [p for p in seen if p.op_index == 1]
    assert result.checked == len(step)
    # One COMMIT: the store is as before it until it completes, then as after it.
    assert result.images == 2
    checked = {r.k: r for r in result.results}
    for crash in result.results:
        assert crash.image is not None
        first = checked[crash.image]
        assert first.image == first.k and first.status == crash.status
        assert first.acceptable == crash.acceptable
    commit = next(p.k for p in step if p.entry[2:] == ["after", "sql", "COMMIT"])
    assert {r.image for r in result.results if r.k < commit} == {step[0].k}
    assert {r.image for r in result.results if r.k >= commit} == {commit}
