"""Where ``runstore run`` makes a store (SPEC.md section 8, "Making a store"; section 15.7's
``run`` row): only in a missing or empty directory, never among a user's files. What an
interrupted first open leaves does not count as the user's; a root that already holds a
store is used whatever else it holds. The refusal (``unsafe_path``) names the first three
other entries in name order and how many more there are, so the user sees which of their
files stopped it.

``check_adoptable`` is what the command calls before opening; it is driven directly here.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.errors import UnsafePathError
from runstore.store.probes import PROBE_PREFIX
from runstore.store.store_root import INIT_LOCK_NAME
from runstore.store.store_root import SIDECAR_NAMES
from runstore.store.store_root import check_adoptable


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


def test_a_missing_or_empty_directory_takes_a_store(tmp_path: Path, root: Path) -> None:
    """Both places a store may be made pass the check (a missing one is then created by
    ``--init``, or refused as missing by opening)."""
    check_adoptable(str(tmp_path / "missing"))
    check_adoptable(str(root))
    assert os.listdir(root) == []
    assert not (tmp_path / "missing").exists()


def test_what_an_interrupted_first_open_leaves_does_not_count(root: Path) -> None:
    """The init lock, SQLite's sidecars and probe directories are what a first open that
    died before creating ``run.sqlite3`` leaves: such a directory still takes a store."""
    for name in (INIT_LOCK_NAME, *SIDECAR_NAMES):
        (root / name).write_bytes(b"")
    (root / f"{PROBE_PREFIX}0123456789abcdef").mkdir()
    check_adoptable(str(root))


def test_a_directory_holding_a_store_is_used_whatever_else_it_holds(root: Path) -> None:
    """A root with ``run.sqlite3`` is an existing store: its own directories (and anything
    else in it) are no reason to refuse; opening then checks the store itself."""
    RunStore.open(root).close()
    (root / "artifacts").mkdir()
    (root / "notes.txt").write_bytes(b"mine")
    check_adoptable(str(root))


def test_a_directory_with_a_users_file_is_refused_untouched(root: Path) -> None:
    """One file of the user's beside the leftovers of a first open is enough to refuse
    (``unsafe_path``); nothing is created or removed."""
    (root / INIT_LOCK_NAME).write_bytes(b"")
    (root / f"{PROBE_PREFIX}0123456789abcdef").mkdir()
    (root / "thesis.tex").write_bytes(b"mine")
    before = sorted(os.listdir(root))
    with pytest.raises(UnsafePathError, match="holds no run store") as caught:
        check_adoptable(str(root))
    assert caught.value.code == "unsafe_path"
    assert "(thesis.tex)" in str(caught.value)
    assert sorted(os.listdir(root)) == before


# Names created in this order; the message lists them in code-point order.
NAMES = ["notes.txt", "data", "Zebra", "a.csv", "bin", "results", "Makefile"]


@pytest.mark.parametrize(
    ("count", "listed"),
    [
        (1, "(notes.txt)"),
        (3, "(Zebra, data, notes.txt)"),
        (4, "(Zebra, a.csv, data and 1 more)"),
        (7, "(Makefile, Zebra, a.csv and 4 more)"),
    ],
)
def test_the_refusal_names_the_first_three_entries_and_how_many_more(
    root: Path, count: int, listed: str
) -> None:
    """The message names the first three of the user's entries in code-point order and,
    past three, how many more there are; the leftovers of a first open are not named."""
    (root / INIT_LOCK_NAME).write_bytes(b"")
    for name in NAMES[:count]:
        (root / name).write_bytes(b"")
    with pytest.raises(UnsafePathError) as caught:
        check_adoptable(str(root))
    assert caught.value.message == (
        f"{root} holds no run store but other files {listed}; "
        "a store is made only in a missing or empty directory"
    )


def test_a_directory_that_cannot_be_listed_is_refused_unsafe_path(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root whose entries cannot be read cannot be shown to be empty: refused
    ``unsafe_path`` (section 9: a typed error, never a raw OSError)."""

    def unreadable(path: str) -> list[str]:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(os, "listdir", unreadable)
    with pytest.raises(UnsafePathError, match="cannot list the store root") as caught:
        check_adoptable(str(root))
    assert caught.value.code == "unsafe_path"
