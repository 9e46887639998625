"""Text the store cannot keep (SPEC.md section 9: ``invalid_record``): a str holding a lone
surrogate has no UTF-8 form. Every entry point that takes an id refuses it typed, before
any transaction, leaving the store as it was (it used to escape as a raw
UnicodeEncodeError from SQLite's parameter binding)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from runstore import FirstAttempt
from runstore import RunStore
from runstore.batch import WriteBatch
from runstore.testing import fixtures as sc

from conformance.writer.world import World

HOSTILE = "attempt-slot:v1:\udc80"

CALLS: list[tuple[str, Callable[[RunStore], Any]]] = [
    ("registered_for", lambda store: store.registered_for([HOSTILE])),
    ("slot_progress", lambda store: store.slot_progress(["ok", HOSTILE])),
    (
        "reserve",
        lambda store: store.reserve(HOSTILE, FirstAttempt(), sc.lease("l1", 10_000), 1_000),
    ),
    (
        "batch.reserve",
        lambda store: WriteBatch().reserve(HOSTILE, FirstAttempt(), sc.lease("l1", 9), 1),
    ),
]


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_a_lone_surrogate_in_an_id_is_refused_typed_and_changes_nothing(
    world: World, name: str, call: Callable[[RunStore], Any]
) -> None:
    error = world.refused_untouched("invalid_record", lambda: call(world.store))
    assert "lone surrogate" in error.message, name


def test_the_sql_seam_refuses_unencodable_text_typed(world: World) -> None:
    """A path no argument check covers still meets a typed refusal, not a raw error."""
    from runstore import sql

    connection = world.store._connection
    assert connection is not None
    with pytest.raises(Exception) as info:
        sql.execute(connection, "SELECT ?", ("\udc80",))
    assert getattr(info.value, "code", None) == "invalid_record"
