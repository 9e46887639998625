"""Each file a pass reads must be the file the scan saw, and each failure of the pass has
its own code (SPEC.md 12.4, "Completion" steps 1-3 and "Verification"; the errors of
:mod:`runstore.store.publication.file_pass`):

- opened, a file must be the regular file of the scanned size and execute bit: one that
  grew, shrank, or gained or lost its execute bit since the scan is ``artifact_corrupt``
  there, before a byte is read;
- a file that verification reads must still have the stamp its walk saw (inode, size,
  mode, modification time), and every file must keep its stamp while it is read: a
  modification time moved either way is ``artifact_corrupt``;
- a file that cannot be opened or read is ``artifact_corrupt`` naming the system's
  reason ("became a symbolic link" when a link now stands at its path), and so is a
  ``manifest.json`` that verification cannot open;
- a runtime file whose name was taken after the scan is ``artifact_corrupt`` (an entry
  added); one that cannot be created or written, and a directory sync that fails, are
  ``durability_failed``; nothing after the failure is done (no ``manifest.json``).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from runstore import RunStoreError
from runstore.store.publication import file_pass
from runstore.store.publication import objects
from runstore.store.publication.inventory import InventoryFile

from conformance.publication.test_objects import RESERVED
from conformance.publication.test_objects import observed
from conformance.publication.test_objects import populate

SECOND = 10**9


def _refusal(call: Any) -> RunStoreError:
    with pytest.raises(RunStoreError) as info:
        call()
    return info.value


def _chmod(path: Path, add: int, remove: int) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    path.chmod((mode | add) & ~remove)


def _shift_mtime(path: Path, by_ns: int) -> None:
    status = path.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + by_ns))


# --- opened: the scanned file ------------------------------------------------------------------

CHANGES = {
    "grown": (b"12", False, lambda p: p.write_bytes(b"123"), "'a' is not the file of size 2"),
    "shrunk": (b"12", False, lambda p: p.write_bytes(b"1"), "'a' is not the file of size 2"),
    "made-executable": (
        b"12",
        False,
        lambda p: _chmod(p, 0o100, 0),
        "'a' changed after it was scanned",
    ),
    "made-plain": (b"12", True, lambda p: _chmod(p, 0, 0o111), "'a' changed after it was scanned"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_file_changed_since_the_scan_is_refused_when_opened(tmp_path: Path, change: str) -> None:
    """SPEC.md 12.4 step 2: ``fstat`` the descriptor: the regular file of the scanned size
    and execute bit, else ``artifact_corrupt`` (the refusal names the file and what the scan
    saw); a change either way is refused there, and no manifest is written."""
    data, executable, alter, message = CHANGES[change]
    populate(tmp_path, {"a": (data, executable)})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    alter(tmp_path / "a")
    refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert (refusal.code, refusal.message) == ("artifact_corrupt", message)
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize("by_ns", [-SECOND, SECOND], ids=["earlier", "later"])
def test_verify_refuses_a_file_touched_after_its_walk(tmp_path: Path, by_ns: int) -> None:
    """SPEC.md 12.4, "Verification": each file is read as the walk saw it; a modification
    time moved either way between the walk and the file's read is ``artifact_corrupt``."""
    populate(tmp_path, {"a": b"payload"})
    objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=RESERVED), {})
    touched: list[bool] = []

    def touch(phase: str, operation: str, target: str) -> None:
        # verify syncs manifest.json as it reads it, after the walk and before the files
        if (phase, operation) == ("before", "fsync_file") and target.endswith("manifest.json"):
            touched.append(True)
            _shift_mtime(tmp_path / "a", by_ns)

    with observed(touch):
        refusal = _refusal(lambda: objects.verify(str(tmp_path), sync=True))
    assert touched
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "'a' changed after it was scanned",
    )


@pytest.mark.parametrize("by_ns", [-SECOND, SECOND], ids=["earlier", "later"])
def test_a_file_touched_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_ns: int
) -> None:
    """SPEC.md 12.4 step 2: ``fstat`` again after the read: the same inode, size, mode and
    modification time, else ``artifact_corrupt`` (a file rewritten while read), whichever
    way the time moved."""
    path = tmp_path / "a"
    path.write_bytes(b"payload")
    real_read = os.read

    def read(fd: int, count: int) -> bytes:
        data = real_read(fd, count)
        _shift_mtime(path, by_ns)
        return data

    monkeypatch.setattr(os, "read", read)
    refusal = _refusal(
        lambda: file_pass.read_file(
            str(path), InventoryFile(path="a", size=7, executable=False), sync=False
        )
    )
    assert (refusal.code, refusal.message) == ("artifact_corrupt", "'a' changed while it was read")


