"""How far the power-loss and I/O-fault campaigns reach: every boundary of recovery and of
creating a store (its root, the probe directory, an export directory), and the teeth that
show each of their syncs and renames is observed (tools/powerloss_teeth.py).

The persistence model's rules these campaigns rest on are pinned here first: a rename
between two directories can lose its new entry while its removal persists, a dead
process's unsynced fixture files are not durable, and a root's own entry is durable only
once its parent is synced.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import powerloss_teeth
import pytest
from runstore.crashsim.exporting import EXPORT
from runstore.crashsim.iofaults import ALWAYS_FAULTED
from runstore.crashsim.iofaults import run_io_faults
from runstore.crashsim.persistence import Disk
from runstore.crashsim.photographs import STORE
from runstore.crashsim.photographs import Node
from runstore.crashsim.photographs import Photo
from runstore.crashsim.photographs import photograph_parent
from runstore.crashsim.powerloss_suite import DEFAULT
from runstore.crashsim.powerloss_suite import RECOVERY
from runstore.crashsim.scenarios import INIT_ROOT
from runstore.crashsim.scenarios import RECOVERIES
from runstore.crashsim.scenarios import SCENARIOS

from conformance.crash.fresh import fresh
from conformance.crash.test_powerloss import photo
from conformance.crash.test_powerloss import states

ROOT = Path(__file__).resolve().parents[2]


# --- the model ------------------------------------------------------------------------------


def test_a_rename_synced_only_at_the_source_may_lose_the_entry_under_both_names() -> None:
    """SPEC 14.11: each directory's entries persist only once that directory is synced, so
    a rename between two directories whose source alone was synced may leave neither name
    (the removal persists, the new entry does not): the model keeps no rename whole."""
    start = photo(src=(2, None), src__x=(4, b"x"), dst=(3, None))
    disk = Disk(start, {})
    moved = photo(src=(2, None), dst=(3, None), dst__x=(4, b"x"))
    disk.observe(moved, [["rename", "$ROOT/src/x", "$ROOT/dst/x"], ["fsync_dir", "$ROOT/src"]])
    found = states(disk)
    assert {"src": None, "dst": None} in found
    assert {"src": None, "dst": None, "dst/x": b"x"} in found
    assert all("src/x" not in state for state in found)


def test_a_rename_within_one_directory_is_two_entries_each_reverting_alone() -> None:
    disk = Disk(photo(a=(2, b"x")), {})
    disk.observe(photo(b=(2, b"x")), [["rename", "$ROOT/a", "$ROOT/b"]])
    found = states(disk)
    assert {"a": b"x"} in found and {"b": b"x"} in found
    assert {} in found and {"a": b"x", "b": b"x"} in found


def test_unsynced_fixture_paths_are_not_durable_with_everything_beneath_them() -> None:
    """A dead publisher's object that it never synced (``Scenario.unsynced``): its entry,
    its files' bytes and its directories' entries may all be lost; the rest of the fixture
    is durable."""
    start = photo(kept=(2, b"k"), obj=(3, None), obj__f=(4, b"data"))
    disk = Disk(start, {}, ("obj",))
    found = states(disk)
    assert all(state["kept"] == b"k" for state in found)
    assert {"kept": b"k"} in found
    assert {"kept": b"k", "obj": None} in found
    assert {"kept": b"k", "obj": None, "obj/f": b"da"} in found
    disk.observe(start, [["fsync", "$ROOT/obj/f"], ["fsync_dir", "$ROOT/obj"]])
    disk.observe(start, [["fsync_dir", "$ROOT"]])
    assert states(disk) == [{"kept": b"k", "obj": None, "obj/f": b"data"}]


def test_a_capped_cut_keeps_the_extremes_first() -> None:
    names = {f"f{i}": (10 + i, b"x" * 8) for i in range(5)}
    disk = Disk(photo(), {})
    disk.observe(photo(**names), [["fsync_dir", "$ROOT"]])
    cut = disk.cut()
    chosen = cut.choices(limit=100, seed=3, cap=3)
    assert chosen == cut.choices(limit=100, seed=3, cap=3)
    assert chosen[:2] == [(0,) * 5, (2,) * 5] and len(chosen) == 3
    assert sum(1 for option in chosen[2] if option) == 1  # one item undone alone


def _parent(root: tuple[int, ...] | None, export: bool = False) -> Photo:
    """A photograph of a root's parent (inode 1) holding the store root (inode 2, with
    ``run.sqlite3``) when ``root`` is given, and ``store.export`` (inode 5) when asked."""
    found: Photo = {"": Node(1, "d", 0o755)}
    if root is not None:
        found[STORE] = Node(2, "d", 0o700)
        found[f"{STORE}/run.sqlite3"] = Node(3, "f", 0o600)
    if export:
        found[f"{STORE}.export"] = Node(5, "d", 0o755)
        found[f"{STORE}.export/a.csv"] = Node(6, "f", 0o644, b"a,b\n")
    return found


def test_a_new_root_is_durable_only_once_its_parent_is_synced() -> None:
    """``--init`` (SPEC 8; 14.11): a root made in the run, and so the whole store in it,
    may vanish at a cut until its parent's sync."""
    database = {"run.sqlite3": b"db"}
    disk = Disk(_parent(None), {}, store=STORE)
    disk.observe(_parent(()), [["mkdir", "$ROOT"]], database, safe=True)
    trees = [{path for path, *_ in disk.cut().materialize(c)} for c in disk.cut().choices(9, 0)]
    assert set() in trees and {STORE, f"{STORE}/run.sqlite3"} in trees
    disk.observe(_parent(()), [["fsync_dir", "$PARENT"]], database, safe=True)
    trees = [{path for path, *_ in disk.cut().materialize(c)} for c in disk.cut().choices(9, 0)]
    assert set() not in trees and {STORE} in trees  # its own entries: not yet synced
    disk.observe(_parent(()), [["fsync_dir", "$ROOT"]], database, safe=True)
    (tree,) = [disk.cut().materialize(c) for c in disk.cut().choices(9, 0)]
    assert [path for path, *_ in tree] == [STORE, f"{STORE}/run.sqlite3"]


