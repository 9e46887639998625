"""The store's outcome-document builder (:mod:`runstore.store.publication.outcome_document`)
read again from committed rows, on a plain connection, as the conformance kit's
``outcome_document`` operation and recovery read it (SPEC.md sections 13.2, 13.4 and
18.3):

- after the terminal step it rebuilds exactly the ``outcome.json`` bytes
  ``publish_finalization`` wrote, for every terminal outcome: ``finalizing_revision`` is
  "once terminal, the revision before the terminal step" (13.2), whichever terminal state
  the attempt reached, and the snapshot is the document's;
- asked for an attempt that is not registered, it refuses with ``database_error`` (13.4),
  and for one that has not been finalizing with ``illegal_transition``: typed refusals
  rather than failures of its own code.

``test_outcome_document.py`` compares the builders while the attempts are finalizing;
these tests drive the store through ``publish_finalization`` and read its rows afterwards.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from typing import TypeVar

import pytest
from runstore import RunStoreError
from runstore.canonical import decode
from runstore.requests import Failed
from runstore.store.publication import outcome_document as store_builder
from runstore.testing import fixtures as sc

from conformance.publication.world import PublicationWorld
from conformance.publication.world import at
from conformance.publication.world import files

T = TypeVar("T")
LOGS = files(**{"stderr.log": b"done\n"})


def _read(world: PublicationWorld, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read(connection)`` on a fresh read-only connection inside ``BEGIN`` (rolled back)."""
    connection = sqlite3.connect(
        f"file:{world.store.database_path}?mode=ro", uri=True, isolation_level=None
    )
    try:
        connection.execute("BEGIN")
        try:
            return read(connection)
        finally:
            connection.execute("ROLLBACK")
    finally:
        connection.close()


@pytest.fixture(params=["accepted", "censored", "superseded", "failed"])
def outcome_name(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


def test_after_the_terminal_step_the_builder_rebuilds_the_published_bytes(
    world: PublicationWorld, outcome_name: str
) -> None:
    """SPEC.md 13.2 (``attempt.finalizing_revision``: once terminal, the revision before the
    terminal step) and 18.3 (``outcome_document``: the bytes a ``publish_finalization``
    would write, from the committed rows): rebuilt after the commit, the document is the
    published ``outcome.json`` byte for byte, for each terminal state."""
    guard, outcome = world.terminal_scenario(outcome_name)
    published = world.publish_finalization(guard, outcome, (), LOGS, at(2_000))
    terminal = published.terminal
    written = (world.root / published.artifact.path / "outcome.json").read_bytes()
    assert world.rows("SELECT state, revision FROM attempts WHERE id = ?", (guard.attempt_id,)) == [
        (outcome.state.value, terminal.revision)
    ]

    rebuilt, snapshot = _read(
        world,
        lambda c: (
            store_builder.outcome_document(
                c, guard.attempt_id, outcome, (), terminal.finished_at_ns
            ),
            store_builder.snapshot(c, guard.attempt_id, outcome),
        ),
    )

    assert rebuilt == written
    document = decode(written)
    assert isinstance(document, dict) and isinstance(document["attempt"], dict)
    assert document["attempt"]["finalizing_revision"] == guard.revision == terminal.revision - 1
    assert snapshot == document["snapshot"]


def test_an_unregistered_attempt_is_a_database_error(world: PublicationWorld) -> None:
    """SPEC.md 13.4: the builder reads rows its caller has checked; asked for an attempt
    that is not registered (here the second attempt of a slot whose first one runs), it
    refuses with ``database_error``, for the document and for the snapshot alike."""
    fixture = sc.slot_fixture()
    world.executing(fixture)
    missing = fixture.attempt_id(1)
    outcome = Failed(code="crash", details={})
    for build in (
        lambda c: store_builder.outcome_document(c, missing, outcome, (), 5_000),
        lambda c: store_builder.snapshot(c, missing, outcome),
    ):
        with pytest.raises(RunStoreError) as info:
            _read(world, build)
        assert info.value.code == "database_error"
        assert info.value.message == f"attempt {missing} is not registered"


def test_an_attempt_that_has_not_been_finalizing_is_an_illegal_transition(
    world: PublicationWorld,
) -> None:
    """SPEC.md 13.4: an attempt still executing has no finalizing revision, so it has no
    outcome document; asked for one directly (the kit's ``outcome_document``), the builder
    refuses with ``illegal_transition`` (it raised a bare ``AssertionError`` before)."""
    fixture = sc.slot_fixture()
    guard = world.executing(fixture)
    outcome = Failed(code="crash", details={})
    with pytest.raises(RunStoreError) as info:
        _read(
            world, lambda c: store_builder.outcome_document(c, guard.attempt_id, outcome, (), 5_000)
        )
    assert info.value.code == "illegal_transition"
    assert info.value.message.startswith(f"attempt {guard.attempt_id} is executing: ")
