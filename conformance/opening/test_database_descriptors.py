"""The process-wide table of database descriptors (SPEC.md section 8, "The database
descriptor"; ``runstore.store.store_root``): one descriptor per database file (per inode),
shared by every handle whatever path reached the file, opened without following a link,
closed by the last release, and never closed while this process may hold SQLite's POSIX
locks on its file, since closing any descriptor of a file drops them.

Each test drives a fresh ``_DatabaseDescriptors`` on files under ``tmp_path``. A file
replaced between the table's ``lstat`` and its ``open`` is simulated deterministically: the
module's ``os.open`` is wrapped so that the replacement happens right before the real open.
A POSIX record lock taken with ``lockf`` stands in for the locks SQLite takes; whether this
process still holds it is read from ``/proc/locks``.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore.errors import UnsafePathError
from runstore.store import store_root
from runstore.store.store_root import _DatabaseDescriptors


class _OsWithARace:
    """The ``os`` module, except that ``open`` first runs ``race`` once (another process
    changing the directory between the table's check and its open)."""

    def __init__(self, race: Callable[[str], None]) -> None:
        self._race: Callable[[str], None] | None = race

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        race, self._race = self._race, None
        if race is not None:
            race(path)
        return os.open(path, flags, mode)


@pytest.fixture
def race(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[str], None]], None]:
    def install(change: Callable[[str], None]) -> None:
        monkeypatch.setattr(store_root, "os", _OsWithARace(change))

    return install


def key_of(path: Path) -> tuple[int, int]:
    info = os.stat(path, follow_symlinks=False)
    return (info.st_dev, info.st_ino)


def descriptors_of(key: tuple[int, int]) -> list[int]:
    """This process's open descriptors of the file ``key``."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            info = os.stat(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if (info.st_dev, info.st_ino) == key:
            found.append(int(name))
    return found


def holds_posix_lock(key: tuple[int, int]) -> bool:
    """Whether this process holds a POSIX record lock on the file ``key``."""
    pid = str(os.getpid())
    with open("/proc/locks", encoding="ascii") as locks:
        for line in locks:
            fields = line.split()
            if (
                fields[1:2] == ["POSIX"]
                and fields[4] == pid
                and int(fields[5].rsplit(":", 1)[1]) == key[1]
            ):
                return True
    return False


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Callable[[Path], int]]:
    """Lock byte 0 of a file through a descriptor of its own, as an SQLite connection of
    this process would; every such descriptor is closed at the end."""
    opened: list[int] = []

    def lock(path: Path) -> int:
        fd = os.open(path, os.O_RDWR)
        opened.append(fd)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        assert holds_posix_lock(key_of(path))
        return fd

    yield lock
    for fd in opened:
        os.close(fd)


def test_two_paths_to_one_file_share_one_descriptor_and_the_last_release_closes_it(
    tmp_path: Path,
) -> None:
    """One entry per inode, reference counted: a second path (a hard link) to a held file
    gets the same descriptor, and only the last release closes it."""
    database = tmp_path / "run.sqlite3"
    table = _DatabaseDescriptors()
    first = table.acquire(str(database))  # created: the file did not exist
    assert database.is_file() and first.key == key_of(database)
    os.link(database, tmp_path / "alias")
    second = table.acquire(str(tmp_path / "alias"))
    assert second == first
    assert descriptors_of(first.key) == [first.fd]
    table.release(first)
    assert table.holds(first.key) and descriptors_of(first.key) == [first.fd]
    table.release(second)
    assert not table.holds(first.key) and descriptors_of(first.key) == []


def test_a_new_database_file_is_created_owner_read_write_only(tmp_path: Path) -> None:
    """``run.sqlite3`` is created with mode 0600 (section 8, "Files"), whatever the umask
    lets through."""
    previous = os.umask(0)
    try:
        table = _DatabaseDescriptors()
        held = table.acquire(str(tmp_path / "run.sqlite3"))
    finally:
        os.umask(previous)
    table.release(held)
    assert (tmp_path / "run.sqlite3").stat().st_mode & 0o7777 == 0o600


@pytest.mark.parametrize("replacement", ["a lower inode", "a higher inode"])
def test_a_database_replaced_between_check_and_open_is_refused_and_its_replacement_closed(
    tmp_path: Path, race: Callable[[Callable[[str], None]], None], replacement: str
) -> None:
    """A file renamed over the database path after the table looked at it is refused
    (``unsafe_path``, "changed while opening"), whichever way its inode number lies from the
    original's; the replacement's descriptor, which no connection of this process uses, is
    closed, and nothing is entered in the table."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_bytes(b"1")
    two.write_bytes(b"2")
    low, high = sorted((one, two), key=lambda path: os.stat(path).st_ino)
    original, other = (high, low) if replacement == "a lower inode" else (low, high)
    database = tmp_path / "run.sqlite3"
    original.rename(database)
    other_key = key_of(other)
    race(lambda path: os.rename(other, path))
    table = _DatabaseDescriptors()
    with pytest.raises(UnsafePathError, match="changed while opening") as caught:
        table.acquire(str(database))
    assert caught.value.code == "unsafe_path"
    assert key_of(database) == other_key
    assert not table.holds(other_key)
    assert descriptors_of(other_key) == []


