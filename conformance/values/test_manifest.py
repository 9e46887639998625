"""The version-1 completion manifest and the entry name rules (runstore.manifest): exact
bytes, round trips, and every refusal of the strict reader, written from the format text."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runstore.canonical import MAX_SAFE_INTEGER
from runstore.canonical import encode
from runstore.errors import ArtifactCorruptError
from runstore.errors import InvalidRecordError
from runstore.errors import OutOfRangeError
from runstore.errors import UnsafeEntryError
from runstore.manifest import ManifestFile
from runstore.manifest import check_entry_name
from runstore.manifest import manifest_bytes
from runstore.manifest import manifest_sha256
from runstore.manifest import parse_manifest
from runstore.model import content

EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def listed(path: str, data: bytes = b"") -> ManifestFile:
    return ManifestFile(path=path, sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def test_the_exact_bytes_of_a_one_file_manifest() -> None:
    expected = (
        b'{"complete":true,"files":[{"media_type":"application/octet-stream",'
        b'"path":"data.bin","sha256":"' + EMPTY_SHA.encode() + b'","size_bytes":0}],'
        b'"schema_version":1}'
    )
    assert manifest_bytes([listed("data.bin")]) == expected
    assert manifest_sha256(expected) == hashlib.sha256(expected).hexdigest()


def test_the_empty_manifest() -> None:
    assert manifest_bytes([]) == b'{"complete":true,"files":[],"schema_version":1}'
    assert parse_manifest(manifest_bytes([])) == ()


def test_files_are_sorted_by_utf8_bytes() -> None:
    files = [listed("\u00e9"), listed("z"), listed("a/b"), listed("a.txt"), listed("B")]
    parsed = parse_manifest(manifest_bytes(files))
    assert [f.path for f in parsed] == ["B", "a.txt", "a/b", "z", "\u00e9"]


names = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="/\\"), min_size=1, max_size=8),
    min_size=1,
    max_size=3,
).map("/".join)


def safe(path: str) -> bool:
    try:
        check_entry_name(path)
    except UnsafeEntryError:
        return False
    return True


@given(
    st.dictionaries(
        names.filter(safe).filter(lambda p: p != "manifest.json"),
        st.tuples(st.binary(max_size=8), st.integers(0, MAX_SAFE_INTEGER)),
        max_size=6,
    )
)
def test_parse_is_the_inverse_of_manifest_bytes(files: dict[str, tuple[bytes, int]]) -> None:
    entries = [
        ManifestFile(path=p, sha256=hashlib.sha256(d).hexdigest(), size_bytes=n)
        for p, (d, n) in files.items()
    ]
    segments = [p.split("/") for p in files]
    if any("/".join(s[:n]) in files for s in segments for n in range(1, len(s))):
        with pytest.raises(InvalidRecordError):  # a file is also another's directory
            manifest_bytes(entries)
        return
    data = manifest_bytes(entries)
    parsed = parse_manifest(data)
    assert sorted(parsed, key=lambda f: f.path.encode()) == list(parsed)
    assert set(parsed) == set(entries)
    assert manifest_bytes(parsed) == data


def test_writing_a_size_above_2_53_minus_1_is_out_of_range() -> None:
    with pytest.raises(OutOfRangeError):
        manifest_bytes([ManifestFile(path="big", sha256=EMPTY_SHA, size_bytes=2**53)])
    assert b"9007199254740991" in manifest_bytes(
        [ManifestFile(path="big", sha256=EMPTY_SHA, size_bytes=MAX_SAFE_INTEGER)]
    )


@pytest.mark.parametrize(
    "files",
    [
        [listed("a"), listed("a")],
        [listed("manifest.json")],
        [listed("../a")],
        [ManifestFile(path="a", sha256=EMPTY_SHA.upper(), size_bytes=0)],
        [ManifestFile(path="a", sha256=EMPTY_SHA, size_bytes=-1)],
        [ManifestFile(path="a", sha256=EMPTY_SHA, size_bytes=True)],
    ],
    ids=["duplicate", "itself", "unsafe path", "uppercase digest", "negative", "bool size"],
)
def test_writing_a_defective_file_list_is_invalid_record(files: list[ManifestFile]) -> None:
    with pytest.raises(InvalidRecordError):
        manifest_bytes(files)


GOOD = {"media_type": "application/octet-stream", "path": "a", "sha256": EMPTY_SHA}


def document(**changes: object) -> bytes:
    base: dict[str, object] = {
        "complete": True,
        "files": [{**GOOD, "size_bytes": 0}],
        "schema_version": 1,
    }
    base.update(changes)
    return encode(base)  # type: ignore[arg-type]


def file_doc(**changes: object) -> bytes:
    return document(files=[{**GOOD, "size_bytes": 0, **changes}])


REFUSED = {
    "not canonical (space)": document().replace(b":true", b": true"),
    "not canonical (unsorted keys)": json.dumps(
        {"schema_version": 1, "complete": True, "files": []}, separators=(",", ":")
    ).encode(),
    "not UTF-8": document().replace(b'"a"', b'"\xff"'),
    "not an object": b"[]",
    "unknown top-level key": document(extra=1),
    "missing files": encode({"complete": True, "schema_version": 1}),
    "schema_version 2": document(schema_version=2),
    "schema_version true": document(schema_version=True),
    "complete false": document(complete=False),
    "files not an array": document(files={}),
    "file not an object": document(files=["a"]),
    "unknown file key": file_doc(extra=1),
    "representation (never written)": file_doc(representation={"shape": [1]}),
    "missing media_type": encode(
        {
            "complete": True,
            "files": [{"path": "a", "sha256": EMPTY_SHA, "size_bytes": 0}],
            "schema_version": 1,
        }
    ),
    "other media_type": file_doc(media_type="text/plain"),
    "uppercase sha256": file_doc(sha256=EMPTY_SHA.upper()),
    "short sha256": file_doc(sha256=EMPTY_SHA[:-1]),
    "negative size": file_doc(size_bytes=-1),
    "size 2**53": file_doc(size_bytes=2**53 - 1).replace(b"9007199254740991", b"9007199254740992"),
    "string size": file_doc(size_bytes="0"),
    "bool size": file_doc(size_bytes=False),
    "leading slash": file_doc(path="/a"),
    "dot-dot segment": file_doc(path="a/../b"),
    "backslash": file_doc(path="a\\b"),
    "empty path": file_doc(path=""),
    "NFD path": file_doc(path="e\u0301"),
    "control character": file_doc(path="a\x7f"),
    "lists manifest.json": file_doc(path="manifest.json"),
    "unsorted files": document(
        files=[{**GOOD, "path": "b", "size_bytes": 0}, {**GOOD, "size_bytes": 0}]
    ),
    "duplicate path": document(files=[{**GOOD, "size_bytes": 0}, {**GOOD, "size_bytes": 1}]),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_reader_refuses_every_defect_with_artifact_corrupt(name: str) -> None:
    with pytest.raises(ArtifactCorruptError) as caught:
        parse_manifest(REFUSED[name])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "paths",
    [["a", "a/b"], ["a", "a-x", "a.txt", "a/b"], ["d/a", "d/a-x", "d/a/b/c"]],
    ids=["neighbours", "a-x and a.txt between", "nested two deeper"],
)
def test_spec_12_2_a_path_that_is_also_another_listed_paths_directory_is_refused(
    paths: list[str],
) -> None:
    """SPEC 12.2, "Reading is strict": no tree holds both a file ``a`` and ``a/b``. Byte
    order puts ``a-x`` and ``a.txt`` between the two, so comparing neighbours misses it."""
    assert sorted(paths, key=lambda p: p.encode()) == paths
    data = document(files=[{**GOOD, "path": p, "size_bytes": 0} for p in paths])
    with pytest.raises(ArtifactCorruptError, match="directory"):
        parse_manifest(data)
    with pytest.raises(InvalidRecordError, match="directory"):
        manifest_bytes([listed(p) for p in paths])


def test_spec_12_2_paths_sharing_a_prefix_without_a_slash_are_accepted() -> None:
    paths = ["a", "a-x", "a.txt", "ab/c", "b/a", "b/ab"]
    assert [f.path for f in parse_manifest(manifest_bytes([listed(p) for p in paths]))] == paths


@pytest.mark.parametrize("path", ["manifest.json/x", "manifest.json/a/b"])
def test_spec_12_2_nothing_is_listed_under_a_root_manifest_json(path: str) -> None:
    """SPEC 12.2, "Reading is strict", and 12.1: ``manifest.json`` is the runtime's name at
    the root whatever its type, so no payload holds a directory of that name and no
    manifest lists a path under one (the reader refuses what no writer produces)."""
    data = document(files=[{**GOOD, "path": path, "size_bytes": 0}])
    with pytest.raises(ArtifactCorruptError, match=r"manifest\.json"):
        parse_manifest(data)
    with pytest.raises(InvalidRecordError, match=r"manifest\.json"):
        manifest_bytes([listed(path)])
    refusal = content.manifest_refusal(data)
    assert refusal is not None and refusal.code == "artifact_corrupt"


def test_a_nested_manifest_json_is_an_ordinary_file() -> None:
    assert parse_manifest(manifest_bytes([listed("sub/manifest.json")]))[0].path == (
        "sub/manifest.json"
    )


# --- the name rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "a",
        "a/b/c",
        "caf\u00e9",
        "\u65e5\u672c/\U0001f600.bin",
        "x" * 255,
        "\u00e9" * 127,  # 254 bytes
        ".hidden",
        "a..b",
        "manifest.json",  # reserved only at an object's root, which scan decides
        "name with spaces",
        "\u2028",
    ],
)
def test_safe_names_are_accepted(path: str) -> None:
    check_entry_name(path)


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/a",
        "a/",
        "a//b",
        ".",
        "..",
        "a/./b",
        "a/../b",
        "a\\b",
        "a\x00b",
        "tab\t",
        "new\nline",
        "del\x7f",
        "c1\x85",
        "c1\x9f",
        "e\u0301",  # NFD of e-acute
        "x" * 256,
        "\u00e9" * 128,  # 256 bytes
        "a\udc80",  # a non-UTF-8 byte decoded with surrogateescape
    ],
)
def test_unsafe_names_are_unsafe_entry(path: str) -> None:
    with pytest.raises(UnsafeEntryError) as caught:
        check_entry_name(path)
    assert "\n" not in str(caught.value)
