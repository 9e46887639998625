"""Two groups compared (SPEC.md section 17.3): the estimates and intervals against brute
force, the p-value against scipy, the symmetries, coverage by simulation, the verdict rule
and every refusal."""

from __future__ import annotations

import json
import math
import random

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.analysis.compare import Comparison
from runstore.analysis.compare import compare
from runstore.errors import InvalidRecordError

from conformance.analysis.reference import has_ties
from conformance.analysis.reference import hodges_lehmann
from conformance.analysis.reference import moses_index
from conformance.analysis.reference import pairwise

stats = pytest.importorskip("scipy.stats")

values = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)
positive = st.floats(1e-3, 1e6)
groups = st.lists(values, min_size=1, max_size=15)
positive_groups = st.lists(positive, min_size=1, max_size=15)
tied_groups = st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0]), min_size=1, max_size=15)
directions = st.sampled_from(["lower", "higher"])


@settings(max_examples=120)
@given(
    baseline=groups | positive_groups | tied_groups,
    candidate=groups | positive_groups | tied_groups,
    direction=directions,
)
def test_estimates_intervals_and_p_value_match_brute_force_and_scipy(
    baseline: list[float], candidate: list[float], direction: str
) -> None:
    result = compare(baseline, candidate, direction=direction)
    m, n = len(baseline), len(candidate)
    k, level = moses_index(m, n)
    differences = pairwise(baseline, candidate)
    assert result.difference == pytest.approx(hodges_lehmann(baseline, candidate), abs=1e-9)
    assert (result.difference_low, result.difference_high) == (differences[k - 1], differences[-k])
    assert result.ci_level == pytest.approx(level, abs=1e-12)
    positive = min(baseline) > 0 and min(candidate) > 0
    logs = pairwise(np.log(baseline), np.log(candidate)) if positive else differences
    estimates = (float(np.median(logs)), logs[k - 1], logs[-k])
    if positive and max(map(abs, estimates)) <= 700:  # beyond 700: no ratio (SPEC 17.3)
        assert result.ratio == pytest.approx(math.exp(float(np.median(logs))), rel=1e-12)
        assert result.ratio_low == pytest.approx(math.exp(logs[k - 1]), rel=1e-12)
        assert result.ratio_high == pytest.approx(math.exp(logs[-k]), rel=1e-12)
    else:
        assert result.ratio is result.ratio_low is result.ratio_high is None
    if m < 2 or n < 2:
        assert (result.p_value, result.method, result.significant) == (1.0, "none", False)
        assert result.verdict == "same"
        return
    exact = not has_ties(baseline, candidate)
    assert result.method == ("exact" if exact else "normal")
    if len(set(baseline + candidate)) == 1:
        assert result.p_value == 1.0
    else:
        expected = stats.mannwhitneyu(
            baseline, candidate, method="exact" if exact else "asymptotic", use_continuity=True
        ).pvalue
        assert result.p_value == pytest.approx(expected, abs=1e-9)


@settings(max_examples=100)
@given(
    baseline=groups | positive_groups | tied_groups,
    candidate=groups | positive_groups | tied_groups,
    direction=directions,
    threshold=st.none() | st.floats(0, 0.5),
)
def test_swapping_the_groups_inverts_the_ratio_and_flips_the_verdict(
    baseline: list[float], candidate: list[float], direction: str, threshold: float | None
) -> None:
    forward = compare(baseline, candidate, direction=direction, threshold=threshold)
    backward = compare(candidate, baseline, direction=direction, threshold=threshold)
    assert backward.difference == -forward.difference
    assert (backward.difference_low, backward.difference_high) == (
        -forward.difference_high,
        -forward.difference_low,
    )
    if forward.ratio is None:
        assert backward.ratio is None
    else:
        assert backward.ratio is not None
        assert backward.ratio_low is not None and forward.ratio_high is not None
        assert forward.ratio * backward.ratio == pytest.approx(1.0, rel=1e-12)
        assert forward.ratio_high * backward.ratio_low == pytest.approx(1.0, rel=1e-12)
    assert (backward.p_value, backward.significant, backward.change) == (
        forward.p_value,
        forward.significant,
        forward.change,
    )
    flipped = {"better": "worse", "worse": "better", "same": "same"}
    assert backward.verdict == flipped[forward.verdict]


