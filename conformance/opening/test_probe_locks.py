"""The lock probes of SPEC section 8, step 3, against the rules the fake-kernel table of
test_probes.py does not reach: the record-lock probe's forked child only calls ``fcntl``
and exits, whatever that call raises, and only the probe's caller returns; the flock probe
locks descriptors opened read-write, as the init lock's is.

Rules of this file: fakes go in at the seams probes.py really uses (``runstore.durable``
functions, and the ``os``/``fcntl`` modules as probes.py sees them). A forked child that
comes back into a test's code is stopped right there (:class:`Escapes`), so a probe that
lets one escape fails its test instead of running the rest of the session twice.
"""

from __future__ import annotations

import errno
import fcntl
import os
import types
from pathlib import Path
from typing import Any

import pytest
from runstore import RunStore
from runstore import durable
from runstore.errors import CapabilityProbeError
from runstore.store import probes
from runstore.store.probes import PROBE_PREFIX


class Escapes:
    """Forked children that return or raise into the test's code. Call :meth:`stop_if_child`
    in a ``finally`` around the probe: in any process but the test's own it writes the pid
    to a pipe and exits at once. :meth:`pids` (in the test's process) says who escaped."""

    def __init__(self) -> None:
        self.caller = os.getpid()
        self._read, self._write = os.pipe()

    def stop_if_child(self) -> None:
        if os.getpid() != self.caller:
            os.write(self._write, f"{os.getpid()}\n".encode())
            os._exit(70)

    def pids(self) -> list[int]:
        os.close(self._write)
        data = b""
        while chunk := os.read(self._read, 4096):
            data += chunk
        os.close(self._read)
        return [int(pid) for pid in data.split()]


def seen_by_probes(monkeypatch: pytest.MonkeyPatch, name: str, **fakes: Any) -> None:
    """Give probes.py (only) a copy of the module ``name`` with some functions replaced."""
    module = {"os": os, "fcntl": fcntl}[name]
    monkeypatch.setattr(probes, name, types.SimpleNamespace(**{**vars(module), **fakes}))


def test_the_record_lock_probe_returns_in_its_caller_and_only_its_child_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 8 step 3: the record-lock probe's forked child "only calls fcntl and exits".
    So the process that runs the probe is never told to exit (``os._exit`` as probes.py
    sees it raises here if it is), it returns from the probe with its verdict (this kernel
    passes), and no other process comes back into the caller's code."""
    escapes = Escapes()

    def _exit(status: int) -> None:
        if os.getpid() == escapes.caller:
            raise AssertionError(f"the probe told its caller's process to exit ({status})")
        os._exit(status)

    seen_by_probes(monkeypatch, "os", _exit=_exit)
    try:
        probes.probe_posix_record_lock(str(tmp_path))
    finally:
        escapes.stop_if_child()
    assert escapes.pids() == []
    assert sorted(os.listdir(tmp_path)) == ["posix-lock"]


@pytest.mark.parametrize("raised", [KeyboardInterrupt, RuntimeError], ids=lambda t: t.__name__)
def test_the_lock_probe_child_exits_whatever_its_lockf_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: type[BaseException]
) -> None:
    """SPEC 8 step 3: the child only calls fcntl and exits, even when that call raises
    something other than an OSError (KeyboardInterrupt: Ctrl-C sends SIGINT to the whole
    process group, the child included). Such a child has not taken the lock, so it reports
    "could not lock" by its exit status and the probe refuses (capability_probe_failed)
    when the released lock cannot be taken; it never unwinds into its caller's code, where
    it would run the caller's cleanup on the caller's inherited files and connections."""
    escapes = Escapes()

    def lockf(*args: Any) -> None:
        raise raised("raised in the lock-probe child")

    seen_by_probes(monkeypatch, "fcntl", lockf=lockf)
    try:
        with pytest.raises(CapabilityProbeError) as caught:
            probes.probe_posix_record_lock(str(tmp_path))
    finally:
        escapes.stop_if_child()
    assert escapes.pids() == [], "lock-probe children came back into the caller's code"
    assert caught.value.code == "capability_probe_failed"
    assert caught.value.message == "a child process could not take a released POSIX record lock"


def only_writable_descriptors_lock_exclusively(real: Any) -> Any:
    """``durable.flock`` as on a kernel that emulates flock with fcntl record locks (Linux
    NFS clients since 2.6.12, flock(2) NOTES): "in order to place an exclusive lock, the
    file must be opened for writing", else EBADF."""

    def flock(fd: int, label: str, *, exclusive: bool = True, timeout: float = 0.0) -> bool:
        if exclusive and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF), label)
        return bool(real(fd, label, exclusive=exclusive, timeout=timeout))

    return flock


def test_the_flock_probe_locks_descriptors_opened_like_the_init_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 8 step 3: the flock probe's two descriptors are opened read-write, as the init
    lock's is (step 2), so the probe checks the lock the store really takes. On a kernel
    whose exclusive flock needs a writable descriptor the store's own lock works, and so
    must the probe: the store opens, and the probe directory is gone."""
    monkeypatch.setattr(durable, "flock", only_writable_descriptors_lock_exclusively(durable.flock))
    root = tmp_path / "store"
    root.mkdir()
    with RunStore.open(root) as store:
        assert store.database_path == str(root / "run.sqlite3")
    assert [name for name in os.listdir(root) if name.startswith(PROBE_PREFIX)] == []


def test_teeth_the_writable_flock_fake_refuses_a_read_only_descriptor(tmp_path: Path) -> None:
    """The fake above is not vacuous: an exclusive lock on a read-only descriptor fails with
    EBADF, while a shared one and a read-write descriptor still lock."""
    flock = only_writable_descriptors_lock_exclusively(durable.flock)
    path = tmp_path / "lock"
    path.write_bytes(b"")
    read_only = os.open(path, os.O_RDONLY)
    read_write = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(OSError) as caught:
            flock(read_only, str(path))
        assert caught.value.errno == errno.EBADF
        assert flock(read_only, str(path), exclusive=False)
        durable.funlock(read_only, str(path))
        assert flock(read_write, str(path))
    finally:
        os.close(read_only)
        os.close(read_write)
