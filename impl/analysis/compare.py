"""Two groups compared: a candidate against a baseline (SPEC.md section 17.3).

Rules of this file: pure functions of numbers. It owns the :class:`Comparison` value, the
estimates (Hodges-Lehmann shifts, of the values and of their logarithms), their Moses
intervals, the significance and verdict rule (:func:`compare`) and its words
(:func:`describe`). The null distributions and the rank test are
:mod:`runstore.analysis.ranks`'; the sample checks are :mod:`runstore.analysis.summary`'s.
Everything is a function of the two samples as multisets: the order values come in never
matters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

import attrs
from runstore.analysis.numbers import bracketed
from runstore.analysis.numbers import check_unit
from runstore.analysis.numbers import significant as digits
from runstore.analysis.ranks import mann_whitney
from runstore.analysis.ranks import shift_interval
from runstore.analysis.summary import Document
from runstore.analysis.summary import check_sample
from runstore.analysis.summary import check_threshold
from runstore.analysis.summary import median_of_sorted
from runstore.errors import InvalidRecordError

DIRECTIONS: Final = ("lower", "higher")
"""Which values of a metric are better."""

ALPHA: Final = 0.05
"""A difference is significant only when the two-sided p-value is below this."""

MIN_REPETITIONS: Final = 2
"""Fewer values than this on either side: no test is made."""

TIME_UNITS: Final = frozenset({"s", "ms", "us", "\u00b5s", "\u03bcs", "ns", "min", "h"})
"""Units of time (both micro signs): with lower-is-better, a better candidate is "faster"."""

MAX_LOG_RATIO: Final = 700.0
"""A log ratio (estimate or bound) beyond +/-700 (a ratio beyond about 1e304) gives no
ratio: it and its inverse stay finite."""


@attrs.frozen(kw_only=True)
class Comparison:
    """A candidate against a baseline (SPEC.md section 17.3). Made by :func:`compare`; the
    fields are as that function documents them."""

    n_baseline: int
    n_candidate: int
    direction: str
    threshold: float | None
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    difference: float
    difference_low: float
    difference_high: float
    ci_level: float
    p_value: float
    method: str
    change: float | None
    significant: bool
    verdict: str

    def to_json(self) -> Document:
        """Every field by name, ``None`` as ``null``."""
        return {field.name: getattr(self, field.name) for field in attrs.fields(Comparison)}


def check_direction(direction: object) -> str:
    """``"lower"`` or ``"higher"``; anything else is refused with ``invalid_record``."""
    if type(direction) is not str or direction not in DIRECTIONS:
        raise InvalidRecordError(f"direction must be 'lower' or 'higher', got {direction!r}")
    return direction


def _shift(differences: list[float], k: int) -> tuple[float, float, float]:
    """The Hodges-Lehmann estimate (the median of the pairwise differences) and the Moses
    interval ``[d_(k), d_(N+1-k)]`` of the sorted differences."""
    differences.sort()
    return median_of_sorted(differences), differences[k - 1], differences[-k]


def _relative_change(
    log_shift: float | None, shift: float, baseline: list[float], candidate: list[float]
) -> float | None:
    """``expm1(|h|)`` for a log shift ``h``; without one, ``|shift|`` over the larger of the
    two medians' magnitudes (0 for a zero shift; ``None`` when that quotient is not a finite
    double: both medians 0, or an overflow)."""
    if log_shift is not None:
        return math.expm1(abs(log_shift))
    if shift == 0.0:
        return 0.0
    scale = max(abs(median_of_sorted(sorted(baseline))), abs(median_of_sorted(sorted(candidate))))
    change = abs(shift) / scale if scale > 0.0 else math.inf
    return change if math.isfinite(change) else None


def compare(
    baseline: Iterable[float],
    candidate: Iterable[float],
    *,
    direction: str,
    threshold: float | None = None,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` for a metric where ``direction`` values are
    better.

    * ``difference``: the Hodges-Lehmann shift, the median of the ``m * n`` differences
      ``c - b``; ``difference_low``/``_high``: their order statistics ``k`` and ``m*n + 1 - k``
      (:func:`~runstore.analysis.ranks.shift_interval`), coverage ``ci_level``.
    * ``ratio``: ``exp`` of the same estimate over ``log(c) - log(b)``, with its interval
      from the same ``k``; ``None`` (all three) when a value is ``<= 0`` or a log estimate
      or bound exceeds :data:`MAX_LOG_RATIO` in magnitude.
    * ``p_value``, ``method``: :func:`~runstore.analysis.ranks.mann_whitney`; with fewer than
      2 values on a side, ``1.0`` and ``"none"``.
    * ``change``: ``expm1(|log shift|)``, or without a ratio ``|difference|`` over the larger
      median magnitude (``None`` when that quotient is no finite double).
    * ``significant``: ``p_value < 0.05`` and ``change`` above ``threshold`` (above 0 when
      no threshold; an undefined change counts as above).
    * ``verdict``: ``"same"`` unless significant; then ``"better"`` when the candidate moved
      in ``direction`` (the sign of the log shift, or of the difference), else ``"worse"``.

    Swapping the samples negates the shifts, inverts the ratio and swaps "better" and
    "worse". Refuses with ``invalid_record`` what
    :func:`~runstore.analysis.summary.check_sample` refuses for either sample, a direction
    other than "lower"/"higher", and a threshold
    :func:`~runstore.analysis.summary.check_threshold` refuses.
    """
    first = list(check_sample(baseline, "baseline"))
    second = list(check_sample(candidate, "candidate"))
    better = check_direction(direction)
    limit = check_threshold(threshold)
    m, n = len(first), len(second)
    k, level = shift_interval(m, n)
    shift, shift_low, shift_high = _shift([c - b for b in first for c in second], k)
    log_shift: float | None = None
    ratio: tuple[float, float, float] | None = None
    if min(first) > 0.0 and min(second) > 0.0:
        logs_b = [math.log(b) for b in first]
        logs_c = [math.log(c) for c in second]
        estimate = _shift([c - b for b in logs_b for c in logs_c], k)
        if max(abs(bound) for bound in estimate) <= MAX_LOG_RATIO:
            log_shift = estimate[0]
            ratio = (math.exp(estimate[0]), math.exp(estimate[1]), math.exp(estimate[2]))
    if m < MIN_REPETITIONS or n < MIN_REPETITIONS:
        p_value, method = 1.0, "none"
    else:
        p_value, method = mann_whitney(first, second)
    change = _relative_change(log_shift, shift, first, second)
    significant = p_value < ALPHA and (change is None or change > (limit or 0.0))
    moved = log_shift if log_shift is not None else shift
    if not significant:
        verdict = "same"
    else:
        verdict = "better" if (moved < 0) == (better == "lower") else "worse"
    return Comparison(
        n_baseline=m,
        n_candidate=n,
        direction=better,
        threshold=limit,
        ratio=None if ratio is None else ratio[0],
        ratio_low=None if ratio is None else ratio[1],
        ratio_high=None if ratio is None else ratio[2],
        difference=shift,
        difference_low=shift_low,
        difference_high=shift_high,
        ci_level=level,
        p_value=p_value,
        method=method,
        change=change,
        significant=significant,
        verdict=verdict,
    )