def test_a_replacement_by_a_file_this_process_holds_keeps_its_locks(
    tmp_path: Path,
    race: Callable[[Callable[[str], None]], None],
) -> None:
    """When the file renamed over the path is one the table already holds (so this process
    may hold SQLite's locks on it), the open is refused and the descriptor just opened on
    it is left open: closing it would drop those locks."""
    table = _DatabaseDescriptors()
    held_path = tmp_path / "held.sqlite3"
    held = table.acquire(str(held_path))
    fcntl.lockf(held.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    assert holds_posix_lock(held.key)
    database = _database(tmp_path)
    race(_link_renamed_over(lambda link: os.link(held_path, link), tmp_path / "link"))
    with pytest.raises(UnsafePathError, match="changed while opening"):
        table.acquire(str(database))
    assert holds_posix_lock(held.key), "a descriptor of the held file was closed"
    assert table.holds(held.key)
    table.release(held)
    for fd in descriptors_of(held.key):  # the one left open on purpose
        os.close(fd)


def test_a_symbolic_link_swapped_in_is_refused_without_opening_its_target(
    tmp_path: Path,
    race: Callable[[Callable[[str], None]], None],
    locked: Callable[[Path], int],
) -> None:
    """The database is opened without following a link (section 8, "Files": a store file is
    never a symbolic link): a link renamed over the path after the check is refused, and
    the file it points to, on which this process holds locks, is never opened (opening and
    closing it would drop them)."""
    target = tmp_path / "elsewhere.sqlite3"
    target.write_bytes(b"")
    own = locked(target)
    database = _database(tmp_path)
    race(_link_renamed_over(lambda link: os.symlink(target, link), tmp_path / "link"))
    table = _DatabaseDescriptors()
    with pytest.raises(UnsafePathError) as caught:
        table.acquire(str(database))
    assert caught.value.code == "unsafe_path"
    assert holds_posix_lock(key_of(target)), "the link's target was opened and closed"
    assert descriptors_of(key_of(target)) == [own]
    assert os.path.islink(database)


def test_a_symbolic_link_to_a_held_database_is_refused(tmp_path: Path) -> None:
    """The path is examined with ``lstat``: a link is refused (``unsafe_path``) even when it
    points to a database the table holds, rather than sharing that file's descriptor."""
    table = _DatabaseDescriptors()
    database = tmp_path / "run.sqlite3"
    held = table.acquire(str(database))
    (tmp_path / "link").symlink_to(database)
    with pytest.raises(UnsafePathError, match="not a regular file"):
        table.acquire(str(tmp_path / "link"))
    table.release(held)
    assert not table.holds(held.key)


def test_a_database_that_appears_between_check_and_open_is_refused_untouched(
    tmp_path: Path, race: Callable[[Callable[[str], None]], None]
) -> None:
    """A database the table found missing is created exclusively: a file another process
    makes there in between is refused (``unsafe_path``), neither adopted nor changed."""
    database = tmp_path / "run.sqlite3"
    race(lambda path: Path(path).write_bytes(b"theirs"))
    table = _DatabaseDescriptors()
    with pytest.raises(UnsafePathError) as caught:
        table.acquire(str(database))
    assert caught.value.code == "unsafe_path"
    assert database.read_bytes() == b"theirs"
    assert not table.holds(key_of(database))
    assert descriptors_of(key_of(database)) == []


def _database(directory: Path) -> Path:
    """An empty ``run.sqlite3`` in ``directory``."""
    database = directory / "run.sqlite3"
    database.write_bytes(b"")
    return database


def _link_renamed_over(make: Callable[[Path], None], link: Path) -> Callable[[str], None]:
    """A race step: ``make`` a link at ``link``, then rename it over the path being opened."""

    def swap(path: str) -> None:
        make(link)
        os.rename(link, path)

    return swap