@settings(max_examples=60)
@given(
    baseline=st.lists(st.integers(-1000, 1000), min_size=1, max_size=12),
    candidate=st.lists(st.integers(-1000, 1000), min_size=1, max_size=12),
    shift=st.integers(-5000, 5000),
)
def test_shifting_the_candidate_shifts_the_difference(
    baseline: list[int], candidate: list[int], shift: int
) -> None:
    """Integers keep every difference exact, so the shift carries over exactly (the
    midpoint of two integers is exact too)."""
    before = compare(baseline, candidate, direction="lower")
    after = compare(baseline, [value + shift for value in candidate], direction="lower")
    assert after.difference == before.difference + shift
    assert after.difference_low == before.difference_low + shift
    assert after.difference_high == before.difference_high + shift


@settings(max_examples=60)
@given(
    sample=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=15),
    direction=directions,
    threshold=st.none() | st.floats(0, 1),
)
def test_identical_samples_compare_as_the_same(
    sample: list[float], direction: str, threshold: float | None
) -> None:
    result = compare(sample, list(reversed(sample)), direction=direction, threshold=threshold)
    assert result.difference == 0.0
    assert result.p_value == 1.0
    assert (result.significant, result.verdict) == (False, "same")
    if min(sample) > 0 and math.log(max(sample)) - math.log(min(sample)) <= 700:
        assert result.ratio == 1.0  # (beyond 700 there is no ratio, SPEC 17.3)


def test_with_fewer_than_two_values_on_a_side_no_test_is_made() -> None:
    """SPEC 17.3, the one-group-too-small rule, even for a large difference."""
    for baseline, candidate in (([1.0], [5.0, 6.0, 7.0]), ([1.0, 2.0, 3.0], [9.0])):
        result = compare(baseline, candidate, direction="lower")
        assert (result.p_value, result.method) == (1.0, "none")
        assert (result.significant, result.verdict) == (False, "same")


# --- coverage by simulation ------------------------------------------------------------------


@pytest.mark.parametrize(("m", "n", "seed"), [(10, 10, 1), (7, 12, 2), (25, 25, 3)])
def test_the_shift_interval_covers_a_known_shift(m: int, n: int, seed: int) -> None:
    generator = random.Random(seed)
    shift, covered, levels = 1.5, 0, set()
    for _ in range(400):
        baseline = [generator.gauss(10.0, 2.0) for _ in range(m)]
        candidate = [generator.gauss(10.0 + shift, 2.0) for _ in range(n)]
        result = compare(baseline, candidate, direction="lower")
        covered += result.difference_low <= shift <= result.difference_high
        levels.add(result.ci_level)
    assert covered / 400 >= 0.93
    assert len(levels) == 1 and levels.pop() >= 0.95


@pytest.mark.parametrize(("m", "n", "seed"), [(10, 10, 4), (6, 9, 5)])
def test_the_ratio_interval_covers_a_known_factor(m: int, n: int, seed: int) -> None:
    generator = random.Random(seed)
    factor, covered = 1.3, 0
    for _ in range(400):
        baseline = [generator.lognormvariate(0.0, 0.4) for _ in range(m)]
        candidate = [factor * generator.lognormvariate(0.0, 0.4) for _ in range(n)]
        result = compare(baseline, candidate, direction="higher")
        assert result.ratio_low is not None and result.ratio_high is not None
        covered += result.ratio_low <= factor <= result.ratio_high
    assert covered / 400 >= 0.93


# --- significance and the verdict, by named cases ---------------------------------------------

FAST = [10.0, 10.2, 10.1, 9.9, 10.05, 10.15]
SLOW = [13.0, 13.3, 12.9, 13.1, 13.2, 12.95]


