"""The object content vectors (vectors/content.json): the committed file is current, and
every case holds against the library (runstore.tree_hash, runstore.manifest, and
runstore.store.publication.objects on a real temporary directory) and against the model
(runstore.model.content).

Apart from the currency check, this reads only the committed file, as another
implementation would (format in vectors/README.md and SPEC.md section 10, "content.json"); it does
not use the generator's cases or helpers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from runstore.errors import RunStoreError
from runstore.manifest import ManifestFile
from runstore.manifest import check_entry_name
from runstore.manifest import manifest_bytes
from runstore.manifest import parse_manifest
from runstore.model import content
from runstore.store.publication import objects
from runstore.tree_hash import Entry
from runstore.tree_hash import tree_sha256
from vectorgen import content as generator

ROOT = Path(__file__).resolve().parents[2]
DATA = (ROOT / "vectors" / "content.json").read_bytes()
DATA.decode("ascii")
VECTORS: dict[str, Any] = json.loads(DATA)
RESERVED = ("manifest.json", "outcome.json")


def test_the_committed_file_is_what_the_generator_builds() -> None:
    assert generator.build() == DATA.decode("ascii")


def test_the_header_and_sections() -> None:
    assert VECTORS["format"] == "runstore content vectors"
    assert VECTORS["format_version"] == 1
    for section in (
        "tree_hashes",
        "manifests",
        "names_accepted",
        "names_refused",
        "entries_refused",
        "manifests_refused",
    ):
        names = [case["name"] for case in VECTORS[section]]
        assert names and len(names) == len(set(names)), section


def cases(section: str) -> list[Any]:
    return [pytest.param(case, id=case["name"]) for case in VECTORS[section]]


def path_of(description: dict[str, Any]) -> str:
    """The entry's path as text; a non-UTF-8 ``path_hex`` decodes with surrogateescape."""
    if "path_hex" in description:
        return bytes.fromhex(description["path_hex"]).decode("utf-8", "surrogateescape")
    path: str = description["path"]
    return path


def library_entry(description: dict[str, Any]) -> Entry:
    return Entry(
        path=description["path"],
        type=description["type"],
        data=bytes.fromhex(description.get("data_hex", "")),
        executable=description.get("executable", False),
        target=description.get("target", ""),
    )


def model_node(description: dict[str, Any]) -> content.Entry:
    kind = description["type"]
    if kind == "directory":
        return content.Directory()
    if kind == "file":
        return content.File(bytes.fromhex(description["data_hex"]), description["executable"])
    if kind == "symlink":
        return content.Symlink(description["target"])
    return content.Special()


def model_tree(entries: list[dict[str, Any]]) -> dict[str, content.Entry]:
    return {path_of(item): model_node(item) for item in entries}


def create(root: str, description: dict[str, Any]) -> None:
    path = os.path.join(os.fsencode(root), os.fsencode(path_of(description)))
    kind = description["type"]
    if kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        os.symlink(os.fsencode(description["target"]), path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, bytes.fromhex(description["data_hex"]))
        os.close(fd)
        os.chmod(path, 0o755 if description.get("executable") else 0o644)


def code_of(call: Any) -> str | None:
    try:
        call()
    except RunStoreError as error:
        return error.code
    return None


# --- tree hashes ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("tree_hashes"))
def test_tree_hash(case: dict[str, Any]) -> None:
    entries = case["entries"]
    assert tree_sha256(library_entry(item) for item in entries) == case["tree_sha256"]
    assert content.tree_sha256(model_tree(entries)) == case["tree_sha256"]


# --- manifests -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("manifests"))
def test_manifest(case: dict[str, Any]) -> None:
    files = case["files"]
    manifest = bytes.fromhex(case["manifest_hex"])
    assert hashlib.sha256(manifest).hexdigest() == case["manifest_sha256"]
    listed = [
        ManifestFile(
            path=file["path"],
            sha256=hashlib.sha256(bytes.fromhex(file["data_hex"])).hexdigest(),
            size_bytes=len(bytes.fromhex(file["data_hex"])),
        )
        for file in files
    ]
    assert manifest_bytes(listed) == manifest
    assert set(parse_manifest(manifest)) == set(listed)
    payload = {
        file["path"]: content.File(bytes.fromhex(file["data_hex"]), file["executable"])
        for file in files
    }
    assert content.manifest_bytes(payload) == manifest
    assert content.manifest_refusal(manifest) is None
    model = content.complete(payload, {}, reserved=("manifest.json",))
    assert not isinstance(model, content.Refusal)
    assert model[1:] == (case["tree_sha256"], case["manifest_sha256"])
    with tempfile.TemporaryDirectory() as root:
        for path in sorted(
            {
                "/".join(f["path"].split("/")[:n])
                for f in files
                for n in range(1, f["path"].count("/") + 1)
            }
        ):
            os.mkdir(os.path.join(root, path))
        for file in files:
            create(root, {**file, "type": "file"})
        inventory = objects.scan(root, reserved=("manifest.json",))
        completed = objects.complete(root, inventory, {})
        assert (completed.manifest, completed.manifest_sha256, completed.tree_sha256) == (
            manifest,
            case["manifest_sha256"],
            case["tree_sha256"],
        )
        assert objects.verify(root, sync=False) == completed


@pytest.mark.parametrize("case", cases("manifests_refused"))
def test_manifest_refused(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["manifest_hex"])
    assert code_of(lambda: parse_manifest(data)) == case["error_code"]
    refusal = content.manifest_refusal(data)
    assert refusal is not None and refusal.code == case["error_code"]


# --- names and entries ---------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("names_accepted"))
def test_name_accepted(case: dict[str, Any]) -> None:
    check_entry_name(case["path"])
    assert content.name_refusal(case["path"]) is None


@pytest.mark.parametrize("case", cases("names_refused"))
def test_name_refused(case: dict[str, Any]) -> None:
    assert code_of(lambda: check_entry_name(case["path"])) == case["error_code"]
    refusal = content.name_refusal(case["path"])
    assert refusal is not None and refusal.code == case["error_code"]


@pytest.mark.parametrize("case", cases("entries_refused"))
def test_entries_refused(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as root:
        for description in case["entries"]:
            create(root, description)
        assert code_of(lambda: objects.scan(root, reserved=RESERVED)) == case["error_code"]
    refusal = content.refusal(model_tree(case["entries"]), RESERVED)
    assert refusal is not None and refusal.code == case["error_code"]
