"""Attempt ids refuse ill-typed arguments with typed errors (SPEC.md sections 3 and 4).

SPEC 3: ``run_attempt_id(slot_id, retry_index)`` needs an ``attempt-slot`` id and an integer
``retry_index`` in 0..2^53-1. SPEC 4: a typed id reference has the named prefix and the exact
``<prefix>:v1:<64 hex>`` shape, and booleans are never integers [``invalid_record``]. These
tests call it with hostile arguments (CONVENTIONS 13), each also after the same id was asked
for with well-typed arguments, because the function is memoized and a cached answer must
never stand in for a refusal.
"""

from __future__ import annotations

import pytest
from runstore import run_attempt_id
from runstore.errors import InvalidRecordError
from runstore.identity import ATTEMPT_SLOT
from runstore.identity import check_typed_id
from runstore.identity import is_typed_id

SLOT = "attempt-slot:v1:" + "5" * 64

NON_INTEGERS = [True, False, 1.0, 0.0, "1", b"1", None, [1], {}, (1,), {1}]
NON_STRINGS = [None, 1, 1.5, b"attempt-slot:v1:" + b"5" * 64, [SLOT], {"id": SLOT}, (SLOT,)]


@pytest.mark.parametrize("retry_index", NON_INTEGERS, ids=repr)
def test_run_attempt_id_refuses_a_non_integer_retry_index_with_invalid_record(
    retry_index: object,
) -> None:
    """SPEC 3/4: ``retry_index`` is an integer, and a bool is not one; any other type
    (unhashable ones included) is ``invalid_record``, even right after the integer of equal
    value was asked for."""
    run_attempt_id(SLOT, 1)
    run_attempt_id(SLOT, 0)
    with pytest.raises(InvalidRecordError) as caught:
        run_attempt_id(SLOT, retry_index)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_record"


@pytest.mark.parametrize("slot_id", NON_STRINGS, ids=repr)
def test_run_attempt_id_refuses_a_slot_id_that_is_not_a_string_with_invalid_record(
    slot_id: object,
) -> None:
    """SPEC 3/4: ``slot_id`` must be an ``attempt-slot`` typed id, so a value that is not a
    string at all (unhashable ones included) is ``invalid_record``, not a ``TypeError`` or an
    assertion."""
    run_attempt_id(SLOT, 0)
    with pytest.raises(InvalidRecordError) as caught:
        run_attempt_id(slot_id, 0)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_record"


@pytest.mark.parametrize("value", NON_STRINGS, ids=repr)
def test_a_typed_id_reference_that_is_not_a_string_is_not_a_typed_id(value: object) -> None:
    """SPEC 4: a typed id reference is a string of the exact shape; no other type has it, and
    checking such a field refuses it with ``invalid_record`` naming the field."""
    assert not is_typed_id(value, ATTEMPT_SLOT)
    with pytest.raises(InvalidRecordError, match="slot_id must be"):
        check_typed_id(value, ATTEMPT_SLOT, "slot_id")
