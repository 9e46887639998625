"""``RunStore.open`` is the only way to get a handle (SPEC.md section 9,
``direct_construction``): calling the class directly, with whatever arguments, is refused
before it touches anything, so no handle ever skips the path checks, probes and schema
check that opening runs.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import runstore
from runstore import RunStore
from runstore import RunStoreError
from runstore.errors import DirectConstructionError

MESSAGE = "RunStore(...) makes no handle; use RunStore.open(root)"


@pytest.mark.parametrize(
    "arguments",
    [
        (),
        ("/nonexistent/store",),
        ("{root}", "{root}/run.sqlite3", None, None),
    ],
    ids=["no-arguments", "a-root", "open's-own-parts"],
)
def test_calling_the_class_is_refused_and_touches_nothing(
    tmp_path: Path, arguments: tuple[object, ...]
) -> None:
    given = [a.format(root=tmp_path) if isinstance(a, str) else a for a in arguments]
    with pytest.raises(DirectConstructionError) as info:
        RunStore(*given)
    assert isinstance(info.value, RunStoreError)
    assert (info.value.code, info.value.message) == ("direct_construction", MESSAGE)
    assert str(info.value) == f"direct_construction: {MESSAGE}"
    assert os.listdir(tmp_path) == []


def test_keyword_arguments_and_the_public_name_are_refused_alike(tmp_path: Path) -> None:
    connection = sqlite3.connect(":memory:")
    try:
        with pytest.raises(DirectConstructionError):
            runstore.RunStore(root=str(tmp_path), connection=connection)
    finally:
        connection.close()
    assert os.listdir(tmp_path) == []


def test_open_still_gives_a_working_handle(tmp_path: Path) -> None:
    with RunStore.open(tmp_path) as store:
        assert isinstance(store, RunStore)
        assert store.root == str(tmp_path)
        assert store.database_path == str(tmp_path / "run.sqlite3")
        assert store.subscriber_failures == 0
        assert store.slot_progress([]) == {}
    assert repr(store) == f"RunStore({str(tmp_path)!r}, closed)"
