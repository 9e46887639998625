"""What the capability probes of SPEC section 8 (steps 2 and 3) do to the store root's
files: the fresh probe directory's name, the modes of what the probes make, exclusive
creation of each file a probe writes, which entries clearing stale probe directories
removes, and the no-replace rename probe's "both trees unchanged" byte for byte.

Rules of this file: every test goes through ``RunStore.open`` on a real root; fakes go in
at the ``runstore.durable`` seam as probes.py calls it, and only watch or add to what the
real call does, except where a test's name says it fakes a broken kernel.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from runstore import RunStore
from runstore import durable
from runstore.errors import CapabilityProbeError
from runstore.store.probes import PROBE_PREFIX


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


def probe_dirs(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root) if name.startswith(PROBE_PREFIX))


def open_and_close(root: Path) -> None:
    with RunStore.open(root) as store:
        assert store.database_path == str(root / "run.sqlite3")


def after_probe_mkdir(monkeypatch: pytest.MonkeyPatch, then: Callable[[str], None]) -> list[str]:
    """Wrap ``durable.mkdir``: call ``then(path)`` after each probe directory is made.
    Returns the list of probe directories made."""
    real = durable.mkdir
    made: list[str] = []

    def mkdir(path: str, mode: int = 0o700) -> None:
        real(path, mode)
        if os.path.basename(path).startswith(PROBE_PREFIX):
            made.append(path)
            then(path)

    monkeypatch.setattr(durable, "mkdir", mkdir)
    return made


# --- the probe directory's name -------------------------------------------------------------


def test_each_open_probes_in_a_fresh_directory_named_prefix_and_16_hex(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 8 step 3: the probes run in a fresh ``.run-store-probe-<16 hex>`` directory of
    the root (16 lowercase hexadecimal digits), a new one for each open, removed after."""
    made = after_probe_mkdir(monkeypatch, lambda path: None)
    open_and_close(root)
    open_and_close(root)
    assert len(made) == 2 and made[0] != made[1], made
    for path in made:
        assert os.path.dirname(path) == str(root)
        assert re.fullmatch(r"\.run-store-probe-[0-9a-f]{16}", os.path.basename(path)), path
    assert probe_dirs(root) == []


# --- modes -----------------------------------------------------------------------------------