@pytest.mark.parametrize(
    ("direction", "verdict"), [("lower", "better"), ("higher", "worse")], ids=["lower", "higher"]
)
def test_a_clearly_lower_candidate_is_better_exactly_when_lower_is_better(
    direction: str, verdict: str
) -> None:
    result = compare(SLOW, FAST, direction=direction)
    assert result.p_value < 0.05 and result.significant
    assert result.ratio is not None and result.ratio < 1
    assert result.verdict == verdict


def test_a_threshold_above_the_change_makes_it_the_same() -> None:
    """SLOW is about 29% above FAST: significant at a 20% threshold, not at 40%."""
    assert compare(FAST, SLOW, direction="lower", threshold=0.2).verdict == "worse"
    held = compare(FAST, SLOW, direction="lower", threshold=0.4)
    assert held.p_value < 0.05 and not held.significant and held.verdict == "same"
    assert held.change is not None and 0.2 < held.change < 0.4


def test_without_a_ratio_the_change_is_relative_to_the_larger_median() -> None:
    """A zero in the baseline: no ratio; the change is |difference| / max |median|."""
    baseline = [0.0, 0.1, 0.2, 0.15, 0.05]
    candidate = [3.0, 3.1, 3.2, 3.05, 3.15]
    result = compare(baseline, candidate, direction="higher")
    assert result.ratio is None
    assert result.change == pytest.approx(abs(result.difference) / 3.1, rel=1e-15)
    assert result.verdict == "better"


@settings(max_examples=30)
@given(baseline=groups | positive_groups, candidate=groups | positive_groups, direction=directions)
def test_to_json_names_every_field_and_dumps(
    baseline: list[float], candidate: list[float], direction: str
) -> None:
    result = compare(baseline, candidate, direction=direction, threshold=0.01)
    document = result.to_json()
    assert set(document) == {field.name for field in attrs.fields(Comparison)}
    assert json.loads(json.dumps(document, allow_nan=False)) == attrs.asdict(result)


def test_values_near_the_magnitude_bound_still_compare() -> None:
    result = compare([-1e300, -1e300, 1e300], [1e300, 1e300, 1e300], direction="higher")
    assert all(math.isfinite(v) for v in (result.difference, result.difference_high))
    assert result.change is None or math.isfinite(result.change)
    tiny = compare([1e-300, 2e-300], [1e300, 0.5e300], direction="higher")
    assert tiny.ratio is None  # a log ratio beyond 700: no ratio
    assert tiny.change == tiny.difference / 7.5e299  # over the candidate's median


def test_with_both_medians_zero_the_change_is_undefined_and_counts_as_over() -> None:
    """Medians 0 and 0; the pairwise differences -1,-1,0,0,1,1,2,3,4 have median 1."""
    result = compare([-1.0, 0.0, 1.0], [0.0, 0.0, 3.0], direction="lower", threshold=0.5)
    assert (result.ratio, result.difference, result.change) == (None, 1.0, None)


# --- refusals --------------------------------------------------------------------------------

GOOD = [1.0, 2.0, 3.0]
BAD_SAMPLES = [[], [math.nan], [math.inf], [True], ["1"], [None], [1e301], "12", {1.0: 1.0}, 3]


@pytest.mark.parametrize("sample", BAD_SAMPLES, ids=repr)
def test_bad_samples_on_either_side_are_refused(sample: object) -> None:
    for baseline, candidate in ((sample, GOOD), (GOOD, sample)):
        with pytest.raises(InvalidRecordError) as raised:
            compare(baseline, candidate, direction="lower")  # type: ignore[arg-type]
        assert raised.value.code == "invalid_record"


@pytest.mark.parametrize("direction", ["Lower", "low", "", None, 1, True, ["lower"]], ids=repr)
def test_bad_directions_are_refused(direction: object) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        compare(GOOD, GOOD, direction=direction)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_record"


@pytest.mark.parametrize("threshold", [-0.1, math.nan, math.inf, 1e301, True, "0.1"], ids=repr)
def test_bad_thresholds_are_refused(threshold: object) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        compare(GOOD, GOOD, direction="lower", threshold=threshold)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_record"