def test_an_export_directory_beside_the_root_is_photographed_and_modelled(
    tmp_path: Path,
) -> None:
    root = tmp_path / "live"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "live.export").mkdir()
    (tmp_path / "live.export" / "a.csv").write_bytes(b"a,b\n")
    taken = photograph_parent(str(root))
    assert sorted(taken) == ["", STORE, f"{STORE}.export", f"{STORE}.export/a.csv"]
    disk = Disk(_parent((), export=False), {}, store=STORE)
    synced = [["fsync", "$ROOT.export/a.csv"], ["fsync_dir", "$ROOT.export"]]
    disk.observe(_parent((), export=True), synced)
    found = [{path for path, *_ in disk.cut().materialize(c)} for c in disk.cut().choices(9, 0)]
    assert {STORE, f"{STORE}/run.sqlite3"} in found  # the directory's own entry: not synced
    disk.observe(_parent((), export=True), [["fsync_dir", "$PARENT"]])
    assert disk.cut().items == ()


# --- the catalog and the default runs ---------------------------------------------------------


def test_the_default_power_loss_run_takes_every_recovery_and_creation_scenario() -> None:
    assert set(RECOVERY) == {scenario.name for scenario in RECOVERIES}
    assert set(RECOVERY) <= set(DEFAULT)
    assert {"recover_unpublished", "recover_second_pass"} <= set(RECOVERY)
    assert SCENARIOS[INIT_ROOT].creates_root and SCENARIOS[INIT_ROOT].parent
    assert SCENARIOS[EXPORT].parent
    assert {INIT_ROOT, EXPORT} <= set(DEFAULT)


def test_the_creation_and_export_sweeps_pass_and_cut_where_directories_are_made() -> None:
    suite = fresh(
        "runstore.crashsim.powerloss_suite:run_powerloss_suite", names=[INIT_ROOT, EXPORT]
    )
    for sweep in suite.sweeps:
        assert sweep.problem is None and not sweep.mismatches, sweep.problem
        assert sweep.failures == [], sweep.failures[:3]
    undone = {what for sweep in suite.sweeps for r in sweep.results for what in r.undone or ()}
    assert f"entry {STORE}" in undone  # the new root lost with everything in it
    assert any(what.startswith(f"entry {STORE}.export/.") for what in undone)  # temporaries


