"""The null distributions behind the distribution-free intervals and the rank test.

Rules of this file: pure integer arithmetic on sample sizes and ranks (SPEC.md section 17.1);
no floats enter a count, and every probability is one correctly rounded division of two
exact integers, so another implementation reproduces the same doubles. It owns:

* the binomial order-statistic index of the median's interval (:func:`median_interval`);
* the exact Mann-Whitney U null distribution, by dynamic programming over the sizes
  (:func:`u_counts`), and the order-statistic index of the Moses interval for a shift
  (:func:`shift_interval`);
* the two-sided Mann-Whitney U test (:func:`mann_whitney`), exact or normal.

It knows nothing of summaries, comparisons or formatting; callers pass checked finite
numbers and sizes of at least 1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Final

EXACT_COST: Final = 1_000_000
"""The exact U distribution is used when ``min(m, n) ** 2 * max(m, n) <= EXACT_COST`` (its
cost in integer additions): every ``m == n <= 100``, ``m = 10`` up to ``n = 10_000``."""

COVERAGE: Final = 0.95
"""The coverage every interval aims at (at least this, when the sizes allow)."""

Z_975: Final = 1.959963984540054
"""The standard normal quantile of 0.975 (its double nearest the true value)."""

_MISS_NUMERATOR: Final = 1
_MISS_DENOMINATOR: Final = 40
"""One tail may hold at most 1/40 = (1 - COVERAGE) / 2 of the probability, exactly."""


def normal_cdf(z: float) -> float:
    """The standard normal distribution function, ``erfc(-z / sqrt(2)) / 2``."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _tail_allowed(tail: int, total: int) -> bool:
    """Whether ``tail / total`` (one tail's probability) is at most 1/40, in integers."""
    return tail * _MISS_DENOMINATOR <= total * _MISS_NUMERATOR


# --- the median: binomial order statistics ---------------------------------------------------


