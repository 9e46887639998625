"""A content address that is already taken must hold the identical complete object
(SPEC.md section 11, ``publish_artifact`` step 6): a directory that verifies with the same
tree hash and the same manifest bytes; anything else is ``destination_conflict`` and
nothing is replaced. ``test_failures.py`` plants corrupt or foreign entries that fail
verification; these tests plant what passes every check but the last one, and an address
the system cannot describe:

- another complete object, one that verifies on its own, planted at the address is a
  conflict whichever of the two tree hashes is the smaller (the check is equality, not an
  order), and so is the reverse planting;
- an address whose type cannot be read (its ``lstat`` fails after the no-replace rename
  found it taken) is a conflict naming the system's reason, not an untyped ``OSError``.

In each case the planted entry is left as it was, no artifact is registered, and the stage
stays registered with its lock released (section 11, "Failures").
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import RunStoreError
from runstore import durable
from runstore.store.publication import objects
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import Payload
from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files
from conformance.publication.world import snapshot_tree
from conformance.publication.world import unchanged_but_staging

DATASET = ArtifactKind.DATASET
OTHER = files(**{"data.bin": b"\x00\x01other", "notes/readme.txt": b"hello again\n"})
"""A payload other than ``DATA``: its object has another tree hash and manifest."""
PAYLOADS = {"data": DATA, "other": OTHER}


def _published(factory: pytest.TempPathFactory, kept: Path) -> dict[str, ArtifactRegistration]:
    """Both payloads published in a scratch store (outside the world's root: a store is
    never opened inside another), each object copied under ``kept``; their registrations."""
    scratch_root = factory.mktemp("scratch")
    scratch = PublicationWorld(scratch_root)
    try:
        guard = scratch.executing(sc.slot_fixture())
        published = {
            name: scratch.store.publish_artifact(
                guard, DATASET, payload, at(2_000).fresh()
            ).artifact
            for name, payload in PAYLOADS.items()
        }
    finally:
        scratch.close()
    for name, artifact in published.items():
        shutil.copytree(scratch_root / artifact.path, kept / name)
    return published


def _refused(world: PublicationWorld, planted: Path, payload: Payload) -> RunStoreError:
    """Publish ``payload`` with ``planted`` in place; the refusal, after checking that
    nothing was replaced or registered and that the stage is kept with its lock free."""
    guard = world.executing(sc.slot_fixture())
    entry_before = snapshot_tree(planted)
    before = world.projection()
    with pytest.raises(RunStoreError) as info:
        world.store.publish_artifact(guard, DATASET, payload, at(2_000).fresh())
    assert snapshot_tree(planted) == entry_before
    assert world.artifact_rows() == []
    assert world.rows("SELECT count(*) FROM leased_artifacts") == [(0,)]
    unchanged_but_staging(world, before)
    return info.value


@pytest.mark.parametrize(("planted_name", "published_name"), [("other", "data"), ("data", "other")])
def test_another_complete_object_at_the_address_is_a_destination_conflict(
    world: PublicationWorld,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    planted_name: str,
    published_name: str,
) -> None:
    """SPEC.md 11 step 6: the taken address must verify with the same tree hash and the
    same manifest bytes. A complete object of other content verifies on its own, so only
    that comparison refuses it; run in both directions, one of them plants the larger
    tree hash and the other the smaller."""
    published = _published(tmp_path_factory, tmp_path)
    planted_copy = tmp_path / planted_name
    assert objects.verify(str(planted_copy), sync=False).tree_sha256 == (
        published[planted_name].content_sha256
    )
    assert published[planted_name].content_sha256 != published[published_name].content_sha256
    world.artifacts.mkdir()
    planted = world.root / published[published_name].path
    shutil.copytree(planted_copy, planted)

    refusal = _refused(world, planted, PAYLOADS[published_name])

    assert refusal.code == "destination_conflict"
    assert refusal.message == f"{planted.name} exists with other content"
    # The publisher's own object is complete, identical to the scratch store's, in its stage.
    (stage,) = world.stages()
    duplicate = objects.verify(str(stage / "object"), sync=False)
    assert duplicate.tree_sha256 == published[published_name].content_sha256


def test_an_address_that_cannot_be_inspected_is_a_destination_conflict(
    world: PublicationWorld,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC.md 11 step 6 and section 9: an address that is taken but whose type cannot be
    read is not the identical object, so the refusal is the typed ``destination_conflict``
    with the system's reason, never the bare ``OSError``; the identical object planted
    there is left untouched."""
    published = _published(tmp_path_factory, tmp_path)
    world.artifacts.mkdir()
    planted = world.root / published["data"].path
    shutil.copytree(tmp_path / "data", planted)
    taken: list[bool] = []

    def observer(phase: str, operation: str, path: str) -> None:
        if operation == "rename_noreplace":
            taken.append(True)

    real_lstat = os.lstat

    def lstat(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> os.stat_result:
        if taken and os.fspath(path) == str(planted):
            raise PermissionError(errno.EACCES, "injected", str(planted))
        return real_lstat(path, *args, **kwargs)

    guard = world.executing(sc.slot_fixture())
    before = world.projection()
    previous = durable.install_observer(observer)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(os, "lstat", lstat)
            with pytest.raises(RunStoreError) as info:
                world.store.publish_artifact(guard, DATASET, DATA, at(2_000).fresh())
    finally:
        durable.install_observer(previous)

    assert taken  # the no-replace rename was tried (and found the address taken)
    assert info.value.code == "destination_conflict"
    assert info.value.message == (
        f"{planted.name} cannot be inspected: [Errno 13] injected: '{planted}'"
    )
    assert isinstance(info.value.__cause__, PermissionError)
    assert objects.verify(str(planted), sync=False).tree_sha256 == published["data"].content_sha256
    assert world.artifact_rows() == []
    unchanged_but_staging(world, before)