def test_the_probes_make_directories_0700_and_write_files_0600(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 8 step 3: the probe directory and the directories the probes make in it have
    mode 0700, and the files the probes write have mode 0600 (as ``run.sqlite3``, SPEC 8
    "Files"). Seen under umask 0, so the requested mode is the mode, while the rename probe
    runs (every file and directory of the lock, fsync and rename probes exists then)."""
    modes: dict[str, int] = {}
    real = durable.rename_noreplace

    def rename_noreplace(source: str, destination: str) -> None:
        directory = os.path.dirname(source)
        if not modes:
            modes["."] = stat.S_IMODE(os.lstat(directory).st_mode)
            for parent, names, files in os.walk(directory):
                for name in names + files:
                    path = os.path.join(parent, name)
                    modes[os.path.relpath(path, directory)] = stat.S_IMODE(os.lstat(path).st_mode)
        real(source, destination)

    monkeypatch.setattr(durable, "rename_noreplace", rename_noreplace)
    umask = os.umask(0)
    try:
        open_and_close(root)
    finally:
        os.umask(umask)
    directories = [".", "rename-source", "rename-populated", "rename-empty"]
    files = ["flock", "posix-lock", "fsync", "rename-source/payload", "rename-populated/resident"]
    assert modes == {
        **{name: 0o700 for name in directories},
        **{name: 0o600 for name in files},
    }


# --- exclusive creation ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["flock", "posix-lock", "fsync"])
def test_a_probe_never_writes_through_a_name_it_did_not_create(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """SPEC 8 step 3: each file a probe writes is created exclusively. A name already taken
    in the probe directory, here by a link another process planted to a file outside,
    fails the probe (capability_probe_failed) and nothing is written through the link;
    the next open clears the directory (removing the link, not its target) and opens."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"the user's file\n")
    after_probe_mkdir(monkeypatch, lambda path: os.symlink(victim, os.path.join(path, name)))
    with pytest.raises(CapabilityProbeError) as caught:
        RunStore.open(root)
    assert caught.value.code == "capability_probe_failed"
    assert f"[Errno {errno.EEXIST}]" in caught.value.message
    assert victim.read_bytes() == b"the user's file\n"
    monkeypatch.undo()
    open_and_close(root)
    assert probe_dirs(root) == []
    assert victim.read_bytes() == b"the user's file\n"


# --- clearing stale probe directories ---------------------------------------------------------


def test_clearing_removes_only_real_probe_directories(root: Path, tmp_path: Path) -> None:
    """SPEC 8 step 2: probe directories left by interrupted opens are removed first; only
    real directories named ``.run-store-probe-*`` are. Everything else in the root is left
    as it is: the user's own directories, and a file or a symbolic link of a probe
    directory's name (the link is not followed: its target keeps its files)."""
    open_and_close(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"kept\n")
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_bytes(b"todo\n")
    (root / (PROBE_PREFIX + "file")).write_bytes(b"not a directory\n")
    (root / (PROBE_PREFIX + "link")).symlink_to(outside, target_is_directory=True)
    stale = root / (PROBE_PREFIX + "0123456789abcdef")
    (stale / "nested").mkdir(parents=True)
    (stale / "nested" / "left").write_bytes(b"left by an interrupted open\n")
    before = sorted(os.listdir(root))
    open_and_close(root)
    assert sorted(os.listdir(root)) == sorted(set(before) - {stale.name})
    assert (root / "notes" / "todo.txt").read_bytes() == b"todo\n"
    assert (root / (PROBE_PREFIX + "file")).read_bytes() == b"not a directory\n"
    assert os.readlink(root / (PROBE_PREFIX + "link")) == str(outside)
    assert sorted(os.listdir(outside)) == ["keep"]
    assert (outside / "keep").read_bytes() == b"kept\n"


# --- the rename probe: both trees unchanged, byte for byte ------------------------------------


def grow_the_populated_destination(source: str, destination: str) -> None:
    """A refusal that appends to the populated destination's file (its bytes now sort after
    the original's)."""
    if os.path.basename(destination) == "rename-populated":
        with open(os.path.join(destination, "resident"), "ab") as handle:
            handle.write(b"appended\n")
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)


def rewrite_the_source(source: str, destination: str) -> None:
    """A refusal that rewrites the source's file with other bytes of the same length that
    sort after the original's."""
    path = os.path.join(source, "payload")
    with open(path, "rb") as handle:
        content = handle.read()
    with open(path, "wb") as handle:
        handle.write(b"~" + content[1:])
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)


@pytest.mark.parametrize(
    ("rename", "changed"),
    [
        (grow_the_populated_destination, "rename-populated/resident"),
        (rewrite_the_source, "rename-source/payload"),
    ],
    ids=["longer destination file", "rewritten source file"],
)
def test_a_refused_rename_that_changes_any_byte_fails_the_probe(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    rename: Callable[[str, str], None],
    changed: str,
) -> None:
    """SPEC 8 step 3: the no-replace rename refuses populated and empty destinations "with
    both trees unchanged": the probe compares every file's bytes, so a refusal that changes
    them in any way (a longer file, other bytes), not only one that empties or truncates
    them, is capability_probe_failed, naming the file."""
    monkeypatch.setattr(durable, "rename_noreplace", rename)
    with pytest.raises(CapabilityProbeError) as caught:
        RunStore.open(root)
    assert caught.value.code == "capability_probe_failed"
    assert caught.value.message == f"{changed} changed content"
