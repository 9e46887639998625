"""Reading a completion manifest is strict (SPEC.md section 12.2, "Reading is strict").

A reader accepts exactly the bytes a writer produces and refuses everything else with
``artifact_corrupt``. These tests take the rules one at a time, on both sides of each
boundary the rule draws.
"""

from __future__ import annotations

import hashlib

import pytest
from runstore.canonical import encode
from runstore.errors import ArtifactCorruptError
from runstore.manifest import ManifestFile
from runstore.manifest import manifest_bytes
from runstore.manifest import parse_manifest

EMPTY_SHA = hashlib.sha256(b"").hexdigest()
ONE_FILE = [
    {"media_type": "application/octet-stream", "path": "a", "sha256": EMPTY_SHA, "size_bytes": 0}
]


@pytest.mark.parametrize("version", [-1, 0, 2, 3, 2**53 - 1, -(2**53 - 1)])
def test_a_schema_version_other_than_the_integer_1_is_artifact_corrupt(version: int) -> None:
    """SPEC 12.2: a reader refuses "a ``schema_version`` other than the integer 1", below it
    as well as above it."""
    data = encode({"complete": True, "files": ONE_FILE, "schema_version": version})  # type: ignore[dict-item]
    with pytest.raises(ArtifactCorruptError, match="schema_version"):
        parse_manifest(data)


def test_schema_version_1_is_read_back_to_its_file_list() -> None:
    """SPEC 12.2: ``manifest_bytes(parse(data)) == data`` for the one version there is."""
    data = encode({"complete": True, "files": ONE_FILE, "schema_version": 1})  # type: ignore[dict-item]
    assert parse_manifest(data) == (ManifestFile(path="a", sha256=EMPTY_SHA, size_bytes=0),)
    assert manifest_bytes(parse_manifest(data)) == data


@pytest.mark.parametrize("complete", [False, 1, 0, 2, "true", None, [], {}, [True]])
def test_complete_other_than_true_is_artifact_corrupt(complete: object) -> None:
    """SPEC 12.2: a reader refuses "``complete`` other than ``true``": the literal ``true``
    only, not an integer that compares equal to it, nor a string, null or container (each
    refused with ``artifact_corrupt``, never an internal error)."""
    data = encode({"complete": complete, "files": ONE_FILE, "schema_version": 1})  # type: ignore[dict-item]
    with pytest.raises(ArtifactCorruptError, match="complete must be true"):
        parse_manifest(data)


def _listed(paths: list[str]) -> bytes:
    files = [dict(ONE_FILE[0], path=path) for path in paths]
    return encode({"complete": True, "files": files, "schema_version": 1})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    "paths",
    [
        ["a", "c", "b"],  # only the last two are out of order
        ["a", "b", "d", "c"],
        ["a", "b", "c", "d", "f", "e"],
        ["a", "b", "c", "c"],  # a repeat far from the start
    ],
)
def test_every_neighbouring_pair_of_listed_paths_must_be_in_order(paths: list[str]) -> None:
    """SPEC 12.2: a reader refuses "unsorted or repeated paths" wherever in the list the
    disorder is, not only against the first entry or some earlier one; the refusal names
    the first path found out of place."""
    with pytest.raises(ArtifactCorruptError, match=f"not sorted and unique at '{paths[-1]}'"):
        parse_manifest(_listed(paths))
    assert [f.path for f in parse_manifest(_listed(sorted(set(paths))))] == sorted(set(paths))
