"""SPEC.md 12.3: a file's ``exec`` byte is 1 when ANY of the owner, group or other execute
bits is set, and no other permission bit counts. Checked for each execute bit alone and
for the write and read bits beside them, through the scan's inventory and through the
tree hash of the completed object, against the pure formats (``runstore.tree_hash``)
given the rule's own answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore.manifest import MANIFEST_NAME
from runstore.store.publication import objects
from runstore.tree_hash import Entry
from runstore.tree_hash import tree_sha256

RESERVED = ("manifest.json", "outcome.json")

MODES = {
    0o700: True,  # owner execute only
    0o650: True,  # group execute only
    0o641: True,  # other execute only
    0o111: True,  # every execute bit, nothing else
    0o666: False,  # every read and write bit, no execute bit
    0o642: False,  # other write (the bit beside other execute)
    0o624: False,  # group write, other read
    0o000: False,  # no bit at all
}


@pytest.mark.parametrize(("mode", "executable"), MODES.items(), ids=[f"{m:04o}" for m in MODES])
def test_any_execute_bit_and_only_an_execute_bit_makes_a_file_executable(
    tmp_path: Path, mode: int, executable: bool
) -> None:
    """SPEC.md 12.3: ``exec`` is 0x01 when any of the owner, group or other execute bits is
    set; no other permission bit counts. The scan reports it and the completed object's
    tree hash (its content address) includes it."""
    payload = tmp_path / "object"
    payload.mkdir()
    (payload / "tool").write_bytes(b"#!/bin/sh\n")
    (payload / "tool").chmod(mode)

    inventory = objects.scan(str(payload), reserved=RESERVED)
    assert [(f.path, f.executable) for f in inventory.files] == [("tool", executable)]

    completed = objects.complete(str(payload), inventory, {})
    manifest = (payload / MANIFEST_NAME).read_bytes()
    expected = tree_sha256(
        [
            Entry(path="tool", type="file", data=b"#!/bin/sh\n", executable=executable),
            Entry(path=MANIFEST_NAME, type="file", data=manifest),
        ]
    )
    assert completed.tree_sha256 == expected
