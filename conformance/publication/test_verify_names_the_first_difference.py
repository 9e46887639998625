"""SPEC.md 12.4, "Verification": any difference between a completed object and its
manifest is ``artifact_corrupt``, and the message names the FIRST one in path order (UTF-8
bytes): a listed entry that is missing, an entry nothing lists, or an entry whose type or
size differs from the manifest's, giving what was found and what was listed.

Every case leaves an identical entry (``a.txt``) sorting before the difference, so a
message naming an entry that does not differ is caught, and the size cases go both ways
(smaller and larger than listed)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from runstore.errors import ArtifactCorruptError
from runstore.store.publication import objects

RESERVED = ("manifest.json", "outcome.json")
LISTED = "file of 5 bytes, exec=False"


def _completed(root: Path) -> None:
    """A completed object: ``a.txt``, ``b.txt`` (5 bytes each) and ``d/x``."""
    (root / "d").mkdir()
    for path, data in {"a.txt": b"aaaaa", "b.txt": b"bbbbb", "d/x": b"x"}.items():
        (root / path).write_bytes(data)
        (root / path).chmod(0o644)
    objects.complete(str(root), objects.scan(str(root), reserved=RESERVED), {})


def _shrink(root: Path) -> None:
    (root / "b.txt").write_bytes(b"bb")


def _grow(root: Path) -> None:
    (root / "b.txt").write_bytes(b"bbbbbbb")


def _remove(root: Path) -> None:
    (root / "b.txt").unlink()


def _add(root: Path) -> None:
    (root / "c.txt").write_bytes(b"c")


def _replace_with_directory(root: Path) -> None:
    (root / "b.txt").unlink()
    (root / "b.txt").mkdir()
    (root / "b.txt" / "inner").write_bytes(b"i")


def _two_differences(root: Path) -> None:
    shutil.rmtree(root / "d")  # 'd' and 'd/x' go missing, after ...
    (root / "c.txt").write_bytes(b"c")  # ... an extra entry that sorts first


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "a file smaller than listed": (
        _shrink,
        f"'b.txt' is a file of 2 bytes, exec=False, not a {LISTED}",
    ),
    "a file larger than listed": (
        _grow,
        f"'b.txt' is a file of 7 bytes, exec=False, not a {LISTED}",
    ),
    "a listed file missing": (_remove, "'b.txt' is missing"),
    "an entry nothing lists": (_add, "'c.txt' is an extra entry"),
    "a listed file found as a directory": (
        _replace_with_directory,
        f"'b.txt' is a directory, not a {LISTED}",
    ),
    "the first of two differences": (_two_differences, "'c.txt' is an extra entry"),
}


@pytest.mark.parametrize("case", CASES)
def test_verify_names_the_first_difference_in_path_order(tmp_path: Path, case: str) -> None:
    """SPEC.md 12.4: the ``artifact_corrupt`` message names the first difference from the
    manifest in path order, saying what was found and what was listed."""
    change, difference = CASES[case]
    _completed(tmp_path)
    objects.verify(str(tmp_path), sync=False)  # the untouched object verifies
    change(tmp_path)
    with pytest.raises(ArtifactCorruptError) as info:
        objects.verify(str(tmp_path), sync=False)
    assert info.value.message == f"object does not match its manifest: {difference}"
