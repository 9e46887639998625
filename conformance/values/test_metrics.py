"""The metrics format (runstore.metrics, SPEC.md section 15.3, "The worker protocol", and
16.3): a worker's numbers become decimal strings, every value the runner stores reads back
unchanged through the inspection reader's rule, and that rule shows exactly the string and
integer members of a stored result's metrics."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runstore.metrics import decimal
from runstore.metrics import parse_result_document
from runstore.metrics import result_object
from runstore.metrics import stored_metrics
from runstore.metrics import stored_value

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), min_size=1)
NUMBERS = st.one_of(
    st.integers(-(2**53) + 1, 2**53 - 1), st.floats(allow_nan=False, allow_infinity=False)
)


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (-7, "-7"),
        (2**53 - 1, "9007199254740991"),
        (0.1, "0.1"),
        (1e-07, "1e-07"),
        (2.5, "2.5"),
        (-0.0, "-0.0"),
        (1e300, "1e+300"),
    ],
)
def test_metric_values_become_decimal_strings(number: object, text: str) -> None:
    assert decimal("m", number) == text


@pytest.mark.parametrize("number", [2**53, -(2**53), float("nan"), float("inf"), True, "1", None])
def test_metric_values_that_are_not_safe_numbers_are_refused(number: object) -> None:
    with pytest.raises(ValueError, match="'m'"):
        decimal("m", number)


@given(st.dictionaries(NAMES, NUMBERS))
def test_what_the_runner_stores_the_reader_reads_back_unchanged(metrics: dict[str, object]) -> None:
    document = json.dumps({"metrics": metrics}).encode()
    pairs = parse_result_document(document)
    stored = json.loads(json.dumps(result_object(pairs)))  # as the record keeps it
    assert stored_metrics(stored) == dict(pairs)
    for name, text in pairs:
        value = metrics[name]
        assert (int(text) if type(value) is int else float(text)) == value


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("12", "12"),
        ("-0.5", "-0.5"),
        ("1e-07", "1e-07"),
        ("caf\u00e9", "caf\u00e9"),  # another writer's string metric, shown as it is
        ("", ""),
        (12, "12"),  # an integer member, written in decimal (SPEC 16.3)
        (-(2**53) + 1, str(-(2**53) + 1)),
    ],
)
def test_string_and_integer_members_are_metric_values(value: object, read: str) -> None:
    assert stored_value(value) == read
    assert stored_metrics({"metrics": {"m": value}}) == {"m": read}


@pytest.mark.parametrize("value", [True, False, 1.5, None, {"value": "1"}, ["1"]])
def test_other_members_are_no_metric_values(value: object) -> None:
    assert stored_value(value) is None
    assert stored_metrics({"metrics": {"m": value, "kept": "3"}}) == {"kept": "3"}


@pytest.mark.parametrize("result", [None, "x", [], {}, {"metrics": None}, {"metrics": ["1"]}])
def test_a_result_without_a_metrics_object_has_no_metrics(result: object) -> None:
    assert stored_metrics(result) == {}
