"""The store root's checks and its creation (SPEC.md section 8, "Files", "Opening" step 1
and 2, and "Making a store"; section 9: every refusal is a typed ``RunStoreError``, never a
raw ``OSError``).

``create_root`` is what ``runstore run --init`` calls; it is driven directly here. The init
lock's wait is measured on a simulated clock (the durability seam's ``time``), so no test
sleeps.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import RunStore
from runstore import durable
from runstore.errors import BusyError
from runstore.errors import DurabilityError
from runstore.errors import UnsafePathError
from runstore.errors import UnsupportedFilesystemError
from runstore.store.store_root import INIT_LOCK_NAME
from runstore.store.store_root import InitLock
from runstore.store.store_root import create_root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


# --- opening step 1: the root ---------------------------------------------------------------


@pytest.mark.parametrize("case", ["below a regular file", "a name too long"])
def test_a_root_lstat_cannot_inspect_is_refused_unsafe_path(tmp_path: Path, case: str) -> None:
    """Step 1 checks the root with ``lstat``; a root it cannot inspect (ENOTDIR below a
    file, ENAMETOOLONG) is refused ``unsafe_path``, not with a raw OSError."""
    if case == "below a regular file":
        (tmp_path / "file").write_bytes(b"")
        path = tmp_path / "file" / "store"
    else:
        path = tmp_path / ("x" * 300)
    with pytest.raises(UnsafePathError, match="cannot inspect the store root") as caught:
        RunStore.open(path)
    assert caught.value.code == "unsafe_path"


def test_a_filesystem_statfs_cannot_identify_is_refused_untouched(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 1: a root whose filesystem ``statfs`` cannot identify is refused as an
    unsupported filesystem, before the lock, the probes or the database are made."""

    def failing_statfs(path: str) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO), path)

    monkeypatch.setattr(durable, "filesystem_magic", failing_statfs)
    with pytest.raises(UnsupportedFilesystemError, match="cannot identify") as caught:
        RunStore.open(root)
    assert caught.value.code == "unsupported_filesystem"
    assert os.listdir(root) == []


# --- opening step 2: the init lock waits at most 5 s ----------------------------------------


class _SimulatedClock:
    """``time`` for the durability seam: sleeping advances the clock, and the other holder
    of the init lock lets go once the clock reaches ``release_at``."""

    def __init__(self, holder: int, release_at: float) -> None:
        self.now = 1000.0
        self._start = self.now
        self._holder: int | None = holder
        self._release_at = release_at

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self._holder is not None and self.now - self._start >= self._release_at:
            os.close(self._holder)  # closing the other description releases its flock
            self._holder = None

    def close(self) -> None:
        if self._holder is not None:
            os.close(self._holder)


@pytest.fixture
def held_for(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[float], _SimulatedClock]]:
    clocks: list[_SimulatedClock] = []

    def hold(seconds: float) -> _SimulatedClock:
        fd = os.open(root / INIT_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        assert durable.flock(fd, "another opener")
        clock = _SimulatedClock(fd, seconds)
        clocks.append(clock)
        monkeypatch.setattr(durable, "time", clock)
        return clock

    yield hold
    for clock in clocks:
        clock.close()


def test_the_init_lock_is_waited_for_up_to_five_seconds(
    root: Path, held_for: Callable[[float], _SimulatedClock]
) -> None:
    """Step 2: an opener waits for the init lock; another holder letting go 4.9 s later
    is waited for, and the lock is taken then."""
    clock = held_for(4.9)
    with InitLock(str(root)):
        assert 4.9 <= clock.now - 1000.0 < 5.0


def test_the_init_lock_is_not_waited_for_past_five_seconds(
    root: Path, held_for: Callable[[float], _SimulatedClock]
) -> None:
    """Step 2: a holder keeping the init lock past 5 s makes the opener give up with
    ``busy`` once 5 s have passed, not later."""
    clock = held_for(5.3)
    with pytest.raises(BusyError, match="5 s") as caught, InitLock(str(root)):
        pass
    assert caught.value.code == "busy"
    assert 5.0 <= clock.now - 1000.0 < 5.1


# --- making a store: the root --init creates ------------------------------------------------


def test_init_creates_a_missing_root_owner_only_and_then_uses_it_as_found(
    tmp_path: Path,
) -> None:
    """Section 8, "Making a store": ``--init`` creates a missing root (mode 0700) and
    says it did; on a root that already is a directory it does nothing and says so,
    keeping its entries."""
    path = tmp_path / "store"
    previous = os.umask(0)
    try:
        assert create_root(str(path)) is True
    finally:
        os.umask(previous)
    assert path.is_dir() and path.stat().st_mode & 0o7777 == 0o700
    (path / "kept").write_bytes(b"")
    assert create_root(str(path)) is False
    assert os.listdir(path) == ["kept"]


def test_init_refuses_a_relative_root_or_a_missing_parent_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root is absolute (section 8, "Files") and its parent must exist (section 8,
    "Making a store"), else ``unsafe_path``; nothing is created either way."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafePathError, match="absolute"):
        create_root("store")
    with pytest.raises(UnsafePathError, match="parent of the store root does not exist"):
        create_root(str(tmp_path / "missing" / "store"))
    assert os.listdir(tmp_path) == []


@pytest.fixture
def made_meanwhile(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[str], None]], None]:
    """Run ``make(path)`` (another process) right before the durable mkdir of the root."""

    def install(make: Callable[[str], None]) -> None:
        real = durable.mkdir

        def mkdir(path: str, mode: int = 0o700) -> None:
            make(path)
            real(path, mode)

        monkeypatch.setattr(durable, "mkdir", mkdir)

    return install


def test_init_uses_a_root_another_process_made_at_the_same_moment(
    tmp_path: Path, made_meanwhile: Callable[[Callable[[str], None]], None]
) -> None:
    """Section 8, "Making a store": a root made by another process between the check and
    the mkdir is used as found (the mkdir's EEXIST is no error, and ``--init`` did not
    create it)."""
    made_meanwhile(os.mkdir)
    assert create_root(str(tmp_path / "store")) is False
    assert (tmp_path / "store").is_dir()


def test_init_refuses_a_file_another_process_made_at_the_root_meanwhile(
    tmp_path: Path, made_meanwhile: Callable[[Callable[[str], None]], None]
) -> None:
    """What appeared at the root meanwhile is checked like any root: a file is refused
    ``unsafe_path`` and left as it is."""
    made_meanwhile(lambda path: Path(path).write_bytes(b"theirs"))
    with pytest.raises(UnsafePathError, match="not a directory"):
        create_root(str(tmp_path / "store"))
    assert (tmp_path / "store").read_bytes() == b"theirs"


@pytest.mark.parametrize("error", [errno.EIO, errno.ENOSPC])
def test_a_failed_root_creation_is_durability_failed(tmp_path: Path, error: int) -> None:
    """Section 8, "Making a store": a failed creation of the root is ``durability_failed``
    (section 14.10 rule 1: a typed error, no raw OSError) and leaves no root."""

    def fail_mkdir(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "mkdir":
            raise OSError(error, os.strerror(error), target)

    previous = durable.install_observer(fail_mkdir)
    try:
        with pytest.raises(DurabilityError, match="cannot create the store root") as caught:
            create_root(str(tmp_path / "store"))
    finally:
        durable.install_observer(previous)
    assert caught.value.code == "durability_failed"
    assert not (tmp_path / "store").exists()
