"""Completing and verifying object directories on a real filesystem
(runstore.store.publication.objects): the scan's refusals, complete() against the pure formats and
the model, verify() against each kind of corruption, and the durability order seen through the
durable seam."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore import durable
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import UnsafeEntryError
from runstore.manifest import ManifestFile
from runstore.manifest import manifest_bytes
from runstore.manifest import parse_manifest
from runstore.model import content
from runstore.store.publication import objects
from runstore.tree_hash import Entry
from runstore.tree_hash import tree_sha256

RESERVED = ("manifest.json", "outcome.json")

Spec = Mapping[str, bytes | tuple[bytes, bool] | None]
"""path -> file bytes, (bytes, executable), or None for a directory."""


def populate(root: Path, spec: Spec) -> None:
    for path, value in spec.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if value is None:
            target.mkdir(exist_ok=True)
            continue
        data, executable = value if isinstance(value, tuple) else (value, False)
        target.write_bytes(data)
        target.chmod(0o755 if executable else 0o644)


def model_tree(spec: Spec) -> dict[str, content.Entry]:
    tree: dict[str, content.Entry] = {}
    for path, value in spec.items():
        if value is None:
            tree[path] = content.Directory()
        else:
            data, executable = value if isinstance(value, tuple) else (value, False)
            tree[path] = content.File(data, executable)
    return tree


def pure_entries(root: Path) -> list[Entry]:
    """An in-memory description of a directory, read with plain pathlib."""
    entries = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_dir():
            entries.append(Entry(path=relative, type="directory"))
        else:
            executable = bool(path.stat().st_mode & 0o111)
            entries.append(
                Entry(path=relative, type="file", data=path.read_bytes(), executable=executable)
            )
    return entries


MIB = 1 << 20
MIXED: Spec = {
    "a.bin": (b"\x00" * (2 * MIB + 17)),  # before manifest.json, several chunks
    "bin/tool": (b"#!/bin/sh\nexit 0\n", True),
    "caf\u00e9/\u65e5\u672c.txt": "\u65e5\u672c".encode(),
    "empty.txt": b"",
    "m/deep/er/x": b"x",
    "zeta.bin": bytes(range(256)) * (MIB // 64),  # after manifest.json, kept from one read
    "\u00fcber": b"after manifest.json",
}


def completed_dir(root: Path, spec: Spec = MIXED) -> objects.CompletedObject:
    populate(root, spec)
    inventory = objects.scan(str(root), reserved=RESERVED)
    return objects.complete(str(root), inventory, {"outcome.json": b'{"ok":true}'})


# --- scan ------------------------------------------------------------------------------------


def test_scan_lists_sorted_directories_and_files_with_sizes_and_exec_bits(tmp_path: Path) -> None:
    populate(tmp_path, MIXED)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    assert inventory.directories == ("bin", "caf\u00e9", "m", "m/deep", "m/deep/er")
    paths = [f.path for f in inventory.files]
    assert paths == sorted(MIXED, key=lambda p: p.encode())
    assert {f.path for f in inventory.files if f.executable} == {"bin/tool"}
    assert {f.path: f.size for f in inventory.files}["empty.txt"] == 0


def test_an_empty_root_and_a_nested_reserved_name_are_accepted(tmp_path: Path) -> None:
    assert objects.scan(str(tmp_path), reserved=RESERVED) == objects.Inventory(
        directories=(), files=()
    )
    populate(tmp_path, {"sub/manifest.json": b"{}"})
    assert objects.scan(str(tmp_path), reserved=RESERVED).files[0].path == "sub/manifest.json"


def make_unsafe(root: Path, kind: str) -> str:
    """Create one unsafe entry of ``kind`` in ``root``; return the name the error names."""
    (root / "ok.txt").write_bytes(b"fine")
    if kind == "symlink to a file":
        os.symlink("ok.txt", root / "link")
        return "link"
    if kind == "dangling symlink in a subdirectory":
        (root / "sub").mkdir()
        os.symlink("missing", root / "sub" / "link")
        return "sub/link"
    if kind == "symlink to a directory":
        (root / "dir").mkdir()
        (root / "dir" / "f").write_bytes(b"")
        os.symlink("dir", root / "dirlink")
        return "dirlink"
    if kind == "fifo":
        os.mkfifo(root / "pipe")
        return "pipe"
    if kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(root / "sock"))
        server.close()
        return "sock"
    if kind == "character device":
        os.mknod(root / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        return "null"
    if kind == "empty directory":
        (root / "empty").mkdir()
        return "empty"
    if kind == "nested empty directory":
        (root / "a" / "b").mkdir(parents=True)
        (root / "a" / "file").write_bytes(b"")
        return "a/b"
    if kind == "manifest.json written by the caller":
        (root / "manifest.json").write_bytes(b"{}")
        return "manifest.json"
    if kind == "outcome.json directory":
        (root / "outcome.json").mkdir()
        (root / "outcome.json" / "x").write_bytes(b"")
        return "outcome.json"
    if kind == "backslash":
        (root / "a\\b").write_bytes(b"")
        return "a\\\\b"
    if kind == "control character":
        (root / "bell\x07").write_bytes(b"")
        return "bell"
    if kind == "NFD name":
        (root / "e\u0301").write_bytes(b"")
        return "e\u0301"
    if kind == "non-UTF-8 name":
        fd = os.open(os.fsencode(root) + b"/bad\xff", os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
        return "bad"
    raise AssertionError(kind)


UNSAFE = [
    "symlink to a file",
    "dangling symlink in a subdirectory",
    "symlink to a directory",
    "fifo",
    "socket",
    "character device",
    "empty directory",
    "nested empty directory",
    "manifest.json written by the caller",
    "outcome.json directory",
    "backslash",
    "control character",
    "NFD name",
    "non-UTF-8 name",
]


@pytest.mark.parametrize("kind", UNSAFE)
def test_scan_refuses_each_unsafe_entry_naming_it(kind: str) -> None:
    if kind == "character device" and os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # AF_UNIX paths are short
        root = Path(short)
        named = make_unsafe(root, kind)
        with pytest.raises(UnsafeEntryError) as caught:
            objects.scan(short, reserved=RESERVED)
    assert named in caught.value.message
    assert "\n" not in str(caught.value)


def test_scan_refuses_a_root_that_is_a_symlink_or_missing(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "link")
    for root in ("link", "missing"):
        with pytest.raises(UnsafeEntryError):
            objects.scan(str(tmp_path / root), reserved=RESERVED)


# --- complete --------------------------------------------------------------------------------


def test_complete_matches_the_pure_formats_and_the_model(tmp_path: Path) -> None:
    completed = completed_dir(tmp_path)
    on_disk = (tmp_path / "manifest.json").read_bytes()
    assert on_disk == completed.manifest
    assert completed.manifest_sha256 == hashlib.sha256(on_disk).hexdigest()
    assert completed.tree_sha256 == tree_sha256(pure_entries(tmp_path))
    listed = parse_manifest(on_disk)
    assert listed == completed.files
    assert [f.path for f in listed] == sorted([*MIXED, "outcome.json"], key=lambda p: p.encode())
    assert (tmp_path / "outcome.json").read_bytes() == b'{"ok":true}'
    assert stat.S_IMODE((tmp_path / "outcome.json").stat().st_mode) == 0o644
    result = content.complete(model_tree(MIXED), {"outcome.json": b'{"ok":true}'})
    assert not isinstance(result, content.Refusal)
    _, model_tree_sha256, model_manifest_sha256 = result
    assert (model_tree_sha256, model_manifest_sha256) == (
        completed.tree_sha256,
        completed.manifest_sha256,
    )


def test_complete_creates_nothing_but_the_runtime_files_and_the_manifest(tmp_path: Path) -> None:
    populate(tmp_path, {"only": b"1"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    completed = objects.complete(str(tmp_path), inventory, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "only"]
    assert completed.manifest == manifest_bytes(
        [ManifestFile(path="only", sha256=hashlib.sha256(b"1").hexdigest(), size_bytes=1)]
    )


def test_an_empty_payload_completes_to_a_manifest_only_object(tmp_path: Path) -> None:
    completed = objects.complete(str(tmp_path), objects.scan(str(tmp_path), reserved=()), {})
    assert completed.files == ()
    assert objects.verify(str(tmp_path), sync=False) == completed


@pytest.mark.parametrize("name", ["manifest.json", "only", "sub/x", "..", "a\\b"])
def test_a_runtime_file_must_be_a_free_root_level_name(tmp_path: Path, name: str) -> None:
    populate(tmp_path, {"only": b"1"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    with pytest.raises(UnsafeEntryError):
        objects.complete(str(tmp_path), inventory, {name: b""})
    assert not (tmp_path / "manifest.json").exists()


def test_a_size_that_differs_from_the_scan_is_artifact_corrupt(tmp_path: Path) -> None:
    populate(tmp_path, {"a": b"12"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    (tmp_path / "a").write_bytes(b"123")
    with pytest.raises(ArtifactCorruptError):
        objects.complete(str(tmp_path), inventory, {})
    assert not (tmp_path / "manifest.json").exists()


@contextmanager
def observed(observer: durable.Observer) -> Iterator[None]:
    previous = durable.install_observer(observer)
    try:
        yield
    finally:
        durable.install_observer(previous)


@pytest.mark.parametrize("change", ["new file", "new empty directory", "removed file"])
def test_an_inventory_change_before_the_manifest_is_refused(tmp_path: Path, change: str) -> None:
    populate(tmp_path, {"a": b"1", "sub/b": b"2"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def meddle(phase: str, operation: str, target: str) -> None:
        if phase == "after" and operation == "fsync_dir" and target.endswith("sub"):
            if change == "new file":
                (tmp_path / "sub" / "late").write_bytes(b"")
            elif change == "new empty directory":
                (tmp_path / "late").mkdir()
            else:
                (tmp_path / "a").unlink()

    with observed(meddle), pytest.raises((ArtifactCorruptError, UnsafeEntryError)):
        objects.complete(str(tmp_path), inventory, {})
    assert not (tmp_path / "manifest.json").exists()


def test_a_late_file_changing_between_its_two_reads_is_refused(tmp_path: Path) -> None:
    populate(tmp_path, {"zeta": b"before"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def meddle(phase: str, operation: str, target: str) -> None:
        if phase == "after" and target.endswith("manifest.json"):
            (tmp_path / "zeta").write_bytes(b"after!!")

    with observed(meddle), pytest.raises(ArtifactCorruptError):
        objects.complete(str(tmp_path), inventory, {})


def test_a_failed_fsync_is_durability_failed_and_stops_before_the_manifest(
    tmp_path: Path,
) -> None:
    populate(tmp_path, {"a": b"1"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)

    def fail(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "fsync_file":
            raise OSError(5, "Input/output error")

    with observed(fail), pytest.raises(DurabilityError):
        objects.complete(str(tmp_path), inventory, {})
    assert not (tmp_path / "manifest.json").exists()


def test_the_seam_sees_every_fsync_and_the_manifest_last(tmp_path: Path) -> None:
    populate(tmp_path, MIXED)
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    seen: list[tuple[str, str]] = []

    def record(phase: str, operation: str, target: str) -> None:
        if phase == "after":
            seen.append((operation, os.path.relpath(target, tmp_path)))

    with observed(record):
        objects.complete(str(tmp_path), inventory, {"outcome.json": b"{}"})
    files = {*MIXED, "outcome.json", "manifest.json"}
    directories = {"bin", "caf\u00e9", "m", "m/deep", "m/deep/er", "."}
    assert {t for op, t in seen if op == "fsync_file"} == files
    assert {t for op, t in seen if op == "fsync_dir"} == directories
    manifest_at = seen.index(("fsync_file", "manifest.json"))
    assert all(
        index < manifest_at
        for index, entry in enumerate(seen)
        if entry[1] != "." and entry != ("fsync_file", "manifest.json")
    )
    assert seen[-1] == ("fsync_dir", ".")
    dirs = [t for op, t in seen if op == "fsync_dir" and t != "."]
    assert dirs.index("m/deep/er") < dirs.index("m/deep") < dirs.index("m")  # bottom-up


# --- verify ----------------------------------------------------------------------------------


def test_verify_accepts_a_completed_object_and_syncs_everything(tmp_path: Path) -> None:
    completed = completed_dir(tmp_path)
    seen: list[tuple[str, str]] = []

    def record(phase: str, operation: str, target: str) -> None:
        if phase == "after":
            seen.append((operation, os.path.relpath(target, tmp_path)))

    with observed(record):
        assert objects.verify(str(tmp_path), sync=True) == completed
    assert {t for op, t in seen if op == "fsync_file"} == {*MIXED, "outcome.json", "manifest.json"}
    assert {t for op, t in seen if op == "fsync_dir"} == {
        "bin",
        "caf\u00e9",
        "m",
        "m/deep",
        "m/deep/er",
        ".",
    }
    assert seen[-1] == ("fsync_dir", ".")
    seen.clear()
    with observed(record):
        assert objects.verify(str(tmp_path), sync=False) == completed
    assert seen == []


def flip_byte(root: Path) -> None:
    data = bytearray((root / "zeta.bin").read_bytes())
    data[1000] ^= 1
    (root / "zeta.bin").write_bytes(bytes(data))


def edit_manifest(root: Path) -> None:
    files = list(parse_manifest((root / "manifest.json").read_bytes()))
    files[0] = ManifestFile(path=files[0].path, sha256="0" * 64, size_bytes=files[0].size_bytes)
    path = root / "manifest.json"
    path.chmod(0o644)
    path.write_bytes(manifest_bytes(files))


CORRUPTIONS = {
    "flipped byte": flip_byte,
    "truncated file": lambda root: (root / "a.bin").write_bytes(b"\x00" * 10),
    "extra file": lambda root: (root / "bin" / "extra").write_bytes(b""),
    "missing file": lambda root: (root / "empty.txt").unlink(),
    "missing nested file and its directories": lambda root: (
        (root / "m/deep/er/x").unlink(),
        (root / "m/deep/er").rmdir(),
    ),
    "extra empty directory": lambda root: (root / "m" / "new").mkdir(),
    "edited manifest": edit_manifest,
    "non-canonical manifest": lambda root: (root / "manifest.json").write_bytes(
        (root / "manifest.json").read_bytes() + b"\n"
    ),
    "missing manifest": lambda root: (root / "manifest.json").unlink(),
    "symlink added": lambda root: os.symlink("a.bin", root / "link"),
    "file replaced by a symlink": lambda root: (
        (root / "empty.txt").unlink(),
        os.symlink("a.bin", root / "empty.txt"),
    ),
    "fifo added": lambda root: os.mkfifo(root / "pipe"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_verify_refuses_each_corruption(tmp_path: Path, name: str) -> None:
    completed_dir(tmp_path)
    CORRUPTIONS[name](tmp_path)
    with pytest.raises(ArtifactCorruptError) as caught:
        objects.verify(str(tmp_path), sync=False)
    assert "\n" not in str(caught.value)


def test_verify_notices_a_changed_executable_bit_through_the_tree_hash(tmp_path: Path) -> None:
    completed = completed_dir(tmp_path)
    (tmp_path / "bin" / "tool").chmod(0o644)
    assert objects.verify(str(tmp_path), sync=False).tree_sha256 != completed.tree_sha256


# --- addressing ------------------------------------------------------------------------------


def test_address_is_the_registration_id_and_path() -> None:
    tree = "ab" * 32
    assert objects.address("dataset", tree) == (
        f"run-store-v1:dataset-{tree}",
        f"artifacts/dataset-{tree}",
    )


@pytest.mark.parametrize("kind, tree", [("nope", "ab" * 32), ("dataset", "AB" * 32)])
def test_address_refuses_an_unknown_kind_or_malformed_digest(kind: str, tree: str) -> None:
    with pytest.raises(InvalidRecordError):
        objects.address(kind, tree)


# --- agreement with the model ----------------------------------------------------------------

SEGMENT = st.sampled_from(["a", "b", "A", "z.txt", "a.b", "\u00e9", "\u65e5", "\U0001f600", "-"])


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, bytes | tuple[bytes, bool] | None]:
    spec: dict[str, bytes | tuple[bytes, bool] | None] = {}
    for segments in draw(st.lists(st.lists(SEGMENT, min_size=1, max_size=3), max_size=8)):
        path = "/".join(segments)
        prefixes = {"/".join(segments[:i]) for i in range(1, len(segments))}
        clash = any(p in spec for p in prefixes) or any(k.startswith(path + "/") for k in spec)
        if clash or path in spec or path in RESERVED:
            continue
        spec[path] = (draw(st.binary(max_size=40)), draw(st.booleans()))
    return spec


@settings(max_examples=60)
@given(spec=payloads(), outcome=st.one_of(st.none(), st.binary(max_size=20)))
def test_complete_and_the_model_agree_on_generated_trees(
    spec: dict[str, bytes | tuple[bytes, bool] | None], outcome: bytes | None
) -> None:
    runtime = {} if outcome is None else {"outcome.json": outcome}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        populate(root, spec)
        completed = objects.complete(directory, objects.scan(directory, reserved=RESERVED), runtime)
        assert objects.verify(directory, sync=False) == completed
    result = content.complete(model_tree(spec), runtime)
    assert not isinstance(result, content.Refusal)
    tree, model_tree_sha256, model_manifest_sha256 = result
    assert (model_tree_sha256, model_manifest_sha256) == (
        completed.tree_sha256,
        completed.manifest_sha256,
    )
    manifest = tree["manifest.json"]
    assert isinstance(manifest, content.File) and manifest.data == completed.manifest


def test_a_file_over_2_53_minus_1_bytes_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    huge = objects.Inventory(
        directories=(), files=(objects.InventoryFile(path="big", size=2**53, executable=False),)
    )
    with pytest.raises(OutOfRangeError):
        objects.complete(str(tmp_path), huge, {"outcome.json": b"{}"})
    assert list(tmp_path.iterdir()) == []
