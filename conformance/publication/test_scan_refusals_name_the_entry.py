"""SPEC.md 12.1: a directory the scan cannot list, and an entry whose type cannot be read,
are ``unsafe_entry`` (never a bare ``OSError``), and every refusal names the entry by its
relative path (the root as ``.``), quoted as Python's ``repr`` cut to 120 characters.

The tests run as root here, where permission bits do not stop a listing, so the failures
are made by wrapping ``os.scandir``: once with the ``EACCES`` a mode-0300 directory gives
any other user, and once with a real race (an entry removed between the listing of its
directory and its ``lstat``)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runstore.errors import UnsafeEntryError
from runstore.store.publication import objects

RESERVED = ("manifest.json", "outcome.json")
LONG = "n" * 200
"""A legal segment (200 bytes) whose ``repr`` (202 characters) is longer than the cut."""


def _wrap_scandir(monkeypatch: pytest.MonkeyPatch, before: Callable[[str], None]) -> None:
    """Make ``os.scandir(path)`` call ``before(path)`` first (which may raise)."""
    real = os.scandir

    def scandir(path: str) -> object:
        before(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def _unlistable(target: str) -> Callable[[str], None]:
    def before(path: str) -> None:
        if path == target:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    return before


def test_an_unlistable_subdirectory_is_unsafe_entry_named_by_its_cut_repr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.1: the refusal names the directory's relative path as its ``repr`` cut to
    120 characters, with the system's reason."""
    (tmp_path / LONG).mkdir()
    (tmp_path / LONG / "data.bin").write_bytes(b"data")
    _wrap_scandir(monkeypatch, _unlistable(f"{tmp_path}/{LONG}"))
    with pytest.raises(UnsafeEntryError) as info:
        objects.scan(str(tmp_path), reserved=RESERVED)
    assert info.value.message == f"{repr(LONG)[:120]} cannot be listed: Permission denied"
    assert len(repr(LONG)[:120]) == 120


def test_an_unlistable_root_is_unsafe_entry_named_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.1: the root is named ``.`` when its own listing fails."""
    (tmp_path / "data.bin").write_bytes(b"data")
    _wrap_scandir(monkeypatch, _unlistable(str(tmp_path)))
    with pytest.raises(UnsafeEntryError) as info:
        objects.scan(str(tmp_path), reserved=RESERVED)
    assert info.value.message == "'.' cannot be listed: Permission denied"


def test_an_entry_removed_while_its_directory_is_scanned_is_unsafe_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.1: an entry whose type cannot be read (it vanished between the listing of
    its directory and its ``lstat``) is ``unsafe_entry`` naming its relative path."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kept.txt").write_bytes(b"kept")
    (tmp_path / "sub" / "gone.txt").write_bytes(b"gone")
    real = os.scandir

    @contextmanager
    def racing(path: str) -> Iterator[Iterator[os.DirEntry[str]]]:
        with real(path) as entries:
            children = list(entries)
        if path == f"{tmp_path}/sub":
            os.unlink(f"{path}/gone.txt")  # after the listing, before the entry's lstat
        yield iter(children)

    monkeypatch.setattr(os, "scandir", racing)
    with pytest.raises(UnsafeEntryError) as info:
        objects.scan(str(tmp_path), reserved=RESERVED)
    assert info.value.message == "'sub/gone.txt' cannot be read: No such file or directory"
