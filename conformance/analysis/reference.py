"""Independent reference computations the analysis tests compare against (SPEC.md section 17).

Nothing here imports ``runstore.analysis``: each function computes its quantity another way
(brute-force enumeration, the textbook recurrence, numpy, scipy), so that a test comparing
the layer with it can fail.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np


def u_distribution_by_enumeration(m: int, n: int) -> list[int]:
    """Counts of ``U = 0 .. m*n`` over every choice of the first sample's ranks among
    ``1 .. m + n``: ``U = (sum of those ranks) - m(m+1)/2``."""
    counts = [0] * (m * n + 1)
    for ranks in itertools.combinations(range(1, m + n + 1), m):
        counts[sum(ranks) - m * (m + 1) // 2] += 1
    return counts


@functools.cache
def u_distribution_by_recurrence(m: int, n: int) -> tuple[int, ...]:
    """Counts of ``U`` by the classic recurrence on the largest pooled value: it belongs to
    the first sample (adding ``n`` to ``U``) or to the second: ``f(m, n, u) = f(m - 1, n,
    u - n) + f(m, n - 1, u)``."""
    if m == 0 or n == 0:
        return (1,)
    left = u_distribution_by_recurrence(m - 1, n)
    right = u_distribution_by_recurrence(m, n - 1)
    counts = [0] * (m * n + 1)
    for u, count in enumerate(left):
        counts[u + n] += count
    for u, count in enumerate(right):
        counts[u] += count
    return tuple(counts)


def moses_index(m: int, n: int) -> tuple[int, float]:
    """``(k, coverage)`` of the Moses interval by direct search over the recurrence's
        distribution: the largest ``k <= (m*n + 1) / 2`` whose coverage ``1 - 2 P(U <= k - 1)``
        is at least 0.95 (decided in integers), or 1 when none is; the coverage is one division
    of integers."""
    counts = u_distribution_by_recurrence(m, n)
    total = math.comb(m + n, m)
    # 1 - 2 * count / total >= 0.95 is 40 * count <= total.
    good = [k for k in range(1, (m * n + 1) // 2 + 1) if 40 * sum(counts[:k]) <= total]
    k = max(good) if good else 1
    return k, (total - 2 * sum(counts[:k])) / total


def median_index(n: int) -> tuple[int, float]:
    """``(j, coverage)`` of the median's interval from scipy's binomial distribution: the
    largest ``j <= (n + 1) / 2`` with ``1 - 2 * binom.cdf(j - 1, n, 1/2) >= 0.95``, else 1."""
    from scipy.stats import binom  # type: ignore[import-untyped]

    def coverage(j: int) -> float:
        return float(1 - 2 * binom.cdf(j - 1, n, 0.5))

    # A hair of slack: scipy's cdf is a float; the layer decides in integers.
    good = [j for j in range(1, (n + 1) // 2 + 1) if coverage(j) >= 0.95 - 1e-12]
    j = max(good) if good else 1
    return j, coverage(j)


def pairwise(
    baseline: Sequence[float] | np.ndarray, candidate: Sequence[float] | np.ndarray
) -> np.ndarray:
    """The sorted ``m * n`` differences ``candidate - baseline``."""
    return np.sort(np.subtract.outer(np.asarray(candidate), np.asarray(baseline)).ravel())


def hodges_lehmann(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    return float(np.median(pairwise(baseline, candidate)))


def has_ties(*samples: Sequence[float]) -> bool:
    pooled = [value for sample in samples for value in sample]
    return len(set(pooled)) < len(pooled)
