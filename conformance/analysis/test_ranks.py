"""The null distributions and the rank test (SPEC.md section 17.1), against brute force,
the textbook recurrence and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.analysis.ranks import EXACT_COST
from runstore.analysis.ranks import exact_sizes
from runstore.analysis.ranks import mann_whitney
from runstore.analysis.ranks import median_interval
from runstore.analysis.ranks import shift_interval
from runstore.analysis.ranks import u_counts

from conformance.analysis.reference import has_ties
from conformance.analysis.reference import median_index
from conformance.analysis.reference import moses_index
from conformance.analysis.reference import u_distribution_by_enumeration
from conformance.analysis.reference import u_distribution_by_recurrence

stats = pytest.importorskip("scipy.stats")

SMALL_SIZES = [(m, n) for m in range(1, 12) for n in range(1, 12) if m + n <= 12]


@pytest.mark.parametrize(("m", "n"), SMALL_SIZES)
def test_u_counts_match_enumerating_every_arrangement(m: int, n: int) -> None:
    assert list(u_counts(m, n)) == u_distribution_by_enumeration(m, n)


@pytest.mark.parametrize(("m", "n"), [(12, 15), (20, 20), (3, 60), (40, 7), (1, 90)])
def test_u_counts_match_the_recurrence_at_larger_sizes(m: int, n: int) -> None:
    counts = u_counts(m, n)
    assert counts == u_distribution_by_recurrence(m, n)
    assert sum(counts) == math.comb(m + n, m)


def test_the_exact_bound_is_the_stated_cost() -> None:
    """SPEC.md section 17.1: "min(m, n)**2 * max(m, n) <= 1_000_000"."""
    assert EXACT_COST == 1_000_000
    assert exact_sizes(100, 100) and exact_sizes(10, 10_000) and exact_sizes(10_000, 10)
    assert not exact_sizes(101, 100) and not exact_sizes(11, 10_000)


# --- the median's interval ---------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 61))
def test_the_median_interval_is_the_narrowest_pair_covering_95_percent(n: int) -> None:
    j, level = median_interval(n)
    expected_j, expected_level = median_index(n)
    assert j == expected_j
    assert level == pytest.approx(expected_level, abs=1e-12)
    if n >= 6:
        assert level >= 0.95
    else:
        assert j == 1 and level == pytest.approx(1 - 2 * 0.5**n, abs=1e-15)
    # Narrowest: the next pair inward (if there is one) falls short.
    if j + 1 <= (n + 1) // 2:
        assert 1 - 2 * stats.binom.cdf(j, n, 0.5) < 0.95


@pytest.mark.parametrize("n", [61, 100, 101, 999, 1000, 12_345])
def test_the_median_interval_at_larger_sizes_matches_scipy(n: int) -> None:
    j, level = median_interval(n)
    expected_j, expected_level = median_index(n)
    assert j == expected_j and level == pytest.approx(expected_level, abs=1e-9)


# --- the Moses interval's index --------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "n"), [(m, n) for m in range(1, 16) for n in range(1, 16) if m <= n or m * n % 3 == 0]
)
def test_the_shift_interval_index_is_the_narrowest_covering_95_percent(m: int, n: int) -> None:
    k, level = shift_interval(m, n)
    expected_k, expected_level = moses_index(m, n)
    assert k == expected_k
    assert level == pytest.approx(expected_level, abs=1e-12)
    if math.comb(m + n, m) >= 40:  # the smallest tail, 1 / C(m+n, m), fits in 2.5%
        assert level >= 0.95
    else:
        assert k == 1 and level == pytest.approx(1 - 2 / math.comb(m + n, m), abs=1e-15)


@pytest.mark.parametrize(("m", "n"), [(101, 101), (120, 95), (11, 10_001)])
def test_the_normal_shift_index_follows_its_formula_and_nearly_the_exact_one(
    m: int, n: int
) -> None:
    """Beyond the bound the index comes from the continuity-corrected normal tail; it is
    checked against that formula (scipy's normal) and against the exact distribution."""
    assert not exact_sizes(m, n)
    k, level = shift_interval(m, n)
    pairs = m * n
    sigma = math.sqrt(pairs * (m + n + 1) / 12)

    def tail(index: int) -> float:
        return float(stats.norm.cdf((index - 0.5 - pairs / 2) / sigma))

    assert tail(k) <= 0.025 < tail(k + 1)
    assert level == pytest.approx(1 - 2 * tail(k), abs=1e-12)
    counts = u_counts(m, n)  # callable at any size; only slower
    exact_level = 1 - 2 * sum(counts[:k]) / math.comb(m + n, m)
    assert exact_level == pytest.approx(0.95, abs=2e-3)


# --- the two-sided test ------------------------------------------------------------------


untied_pools = st.lists(
    st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False),
    min_size=4,
    max_size=46,
    unique=True,
)


@settings(max_examples=150)
@given(pool=untied_pools, data=st.data())
def test_exact_p_values_match_scipy(pool: list[float], data: st.DataObject) -> None:
    cut = data.draw(st.integers(2, len(pool) - 2))
    first, second = pool[:cut], pool[cut:]
    p, method = mann_whitney(first, second)
    assert method == "exact"
    expected = stats.mannwhitneyu(first, second, alternative="two-sided", method="exact").pvalue
    assert p == pytest.approx(expected, abs=1e-9, rel=1e-9)


@settings(max_examples=150)
@given(
    first=st.lists(st.integers(0, 6), min_size=2, max_size=30),
    second=st.lists(st.integers(0, 6), min_size=2, max_size=30),
)
def test_tied_p_values_match_scipys_continuity_corrected_normal(
    first: list[int], second: list[int]
) -> None:
    xs, ys = [float(v) for v in first], [float(v) for v in second]
    p, method = mann_whitney(xs, ys)
    if not has_ties(xs, ys):
        return  # rare: exact, pinned above
    assert method == "normal"
    if len(set(xs + ys)) == 1:
        assert p == 1.0  # every value equal: no spread, no evidence
        return
    expected = stats.mannwhitneyu(
        xs, ys, alternative="two-sided", method="asymptotic", use_continuity=True
    ).pvalue
    assert p == pytest.approx(expected, abs=1e-9, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_large_untied_samples_use_the_normal_test_like_scipy(seed: int) -> None:
    generator = np.random.default_rng(seed)
    first = list(generator.normal(0.0, 1.0, 101))
    second = list(generator.normal(0.3 * seed, 1.0, 103))
    p, method = mann_whitney(first, second)
    assert method == "normal"
    expected = stats.mannwhitneyu(
        first, second, alternative="two-sided", method="asymptotic", use_continuity=True
    ).pvalue
    assert p == pytest.approx(expected, abs=1e-9, rel=1e-9)


@settings(max_examples=60)
@given(pool=untied_pools, data=st.data())
def test_the_test_is_symmetric_in_its_samples(pool: list[float], data: st.DataObject) -> None:
    cut = data.draw(st.integers(2, len(pool) - 2))
    assert mann_whitney(pool[:cut], pool[cut:]) == mann_whitney(pool[cut:], pool[:cut])