def median_interval(n: int) -> tuple[int, float]:
    """``(j, coverage)``: the interval ``[x_(j), x_(n+1-j)]`` (1-based order statistics) for
    the median of ``n >= 1`` values, and its exact coverage ``1 - 2 * P(B <= j - 1)`` for
    ``B ~ Binomial(n, 1/2)``.

    ``j`` is the largest index (the narrowest symmetric pair) whose coverage is at least
    0.95; when even ``j = 1`` falls short (``n <= 5``) it is 1, ``[min, max]``, with coverage
    ``1 - 2 * 0.5 ** n`` (0 for ``n = 1``). Walks down from the middle, so the cost is about
    ``sqrt(n)`` steps of ``n``-bit integers.
    """
    total = 1 << n
    top = (n + 1) // 2  # the largest j with j <= n + 1 - j
    # below = sum of C(n, i) for i < j, starting at j = top (half the mass below the middle).
    below = (1 << (n - 1)) if n % 2 else (total - math.comb(n, n // 2)) // 2
    j = top
    term = math.comb(n, j - 1)  # C(n, j - 1), the last term of ``below``
    while j > 1 and not _tail_allowed(below, total):
        below -= term
        j -= 1
        term = term * (j) // (n - j + 1)  # C(n, j - 1) from C(n, j)
    return j, (total - 2 * below) / total


# --- the Mann-Whitney U distribution ---------------------------------------------------------


def exact_sizes(m: int, n: int) -> bool:
    """Whether sizes ``m`` and ``n`` are within the exact distribution's bound
    (:data:`EXACT_COST`)."""
    small, large = min(m, n), max(m, n)
    return small * small * large <= EXACT_COST


@functools.lru_cache(maxsize=16)
def u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the ``C(m + n, m)`` equally likely arrangements of two untied samples of
    sizes ``m`` and ``n`` give each ``U = 0 .. m * n`` (``U`` counts the pairs in which the
    first sample's value is the larger).

    The counts are the coefficients of the Gaussian binomial ``[m + n choose m]_q``, built by
    dynamic programming as the product over ``i = 1 .. min(m, n)`` of ``(1 - q**(L + i)) /
    (1 - q**i)`` (``L = max(m, n)``): each step multiplies by the numerator and divides by the
    denominator exactly, in integers.
    """
    small, large = min(m, n), max(m, n)
    counts = [1]
    for i in range(1, small + 1):
        shift = large + i
        grown = counts + [0] * shift
        for index in range(len(counts) - 1, -1, -1):
            grown[index + shift] -= counts[index]
        for index in range(i, len(grown)):  # divide by (1 - q**i): a running sum, stride i
            grown[index] += grown[index - i]
        del grown[i * large + 1 :]  # the quotient has degree i * large; the rest is zero
        counts = grown
    return tuple(counts)


def _u_at_most(m: int, n: int, u: int) -> int:
    """How many arrangements give ``U <= u`` (exact distribution)."""
    if u < 0:
        return 0
    return sum(u_counts(m, n)[: u + 1])


def shift_interval(m: int, n: int) -> tuple[int, float]:
    """``(k, coverage)``: the Moses interval for a shift is ``[d_(k), d_(m*n+1-k)]``, the
    1-based order statistics of the ``m * n`` pairwise differences, and its coverage is
    ``1 - 2 * P(U <= k - 1)`` under the no-tie null distribution of ``U``.

    ``k`` is the largest index whose coverage is at least 0.95. With exact sizes
    (:func:`exact_sizes`) the probability is exact (``P(U <= k - 1) <= 1/40`` in integers);
    otherwise it is the continuity-corrected normal approximation ``Phi((k - 1/2 - m*n/2) /
    sigma)`` with ``sigma = sqrt(m*n*(m + n + 1) / 12)``. When even ``k = 1`` falls short the
    interval is the widest, ``k = 1``, with its coverage ``1 - 2 / C(m + n, m)`` (exactly;
    the normal branch never falls short).
    """
    pairs = m * n
    top = (pairs + 1) // 2
    if exact_sizes(m, n):
        counts = u_counts(m, n)
        total = math.comb(m + n, m)
        k, below = 1, counts[0]  # below = arrangements with U <= k - 1
        while k < top and _tail_allowed(below + counts[k], total):
            below += counts[k]
            k += 1
        return k, (total - 2 * below) / total
    sigma = math.sqrt(pairs * (m + n + 1) / 12.0)

    def tail(index: int) -> float:
        return normal_cdf((index - 0.5 - pairs / 2.0) / sigma)

    k = max(1, min(top, math.floor(pairs / 2.0 + 0.5 - Z_975 * sigma)))
    while k > 1 and tail(k) > 0.025:
        k -= 1
    while k < top and tail(k + 1) <= 0.025:
        k += 1
    return k, 1.0 - 2.0 * tail(k)


# --- the two-sided test ----------------------------------------------------------------------


def _doubled_rank_sum_and_ties(first: Sequence[float], second: Sequence[float]) -> tuple[int, int]:
    """``(2 * R1, T)``: twice the sum of the first sample's mid-ranks in the pooled sample
    (an integer), and the tie term ``T = sum(t**3 - t)`` over the groups of ``t`` equal
    values."""
    pooled = sorted([(value, 0) for value in first] + [(value, 1) for value in second])
    doubled, ties, start = 0, 0, 0
    while start < len(pooled):
        stop = start
        while stop + 1 < len(pooled) and pooled[stop + 1][0] == pooled[start][0]:
            stop += 1
        size = stop - start + 1
        ties += size**3 - size
        # positions start+1 .. stop+1 share the mid-rank (start + stop + 2) / 2
        members = sum(1 for _, group in pooled[start : stop + 1] if group == 0)
        doubled += members * (start + stop + 2)
        start = stop + 1
    return doubled, ties


def mann_whitney(first: Sequence[float], second: Sequence[float]) -> tuple[float, str]:
    """``(p, method)``: the two-sided Mann-Whitney U test of two samples of at least one
    value each, as ``scipy.stats.mannwhitneyu(first, second, alternative="two-sided")``
    computes it with ``method="exact"`` (no ties) or ``method="asymptotic"`` (continuity
    corrected).

    ``U1 = R1 - m(m+1)/2`` and ``U = max(U1, m*n - U1)``. ``"exact"`` when no value occurs
    twice in the pooled sample and the sizes are exact (:func:`exact_sizes`): ``p = 2 *
    P(U' >= U)``. ``"normal"`` otherwise: ``z = (U - m*n/2 - 1/2) / s`` with ``s = sqrt(m*n/12
    * ((N + 1) - T / (N(N - 1))))`` (``N = m + n``), ``p = 2 * Phi(-z)``; ``p = 1`` when ``s``
    is 0 (every value equal). Either way ``p`` is capped at 1.
    """
    m, n = len(first), len(second)
    pairs = m * n
    doubled, ties = _doubled_rank_sum_and_ties(first, second)
    doubled_u1 = doubled - m * (m + 1)
    doubled_u = max(doubled_u1, 2 * pairs - doubled_u1)
    if ties == 0 and exact_sizes(m, n):
        u = doubled_u // 2  # no ties: U is an integer
        # P(U' >= u) = P(U' <= m*n - u) by the symmetry of the null distribution
        at_least = _u_at_most(m, n, pairs - u)
        return min(1.0, 2 * at_least / math.comb(m + n, m)), "exact"
    size = m + n
    spread = pairs / 12 * ((size + 1) - ties / (size * (size - 1)))
    if spread <= 0.0:
        return 1.0, "normal"
    z = (doubled_u / 2 - pairs / 2 - 0.5) / math.sqrt(spread)
    return min(1.0, 2.0 * normal_cdf(-z)), "normal"
