"""Stages: the private, locked directories in which the publisher builds an object, and the
store-wide recovery lock publishers share while they create and register one.

Rules of this file: filesystem only (no SQL). Every durability step goes through
:mod:`runstore.durable`, one syscall per step, so each has its own crash boundary. A stage
is ``artifacts/.staging-<token>/`` (mode 0700) beside the completed objects, holding the
lock file ``lock`` (exclusively flocked by its publisher from creation until after the
final commit) and the payload directory ``object/``, which becomes the published object by
a no-replace rename. ``.run-store-recovery.lock`` in the store root is created durably once
and never deleted; publishers hold it shared from stage creation until the stage's lease is
committed, recovery holds it exclusively. The stage token comes from :func:`new_token`,
which tests may replace through :func:`install_token_source` (never in production).
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from collections.abc import Callable
from typing import Final

import attrs
from runstore import durable
from runstore.errors import DurabilityError
from runstore.errors import UnsafePathError
from runstore.store.lock_file import LockFile

ARTIFACTS_DIR: Final = "artifacts"
STAGE_PREFIX: Final = ".staging-"
STAGE_LOCK_NAME: Final = "lock"
OBJECT_NAME: Final = "object"
RECOVERY_LOCK_NAME: Final = ".run-store-recovery.lock"
RECOVERY_LOCK_TIMEOUT_S: Final = 5.0

_log = logging.getLogger("runstore.store.publication.staging")


def _random_token() -> str:
    return secrets.token_hex(16)


_token_source: Callable[[], str] = _random_token


def install_token_source(source: Callable[[], str] | None) -> Callable[[], str]:
    """Test hook: make stage tokens come from ``source`` (None restores random tokens);
    returns the previous source. Deterministic tokens let a crash campaign's copies and
    the model name the same stages and leases."""
    global _token_source
    previous, _token_source = _token_source, source or _random_token
    return previous


def new_token() -> str:
    """A fresh stage token (32 lowercase hex digits in production)."""
    return _token_source()


def lease_id_for(token: str) -> str:
    """The staging lease id of the stage with ``token``."""
    return f"staging-{token}"


def store_path_for(token: str) -> str:
    """The store-relative path of the stage with ``token``."""
    return f"{ARTIFACTS_DIR}/{STAGE_PREFIX}{token}"


def _sync_failed(step: str, exc: OSError) -> DurabilityError:
    return DurabilityError(f"{step} failed: {exc}")


def artifacts_directory(root: str) -> str:
    """``<root>/artifacts``, created (and the root synced) when missing; refused when it is
    a symbolic link or not a directory."""
    path = os.path.join(root, ARTIFACTS_DIR)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is None:
        try:
            durable.create_directory(path, 0o755)
        except FileExistsError:
            return artifacts_directory(root)
        except OSError as exc:
            raise _sync_failed(f"creating {path}", exc) from exc
        try:
            durable.fsync_dir(root)
        except OSError as exc:
            raise _sync_failed(f"syncing {root}", exc) from exc
        return path
    if not stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"{path} is not a directory")
    return path


class RecoveryLock(LockFile):
    """``.run-store-recovery.lock`` held shared (publishers) or exclusive (recovery) with a
    flock, waiting at most ``timeout`` seconds (default: :data:`RECOVERY_LOCK_TIMEOUT_S`,
    read when the lock is made) else ``busy``. The file is created once (file and root
    synced) and never deleted."""

    def __init__(self, root: str, *, exclusive: bool, timeout: float | None = None):
        super().__init__(
            root,
            RECOVERY_LOCK_NAME,
            exclusive=exclusive,
            timeout=RECOVERY_LOCK_TIMEOUT_S if timeout is None else timeout,
            durable_creation=True,
            busy=f"{RECOVERY_LOCK_NAME} is held by recovery",
        )


@attrs.define
class Stage:
    """A created stage whose lock this process holds (until :meth:`unlock`)."""

    token: str
    path: str
    """The absolute stage directory."""
    lock_fd: int | None

    @property
    def lease_id(self) -> str:
        return lease_id_for(self.token)

    @property
    def store_path(self) -> str:
        return store_path_for(self.token)

    @property
    def object_path(self) -> str:
        return os.path.join(self.path, OBJECT_NAME)

    def unlock(self) -> None:
        """Release the stage's lock (closing its descriptor). Idempotent."""
        fd, self.lock_fd = self.lock_fd, None
        if fd is not None:
            os.close(fd)


def create_stage(root: str) -> Stage:
    """Create ``artifacts/.staging-<token>/`` (0700) with its locked ``lock`` file and an
    empty ``object/``, then sync ``artifacts/`` (the stage's entry, so that recovery finds
    the stage after a power loss once its lease commits). The stage directory itself is not
    synced: nothing in it needs to survive a power loss (a stage without ``lock`` counts
    as free, and recovery removes a stage whole), and the object made in it is made durable
    at its address by its own syncs and the sync of ``artifacts/`` after the rename (SPEC.md
    section 11, step 2). The caller holds the recovery lock shared. On failure nothing of
    the stage is left behind (best effort) and the error is raised
    (``durability_failed``)."""
    parent = artifacts_directory(root)
    token = new_token()
    path = os.path.join(parent, STAGE_PREFIX + token)
    stage = Stage(token=token, path=path, lock_fd=None)
    try:
        durable.create_directory(path, 0o700)
    except OSError as exc:
        raise _sync_failed(f"creating the stage {path}", exc) from exc
    try:
        lock_path = os.path.join(path, STAGE_LOCK_NAME)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        stage.lock_fd = os.open(lock_path, flags, 0o600)
        if not durable.flock(stage.lock_fd, lock_path, exclusive=True):
            raise OSError(errno.EAGAIN, "the new stage's lock is held elsewhere", lock_path)
        durable.create_directory(stage.object_path, 0o700)
        durable.fsync_dir(parent)
    except OSError as exc:
        remove_stage(stage)
        raise _sync_failed(f"creating the stage {path}", exc) from exc
    except BaseException:
        remove_stage(stage)
        raise
    return stage


def remove_stage(stage: Stage, *, sync: bool = True) -> bool:
    """Best effort: remove the stage's directory tree, then (with ``sync``) sync
    ``artifacts/`` (two steps), while still holding its lock, then release the lock.
    Returns whether the tree is gone; a failure is logged, never raised (a leftover stage
    is recovery's to quarantine). Cleanup after a committed publication passes
    ``sync=False``: its stage holds nothing the store needs, its lease is released, and a
    stage a power loss brings back is recovery's to remove (SPEC.md section 11)."""
    try:
        durable.remove_tree(stage.path, sync_parent=False)
        if sync:
            durable.fsync_dir(os.path.dirname(stage.path))
        return True
    except OSError as exc:
        _log.warning("could not remove the stage %s: %s", stage.path, exc)
        return False
    finally:
        stage.unlock()
