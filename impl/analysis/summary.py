"""Descriptive statistics of one group of repeated measurements (SPEC.md section 17.2).

Rules of this file: pure functions of numbers. This module owns the sample check every
statistic of the layer starts with (:func:`check_sample`, :func:`check_threshold`: the
boundary where numbers enter, refusing with ``invalid_record``), the :class:`Summary` value
and :func:`summarize`. Order-statistic indices come from :mod:`runstore.analysis.ranks`;
words for humans from :mod:`runstore.analysis.numbers`. Nothing here reads a store.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Final
from typing import TypeAlias

import attrs
from runstore.analysis.numbers import significant
from runstore.analysis.ranks import median_interval
from runstore.canonical import JSON
from runstore.errors import InvalidRecordError

Document: TypeAlias = dict[str, JSON | float]
"""What ``to_json`` returns: plain JSON with floats (``json.dumps``-able, every float
finite), not canonical JSON (which has no floats)."""

MAX_MAGNITUDE: Final = 1e300
"""Largest magnitude a value may have: no difference, midpoint or sum of two values can
overflow a double."""

MAD_SCALE: Final = 1.4826
"""Scales the MAD to estimate a normal distribution's standard deviation."""

OUTLIER_SCORE: Final = 3.5
"""A value is an outlier when its modified z-score exceeds this (Iglewicz and Hoaglin)."""


