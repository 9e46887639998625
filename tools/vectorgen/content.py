"""The object content vectors (``vectors/content.json``, SPEC.md section 12, "Completed
objects"): the version-1 local-tree hash, the completion manifest, the entry name rules, and
the refused entries and manifests.

The cases are data here; the digests and bytes come from :mod:`runstore.tree_hash` and
:mod:`runstore.manifest`, and the codes of refused entries from
:func:`runstore.store.publication.objects.scan` run on a temporary directory of this module's own
(the one filesystem use of this generator besides ``events``' temporary store; nothing is written
elsewhere). ``tools/regen`` writes :func:`build`'s text.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

from runstore.manifest import MANIFEST_NAME
from runstore.manifest import RESERVED_NAMES
from runstore.manifest import ManifestFile
from runstore.manifest import check_entry_name
from runstore.manifest import manifest_bytes
from runstore.manifest import parse_manifest
from runstore.store.publication import objects
from runstore.tree_hash import Entry
from runstore.tree_hash import tree_sha256

from . import header
from . import refusal_code
from . import render

Case = list[dict[str, Any]]
"""A tree: entry descriptions as they appear in the file."""


def d(path: str) -> dict[str, Any]:
    return {"path": path, "type": "directory"}


def f(path: str, data: bytes = b"", executable: bool = False) -> dict[str, Any]:
    return {"path": path, "type": "file", "data_hex": data.hex(), "executable": executable}


def link(path: str, target: str) -> dict[str, Any]:
    return {"path": path, "type": "symlink", "target": target}


TREES: list[tuple[str, Case]] = [
    (
        "metewand golden: empty directory and a 5-byte file",
        [d("empty"), f("data.bin", b"\x00data")],
    ),
    (
        "metewand golden: executable, symlink and empty directory",
        [
            d("empty"),
            d("bin"),
            f("bin/tool", b"#!/bin/sh\nexit 0\n", True),
            link("tool", "bin/tool"),
        ],
    ),
    ("the empty tree", []),
    ("one empty file", [f("empty.txt")]),
    ("one empty executable file", [f("run", b"", True)]),
    ("one empty directory", [d("empty")]),
    (
        "non-ASCII names in UTF-8 byte order",
        [f("z"), f("caf\u00e9", b"\xc3\xa9"), d("\u65e5\u672c"), f("\u65e5\u672c/\U0001f600.bin")],
    ),
    (
        "nested directories four deep",
        [d("a"), d("a/b"), d("a/b/c"), d("a/b/c/d"), f("a/b/c/d/leaf", b"leaf")],
    ),
    ("'.' sorts before '/'", [d("a"), f("a/b", b"2"), f("a.txt", b"1"), f("a-", b"0")]),
    (
        "a file holding the bytes a nested entry would add",
        [f("a", b"d" + (3).to_bytes(8, "big") + b"a/bf\x00" + (1).to_bytes(8, "big") + b"x")],
    ),
    ("the nested entry itself", [d("a"), f("a/b", b"x")]),
    ("absolute and dangling symlink targets", [link("abs", "/etc/passwd"), link("gone", "x/y")]),
]

PAYLOADS: list[tuple[str, Case]] = [
    ("one file", [f("data.bin", b"\x00data")]),
    ("empty payload: the manifest alone", []),
    (
        "nested, executable and empty files",
        [f("bin/tool", b"#!/bin/sh\n", True), f("logs/empty.log"), f("a/b/c/d.txt", b"d")],
    ),
    (
        "names around manifest.json",
        [
            f("manifesto", b"1"),
            f("manifest.jso", b"2"),
            f("manifest.json.bak", b"3"),
            f("manifest/x", b"4"),
            f("m/x", b"5"),
            f("zeta", b"6"),
        ],
    ),
    (
        "non-ASCII names before and after manifest.json",
        [f("\u00fcber", "\u00fc".encode()), f("caf\u00e9/\u65e5\u672c.txt", b"\xe6\x97\xa5")],
    ),
    ("a nested manifest.json is ordinary", [f("sub/manifest.json", b"{}")]),
    ("an outcome document", [f("outcome.json", b'{"run_store_version":1}'), f("stderr.log")]),
]

ENTRIES_REFUSED: list[tuple[str, Case]] = [
    ("symbolic link", [f("data"), link("link", "data")]),
    ("dangling symbolic link in a subdirectory", [d("sub"), link("sub/link", "missing")]),
    ("FIFO", [{"path": "pipe", "type": "fifo"}]),
    ("empty directory", [f("data"), d("empty")]),
    ("nested empty directory", [d("a"), f("a/file"), d("a/b")]),
    ("caller-written manifest.json", [f(MANIFEST_NAME, b"{}")]),
    ("caller-written outcome.json", [f("outcome.json", b"{}")]),
    ("runtime name as a directory", [d("manifest.json"), f("manifest.json/x")]),
    ("outcome.json as a directory at the root", [d("outcome.json"), f("outcome.json/x")]),
    ("backslash in a name", [f("a\\b")]),
    ("control character in a name", [f("bell\x07")]),
    ("DEL in a name", [f("del\x7f")]),
    ("C1 control in a name", [f("next\x85line")]),
    ("NFD name", [f("e\u0301")]),
    ("NFD directory name", [d("e\u0301"), f("e\u0301/x")]),
    (
        "non-UTF-8 name",
        [{"path_hex": b"bad\xff".hex(), "type": "file", "data_hex": "", "executable": False}],
    ),
]

NAMES_ACCEPTED: list[tuple[str, str]] = [
    ("plain", "data.bin"),
    ("nested", "a/b/c"),
    ("non-ASCII NFC", "caf\u00e9/\u65e5\u672c/\U0001f600"),
    ("segment of 255 bytes", "x" * 255),
    ("segment of 254 bytes of two-byte characters", "\u00e9" * 127),
    ("leading dot", ".hidden"),
    ("double dot inside a name", "a..b"),
    ("U+2028 is not a control character", "line\u2028separator"),
    ("reserved names are ordinary below the root", "sub/manifest.json"),
]

NAMES_REFUSED: list[tuple[str, str]] = [
    ("empty", ""),
    ("leading slash", "/a"),
    ("trailing slash", "a/"),
    ("empty segment", "a//b"),
    ("dot", "."),
    ("dot-dot", ".."),
    ("dot segment", "a/./b"),
    ("dot-dot segment", "a/../b"),
    ("backslash", "a\\b"),
    ("NUL", "a\x00b"),
    ("newline", "a\nb"),
    ("DEL", "a\x7f"),
    ("C1 control U+0085", "a\x85"),
    ("C1 control U+009F", "a\x9f"),
    ("NFD", "e\u0301"),
    ("segment of 256 bytes", "x" * 256),
    ("segment of 256 bytes of two-byte characters", "\u00e9" * 128),
]

_EMPTY = hashlib.sha256(b"").hexdigest()


def _one(path: str, size: str) -> str:
    """One manifest file object (of the empty file's digest), spelled out as text."""
    return (
        '{"media_type":"application/octet-stream","path":"'
        + path
        + '","sha256":"'
        + _EMPTY
        + '","size_bytes":'
        + size
        + "}"
    )


def _manifest(*files: str, top: str = '"complete":true,', version: str = "1") -> bytes:
    text = "{" + top + '"files":[' + ",".join(files) + '],"schema_version":' + version + "}"
    return text.encode("utf-8")


MANIFESTS_REFUSED: list[tuple[str, bytes]] = [
    ("a space after a colon", _manifest(_one("a", "0")).replace(b":true", b": true")),
    ("a trailing newline", _manifest() + b"\n"),
    ("keys out of order", b'{"files":[],"complete":true,"schema_version":1}'),
    ("invalid UTF-8 in a path", _manifest(_one("a", "0")).replace(b'"a"', b'"\xff"')),
    ("an array, not an object", b"[]"),
    ("an unknown top-level key", _manifest(top='"complete":true,"extra":1,')),
    ("complete missing", _manifest(top="")),
    ("complete false", _manifest(top='"complete":false,')),
    ("schema_version 2", _manifest(version="2")),
    ("files not an array", b'{"complete":true,"files":{},"schema_version":1}'),
    ("a file that is a string", _manifest('"a"')),
    ("an unknown file key", _manifest((_one("a", "0"))[:-1] + ',"zz":1}')),
    (
        "a representation object (never written)",
        _manifest((_one("a", "0")).replace('"sha256"', '"representation":{},"sha256"')),
    ),
    ("another media_type", _manifest((_one("a", "0")).replace("octet-stream", "json"))),
    ("an uppercase sha256", _manifest((_one("a", "0")).replace(_EMPTY, _EMPTY.upper()))),
    ("a negative size", _manifest(_one("a", "-1"))),
    ("a size of 2^53", _manifest(_one("a", "9007199254740992"))),
    ("a size as a string", _manifest(_one("a", '"0"'))),
    ("a leading slash", _manifest(_one("/a", "0"))),
    ("a dot-dot segment", _manifest(_one("a/../b", "0"))),
    ("a backslash", _manifest(_one("a\\\\b", "0"))),
    ("an NFD path", _manifest(_one("e\u0301", "0"))),
    ("manifest.json listed", _manifest(_one("manifest.json", "0"))),
    ("files out of order", _manifest(_one("b", "0"), _one("a", "0"))),
    ("a repeated path", _manifest(_one("a", "0"), _one("a", "0"))),
    ("a path that is also another path's directory", _manifest(_one("a", "0"), _one("a/b", "0"))),
    ("a path under a manifest.json directory", _manifest(_one("manifest.json/x", "0"))),
]


def entry(description: dict[str, Any]) -> Entry:
    return Entry(
        path=description["path"],
        type=description["type"],
        data=bytes.fromhex(description.get("data_hex", "")),
        executable=description.get("executable", False),
        target=description.get("target", ""),
    )


def with_directories(files: Case) -> Case:
    """The payload files plus the directories their paths imply."""
    directories = {
        "/".join(file["path"].split("/")[:depth])
        for file in files
        for depth in range(1, file["path"].count("/") + 1)
    }
    return [d(path) for path in sorted(directories)] + files


def manifest_case(name: str, files: Case) -> dict[str, Any]:
    listed = [
        ManifestFile(
            path=file["path"],
            sha256=hashlib.sha256(bytes.fromhex(file["data_hex"])).hexdigest(),
            size_bytes=len(bytes.fromhex(file["data_hex"])),
        )
        for file in files
    ]
    data = manifest_bytes(listed)
    completed = [*with_directories(files), f(MANIFEST_NAME, data)]
    return {
        "name": name,
        "files": [{k: v for k, v in file.items() if k != "type"} for file in files],
        "manifest_hex": data.hex(),
        "manifest_sha256": hashlib.sha256(data).hexdigest(),
        "tree_sha256": tree_sha256(entry(item) for item in completed),
    }


def make(root: str, description: dict[str, Any]) -> None:
    """Create one described entry below ``root`` (its parents must exist)."""
    name = bytes.fromhex(description["path_hex"]) if "path_hex" in description else None
    path = os.fsencode(root) + b"/" + (name or description["path"].encode("utf-8"))
    kind = description["type"]
    if kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        os.symlink(description["target"].encode("utf-8"), path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, bytes.fromhex(description["data_hex"]))
        os.close(fd)


def scan_code(tree: Case) -> str:
    with tempfile.TemporaryDirectory() as root:
        for description in tree:
            make(root, description)
        return refusal_code(lambda: objects.scan(root, reserved=RESERVED_NAMES))


def document() -> dict[str, Any]:
    for _, name in NAMES_ACCEPTED:
        check_entry_name(name)
    return {
        **header("runstore content vectors"),
        "tree_hashes": [
            {"name": name, "entries": tree, "tree_sha256": tree_sha256(map(entry, tree))}
            for name, tree in TREES
        ],
        "manifests": [manifest_case(name, files) for name, files in PAYLOADS],
        "names_accepted": [{"name": name, "path": path} for name, path in NAMES_ACCEPTED],
        "names_refused": [
            {"name": name, "path": path, "error_code": refusal_code(check_entry_name, path)}
            for name, path in NAMES_REFUSED
        ],
        "entries_refused": [
            {"name": name, "entries": tree, "error_code": scan_code(tree)}
            for name, tree in ENTRIES_REFUSED
        ],
        "manifests_refused": [
            {
                "name": name,
                "manifest_hex": data.hex(),
                "error_code": refusal_code(parse_manifest, data),
            }
            for name, data in MANIFESTS_REFUSED
        ],
    }


def build() -> str:
    """The text of ``vectors/content.json``."""
    return render(document())
