"""One group's statistics (SPEC.md section 17.2): against numpy and scipy, their invariants,
and every refusal."""

from __future__ import annotations

import json
import math
import re

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.analysis.summary import Summary
from runstore.analysis.summary import summarize
from runstore.errors import InvalidRecordError

from conformance.analysis.reference import median_index

pytest.importorskip("scipy")

finite = st.floats(-1e9, 1e9, allow_nan=False, allow_subnormal=False)
samples = st.lists(finite, min_size=1, max_size=40)
# Few distinct values: ties, a zero MAD, outliers.
clumpy = st.lists(st.sampled_from([0.0, 1.0, 1.0, 2.0, 3.0, 50.0, -7.5]), min_size=1, max_size=25)
thresholds = st.none() | st.floats(0.0, 2.0)


def close(left: float, right: float, scale: float) -> bool:
    return abs(left - right) <= 1e-12 * scale + 1e-300


@settings(max_examples=150)
@given(values=samples | clumpy, threshold=thresholds)
def test_every_field_matches_an_independent_computation(
    values: list[float], threshold: float | None
) -> None:
    summary = summarize(values, threshold=threshold)
    data = np.asarray(values)
    scale = float(np.max(np.abs(data))) or 1.0
    ordered = np.sort(data)
    median = float(np.median(data))
    mad = float(np.median(np.abs(data - median)))
    assert summary.n == len(values)
    assert close(summary.mean, float(np.mean(data)), scale * len(values))
    if len(values) == 1:
        assert summary.stdev is None
    else:
        assert summary.stdev is not None
        # Scaled first, so no square underflows or overflows in the reference either.
        expected = float(np.std(data / scale, ddof=1)) * scale
        assert close(summary.stdev, expected, 1e3 * scale)
    assert summary.median == median
    assert summary.mad == mad
    assert (summary.minimum, summary.maximum) == (float(ordered[0]), float(ordered[-1]))
    j, level = median_index(len(values))
    assert (summary.ci_low, summary.ci_high) == (float(ordered[j - 1]), float(ordered[-j]))
    assert summary.ci_level == pytest.approx(level, abs=1e-12)
    if mad == 0:
        outliers = int(np.sum(data != median))
    else:
        outliers = int(np.sum(np.abs(data - median) / (1.4826 * mad) > 3.5))
    assert summary.outliers == outliers
    spread_over = threshold is not None and (
        (median == 0 and mad > 0) or (median != 0 and mad / abs(median) > threshold)
    )
    assert summary.unstable == (outliers > 0 or spread_over)
    assert len(summary.reasons) == (outliers > 0) + spread_over
    if outliers:
        assert summary.reasons[-1] == f"{outliers} outlier{'s' if outliers > 1 else ''}"


@settings(max_examples=100)
@given(values=samples | clumpy, threshold=thresholds)
def test_the_order_invariants_hold(values: list[float], threshold: float | None) -> None:
    summary = summarize(values, threshold=threshold)
    assert summary.minimum <= summary.ci_low <= summary.median
    assert summary.median <= summary.ci_high <= summary.maximum
    assert summary.minimum <= summary.mean <= summary.maximum
    assert summary.mad >= 0 and (summary.stdev is None or summary.stdev >= 0)
    assert 0 <= summary.outliers <= summary.n
    assert 0 <= summary.ci_level < 1


@settings(max_examples=60)
@given(values=samples | clumpy, data=st.data())
def test_the_order_of_the_values_does_not_matter(values: list[float], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(values))
    assert summarize(shuffled, threshold=0.05) == summarize(values, threshold=0.05)


def _scaled(summary: Summary, factor: float) -> dict[str, object]:
    """What the summary of ``factor * values`` should be, for ``factor > 0``; the reasons
    with their numbers masked (a reason quotes the median, which scales)."""
    fields = attrs.asdict(summary)
    for name in ("mean", "stdev", "median", "mad", "minimum", "maximum", "ci_low", "ci_high"):
        if fields[name] is not None:
            fields[name] *= factor
    return _masked(fields)


def _masked(fields: dict[str, object]) -> dict[str, object]:
    """``fields`` with every number in its ``reasons`` replaced by ``#``."""
    reasons = fields.get("reasons")
    if isinstance(reasons, tuple | list):
        fields["reasons"] = tuple(re.sub(r"-?\d[\d.e+-]*", "#", str(r)) for r in reasons)
    return fields


@settings(max_examples=60)
@given(values=samples | clumpy, power=st.integers(-20, 20))
def test_scaling_by_a_power_of_two_scales_every_statistic_exactly(
    values: list[float], power: int
) -> None:
    """A power of two scales every double exactly, so nothing may differ, flags included."""
    factor = 2.0**power
    scaled = summarize([factor * value for value in values], threshold=0.05)
    assert _masked(attrs.asdict(scaled)) == _scaled(summarize(values, threshold=0.05), factor)