def check_number(value: object, field: str) -> float:
    """``value`` as a float: an ``int`` or ``float`` (subclasses too), not a ``bool``, finite,
    of magnitude at most :data:`MAX_MAGNITUDE`. Refuses anything else with
    ``invalid_record`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRecordError(f"{field} must be a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRecordError(f"{field} must be finite, got {value!r}")
    if abs(value) > MAX_MAGNITUDE:
        raise InvalidRecordError(f"{field} must be at most {MAX_MAGNITUDE:g} in magnitude")
    return float(value)


def check_sample(values: object, field: str = "values") -> tuple[float, ...]:
    """The values of a nonempty iterable of numbers (:func:`check_number` each), in order.
    Refuses with ``invalid_record`` a string, bytes, a mapping, a non-iterable, an empty
    sample, and any value :func:`check_number` refuses."""
    if isinstance(values, str | bytes | bytearray | Mapping) or not isinstance(values, Iterable):
        raise InvalidRecordError(f"{field} must be a sequence of numbers")
    sample = tuple(check_number(value, f"{field}[{index}]") for index, value in enumerate(values))
    if not sample:
        raise InvalidRecordError(f"{field} must hold at least one value")
    return sample


def check_threshold(threshold: object) -> float | None:
    """``None``, or a number in ``0 .. MAX_MAGNITUDE`` (a fraction: 0.05 is 5%). Refuses
    anything else (a bool, a negative, NaN, an infinity, a non-number) with
    ``invalid_record``."""
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidRecordError(f"threshold must be a number, got {type(threshold).__name__}")
    if not math.isfinite(threshold) or not 0 <= threshold <= MAX_MAGNITUDE:
        raise InvalidRecordError(
            f"threshold must be a number in 0..{MAX_MAGNITUDE:g}, got {threshold!r}"
        )
    return float(threshold)


def midpoint(low: float, high: float) -> float:
    """``(low + high) / 2``: correctly rounded, and between the two (values are bounded by
    :data:`MAX_MAGNITUDE`, so the sum cannot overflow)."""
    return (low + high) / 2


def median_of_sorted(ordered: list[float] | tuple[float, ...]) -> float:
    """The middle value of a sorted nonempty sample, or the midpoint of the middle two."""
    half = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[half]
    return midpoint(ordered[half - 1], ordered[half])


def _mean(sample: tuple[float, ...], low: float, high: float) -> float:
    """``fsum(sample) / n`` (the exact sum, rounded once, then divided), clamped into
    ``[low, high]`` where rounding alone could take it. Sums beyond the double range (more
    than about 1.8e8 values near the bound) fall back to ``fsum(v / n)``."""
    try:
        total = math.fsum(sample)
    except OverflowError:
        total = math.inf
    if math.isfinite(total):
        mean = total / len(sample)
    else:
        mean = math.fsum(value / len(sample) for value in sample)
    return min(max(mean, low), high)


def _stdev(sample: tuple[float, ...], mean: float) -> float | None:
    """The sample standard deviation (``n - 1``), scaled by the largest absolute deviation
    ``c`` so no square overflows: ``c * sqrt(fsum(((x - mean) / c) ** 2) / (n - 1))``."""
    if len(sample) < 2:
        return None
    deviations = [value - mean for value in sample]
    scale = max(abs(deviation) for deviation in deviations)
    if scale == 0.0:
        return 0.0
    squares = math.fsum((deviation / scale) ** 2 for deviation in deviations)
    return scale * math.sqrt(squares / (len(sample) - 1))


def _percent(fraction: float, digits: int = 3) -> str:
    return f"{significant(100.0 * fraction, digits)}%"


def _over(spread: float, limit: float) -> tuple[str, str]:
    """``spread`` and ``limit`` (``spread > limit``) as percentages with three significant
    digits, or more until the two texts differ (10.04% over 10% shows ``"10.04%"``)."""
    for digits in range(3, 18):
        shown = _percent(spread, digits), _percent(limit, digits)
        if shown[0] != shown[1]:
            return shown
    return shown


@attrs.frozen(kw_only=True)
class Summary:
    """Descriptive statistics of one group (SPEC.md section 17.2). Made by
    :func:`summarize`; the fields are as that function documents them."""

    n: int
    mean: float
    stdev: float | None
    median: float
    mad: float
    minimum: float
    maximum: float
    ci_low: float
    ci_high: float
    ci_level: float
    outliers: int
    threshold: float | None
    unstable: bool
    reasons: tuple[str, ...]

    def to_json(self) -> Document:
        """Every field by name; ``reasons`` as a list, ``None`` as ``null``."""
        document: Document = {
            field.name: getattr(self, field.name) for field in attrs.fields(Summary)
        }
        document["reasons"] = list(self.reasons)
        return document


def summarize(values: Iterable[float], *, threshold: float | None = None) -> Summary:
    """Descriptive statistics of one group of repetitions.

    * ``mean``: :func:`_mean`; ``stdev``: the ``n - 1`` sample standard deviation, ``None``
      for one value; ``median``: the middle order statistic (midpoint of the two for even
      ``n``); ``mad``: the median of ``|x - median|``, unscaled.
    * ``ci_low``, ``ci_high``, ``ci_level``: the binomial order-statistic interval for the
      median (:func:`~runstore.analysis.ranks.median_interval`).
    * ``outliers``: values whose modified z-score ``|x - median| / (1.4826 * mad)`` exceeds
      3.5; when ``mad`` is 0, every value other than the median.
    * ``unstable``: any outlier, or (with ``threshold``) ``mad / |median| > threshold``, a
      zero median with a nonzero ``mad`` counting as over. ``reasons`` holds one phrase per
      cause, the spread first.

    Refuses with ``invalid_record`` what :func:`check_sample` and :func:`check_threshold`
    refuse.
    """
    sample = check_sample(values)
    limit = check_threshold(threshold)
    ordered = sorted(sample)
    n = len(ordered)
    median = median_of_sorted(ordered)
    mad = median_of_sorted(sorted(abs(value - median) for value in ordered))
    if mad == 0.0:
        outliers = sum(1 for value in ordered if value != median)
    else:
        cut = MAD_SCALE * mad
        outliers = sum(1 for value in ordered if abs(value - median) / cut > OUTLIER_SCORE)
    reasons: list[str] = []
    if limit is not None and mad > 0.0:
        # A zero median has no relative spread: any nonzero MAD counts as over.
        spread = mad / abs(median) if median != 0.0 else math.inf
        if spread > limit and math.isfinite(100.0 * spread):
            over, bound = _over(spread, limit)
            reasons.append(f"spread {over} of the median exceeds the {bound} threshold")
        elif spread > limit:  # too large a fraction to write as a percentage
            reasons.append(
                f"spread around a median of {significant(median)} exceeds the "
                f"{_percent(limit)} threshold"
            )
    if outliers:
        reasons.append(f"{outliers} outlier{'s' if outliers > 1 else ''}")
    j, level = median_interval(n)
    mean = _mean(tuple(ordered), ordered[0], ordered[-1])
    return Summary(
        n=n,
        mean=mean,
        stdev=_stdev(tuple(ordered), mean),
        median=median,
        mad=mad,
        minimum=ordered[0],
        maximum=ordered[-1],
        ci_low=ordered[j - 1],
        ci_high=ordered[n - j],
        ci_level=level,
        outliers=outliers,
        threshold=limit,
        unstable=bool(reasons),
        reasons=tuple(reasons),
    )