# --- words -------------------------------------------------------------------------------------


def _factor(value: float) -> str:
    """A factor: two decimals below 100 (``"14.91"``), else four significant digits
    (``"500"``, ``"1235"``)."""
    return f"{value:.2f}" if value < 100 else digits(value, 4)


def _percent(fraction: float) -> str:
    return f"{digits(100.0 * fraction, 3)}%"


def _speed_words(unit: str, direction: str) -> bool:
    """Whether "faster"/"slower" fit: a time unit where lower is better, or a rate (a unit
    ending in "/s") where higher is better."""
    return (unit in TIME_UNITS and direction == "lower") or (
        unit.endswith("/s") and direction == "higher"
    )


def describe(comparison: Comparison, *, direction: str, unit: str) -> str:
    """The comparison in words, as benchmark tools print it:

    * ``"too few repetitions to compare (n = 1 and 3)"`` (baseline's count first) when no
      test was made;
    * ``"no significant difference (p = 0.41)"``; when only the threshold stood in the way,
      ``"no significant difference (p = 0.003, a change of 1.2% is within the 5% threshold)"``,
      and without a threshold (the estimate is 0 despite the p-value)
      ``"no significant difference (p = 0.03, an estimated change of 0)"``;
    * with a ratio, the shown factor (always ``>= 1``: the larger of ratio and its inverse)
      and its interval: ``"1.82x faster [1.75, 1.90]"``, ``"1.30x slower [1.26, 1.34]"``, or
      ``"1.50x better (higher) [1.40, 1.60]"`` (the parenthesis says which way the candidate
      moved) when the speed words do not fit (:func:`_speed_words`);
    * without a ratio, the signed difference in the metric's unit with its interval and the
      verdict: ``"+3.2 MB/s [1.1, 5.0], better"``.

    p-values show two significant digits. Refuses with ``invalid_record`` a ``comparison``
    that is not a :class:`Comparison`, a ``direction`` other than the one it was made with,
    and a unit :func:`~runstore.analysis.numbers.check_unit` refuses.
    """
    if not isinstance(comparison, Comparison):
        raise InvalidRecordError(
            f"comparison must be a Comparison, got {type(comparison).__name__}"
        )
    if check_direction(direction) != comparison.direction:
        raise InvalidRecordError(
            f"direction {direction!r} differs from the comparison's {comparison.direction!r}"
        )
    name = check_unit(unit)
    if comparison.method == "none":
        sizes = f"n = {comparison.n_baseline} and {comparison.n_candidate}"
        return f"too few repetitions to compare ({sizes})"
    p_text = f"p = {digits(comparison.p_value, 2)}"
    if not comparison.significant:
        if comparison.p_value < ALPHA and comparison.threshold is None:
            return f"no significant difference ({p_text}, an estimated change of 0)"
        if comparison.p_value < ALPHA and comparison.change is not None:
            limit = _percent(comparison.threshold or 0.0)
            within = f"a change of {_percent(comparison.change)} is within the {limit}"
            return f"no significant difference ({p_text}, {within} threshold)"
        return f"no significant difference ({p_text})"
    better = comparison.verdict == "better"
    if comparison.ratio is None or comparison.ratio_low is None or comparison.ratio_high is None:
        interval = bracketed(
            comparison.difference,
            comparison.difference_low,
            comparison.difference_high,
            name,
            signed=True,
        )
        return f"{interval}, {comparison.verdict}"
    # Which way the candidate moved, from the verdict (the ratio alone can round to 1).
    lower = better == (direction == "lower")
    if lower:
        shown = (1 / comparison.ratio, 1 / comparison.ratio_high, 1 / comparison.ratio_low)
    else:
        shown = (comparison.ratio, comparison.ratio_low, comparison.ratio_high)
    if _speed_words(name, direction):
        word = "faster" if better else "slower"
    else:
        word = f"{comparison.verdict} ({'lower' if lower else 'higher'})"
    return f"{_factor(shown[0])}x {word} [{_factor(shown[1])}, {_factor(shown[2])}]"
