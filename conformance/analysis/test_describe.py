"""A comparison in words (SPEC.md section 17.3, "Words"): each form by a named case, the
shown factor never below 1, and every refusal."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.analysis.compare import Comparison
from runstore.analysis.compare import compare
from runstore.analysis.compare import describe
from runstore.errors import InvalidRecordError

FAST = [10.0, 10.2, 10.1, 9.9, 10.05, 10.15]
SLOW = [13.0, 13.3, 12.9, 13.1, 13.2, 12.95]


def factor_text(result: Comparison, *, inverted: bool) -> tuple[str, str]:
    """``"F.FFx"`` and ``"[L.LL, H.HH]"`` for the factor shown, from the ratio fields."""
    assert result.ratio and result.ratio_low and result.ratio_high
    if inverted:
        shown = (1 / result.ratio, 1 / result.ratio_high, 1 / result.ratio_low)
    else:
        shown = (result.ratio, result.ratio_low, result.ratio_high)
    return f"{shown[0]:.2f}x", f"[{shown[1]:.2f}, {shown[2]:.2f}]"


@pytest.mark.parametrize("unit", ["s", "ms", "us", "\u00b5s", "\u03bcs", "ns", "min", "h"])
def test_a_lower_time_where_lower_is_better_is_faster(unit: str) -> None:
    result = compare(SLOW, FAST, direction="lower")
    factor, interval = factor_text(result, inverted=True)
    assert describe(result, direction="lower", unit=unit) == f"{factor} faster {interval}"


def test_a_higher_time_where_lower_is_better_is_slower() -> None:
    result = compare(FAST, SLOW, direction="lower")
    factor, interval = factor_text(result, inverted=False)
    assert describe(result, direction="lower", unit="ms") == f"{factor} slower {interval}"


def test_a_higher_rate_where_higher_is_better_is_faster_and_a_lower_one_slower() -> None:
    up = compare(FAST, SLOW, direction="higher")
    factor, interval = factor_text(up, inverted=False)
    assert describe(up, direction="higher", unit="MB/s") == f"{factor} faster {interval}"
    down = compare(SLOW, FAST, direction="higher")
    factor, interval = factor_text(down, inverted=True)
    assert describe(down, direction="higher", unit="MB/s") == f"{factor} slower {interval}"


def test_other_units_say_better_or_worse_and_which_way_the_candidate_moved() -> None:
    """A time where higher is better, and a plain unit: no speed words."""
    up = compare(FAST, SLOW, direction="higher")
    factor, interval = factor_text(up, inverted=False)
    assert describe(up, direction="higher", unit="s") == f"{factor} better (higher) {interval}"
    assert describe(up, direction="higher", unit="") == f"{factor} better (higher) {interval}"
    worse = compare(FAST, SLOW, direction="lower")
    factor, interval = factor_text(worse, inverted=False)
    assert describe(worse, direction="lower", unit="B") == f"{factor} worse (higher) {interval}"
    down = compare(SLOW, FAST, direction="lower")
    factor, interval = factor_text(down, inverted=True)
    assert describe(down, direction="lower", unit="B") == f"{factor} better (lower) {interval}"


def test_no_significant_difference_gives_the_p_value_to_two_digits() -> None:
    result = compare([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 3.5, 4.5], direction="lower")
    assert not result.significant and result.p_value >= 0.05
    expected = f"no significant difference (p = {result.p_value:.2g})"
    assert describe(result, direction="lower", unit="ms") == expected


def test_a_change_held_by_the_threshold_says_so() -> None:
    result = compare(FAST, SLOW, direction="lower", threshold=0.4)
    assert result.change is not None and result.p_value < 0.05 and not result.significant
    change = f"{100 * result.change:.3g}%"
    expected = (
        f"no significant difference (p = {result.p_value:.2g}, "
        f"a change of {change} is within the 40% threshold)"
    )
    assert describe(result, direction="lower", unit="ms") == expected


def test_a_significant_p_value_with_a_zero_estimate_says_the_change_is_zero() -> None:
    """Heavy ties: 10 ones and a two against 6 ones and 6 twos. p < 0.05 (scipy agrees,
    see test_compare), but most pairwise differences are 0, so the estimate is 0."""
    result = compare([1.0] * 10 + [2.0], [1.0] * 6 + [2.0] * 6, direction="lower")
    assert result.p_value < 0.05 and result.difference == 0.0 and not result.significant
    expected = f"no significant difference (p = {result.p_value:.2g}, an estimated change of 0)"
    assert describe(result, direction="lower", unit="ms") == expected


def test_too_few_repetitions_name_both_counts() -> None:
    result = compare([1.0], [2.0, 3.0, 4.0], direction="lower")
    assert describe(result, direction="lower", unit="ms") == (
        "too few repetitions to compare (n = 1 and 3)"
    )


def test_without_a_ratio_the_difference_is_given_in_the_metrics_unit() -> None:
    """A negative baseline value: no ratio. The half width sets the decimals."""
    baseline = [-1.0, 0.2, 0.1, 0.3, 0.05, 0.15]
    candidate = [3.5, 3.6, 3.4, 3.52, 3.58, 3.45]
    result = compare(baseline, candidate, direction="higher")
    assert result.ratio is None and result.verdict == "better"
    text = describe(result, direction="higher", unit="MB/s")
    match = re.fullmatch(r"\+([0-9.]+) MB/s \[([0-9.]+), ([0-9.]+)\], better", text)
    assert match, text
    shown = [float(group) for group in match.groups()]
    half = (result.difference_high - result.difference_low) / 2
    for value, exact in zip(
        shown, (result.difference, result.difference_low, result.difference_high), strict=True
    ):
        assert abs(value - exact) <= half  # rounded no coarser than the half width


@settings(max_examples=80)
@given(
    baseline=st.lists(st.floats(0.5, 100), min_size=2, max_size=12),
    candidate=st.lists(st.floats(0.5, 100), min_size=2, max_size=12),
    direction=st.sampled_from(["lower", "higher"]),
    unit=st.sampled_from(["ms", "MB/s", "B", ""]),
)
def test_the_shown_factor_is_never_below_one(
    baseline: list[float], candidate: list[float], direction: str, unit: str
) -> None:
    result = compare(baseline, candidate, direction=direction)
    text = describe(result, direction=direction, unit=unit)
    if result.significant:
        match = re.match(r"([0-9.]+)x (faster|slower|better|worse)", text)
        assert match, text
        assert float(match.group(1)) >= 1.0
        good = match.group(2) in ("faster", "better")
        assert good == (result.verdict == "better")
    else:
        assert text.startswith("no significant difference (p = ")


def test_a_factor_of_a_hundred_or_more_shows_four_significant_digits_not_decimals() -> None:
    """pyperf writes "14.91x"; "500.00x" would claim a precision nobody measured."""
    fast = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]
    result = compare(fast, [500.0 * value for value in fast], direction="lower")
    text = describe(result, direction="lower", unit="ms")
    assert re.fullmatch(r"500x slower \[[0-9]+(\.[0-9]+)?, [0-9]+(\.[0-9]+)?\]", text), text
    near = compare(fast, [14.91 * value for value in fast], direction="lower")
    assert re.match(r"14\.9[0-9]x slower", describe(near, direction="lower", unit="ms"))


# --- refusals --------------------------------------------------------------------------------

RESULT = compare(FAST, SLOW, direction="lower")


@pytest.mark.parametrize("comparison", [None, "x", RESULT.to_json(), 1.0], ids=repr)
def test_describe_refuses_what_is_not_a_comparison(comparison: object) -> None:
    with pytest.raises(InvalidRecordError, match="Comparison"):
        describe(comparison, direction="lower", unit="ms")  # type: ignore[arg-type]


@pytest.mark.parametrize("direction", ["higher", "Lower", None, 0], ids=repr)
def test_describe_refuses_another_or_a_bad_direction(direction: object) -> None:
    with pytest.raises(InvalidRecordError, match="direction"):
        describe(RESULT, direction=direction, unit="ms")  # type: ignore[arg-type]


@pytest.mark.parametrize("unit", [None, 3, "m\ts", "x" * 65], ids=repr)
def test_describe_refuses_a_bad_unit(unit: object) -> None:
    with pytest.raises(InvalidRecordError, match="unit"):
        describe(RESULT, direction="lower", unit=unit)  # type: ignore[arg-type]
