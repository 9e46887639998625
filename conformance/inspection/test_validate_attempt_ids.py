"""``validate`` judges an attempt record whose slot id or retry index is of the wrong JSON
type (SPEC.md sections 3, 4 and 16): it recomputes the attempt's id from the record, and an
argument ``run_attempt_id`` refuses becomes a finding on that attempt, never a crash of the
command. (``run_attempt_id`` is memoized; an unhashable argument used to reach the cache
and raise a raw ``TypeError`` before being refused.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore.canonical import JSON
from runstore.inspection.validate import validate_store

from conformance.closed_store import rows
from conformance.inspection.corrupt_world import edited
from conformance.inspection.corrupt_world import rewrite_record

SLOT_VALUES: list[JSON] = [["attempt-slot"], {"id": "x"}, None, 7]
RETRY_VALUES: list[JSON] = [[0], {"n": 0}, "0", None, True]


def _with(copy: Path, field: str, value: JSON) -> tuple[str, list[tuple[str, str, str]]]:
    (rowid, attempt_id) = rows(copy, "SELECT rowid, id FROM attempts ORDER BY rowid")[0]
    with edited(copy) as connection:
        rewrite_record(connection, "attempts", int(rowid), lambda doc: doc.update({field: value}))
    report = validate_store(str(copy))
    return str(attempt_id), [(f.code, f.subject, f.message) for f in report.findings]


@pytest.mark.parametrize("value", SLOT_VALUES, ids=repr)
def test_an_attempt_record_whose_slot_id_is_not_a_typed_id_is_record_invalid(
    copy: Path, value: JSON
) -> None:
    """SPEC 4: ``slot_id`` is an ``attempt-slot`` typed id; validate reports any other JSON
    value in an attempt's record (an array or object included) as ``record_invalid`` on
    that attempt, naming the field."""
    attempt_id, findings = _with(copy, "slot_id", value)
    assert findings
    assert {(code, subject) for code, subject, _ in findings} == {("record_invalid", attempt_id)}
    assert "slot_id" in findings[0][2]


@pytest.mark.parametrize("value", RETRY_VALUES, ids=repr)
def test_an_attempt_record_whose_retry_index_is_not_an_integer_is_record_invalid(
    copy: Path, value: JSON
) -> None:
    """SPEC 3/4: ``retry_index`` is an integer (never a boolean); validate reports any
    other JSON value as ``record_invalid`` on that attempt, naming the field."""
    attempt_id, findings = _with(copy, "retry_index", value)
    assert findings
    assert {(code, subject) for code, subject, _ in findings} == {("record_invalid", attempt_id)}
    assert "retry_index" in findings[0][2]