def test_the_io_fault_subset_fails_every_sync_and_rename_of_recovery_and_creation() -> None:
    names = [INIT_ROOT, EXPORT, "recover_stage_quarantine", "recover_accepted_import"]
    suite = fresh("runstore.crashsim.iofaults:run_io_faults", names=names, seed=0)
    assert suite.failures == 0, [r for s in suite.sweeps for r in s.failures][:3]
    found = {r.boundary.split(": ", 1)[1] for sweep in suite.sweeps for r in sweep.results}
    for errno_name in ("EIO", "ENOSPC"):
        assert f"mkdir $ROOT [{errno_name}]" in found
        assert f"mkdir $ROOT.export [{errno_name}]" in found
        assert f"fsync_dir $ROOT.export [{errno_name}]" in found
        assert f"fsync_dir $ROOT/artifacts/.quarantine [{errno_name}]" in found
        assert f"create_directory $ROOT/artifacts/.quarantine [{errno_name}]" in found
        assert any(
            b.startswith("rename_noreplace $ROOT/artifacts/.staging-")
            and b.endswith(f"[{errno_name}]")
            for b in found
        )
    assert "rename_noreplace" in ALWAYS_FAULTED


@pytest.mark.exhaustive
def test_every_recovery_and_creation_scenario_passes_every_cut() -> None:
    names = [*RECOVERY, INIT_ROOT, EXPORT]
    suite = fresh(
        "runstore.crashsim.powerloss_suite:run_powerloss_suite", names=names, exhaustive=True
    )
    assert suite.failures == 0, [r for s in suite.sweeps for r in s.failures][:3]


@pytest.mark.exhaustive
def test_the_io_faults_of_recovery_and_creation_pass_everywhere() -> None:
    suite = run_io_faults([*RECOVERY, INIT_ROOT, EXPORT], exhaustive=True)
    assert suite.failures == 0, [r for s in suite.sweeps for r in s.failures][:3]


# --- teeth --------------------------------------------------------------------------------------


def test_every_teeth_mutation_still_applies() -> None:
    """Each mutation's text occurs exactly once in its file (a stale one would prove
    nothing); the list names every sync and rename of recovery and of creating a store."""
    completed = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "powerloss_teeth.py"), "--stale"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stdout
    names = set(powerloss_teeth.NAMES)
    assert {
        "recovery-import-object-sync",
        "recovery-import-artifacts-sync",
        "recovery-orphan-object-sync",
        "recovery-orphan-artifacts-sync",
        "recovery-failure-rename-sync",
        "recovery-failure-rename",
        "quarantine-creation-sync",
        "quarantine-rename",
        "quarantine-destination-sync",
        "quarantine-source-sync",
        "root-parent-sync",
        "export-directory-parent-sync",
        "export-file-fsync",
        "export-directory-sync",
    } <= names
    scenarios = {mutation.scenario for mutation in powerloss_teeth.MUTATIONS}
    assert scenarios <= set(SCENARIOS)


def _teeth(name: str) -> tuple[int, str]:
    command = [sys.executable, str(ROOT / "tools" / "powerloss_teeth.py"), "--only", name]
    completed = subprocess.run(
        command, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=ROOT
    )
    return completed.returncode, completed.stdout + completed.stderr


def test_teeth_a_quarantine_without_its_destination_sync() -> None:
    """The pass returned with the stage renamed into ``.quarantine/`` and ``artifacts/``
    synced, but not ``.quarantine/``: a cut loses the stage under both names."""
    status, output = _teeth("quarantine-destination-sync")
    assert status == 0, output
    assert "caught quarantine-destination-sync" in output
    assert "lost acknowledged result: the quarantined stage artifacts/.staging-" in output


def test_teeth_an_imported_orphan_without_the_sync_of_artifacts() -> None:
    status, output = _teeth("recovery-orphan-artifacts-sync")
    assert status == 0, output
    assert "caught recovery-orphan-artifacts-sync" in output
    assert "undone: entry artifacts/dataset-" in output


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", powerloss_teeth.NAMES)
def test_teeth_each_sync_and_rename(name: str) -> None:
    """Each dropped sync or rename is caught (a lost acknowledged or committed result,
    shrunk); each one SPEC 14.11 argues redundant passes with it dropped."""
    status, output = _teeth(name)
    assert status == 0, output
