"""Recovery's filesystem side, twin of :mod:`runstore.model.disk`'s view: what lies in
``artifacts/``, stage locks tried without waiting, quarantine of abandoned stages, and
reading candidate objects (SPEC.md section 14).

Rules of this file: filesystem only (no SQL). Every durability step goes through
:mod:`runstore.durable`, one syscall per step, so each has its own crash boundary. Nothing
here deletes or rewrites a completed object: a stage moves intact, an object is only read
(and, when asked, synced).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from typing import Final

import attrs
from runstore import durable
from runstore.enums import ArtifactKind
from runstore.errors import ArtifactCorruptError
from runstore.errors import DestinationConflictError
from runstore.errors import DurabilityError
from runstore.errors import UnsafePathError
from runstore.store.lock_file import open_lock_file
from runstore.store.publication import objects
from runstore.store.publication.staging import ARTIFACTS_DIR
from runstore.store.publication.staging import STAGE_LOCK_NAME
from runstore.store.publication.staging import STAGE_PREFIX

QUARANTINE_NAME: Final = ".quarantine"
QUARANTINE_ATTEMPTS: Final = 100
"""How many names (``<name>``, then ``<name>.1`` ...) a quarantine tries before refusing."""
OUTCOME_NAME: Final = "outcome.json"
_ADDRESS: Final = re.compile(
    "(" + "|".join(kind.value for kind in ArtifactKind) + ")-[0-9a-f]{64}", re.ASCII
)


@attrs.frozen(kw_only=True)
class Listing:
    """The entries of ``artifacts/`` that recovery handles: the stage directory names
    (sorted) and the names of every other entry that does not start with ``.``, which
    :func:`addresses` narrows down once the registered ones are set aside."""

    stages: tuple[str, ...]
    names: frozenset[str]


_KINDS: Final = {kind.value: kind for kind in ArtifactKind}


def artifacts_path(root: str) -> str:
    return os.path.join(root, ARTIFACTS_DIR)


def list_artifacts(root: str) -> Listing:
    """List ``artifacts/`` (none of it when it is missing). A symbolic link or
    non-directory there is ``unsafe_path``; so is a stage entry, or ``.quarantine``, that
    is a symbolic link or not a directory (checked here, before the pass commits
    anything). Only names are read: with a long history this directory is large, and
    only stages are worth an ``lstat``."""
    path = artifacts_path(root)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Listing(stages=(), names=frozenset())
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{path} is not a directory")
    names = set(os.listdir(path))
    hidden = {name for name in names if name.startswith(".")}
    names -= hidden
    stages = []
    for name in sorted(name for name in hidden if name.startswith(STAGE_PREFIX)):
        if _is_directory(os.path.join(path, name)):
            stages.append(name)
    if QUARANTINE_NAME in hidden:
        _is_directory(os.path.join(path, QUARANTINE_NAME))
    return Listing(stages=tuple(stages), names=frozenset(names))


def _is_directory(path: str) -> bool:
    """True for a directory; False when ``path`` vanished since it was listed (a
    publisher's cleanup does not wait for recovery); ``unsafe_path`` for anything else."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{path} is not a directory")
    return True


def addresses(names: frozenset[str]) -> list[tuple[str, ArtifactKind]]:
    """``(name, kind)`` of each of ``names`` that is a content address
    (``<known kind>-<64 lowercase hex>``), by name; other names are not recovery's."""
    found = []
    for name in sorted(names):
        if _ADDRESS.fullmatch(name):
            found.append((name, _KINDS[name.split("-", 1)[0]]))
    return found


class StageLock:
    """A stage's ``lock`` file tried exclusively without waiting. :attr:`held_elsewhere`
    says another process holds it; otherwise this process holds it (or the stage has no
    lock file, which no process can hold) until :meth:`release`."""

    def __init__(self, stage_path: str) -> None:
        self._path = os.path.join(stage_path, STAGE_LOCK_NAME)
        self._fd: int | None = None
        self.held_elsewhere = False
        try:
            fd = open_lock_file(self._path)
        except FileNotFoundError:
            return
        try:
            taken = durable.flock(fd, self._path, exclusive=True)
        except OSError as exc:
            os.close(fd)
            raise DurabilityError(f"locking {self._path} failed: {exc}") from exc
        if taken:
            self._fd = fd
        else:
            os.close(fd)
            self.held_elsewhere = True

    def release(self) -> None:
        """Release the lock if this process holds it. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _synced(step: str, action: Callable[[], None]) -> None:
    """Run one durability step; its OSError becomes ``durability_failed``."""
    try:
        action()
    except OSError as exc:
        raise DurabilityError(f"{step} failed: {exc}") from exc


def quarantine(root: str, name: str) -> bool:
    """Move the stage ``artifacts/<name>`` intact to ``artifacts/.quarantine/<name>``:
    create ``.quarantine/`` when missing (``artifacts/`` synced), rename without
    replacement, then sync ``.quarantine/`` and ``artifacts/``, each its own step. When
    that name is taken (a power loss between an earlier pass's rename and its syncs may
    leave the stage under both names), the first free ``<name>.<n>`` (n = 1, 2, ...) is
    used: nothing there is ever replaced. Returns False, moving nothing, when the stage has
    vanished meanwhile (its publisher's cleanup finished)."""
    parent = artifacts_path(root)
    holding = os.path.join(parent, QUARANTINE_NAME)
    try:
        info: os.stat_result | None = os.lstat(holding)
    except FileNotFoundError:
        info = None
    if info is None:
        _synced(f"creating {holding}", lambda: durable.create_directory(holding, 0o700))
        _synced(f"syncing {parent}", lambda: durable.fsync_dir(parent))
    elif not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{holding} is not a directory")
    source = os.path.join(parent, name)
    for attempt in range(QUARANTINE_ATTEMPTS):
        taken = f"{name}.{attempt}" if attempt else name
        try:
            durable.rename_noreplace(source, os.path.join(holding, taken))
            break
        except FileNotFoundError:
            if not os.path.lexists(source):
                return False
            raise DurabilityError(f"quarantining {name} failed: its destination vanished") from None
        except FileExistsError:
            continue
        except OSError as exc:
            raise DurabilityError(f"quarantining {name} failed: {exc}") from exc
    else:
        raise DestinationConflictError(
            f"{ARTIFACTS_DIR}/{QUARANTINE_NAME}/{name} and its next "
            f"{QUARANTINE_ATTEMPTS - 1} names are taken"
        )
    _synced(f"syncing {holding}", lambda: durable.fsync_dir(holding))
    _synced(f"syncing {parent}", lambda: durable.fsync_dir(parent))
    return True


def stage_exists(root: str, store_path: str) -> bool:
    """Whether the stage directory at ``store_path`` exists (not following a link)."""
    try:
        os.lstat(os.path.join(root, store_path))
    except FileNotFoundError:
        return False
    return True


@attrs.frozen(kw_only=True)
class FoundObject:
    """A completed object that verified at its address, with its ``outcome.json`` bytes
    (None when it has no top-level one)."""

    completed: objects.CompletedObject
    outcome: bytes | None


def read_object(root: str, name: str, *, sync: bool) -> FoundObject:
    """Verify ``artifacts/<name>`` (every byte read; every file and directory synced when
    ``sync``) and read its top-level ``outcome.json``. ``artifact_corrupt`` when it does not
    verify or its name is not its address (``<kind>-<tree hash>``)."""
    path = os.path.join(artifacts_path(root), name)
    completed = objects.verify(path, sync=sync)
    if name.split("-", 1)[1] != completed.tree_sha256:
        raise ArtifactCorruptError(f"{name} is not the address of its content")
    listed = {file.path: file for file in completed.files}
    if OUTCOME_NAME not in listed:
        return FoundObject(completed=completed, outcome=None)
    try:
        with open(os.path.join(path, OUTCOME_NAME), "rb", opener=_no_follow) as handle:
            data = handle.read(listed[OUTCOME_NAME].size_bytes + 1)
    except OSError as exc:
        raise ArtifactCorruptError(f"{OUTCOME_NAME} cannot be read: {exc.strerror}") from None
    if hashlib.sha256(data).hexdigest() != listed[OUTCOME_NAME].sha256:
        raise ArtifactCorruptError(f"{OUTCOME_NAME} changed after it was verified")
    return FoundObject(completed=completed, outcome=data)


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)


def verifies(root: str, path: str, content_sha256: str, manifest_sha256: str) -> bool:
    """Whether the registered object at store ``path`` still verifies with these digests."""
    try:
        completed = objects.verify(os.path.join(root, path), sync=False)
    except ArtifactCorruptError:
        return False
    except OSError:
        return False
    return (completed.tree_sha256, completed.manifest_sha256) == (content_sha256, manifest_sha256)


def sync_artifacts(root: str) -> None:
    """Sync ``artifacts/`` (an object's publication parent)."""
    parent = artifacts_path(root)
    _synced(f"syncing {parent}", lambda: durable.fsync_dir(parent))
