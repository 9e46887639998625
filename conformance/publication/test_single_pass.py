"""One pass per file in complete() (runstore.store.publication.objects and file_pass): the
sync lane that overlaps each file's fsync with reading the next files gives the seam the
same operations in the same order as a file-by-file pass, fails as a sequential pass would
(first failure wins, nothing synced after it, no descriptor left open); a file sorting after
``manifest.json`` is read once when it fits the budget and twice beyond it; runtime files
are never read back; the rescan and the manifest builder give the same verdicts and bytes
as the full checks (SPEC.md section 12.4)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.errors import UnsafeEntryError
from runstore.manifest import ManifestFile
from runstore.manifest import built_manifest_bytes
from runstore.manifest import manifest_bytes
from runstore.model import content
from runstore.store.publication import file_pass
from runstore.store.publication import objects

from conformance.publication.test_objects import RESERVED
from conformance.publication.test_objects import Spec
from conformance.publication.test_objects import model_tree
from conformance.publication.test_objects import observed
from conformance.publication.test_objects import populate

Seen = list[tuple[str, str, str]]

MANY: Spec = {
    **{f"d{index // 10}/f{index:02d}": bytes([index]) * (index * 37) for index in range(40)},
    "d1/x": (b"#!/bin/sh\n", True),
    "empty": b"",
    "zz/late": b"late bytes",
}
"""Over LANE_MIN_FILES files in several directories, an empty one, an executable one and
one sorting after manifest.json."""


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def trace_of(root: Path, spec: Spec, lane_min: int, monkeypatch: pytest.MonkeyPatch) -> Seen:
    """The seam's operations during complete() of ``spec`` with lanes from ``lane_min``."""
    populate(root, spec)
    seen: Seen = []
    monkeypatch.setattr(objects, "LANE_MIN_FILES", lane_min)
    inventory = objects.scan(str(root), reserved=RESERVED)
    with observed(
        lambda phase, op, target: seen.append((phase, op, os.path.relpath(target, root)))
    ):
        objects.complete(str(root), inventory, {"outcome.json": b"{}"})
    return seen


def test_the_lane_gives_the_seam_the_order_of_a_file_by_file_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_lane = trace_of(tmp_path / "lane", MANY, 1, monkeypatch)
    without = trace_of(tmp_path / "plain", MANY, 10**9, monkeypatch)
    assert with_lane == without
    files = [target for phase, op, target in with_lane if op == "fsync_file" and phase == "after"]
    assert files == ["outcome.json", *sorted(MANY, key=lambda p: p.encode()), "manifest.json"]


def test_a_lane_completes_to_what_the_model_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objects, "LANE_MIN_FILES", 1)
    populate(tmp_path, MANY)
    before = open_descriptors()
    completed = objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=RESERVED), {})
    assert open_descriptors() == before
    result = content.complete(model_tree(MANY), {})
    assert not isinstance(result, content.Refusal)
    assert (result[1], result[2]) == (completed.tree_sha256, completed.manifest_sha256)
    assert objects.verify(str(tmp_path), sync=False) == completed


def failing_fsync(target_suffix: str) -> Callable[[str, str, str], None]:
    def fail(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "fsync_file" and target.endswith(target_suffix):
            raise OSError(5, "Input/output error")

    return fail


@pytest.mark.parametrize("lane_min", [1, 10**9])
def test_a_failed_fsync_in_the_pass_stops_every_later_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane_min: int
) -> None:
    monkeypatch.setattr(objects, "LANE_MIN_FILES", lane_min)
    populate(tmp_path, MANY)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    seen: Seen = []
    fail = failing_fsync("d0/f05")

    def observer(phase: str, operation: str, target: str) -> None:
        seen.append((phase, operation, os.path.relpath(target, tmp_path)))
        fail(phase, operation, target)

    before = open_descriptors()
    with observed(observer), pytest.raises(DurabilityError):
        objects.complete(str(tmp_path), inventory, {})
    assert open_descriptors() == before
    assert seen[-1] == ("before", "fsync_file", "d0/f05")
    synced = [target for phase, _, target in seen if phase == "after"]
    assert synced == [f"d0/f{index:02d}" for index in range(5)]
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize("lane_min", [1, 10**9])
def test_the_first_failure_in_pass_order_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane_min: int
) -> None:
    """An fsync failing at d0/f03 and a file changed after the scan at d2/f25 (later in the
    pass): a file-by-file pass stops at the fsync, and so does a lane."""
    monkeypatch.setattr(objects, "LANE_MIN_FILES", lane_min)
    populate(tmp_path, MANY)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    (tmp_path / "d2" / "f25").write_bytes(b"other size")
    with observed(failing_fsync("d0/f03")), pytest.raises(DurabilityError):
        objects.complete(str(tmp_path), inventory, {})


