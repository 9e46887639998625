"""The durability seam's own promises (``runstore.durable``; SPEC.md sections 8, 11 and
14.11): a directory sync syncs a directory and nothing else, a parent is synced even when
the user reached it through a link, the store's directories are private, and the
filesystem type is the kernel's 32-bit magic whatever width the C library hands back.

These are the primitives every durable step of the store goes through; a seam that synced
a file in place of a directory, or failed on a user's linked parent, or misread a network
filesystem's magic, would weaken every step above it without any of them noticing.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import select
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import durable

from conformance.capabilities import NOBODY
from conformance.capabilities import owning_nothing


@pytest.fixture
def effects() -> Iterator[list[tuple[str, tuple[str, ...]]]]:
    """The persistence effects the seam records while the test runs."""
    seen: list[tuple[str, tuple[str, ...]]] = []
    previous = durable.install_recorder(lambda effect, paths: seen.append((effect, paths)))
    try:
        yield seen
    finally:
        durable.install_recorder(previous)


def test_a_directory_sync_refuses_a_file_and_a_link(tmp_path: Path) -> None:
    """``fsync_dir`` makes a directory's entries durable (SPEC 14.11: a directory's entries
    are durable as of its last ``fsync_dir``): it opens the path as a directory, never
    following a link, so a file or a link found where the store's own directory should be
    is refused with an ``OSError`` instead of being synced in its place."""
    a_file = tmp_path / "file"
    a_file.write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        durable.fsync_dir(str(a_file))
    directory = tmp_path / "directory"
    directory.mkdir()
    link = tmp_path / "link"
    link.symlink_to(directory)
    with pytest.raises(OSError) as caught:
        durable.fsync_dir(str(link))
    assert caught.value.errno in (errno.ELOOP, errno.ENOTDIR)
    durable.fsync_dir(str(directory))


def test_a_file_sync_refuses_a_link(tmp_path: Path) -> None:
    """``fsync_file`` syncs the store's own file at that path, never following a link (SPEC
    8: a store file is never a symbolic link): a link found there is refused with an
    ``OSError`` (ELOOP) rather than its target synced in the file's place."""
    target = tmp_path / "target"
    target.write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError) as caught:
        durable.fsync_file(str(link))
    assert caught.value.errno == errno.ELOOP
    durable.fsync_file(str(target))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_syncing_a_directory_needs_no_ownership_of_it(tmp_path: Path) -> None:
    """A directory the store syncs may belong to another user (the parent of a root, a
    shared data directory reached through a link): syncing it needs only that it can be
    opened for reading, never ownership, so a process without any privilege standing in
    for ownership syncs it (and its entries) like its own."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    (shared / "entry").mkdir()
    for path in (shared, shared / "entry"):
        os.chown(path, NOBODY, NOBODY)
    with owning_nothing():
        durable.fsync_dir(str(shared))
        durable.fsync_dir(str(shared / "entry"))


def test_a_parent_reached_through_a_link_is_synced(
    tmp_path: Path, effects: list[tuple[str, tuple[str, ...]]]
) -> None:
    """``mkdir`` and ``unlink`` sync the parent of the path they change, and that parent
    may be the user's own linked directory (``--init``'s root under a linked home, an
    export beside it): the parent's sync follows the link, and is recorded for the parent
    as the caller named it."""
    real = tmp_path / "real"
    real.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(real)
    child = str(linked / "child")
    durable.mkdir(child)
    assert ("fsync_dir", (str(linked),)) in effects
    assert (real / "child").is_dir()
    gone = linked / "gone"
    gone.write_bytes(b"x")
    effects.clear()
    durable.unlink(str(gone))
    assert effects == [("unlink", (str(gone),)), ("fsync_dir", (str(linked),))]
    assert not (real / "gone").exists()


def test_removing_a_tree_syncs_its_parent_unless_the_caller_will(
    tmp_path: Path, effects: list[tuple[str, tuple[str, ...]]]
) -> None:
    """``remove_tree`` removes the store's disposable directory and, by default, syncs its
    parent, following a link to it like every parent sync; with ``sync_parent=False`` the
    caller syncs the parent as its own step (a crash boundary of its own, SPEC 14.11), so
    the seam records no sync of it."""
    real = tmp_path / "real"
    real.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(real)
    for sync_parent in (True, False):
        tree = real / "tree"
        (tree / "sub").mkdir(parents=True)
        (tree / "sub" / "file").write_bytes(b"x")
        effects.clear()
        if sync_parent:
            durable.remove_tree(str(linked / "tree"))
        else:
            durable.remove_tree(str(linked / "tree"), sync_parent=False)
        assert not tree.exists()
        synced = [paths for effect, paths in effects if effect == "fsync_dir"]
        assert synced == ([(str(linked),)] if sync_parent else [])


def _lock_elsewhere(path: Path, start: int) -> bool:
    """Whether another process can take an exclusive record lock on byte ``start``."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            fd = os.open(path, os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, start)
            status = 0
        finally:
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    return os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == 0