# --- cannot be opened or read ------------------------------------------------------------------


def _open_fails(code: int) -> Any:
    def install(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        real_open = os.open

        def opening(target: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if os.fspath(target) == str(path):
                raise OSError(code, os.strerror(code), str(path))
            return real_open(target, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", opening)

    return install


def _read_fails(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read(fd: int, count: int) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "read", read)


def _linked(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (path.parent / "other").write_bytes(b"payload")
    path.unlink()
    path.symlink_to("other")


UNREADABLE = {
    "became-a-symlink": (_linked, "became a symbolic link"),
    "removed": (lambda path, _: path.unlink(), os.strerror(errno.ENOENT)),
    "stale-handle": (_open_fails(errno.ESTALE), os.strerror(errno.ESTALE)),
    "read-error": (_read_fails, os.strerror(errno.EIO)),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_file_that_cannot_be_opened_or_read_is_artifact_corrupt_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """SPEC.md 12.4 step 2 (open never following a link) and section 9: a file that cannot
    be opened or read is ``artifact_corrupt`` naming it and the system's reason, or
    "became a symbolic link" when a link now stands at its path."""
    path = tmp_path / "a"
    path.write_bytes(b"payload")
    alter, reason = UNREADABLE[case]
    alter(path, monkeypatch)
    refusal = _refusal(
        lambda: file_pass.read_file(
            str(path), InventoryFile(path="a", size=7, executable=False), sync=False
        )
    )
    assert (refusal.code, refusal.message) == ("artifact_corrupt", f"'a' cannot be read: {reason}")


def test_verify_refuses_a_manifest_it_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.4, "Verification": ``manifest.json`` must be present and parse; one that
    cannot be opened is ``artifact_corrupt`` with the system's reason."""
    populate(tmp_path, {"a": b"payload"})
    objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=RESERVED), {})
    _open_fails(errno.EIO)(tmp_path / "manifest.json", monkeypatch)
    refusal = _refusal(lambda: objects.verify(str(tmp_path), sync=False))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        f"manifest.json cannot be read: {os.strerror(errno.EIO)}",
    )


# --- runtime files and directory syncs ---------------------------------------------------------


def _write_fails(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def write(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)


RUNTIME_FAILURES = {
    "name-taken-after-the-scan": (
        lambda path, _: path.write_bytes(b"caller's"),
        "artifact_corrupt",
        "appeared while the object was completed",
    ),
    "cannot-be-created": (
        _open_fails(errno.ENOSPC),
        "durability_failed",
        f"creating {{}} failed: {os.strerror(errno.ENOSPC)}",
    ),
    "cannot-be-written": (
        _write_fails,
        "durability_failed",
        f"writing {{}} failed: {os.strerror(errno.ENOSPC)}",
    ),
}


@pytest.mark.parametrize("case", sorted(RUNTIME_FAILURES))
def test_a_runtime_file_that_cannot_be_written_new_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """SPEC.md 12.4 step 1 (each runtime file created without replacing anything) and the
    failures of completion: a name taken since the scan is an added entry,
    ``artifact_corrupt``; a failed create or write is ``durability_failed``; no manifest."""
    populate(tmp_path, {"a": b"payload"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    runtime = tmp_path / "outcome.json"
    alter, code, message = RUNTIME_FAILURES[case]
    alter(runtime, monkeypatch)
    refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {runtime.name: b"{}"}))
    monkeypatch.undo()
    assert refusal.code == code
    assert refusal.message.endswith(message.format(runtime))
    assert not (tmp_path / "manifest.json").exists()


def test_a_failed_directory_sync_is_durability_failed(tmp_path: Path) -> None:
    """SPEC.md 12.4 step 3 and its failures: a directory sync that fails is
    ``durability_failed``, and nothing after it is done."""
    populate(tmp_path, {"sub/a": b"payload"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def fail(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("before", "fsync_dir"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    with observed(fail):
        refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert refusal.code == "durability_failed"
    assert refusal.message == f"fsync of directory {tmp_path}/sub failed: {os.strerror(errno.EIO)}"
    assert not (tmp_path / "manifest.json").exists()
