"""Completion and verification compare what they read with what they expect by equality,
so a change is noticed whichever way it goes (SPEC.md 12.4, "Completion" steps 4-5,
"Each byte is read once" and "Verification"), and each refusal names what changed:

- verification refuses a file whose bytes differ from its manifest digest, whether the
  found digest sorts before or after the listed one;
- a file touched after its read (its modification time moved earlier or later) is named
  by the rescan, even when another file is unchanged;
- a late file kept from its one read must keep its stamp until the manifest is written;
- a late file read twice must give the same digest both times (its stamp kept, so only
  its bytes tell);
- a ``manifest.json`` that grows or shrinks while verification reads it is refused.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from runstore import RunStoreError
from runstore.store.publication import objects

from conformance.publication.test_objects import RESERVED
from conformance.publication.test_objects import observed
from conformance.publication.test_objects import populate

SECOND = 10**9


def _refusal(call: object) -> RunStoreError:
    with pytest.raises(RunStoreError) as info:
        call()  # type: ignore[operator]
    return info.value


def _shift_mtime(path: Path, by_ns: int) -> None:
    status = path.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + by_ns))


def _rewrite_keeping_stamp(path: Path, data: bytes) -> None:
    """Same inode, size, mode and modification time; other bytes."""
    status = path.stat()
    with open(path, "r+b") as handle:
        handle.write(data)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def _two_rewrites(original: bytes) -> list[bytes]:
    """Two same-size rewrites of ``original``, one whose SHA-256 sorts before the
    original's and one after."""
    listed = hashlib.sha256(original).hexdigest()
    below = above = None
    for seed in range(256):
        candidate = bytes([seed]) + original[1:]
        digest = hashlib.sha256(candidate).hexdigest()
        if digest < listed and below is None:
            below = candidate
        if digest > listed and above is None:
            above = candidate
    assert below is not None and above is not None
    return [below, above]


PAYLOAD = b"payload bytes"


@pytest.mark.parametrize("order", [0, 1], ids=["digest-below", "digest-above"])
def test_verify_refuses_bytes_that_differ_from_the_manifest_digest(
    tmp_path: Path, order: int
) -> None:
    """SPEC.md 12.4, "Verification": every SHA-256 matches, else ``artifact_corrupt``."""
    populate(tmp_path, {"a": PAYLOAD})
    objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=RESERVED), {})
    _rewrite_keeping_stamp(tmp_path / "a", _two_rewrites(PAYLOAD)[order])
    refusal = _refusal(lambda: objects.verify(str(tmp_path), sync=False))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "'a' does not match its manifest digest",
    )


@pytest.mark.parametrize("by_ns", [-SECOND, SECOND], ids=["earlier", "later"])
def test_the_rescan_names_the_file_touched_after_its_read(tmp_path: Path, by_ns: int) -> None:
    """SPEC.md 12.4 step 4: a file modified after it was read is ``artifact_corrupt``,
    named, whichever way its modification time moved; an unchanged file beside it is not
    named."""
    populate(tmp_path, {"sub/a": b"1234", "sub/b": b"x"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def touch(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("before", "fsync_dir") and target.endswith("/sub"):
            _shift_mtime(tmp_path / "sub" / "a", by_ns)

    with observed(touch):
        refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "'sub/a' changed after it was read",
    )


@pytest.mark.parametrize("by_ns", [-SECOND, SECOND], ids=["earlier", "later"])
def test_a_kept_late_file_must_keep_its_stamp_until_the_manifest_is_written(
    tmp_path: Path, by_ns: int
) -> None:
    """SPEC.md 12.4, "Each byte is read once": a file sorting after ``manifest.json`` must
    still have the stamp it was read under once the manifest is written."""
    populate(tmp_path, {"zeta": b"late bytes"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def touch(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("after", "fsync_file") and target.endswith("manifest.json"):
            _shift_mtime(tmp_path / "zeta", by_ns)

    with observed(touch):
        refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "'zeta' changed after it was read",
    )


@pytest.mark.parametrize("order", [0, 1], ids=["digest-below", "digest-above"])
def test_a_late_file_read_twice_must_give_the_same_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: int
) -> None:
    """SPEC.md 12.4, "Each byte is read once": a late file beyond the budget is read a
    second time after the manifest, and that read must give the same digest, else
    ``artifact_corrupt``."""
    monkeypatch.setattr(objects, "LATE_KEEP_BYTES", 0)
    populate(tmp_path, {"zeta": PAYLOAD})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    rewrite = _two_rewrites(PAYLOAD)[order]

    def meddle(phase: str, operation: str, target: str) -> None:
        if (phase, operation) == ("after", "fsync_file") and target.endswith("manifest.json"):
            _rewrite_keeping_stamp(tmp_path / "zeta", rewrite)

    with observed(meddle):
        refusal = _refusal(lambda: objects.complete(str(tmp_path), inventory, {}))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "'zeta' changed between its two reads",
    )


@pytest.mark.parametrize("change", [b"x", b""], ids=["grown", "shrunk"])
def test_verify_refuses_a_manifest_that_changes_size_while_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: bytes
) -> None:
    """SPEC.md 12.4, "Verification": ``manifest.json`` is read as the walk found it; one
    whose length differs from the walk's size when read is ``artifact_corrupt``."""
    populate(tmp_path, {"a": PAYLOAD})
    objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=RESERVED), {})
    manifest = tmp_path / "manifest.json"
    real_walk = objects.walk

    def walk(*args: object, **kwargs: object) -> object:
        found = real_walk(*args, **kwargs)  # type: ignore[arg-type]
        data = manifest.read_bytes()
        manifest.write_bytes(data + change if change else data[:-1])
        return found

    monkeypatch.setattr(objects, "walk", walk)
    refusal = _refusal(lambda: objects.verify(str(tmp_path), sync=False))
    assert (refusal.code, refusal.message) == (
        "artifact_corrupt",
        "manifest.json changed while it was read",
    )