@pytest.mark.parametrize("lane_min", [1, 10**9])
def test_a_file_changed_mid_pass_is_refused_after_syncing_only_what_precedes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lane_min: int
) -> None:
    monkeypatch.setattr(objects, "LANE_MIN_FILES", lane_min)
    populate(tmp_path, MANY)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    (tmp_path / "d2" / "f25").write_bytes(b"other size")
    synced: list[str] = []

    def record(phase: str, operation: str, target: str) -> None:
        if phase == "after":
            synced.append(os.path.relpath(target, tmp_path))

    before = open_descriptors()
    with observed(record), pytest.raises(ArtifactCorruptError):
        objects.complete(str(tmp_path), inventory, {})
    assert open_descriptors() == before
    order = sorted(MANY, key=lambda p: p.encode())
    assert synced == order[: order.index("d2/f25")]
    assert not (tmp_path / "manifest.json").exists()


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every file complete() opens for reading."""
    reads: list[str] = []
    original = file_pass.read_file

    def counting(absolute: str, *args: object, **kwargs: object) -> object:
        reads.append(os.path.basename(absolute))
        return original(absolute, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(objects, "read_file", counting)
    return reads


def test_a_late_file_is_read_once_and_a_runtime_file_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = count_reads(monkeypatch)
    populate(tmp_path, {"alpha": b"a", "zeta": b"z" * 100, "\u00fcber": b"u"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    completed = objects.complete(str(tmp_path), inventory, {"outcome.json": b"{}"})
    assert sorted(reads) == ["alpha", "zeta", "\u00fcber"]
    assert objects.verify(str(tmp_path), sync=False) == completed


def test_late_files_beyond_the_budget_are_read_twice_and_must_not_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objects, "LATE_KEEP_BYTES", 150)
    reads = count_reads(monkeypatch)
    populate(tmp_path, {"p": b"p" * 100, "q": b"q" * 100, "r": b"r" * 10})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    completed = objects.complete(str(tmp_path), inventory, {})
    assert reads == ["p", "q", "r", "q"]  # p and r fit the budget; q is read again
    assert objects.verify(str(tmp_path), sync=False) == completed

    (tmp_path / "manifest.json").unlink()
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def meddle(phase: str, operation: str, target: str) -> None:
        if phase == "after" and target.endswith("manifest.json"):
            (tmp_path / "q").write_bytes(b"Q" * 100)  # same size, other bytes

    with observed(meddle), pytest.raises(ArtifactCorruptError):
        objects.complete(str(tmp_path), inventory, {})


@pytest.mark.parametrize("name", ["e\u0301", "tab\there", "new"])
def test_the_rescan_checks_the_names_of_new_entries(tmp_path: Path, name: str) -> None:
    populate(tmp_path, {"a": b"1", "sub/b": b"2"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def meddle(phase: str, operation: str, target: str) -> None:
        if phase == "after" and operation == "fsync_dir" and target.endswith("sub"):
            (tmp_path / "sub" / name).write_bytes(b"")

    expected = ArtifactCorruptError if name == "new" else UnsafeEntryError
    with observed(meddle), pytest.raises(expected):
        objects.complete(str(tmp_path), inventory, {})
    assert not (tmp_path / "manifest.json").exists()


def test_a_file_rewritten_in_place_after_its_read_is_refused_by_the_rescan(
    tmp_path: Path,
) -> None:
    populate(tmp_path, {"a": b"1234", "b": b"x"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def meddle(phase: str, operation: str, target: str) -> None:
        if phase == "after" and operation == "fsync_file" and target.endswith("/b"):
            with open(tmp_path / "a", "r+b") as handle:  # same size, same inode
                handle.write(b"9")
            stamp = (tmp_path / "a").stat()
            os.utime(tmp_path / "a", ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1))

    with observed(meddle), pytest.raises(ArtifactCorruptError, match="changed after it was read"):
        objects.complete(str(tmp_path), inventory, {})


paths = st.lists(
    st.text(alphabet="ab/\u00e9\u65e5.", min_size=1, max_size=8).filter(
        lambda p: all(s not in ("", ".", "..") for s in p.split("/")) and p != "manifest.json"
    ),
    unique=True,
    max_size=6,
).filter(  # a scanned tree never holds a file that is also another's directory (SPEC 12.2)
    lambda ps: not any(other.startswith(p + "/") for p in ps for other in ps)
)


@settings(max_examples=80)
@given(
    listed=paths,
    sizes=st.lists(st.integers(min_value=0, max_value=2**53 - 1), min_size=6, max_size=6),
    digest=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_the_built_manifest_is_the_checked_manifest(
    listed: list[str], sizes: list[int], digest: str
) -> None:
    files = [
        ManifestFile(path=path, sha256=digest, size_bytes=size)
        for path, size in zip(listed, sizes, strict=False)
    ]
    ordered = sorted(files, key=lambda f: f.path.encode())
    assert built_manifest_bytes(ordered) == manifest_bytes(reversed(files))
