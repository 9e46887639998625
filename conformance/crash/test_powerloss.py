"""The power-loss simulator: the persistence model (what a power cut may leave), the
default sweeps pass, and the method has teeth (tools/powerloss_teeth.py: each dropped
sync is reported as a lost acknowledged result, with the shrunk operations).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from runstore import durable
from runstore.crashsim.__main__ import main
from runstore.crashsim.persistence import Disk
from runstore.crashsim.photographs import Node
from runstore.crashsim.photographs import Photo
from runstore.crashsim.photographs import photograph
from runstore.crashsim.powerloss import effects_of
from runstore.crashsim.powerloss import safe_points
from runstore.crashsim.powerloss_suite import DEFAULT
from runstore.crashsim.tracer import Tracer
from runstore.crashsim.tracer import effect_stop
from runstore.crashsim.tracer import read_trace

from conformance.crash.fresh import fresh

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"^faults=powerloss scenarios=\d+ cuts=\d+ states=\d+ sampled=\d+ failures=\d+ "
    r"seconds=[\d.]+$"
)


def photo(**entries: tuple[int, bytes | None]) -> Photo:
    """A photograph: ``name=(inode, bytes)`` for a file, ``(inode, None)`` for a directory;
    ``__`` in a name stands for ``/``. The root is inode 1."""
    found: Photo = {"": Node(1, "d", 0o700)}
    for name, (ino, data) in entries.items():
        path = name.replace("__", "/")
        found[path] = Node(ino, "d", 0o700) if data is None else Node(ino, "f", 0o600, data)
    return found


def states(disk: Disk) -> list[dict[str, bytes | None]]:
    """Every state of the current cut, each as path -> bytes (None for a directory)."""
    cut = disk.cut()
    found = []
    for choice in cut.choices(limit=10_000, seed=0):
        tree = cut.materialize(choice)
        found.append({path: (None if kind == "d" else data) for path, kind, _, data in tree})
    return found


def test_a_synced_file_in_a_synced_directory_survives() -> None:
    disk = Disk(photo(), {})
    disk.observe(photo(a=(2, b"data")), [])
    disk.observe(photo(a=(2, b"data")), [["fsync", "$ROOT/a"], ["fsync_dir", "$ROOT"]])
    assert states(disk) == [{"a": b"data"}]


def test_unsynced_data_may_be_lost_or_half_present() -> None:
    disk = Disk(photo(), {})
    disk.observe(photo(a=(2, b"data")), [["fsync_dir", "$ROOT"]])
    assert sorted(s["a"] or b"" for s in states(disk)) == [b"", b"da", b"data"]


def test_an_unsynced_file_loses_its_bytes_but_not_its_mode() -> None:
    disk = Disk(photo(), {})
    created = {"": Node(1, "d", 0o700), "a": Node(2, "f", 0o644, b"data")}
    disk.observe(created, [["fsync_dir", "$ROOT"]])
    (item,) = disk.cut().items
    assert [(v.mode, v.data) for v in item.options] == [
        (0o644, b"data"),
        (0o644, b""),
        (0o644, b"da"),
    ]
    disk.observe({**created, "a": Node(2, "f", 0o644, b"")}, [])
    assert disk.cut().items == ()  # emptied again: nothing a cut could change


def test_an_unsynced_entry_may_vanish_and_a_synced_one_not() -> None:
    disk = Disk(photo(kept=(2, b"k")), {})
    disk.observe(photo(kept=(2, b"k"), new=(3, None)), [])
    found = states(disk)
    assert {"kept": b"k", "new": None} in found
    assert {"kept": b"k"} in found
    assert all("kept" in state for state in found)


def test_a_removed_entry_may_come_back_with_its_durable_contents() -> None:
    disk = Disk(photo(d=(2, None), d__f=(3, b"old")), {})
    disk.observe(photo(d=(2, None), d__f=(3, b"new")), [])
    disk.observe(photo(d=(2, None)), [])  # removed, and d not synced since
    found = states(disk)
    assert {"d": None} in found
    assert {"d": None, "d/f": b"old"} in found
    assert {"d": None, "d/f": b"new"} in found


def test_a_rename_synced_only_at_the_destination_may_leave_both_names() -> None:
    start = photo(src=(2, None), src__x=(4, b"x"), dst=(3, None))
    disk = Disk(start, {})
    moved = photo(src=(2, None), dst=(3, None), dst__x=(4, b"x"))
    disk.observe(moved, [["rename", "$ROOT/src/x", "$ROOT/dst/x"], ["fsync_dir", "$ROOT/dst"]])
    found = states(disk)
    assert {"src": None, "dst": None, "dst/x": b"x"} in found
    assert {"src": None, "src/x": b"x", "dst": None, "dst/x": b"x"} in found
    assert all("dst/x" in state for state in found)


def test_a_reused_inode_is_a_new_file_whose_durable_bytes_are_not_carried() -> None:
    disk = Disk(photo(a=(2, b"synced")), {})
    disk.observe(photo(), [["fsync_dir", "$ROOT"]])
    disk.observe(photo(b=(2, b"fresh")), [["fsync_dir", "$ROOT"]])
    assert sorted(s["b"] or b"" for s in states(disk)) == [b"", b"fr", b"fresh"]


def test_the_database_is_the_last_safe_commit_or_the_current_files() -> None:
    base = photo(**{"run.sqlite3": (2, b"")})
    disk = Disk(base, {"run.sqlite3": b"v1"})
    disk.observe(base, [], {"run.sqlite3": b"v1", "run.sqlite3-wal": b"w2"}, safe=True)
    disk.observe(base, [], {"run.sqlite3": b"v1", "run.sqlite3-wal": b"w3"})
    found = states(disk)
    assert len(found) == 2
    assert {s["run.sqlite3-wal"] for s in found} == {b"w2", b"w3"}


def test_a_database_whose_entry_is_lost_takes_its_sidecars_with_it() -> None:
    disk = Disk(photo(), {})
    created = photo(**{"run.sqlite3": (2, b""), "run.sqlite3-wal": (3, b"")})
    files = {"run.sqlite3": b"db", "run.sqlite3-wal": b"wal"}
    disk.observe(created, [["fsync", "$ROOT/run.sqlite3"]], files, safe=True)
    found = states(disk)
    assert {} in found
    assert {"run.sqlite3": b"db", "run.sqlite3-wal": b"wal"} in found
    with pytest.raises(ValueError, match="safe point"):
        disk.observe(created, [], None, safe=True)


def test_a_probe_directory_is_found_by_its_normalized_name() -> None:
    disk = Disk(photo(), {})
    probe = photo(**{".run-store-probe-0a1b": (2, None), ".run-store-probe-0a1b__f": (3, b"")})
    disk.observe(probe, [["fsync_dir", "$ROOT/.run-store-probe-*"], ["fsync_dir", "$ROOT"]])
    assert states(disk) == [{".run-store-probe-0a1b": None, ".run-store-probe-0a1b/f": b""}]
    assert disk.cut().items == ()


def test_a_probe_directorys_contents_are_one_item_all_kept_or_all_undone() -> None:
    disk = Disk(photo(), {})
    names = {".run-store-probe-0a1b": (2, None)}
    names |= {".run-store-probe-0a1b__a": (3, b"aa"), ".run-store-probe-0a1b__b": (4, b"bb")}
    disk.observe(photo(**names), [["fsync_dir", "$ROOT"]])
    (group,) = disk.cut().items
    assert group.kind == "group" and len(group.members) == 4
    probe = ".run-store-probe-0a1b"
    assert states(disk) == [{probe: None, f"{probe}/a": b"aa", f"{probe}/b": b"bb"}, {probe: None}]


def test_a_symbolic_link_is_photographed_and_its_target_never_undone(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"data")
    (tmp_path / "link").symlink_to("data.bin")
    start = photograph(str(tmp_path))
    assert start["link"].kind == "l" and start["link"].data == b"data.bin"
    disk = Disk(start, {})
    (tmp_path / "other").symlink_to("missing")
    disk.observe(photograph(str(tmp_path)), [])
    cut = disk.cut()
    assert [item.what for item in cut.items] == ["entry other"]
    trees = [cut.materialize(choice) for choice in cut.choices(limit=10, seed=0)]
    assert [("other", "l", 0o777, b"missing") in tree for tree in trees] == [True, False]
    assert all(("link", "l", 0o777, b"data.bin") in tree for tree in trees)


def test_sampling_keeps_the_extremes_and_every_single_undo() -> None:
    names = {f"f{i}": (10 + i, b"x" * 8) for i in range(8)}
    disk = Disk(photo(), {})
    disk.observe(photo(**names), [["fsync_dir", "$ROOT"]])
    cut = disk.cut()
    assert cut.count() == 3**8
    chosen = cut.choices(limit=40, seed=1)
    assert chosen == cut.choices(limit=40, seed=1)
    assert len(chosen) == len(set(chosen)) >= 40
    assert (0,) * 8 in chosen and (2,) * 8 in chosen
    for index in range(8):
        for option in (1, 2):
            single = tuple(option if i == index else 0 for i in range(8))
            assert single in chosen


def test_safe_points_and_effects_follow_the_trace() -> None:
    trace: list[list[object]] = [
        ["b", 0, "before", "sql", "BEGIN IMMEDIATE"],
        ["b", 1, "after", "sql", "BEGIN IMMEDIATE"],
        ["b", 2, "after", "sql", "INSERT INTO t VALUES (1)"],
        ["b", 3, "after", "sql", "COMMIT"],
        ["p", "fsync_dir", "$ROOT"],
        ["b", 4, "after", "fs", "fsync_dir $ROOT"],
        ["b", 5, "after", "sql", "SELECT 1"],
        ["b", 6, "after", "sql", "PRAGMA journal_mode = WAL"],
        ["p", "rename", "$ROOT/a", "$ROOT/b"],
    ]
    assert safe_points(trace) == {3, 6}
    assert effects_of(trace) == [(3, ["fsync_dir", "$ROOT"]), (6, ["rename", "$ROOT/a", "$ROOT/b"])]


def test_a_stop_can_fall_between_two_effects_of_one_operation(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "stage").mkdir(parents=True)
    for name in ("a", "b"):
        (root / "stage" / name).write_bytes(b"x")
    seen: list[tuple[int, list[str]]] = []

    def pause(stop: int) -> None:
        stage = root / "stage"
        seen.append((stop, sorted(os.listdir(stage)) if stage.exists() else ["(gone)"]))

    trace = tmp_path / "trace"
    fd = os.open(trace, os.O_WRONLY | os.O_CREAT, 0o600)
    stops = {effect_stop(n) for n in range(4)}
    try:
        with Tracer(fd, str(root), pause=pause, pause_at=stops, persistence=True):
            durable.remove_tree(str(root / "stage"))
    finally:
        os.close(fd)
    assert [stop for stop, _ in seen] == [-1, -2, -3, -4]
    assert len(seen[0][1]) == 1 and seen[0][1][0] in ("a", "b")  # one file unlinked so far
    assert [listing for _, listing in seen[1:]] == [[], ["(gone)"], ["(gone)"]]
    effects = [entry for entry in read_trace(str(trace)) if entry[0] == "p"]
    assert [entry[1] for entry in effects] == ["unlink", "unlink", "rmdir", "fsync_dir"]
    assert effects[-1] == ["p", "fsync_dir", "$ROOT"]


def test_the_default_sweeps_pass() -> None:
    suite = fresh("runstore.crashsim.powerloss_suite:run_powerloss_suite")
    assert [sweep.scenario for sweep in suite.sweeps] == list(DEFAULT)
    for sweep in suite.sweeps:
        assert sweep.problem is None, sweep.problem
        assert not sweep.mismatches, sweep.mismatches
        assert sweep.failures == [], sweep.failures[:3]
        assert sweep.checked == len(sweep.results) > 1 and sweep.cuts > 1
    assert SUMMARY.match(suite.summary())


def test_the_command_runs_one_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--faults", "powerloss", "--scenario", "init_register"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("init_register: ")
    assert SUMMARY.match(lines[-1]) and " failures=0 " in lines[-1]


def _teeth(*names: str) -> str:
    command = [sys.executable, str(ROOT / "tools" / "powerloss_teeth.py")]
    for name in names:
        command += ["--only", name]
    completed = subprocess.run(
        command, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=ROOT
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_teeth_an_unsynced_root_after_creating_the_database() -> None:
    output = _teeth("root-sync-after-database")
    assert "caught root-sync-after-database" in output
    assert "undone: entry run.sqlite3" in output
    assert (
        "lost acknowledged result: the store went back to before step 1 (register_one_shot)"
        in output
    )
    creation = output.index("create $ROOT/run.sqlite3")
    assert "fsync_dir $ROOT\n" not in output[creation:]


def test_teeth_a_publication_rename_without_its_directory_sync() -> None:
    output = _teeth("publication-rename-sync")
    assert "caught publication-rename-sync" in output
    assert re.search(r"undone: entry artifacts/dataset-[0-9a-f]{64}\n", output)
    assert "lost acknowledged result: the artifact artifacts/dataset-" in output
    renamed = output.index("rename $ROOT/artifacts/.staging-")
    assert "fsync_dir $ROOT/artifacts\n" not in output[renamed:]


def test_teeth_object_files_not_synced_before_the_manifest() -> None:
    output = _teeth("object-file-fsync")
    assert "caught object-file-fsync" in output
    assert re.search(r"undone: data of artifacts/dataset-[0-9a-f]{64}/\S+", output)
    assert "lost acknowledged result: the artifact artifacts/dataset-" in output


def test_the_teeth_sweep_passes_on_an_unmutated_copy() -> None:
    import powerloss_teeth

    with tempfile.TemporaryDirectory() as base:
        powerloss_teeth.scratch_package(Path(base), None)
        status, output = powerloss_teeth.run_powerloss(Path(base), "init_register")
    assert status == 0, output
    assert not powerloss_teeth.caught(status, output)