def test_a_record_lock_covers_byte_0_only(tmp_path: Path) -> None:
    """``posix_lock`` takes a POSIX record lock on byte 0 (the record-lock probe of SPEC 8,
    step 3, checks a child cannot take that byte): another process can still lock byte 1,
    and once released, byte 0 too."""
    path = tmp_path / "lock"
    path.write_bytes(b"\0\0")
    fd = os.open(path, os.O_RDWR)
    try:
        assert durable.posix_lock(fd, str(path), lock=True)
        assert not _lock_elsewhere(path, 0)
        assert _lock_elsewhere(path, 1)
        assert durable.posix_lock(fd, str(path), lock=False)
        assert _lock_elsewhere(path, 0)
    finally:
        os.close(fd)


def test_the_observer_is_told_which_record_lock_operation_runs(tmp_path: Path) -> None:
    """The seam announces each operation by name to its observer (SPEC 14.10: the I/O-fault
    campaign fails each call by name): taking a record lock is ``posix_lock``, releasing it
    ``posix_unlock``, each announced before and after."""
    seen: list[tuple[str, str]] = []
    previous = durable.install_observer(lambda phase, operation, _: seen.append((phase, operation)))
    path = tmp_path / "lock"
    path.write_bytes(b"\0")
    fd = os.open(path, os.O_RDWR)
    try:
        durable.posix_lock(fd, str(path), lock=True)
        durable.posix_lock(fd, str(path), lock=False)
    finally:
        os.close(fd)
        durable.install_observer(previous)
    assert seen == [
        ("before", "posix_lock"),
        ("after", "posix_lock"),
        ("before", "posix_unlock"),
        ("after", "posix_unlock"),
    ]


@pytest.mark.parametrize("make", [durable.mkdir, durable.create_directory])
def test_a_directory_the_store_creates_is_private(tmp_path: Path, make: object) -> None:
    """SPEC 11: the store's directories (a stage, ``object/``, ``.quarantine/``, a new root)
    are mode 0700 less the umask: with no umask, exactly 0700."""
    previous = os.umask(0)
    try:
        path = tmp_path / "made"
        make(str(path))  # type: ignore[operator]
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_a_failing_statfs_raises_naming_the_path(tmp_path: Path) -> None:
    """SPEC 8, step 1: a root whose filesystem ``statfs`` cannot identify is refused; the
    seam reports statfs's failure as an ``OSError`` with its errno and the path, never a
    magic number read from an unfilled buffer."""
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError) as caught:
        durable.filesystem_magic(str(missing))
    assert caught.value.filename == str(missing)


def _fake_statfs(f_type: int) -> object:
    def statfs(path: bytes, buffer: ctypes.Array[ctypes.c_char]) -> int:
        durable._F_TYPE.from_buffer(buffer, durable._F_TYPE_OFFSET).value = f_type
        return 0

    return statfs


@pytest.mark.parametrize(
    ("f_type", "magic"),
    [
        (0xFF534D42 - 2**32, 0xFF534D42),  # CIFS, sign-extended by a 32-bit __fsword_t
        (0xFE534D42 - 2**32, 0xFE534D42),  # SMB2, likewise
        (0xFF534D42, 0xFF534D42),
        (2**32 | 0x6969, 0x6969),  # NFS with garbage above 32 bits
        (0x6969, 0x6969),
    ],
)
def test_the_filesystem_magic_is_read_as_32_unsigned_bits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, f_type: int, magic: int
) -> None:
    """SPEC 8, step 1: network filesystems are told apart by ``f_type``, the kernel's
    32-bit ``*_SUPER_MAGIC`` numbers; the seam reads it as unsigned 32 bits, so a magic
    with its top bit set (CIFS, SMB2) is recognized whether the C library hands it back
    sign-extended or not."""
    monkeypatch.setattr(durable, "_statfs", _fake_statfs(f_type))
    assert durable.filesystem_magic(str(tmp_path)) == magic
    assert magic in durable.NETWORK_FILESYSTEMS


def test_a_record_lock_another_process_holds_is_reported_without_waiting(tmp_path: Path) -> None:
    """``posix_lock`` takes a POSIX record lock on byte 0 *without waiting* and returns
    False when another process holds a conflicting one (SPEC 8, step 3: the record-lock
    probe needs a conflict it can see, and the store never blocks on a lock another
    process may hold for good). The other process here lets go only when told, or after
    10 s: a lock call that waited would return True late instead of False now."""
    path = tmp_path / "lock"
    path.write_bytes(b"\0")
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other process: hold byte 0 until told to stop (at most 10 s)
        try:
            fd = os.open(path, os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            os.write(ready_w, b"1")
            select.select([go_r], [], [], 10.0)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"1"
        fd = os.open(path, os.O_RDWR)
        try:
            assert durable.posix_lock(fd, str(path), lock=True) is False
        finally:
            os.close(fd)
    finally:
        os.write(go_w, b"1")
        os.waitpid(pid, 0)
        for end in (ready_r, ready_w, go_r, go_w):
            os.close(end)
    fd = os.open(path, os.O_RDWR)
    try:
        assert durable.posix_lock(fd, str(path), lock=True) is True
        assert durable.posix_lock(fd, str(path), lock=False) is True
    finally:
        os.close(fd)
