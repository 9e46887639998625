"""Tree digests (runstore.crashsim.images.Digests): what identifies a photograph and a
power-loss state, so two states share a check only when their trees are identical."""

from __future__ import annotations

import pytest
from runstore.crashsim import images
from runstore.crashsim.images import Digests
from runstore.crashsim.images import Tree
from runstore.crashsim.images import tree_digest

TREE: Tree = [
    ("artifacts", "d", 0o700, b""),
    ("run.sqlite3", "f", 0o600, b"\x00" * 4096 + b"db"),
    ("run.sqlite3-wal", "f", 0o600, b"wal frames"),
]


def _changed(
    index: int,
    *,
    relative: str | None = None,
    kind: str | None = None,
    mode: int | None = None,
    data: bytes | None = None,
) -> Tree:
    """TREE with one field of entry ``index`` replaced."""
    was = TREE[index]
    entry = (
        was[0] if relative is None else relative,
        was[1] if kind is None else kind,
        was[2] if mode is None else mode,
        was[3] if data is None else data,
    )
    return [*TREE[:index], entry, *TREE[index + 1 :]]


def test_identical_trees_share_a_digest_across_caches() -> None:
    digests = Digests()
    first = digests.tree(TREE)
    assert digests.tree([(r, k, m, bytes(d)) for r, k, m, d in TREE]) == first
    assert tree_digest(TREE) == first


@pytest.mark.parametrize(
    "tree",
    [
        _changed(2, data=b"wal frameS"),
        _changed(1, data=b"\x00" * 4096 + b"dB"),
        _changed(1, mode=0o644),
        _changed(2, relative="run.sqlite3-shm"),
        _changed(0, kind="f"),
        TREE[:2],
    ],
)
def test_any_difference_changes_the_digest(tree: Tree) -> None:
    digests = Digests()
    assert digests.tree(TREE) != digests.tree(tree)


def test_a_full_cache_is_emptied_and_digests_stay_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(images, "CACHED_BYTES", 5000)
    digests = Digests()
    first = digests.tree(TREE)
    for n in range(5):  # each new content pushes the cache past its limit
        digests.tree(_changed(1, data=bytes([n]) * 4500))
    assert digests.tree(TREE) == first == Digests().tree(TREE)
