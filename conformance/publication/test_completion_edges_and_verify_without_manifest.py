"""Edges of completion and verification (SPEC.md 12.2 and 12.4):

- a file of exactly 2^53-1 bytes is listable: the size check refuses only larger ones
  (``out_of_range``), so a scan claiming exactly that size goes on to the file's checks;
- a runtime file may be any free root-level name other than ``manifest.json``, one sorting
  before it included;
- a late file read a second time is not synchronized again (its pass already did);
- a kept late file removed before the manifest's bytes reach the transcript is
  ``artifact_corrupt`` naming it;
- verification without ``manifest.json`` says so, even when a later file could be
  mistaken for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore import RunStoreError
from runstore.store.publication import objects
from runstore.store.publication.inventory import Inventory
from runstore.store.publication.inventory import InventoryFile

from conformance.publication.test_objects import RESERVED
from conformance.publication.test_objects import observed
from conformance.publication.test_objects import populate

LARGEST = 2**53 - 1


def _refusal(call: object) -> RunStoreError:
    with pytest.raises(RunStoreError) as info:
        call()  # type: ignore[operator]
    return info.value


@pytest.mark.parametrize(
    ("size", "code", "message"),
    [
        (LARGEST, "artifact_corrupt", f"'a' is not the file of size {LARGEST}"),
        (LARGEST + 1, "out_of_range", "'a' is over 2**53-1 bytes: not listable"),
    ],
)
def test_only_a_size_over_2_53_minus_1_is_out_of_range(
    tmp_path: Path, size: int, code: str, message: str
) -> None:
    """SPEC.md 12.2: a size is an integer from 0 to 2^53-1; only a larger one is refused
    with ``out_of_range`` before anything is read. (The scan here claims the size; the
    file itself is small, so a listable claim fails the file's own size check.)"""
    populate(tmp_path, {"a": b"small"})
    inventory = Inventory(
        directories=(), files=(InventoryFile(path="a", size=size, executable=False),)
    )
    refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert (refusal.code, refusal.message) == (code, message)


def test_a_runtime_file_may_sort_before_manifest_json(tmp_path: Path) -> None:
    """SPEC.md 12.4 step 1: runtime files are written at the root under free names; only
    ``manifest.json`` is the completion's own. ``log.json`` sorts before it and is fine."""
    populate(tmp_path, {"a": b"payload"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    completed = objects.complete(str(tmp_path), inventory, {"log.json": b"{}"})
    assert (tmp_path / "log.json").read_bytes() == b"{}"
    assert [f.path for f in completed.files] == ["a", "log.json"]
    assert objects.verify(str(tmp_path), sync=False) == completed


def test_a_late_file_read_twice_is_synced_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.4: each payload file is synchronized in the pass, through the descriptor
    it was read by; the second read of a late file beyond the budget only reads."""
    monkeypatch.setattr(objects, "LATE_KEEP_BYTES", 0)
    populate(tmp_path, {"zeta": b"late bytes"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    synced: list[str] = []

    def record(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("before", "fsync_file"):
            synced.append(Path(target).name)

    with observed(record):
        objects.complete(str(tmp_path), inventory, {})
    assert synced == ["zeta", "manifest.json"]


def test_a_kept_late_file_removed_before_it_is_fed_is_artifact_corrupt(tmp_path: Path) -> None:
    """SPEC.md 12.4, "Each byte is read once": a kept late file must still have the stamp
    it was read under once the manifest is written; one that is gone has none."""
    populate(tmp_path, {"zeta": b"late bytes"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def remove(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("after", "fsync_file") and target.endswith("manifest.json"):
            (tmp_path / "zeta").unlink()

    with observed(remove):
        refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "'zeta' changed after it was read",
    )


def test_verify_says_a_missing_manifest_is_missing(tmp_path: Path) -> None:
    """SPEC.md 12.4, "Verification": ``manifest.json`` must be present; without it the
    refusal says so, rather than reading another file (``zeta``) in its place."""
    populate(tmp_path, {"a": b"payload", "zeta": b"late"})
    objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=RESERVED), {})
    (tmp_path / "manifest.json").unlink()
    refusal = _refusal(lambda: objects.verify(str(tmp_path), sync=False))
    assert (refusal.code, refusal.message) == ("artifact_corrupt", "manifest.json is missing")
