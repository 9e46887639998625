"""Reading the plain-JSON forms the vector files share (``vectors/README.md``), through the
conformance kit's readers (``runstore.kit``: the forms another implementation's driver
receives): terminal outcomes, references and writer operations, replayed on any writer,
each returned guard kept as its attempt's latest. Used by ``test_vectors.py`` (events),
``test_outcomes.py`` and ``test_recovery.py`` (which adds the ``recover`` operation and
its report); independent of the generator's cases and encoders in ``tools/vectorgen``. A
result is compared with the file through its own ``to_json()``
(:func:`runstore.kit.forms.result_wire`), whose encoding of each field
``conformance/values/test_receipts.py`` checks on its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runstore import OwnedAttempt
from runstore.kit.calls import call_of_operation
from runstore.kit.forms import result_wire
from runstore.kit.values import read_vectors
from runstore.kit.wire import outcome_of as outcome_of
from runstore.kit.wire import references_of as references_of
from runstore.testing.lockstep import Writer

ROOT = Path(__file__).resolve().parents[2]


def generator(name: str) -> Any:
    """The generator module ``tools/vectorgen/<name>.py`` (``tools/`` is on the tests'
    path: pyproject's ``pythonpath``)."""
    return importlib.import_module(f"vectorgen.{name}")


def assert_current(name: str) -> None:
    """``vectors/<name>.json`` is what ``tools/vectorgen/<name>.py`` builds."""
    committed = (ROOT / "vectors" / f"{name}.json").read_text(encoding="utf-8")
    assert committed == generator(name).build(), f"vectors/{name}.json is stale: run tools/regen"


def read_vector_file(name: str) -> dict[str, Any]:
    """``vectors/<name>`` decoded, after checking it is ASCII (as every vector file is)."""
    return read_vectors(ROOT / "vectors", name)


def replay(writer: Writer, operation: dict[str, Any], guards: dict[str, OwnedAttempt]) -> object:
    """Apply one operation and return its result; a guarded one's ``attempt_id`` names the
    latest guard in ``guards``, and the guard a call returns (alone, in a disposition or in
    an observation receipt) becomes its attempt's latest. The operation is read as the
    conformance kit reads it (:func:`runstore.kit.calls.call_of_operation`)."""
    return call_of_operation(operation).apply(writer, guards)


def replay_checked(
    writer: Writer,
    operation: dict[str, Any],
    guards: dict[str, OwnedAttempt],
    committed: Callable[[], Sequence[int]],
) -> object:
    """:func:`replay` one operation, checking its result against the file's and the
    sequences of the events it committed (``committed()``: every sequence so far)."""
    before = len(committed())
    result = replay(writer, operation, guards)
    assert result_wire(result) == operation["result"], operation["name"]
    assert list(committed()[before:]) == operation["event_sequences"], operation["name"]
    return result
