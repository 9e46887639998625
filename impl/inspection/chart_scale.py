"""Chart axes: linear or logarithmic, with round ticks and readable labels (SPEC.md
section 16.4).

Rules of this file: pure arithmetic on the floats a chart hands in (no text from the store,
no I/O). The one rule that picks a logarithmic axis, :func:`wants_log`, lives here and every
chart of the report uses it. Tick values are exact decimals (1, 2 or 5 times a power of
ten apart, or powers of ten) labelled with :func:`runstore.analysis.numbers.significant`,
so an axis reads like the tables. Where a value lands is :meth:`Scale.fraction`; a value
that a log axis cannot show (``<= 0``) gets ``None`` and the chart says what it does then.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from collections.abc import Sequence
from decimal import ROUND_CEILING
from decimal import ROUND_FLOOR
from decimal import Decimal
from typing import Final

import attrs
from runstore.analysis.numbers import significant

LOG_SPAN: Final = 100.0
"""An axis is logarithmic when its largest positive value is more than this many times its
smallest."""

_INTERVALS: Final = 5
"""About how many intervals a linear axis has."""
_MAX_LABELS: Final = 10
"""At most this many labelled powers of ten; more decades label every second, third, ..."""
_MINOR_DECADES: Final = 6
"""Log axes of at most this many decades get faint lines at 2 and 5 times each power."""
_TICK_DIGITS: Final = 8


def positive_span(values: Iterable[float]) -> tuple[float, float] | None:
    """The smallest and largest value ``> 0``; None when there is none."""
    positive = [value for value in values if value > 0]
    return (min(positive), max(positive)) if positive else None


def wants_log(values: Iterable[float]) -> bool:
    """Whether an axis over ``values`` is logarithmic: the largest positive value divided
    by the smallest is more than :data:`LOG_SPAN`. Values ``<= 0`` take no part (an axis
    whose positive values span more than a hundredfold is logarithmic whatever else it
    holds; the chart says how it shows the rest)."""
    span = positive_span(values)
    return span is not None and span[1] / span[0] > LOG_SPAN


@attrs.frozen(kw_only=True)
class Scale:
    """An axis: ``log`` or linear from ``low`` to ``high`` (a log axis from
    ``10**decades[0]`` to ``10**decades[1]``), its ``ticks`` with their ``labels`` (``""``
    for a tick drawn without a label) and faint ``minor`` lines."""

    log: bool
    low: float
    high: float
    decades: tuple[int, int]
    ticks: tuple[float, ...]
    labels: tuple[str, ...]
    minor: tuple[float, ...] = ()

    @property
    def words(self) -> str:
        return "log scale" if self.log else "linear scale"

    def fraction(self, value: float) -> float | None:
        """Where ``value`` lands along the axis, 0 at its start and 1 at its end; None for a
        value ``<= 0`` on a log axis (it has no place there)."""
        if self.log:
            if value <= 0:
                return None
            first, last = self.decades
            return (math.log10(value) - first) / (last - first)
        return (value - self.low) / (self.high - self.low)


def scale(values: Sequence[float]) -> Scale:
    """The axis for ``values``: logarithmic when :func:`wants_log`, with a tick at every
    power of ten from the one at or below the smallest positive value to the one at or
    above the largest; else linear with round ticks covering every value (zero is not
    forced in: the charts draw points and intervals, not bars)."""
    span = positive_span(values)
    if span is not None and wants_log(values):
        return _log_scale(*span)
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    ticks = _linear_ticks(Decimal(low), Decimal(high))
    return Scale(
        log=False,
        low=float(ticks[0]),
        high=float(ticks[-1]),
        decades=(0, 0),
        ticks=tuple(float(tick) for tick in ticks),
        labels=tuple(significant(float(tick), _TICK_DIGITS) for tick in ticks),
    )


def _power(exponent: int) -> float:
    return float(f"1e{exponent}")


def _log_scale(smallest: float, largest: float) -> Scale:
    first = Decimal(smallest).adjusted()
    last = Decimal(largest).adjusted()
    if largest > _power(last):
        last += 1
    count = last - first
    every = -(-(count + 1) // _MAX_LABELS)
    ticks = tuple(_power(exponent) for exponent in range(first, last + 1))
    labels = tuple(
        significant(tick) if (exponent - first) % every == 0 else ""
        for exponent, tick in zip(range(first, last + 1), ticks, strict=True)
    )
    minor: tuple[float, ...] = ()
    if count <= _MINOR_DECADES:
        minor = tuple(
            float(f"{factor}e{exponent}") for exponent in range(first, last) for factor in (2, 5)
        )
    return Scale(
        log=True,
        low=ticks[0],
        high=ticks[-1],
        decades=(first, last),
        ticks=ticks,
        labels=labels,
        minor=minor,
    )


def _linear_ticks(low: Decimal, high: Decimal) -> list[Decimal]:
    """Round ticks (1, 2 or 5 times a power of ten apart) from at or below ``low`` to at or
    above ``high``, about :data:`_INTERVALS` intervals; a zero-width range is widened."""
    if low == high:
        pad = abs(low) / 10 if low else Decimal(1)
        low, high = low - pad, high + pad
    raw = (high - low) / _INTERVALS
    exponent = raw.adjusted()
    step = next(
        Decimal(factor).scaleb(exponent)
        for factor in (1, 2, 5, 10)
        if Decimal(factor).scaleb(exponent) >= raw
    )
    first = int((low / step).to_integral_value(rounding=ROUND_FLOOR))
    last = int((high / step).to_integral_value(rounding=ROUND_CEILING))
    return [step * index for index in range(first, last + 1)]