@settings(max_examples=60)
@given(
    values=st.lists(st.floats(1e-3, 1e6), min_size=1, max_size=40),
    factor=st.floats(1e-3, 1e3),
)
def test_scaling_by_any_positive_factor_scales_the_statistics(
    values: list[float], factor: float
) -> None:
    original = summarize(values)
    scaled = summarize([factor * value for value in values])
    # Each product is rounded by half an ulp, so a difference of two (MAD, stdev) may be off
    # by a few ulps of the largest product, however small the difference itself is.
    slack = 4 * math.ulp(max(values) * factor)
    for name, value in _scaled(original, factor).items():
        if isinstance(value, float) and name != "ci_level":
            assert getattr(scaled, name) == pytest.approx(value, rel=1e-9, abs=slack)
    assert (scaled.n, scaled.ci_level) == (original.n, original.ci_level)


# --- the stability rule, by named cases ------------------------------------------------------


def test_a_spread_over_the_threshold_is_unstable_and_says_by_how_much() -> None:
    """median 100, MAD 10: the spread is 10% of the median, over a 5% threshold."""
    summary = summarize([90.0, 100.0, 110.0], threshold=0.05)
    assert (summary.median, summary.mad, summary.outliers) == (100.0, 10.0, 0)
    assert summary.unstable
    assert summary.reasons == ("spread 10% of the median exceeds the 5% threshold",)
    assert not summarize([90.0, 100.0, 110.0], threshold=0.1).unstable  # not over: equal
    assert not summarize([90.0, 100.0, 110.0]).unstable  # no threshold, no outlier


def test_a_spread_just_over_the_threshold_shows_the_digits_that_tell_them_apart() -> None:
    """A MAD of 10.04% of the median over a 10% threshold: "10%" against "10%" says nothing."""
    summary = summarize([89.96, 100.0, 110.04], threshold=0.1)
    assert summary.reasons == ("spread 10.04% of the median exceeds the 10% threshold",)


def test_a_zero_median_with_a_nonzero_spread_counts_as_over_the_threshold() -> None:
    summary = summarize([-1.0, 0.0, 1.0], threshold=0.5)
    assert summary.unstable and summary.outliers == 0
    assert summary.reasons == ("spread around a median of 0 exceeds the 50% threshold",)
    assert not summarize([0.0, 0.0, 0.0], threshold=0.0).unstable


def test_with_a_zero_mad_every_value_off_the_median_is_an_outlier() -> None:
    summary = summarize([5.0, 5.0, 5.0, 5.0, 6.0, 4.0])
    assert (summary.mad, summary.outliers, summary.reasons) == (0.0, 2, ("2 outliers",))


def test_the_smallest_samples_take_min_and_max_with_their_exact_coverage() -> None:
    """n <= 5: no pair reaches 95%, so [min, max] with coverage 1 - 2 * 0.5**n."""
    for n in range(1, 6):
        summary = summarize([float(i) for i in range(n)])
        assert (summary.ci_low, summary.ci_high) == (0.0, float(n - 1))
        assert summary.ci_level == 1 - 2 * 0.5**n


def test_values_near_the_magnitude_bound_overflow_nothing() -> None:
    summary = summarize([1e300, -1e300, 1e300, -1e300, 1e300])
    assert all(
        math.isfinite(value)
        for value in (summary.mean, summary.stdev or 0.0, summary.mad, summary.median)
    )
    assert summary.stdev == pytest.approx(
        float(np.std(np.array([1.0, -1, 1, -1, 1]), ddof=1)) * 1e300
    )


def test_integers_are_numbers() -> None:
    assert summarize([1, 2, 3]).median == 2.0


@settings(max_examples=30)
@given(values=samples | clumpy, threshold=thresholds)
def test_to_json_names_every_field_and_dumps(values: list[float], threshold: float | None) -> None:
    summary = summarize(values, threshold=threshold)
    document = summary.to_json()
    assert set(document) == {field.name for field in attrs.fields(Summary)}
    decoded = json.loads(json.dumps(document, allow_nan=False))
    assert decoded["reasons"] == list(summary.reasons)
    assert decoded["median"] == summary.median and decoded["stdev"] == summary.stdev


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        [],
        (),
        [math.nan],
        [1.0, math.inf],
        [-math.inf],
        [True, 1.0],
        [1.0, "2"],
        [None],
        [1.0, [2.0]],
        [1e301],
        [10**400],
        "123",
        b"12",
        {1.0: 2.0},
        5,
        None,
        1.5,
    ],
    ids=repr,
)
def test_bad_samples_are_refused_with_invalid_record(values: object) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        summarize(values)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_record"


@pytest.mark.parametrize(
    "threshold",
    [-0.01, -math.inf, math.nan, math.inf, 1e301, True, False, "0.05", [0.05]],
    ids=repr,
)
def test_bad_thresholds_are_refused_with_invalid_record(threshold: object) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        summarize([1.0, 2.0], threshold=threshold)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_record"
