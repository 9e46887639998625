"""What recovery finds on disk, as the model's :class:`~runstore.model.DiskView`, read
independently of the store's recovery code.

Rules of this file: test kit, filesystem reads only (plus a stage lock tried and released
at once). Objects are read whole with :func:`runstore.testing.publishing.read_tree` and
checked with the model's own content module (:mod:`runstore.model.content`): an object
*verifies* when it is a publishable tree plus a ``manifest.json`` that is exactly the
manifest of the rest, and its name is ``<kind>-<its tree hash>``. Nothing here imports
:mod:`runstore.store.recovery.disk` or :mod:`runstore.store.publication.objects`, so a defect there
cannot hide itself from the model.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
from typing import Final

from runstore import model as m
from runstore.enums import ArtifactKind
from runstore.model import content
from runstore.records import ArtifactRegistration
from runstore.testing.publishing import read_tree

ARTIFACTS: Final = "artifacts"
_ADDRESS: Final = re.compile(
    "(" + "|".join(kind.value for kind in ArtifactKind) + ")-([0-9a-f]{64})", re.ASCII
)


def held_elsewhere(stage: str) -> bool:
    """Whether another open file description holds the stage's ``lock`` (a missing lock
    file is free)."""
    try:
        fd = os.open(os.path.join(stage, "lock"), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
            return True
        raise
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def read_object(root: str, path: str) -> tuple[ArtifactRegistration | None, bytes | None]:
    """The registration ``artifacts/<kind>-<hex>`` verifies as (None when it does not), and
    its top-level ``outcome.json`` bytes (None when it has none)."""
    match = _ADDRESS.fullmatch(path.removeprefix(f"{ARTIFACTS}/"))
    assert match is not None, path
    tree = read_tree(os.path.join(root, path))
    outcome = tree.get("outcome.json")
    data = outcome.data if isinstance(outcome, content.File) else None
    manifest = tree.get(content.MANIFEST)
    rest = {name: entry for name, entry in tree.items() if name != content.MANIFEST}
    if not isinstance(manifest, content.File):
        return None, data
    if content.refusal(rest, reserved=()) is not None:
        return None, data
    if manifest.data != content.manifest_bytes(rest) or content.tree_sha256(tree) != match[2]:
        return None, data
    registration = ArtifactRegistration(
        kind=ArtifactKind(match[1]),
        path=path,
        content_sha256=match[2],
        manifest_sha256=hashlib.sha256(manifest.data).hexdigest(),
        verified_at_ns=0,
    )
    return registration, data


def disk_view(root: str, state: m.ModelState) -> m.DiskView:
    """The stages under ``artifacts/`` (held or free), the unregistered content addresses
    there (what each verifies as, and its ``outcome.json``), and the registered artifacts
    of ``state`` whose directory no longer verifies."""
    directory = os.path.join(root, ARTIFACTS)
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    registered = {artifact.path: artifact for artifact in state.artifacts.values()}
    stages: dict[str, bool] = {}
    objects: dict[str, m.DiskObject] = {}
    for name in names:
        path = f"{ARTIFACTS}/{name}"
        if name.startswith(".staging-"):
            stages[path] = held_elsewhere(os.path.join(directory, name))
        elif _ADDRESS.fullmatch(name) and path not in registered:
            registration, outcome = read_object(root, path)
            objects[path] = m.DiskObject(registration=registration, outcome=outcome)
    corrupt = set()
    for path, artifact in registered.items():
        found = read_object(root, path)[0] if os.path.isdir(os.path.join(root, path)) else None
        if found is None or found.manifest_sha256 != artifact.manifest_sha256:
            corrupt.add(artifact.id)
    return m.DiskView(stages=stages, objects=objects, corrupt=frozenset(corrupt))
