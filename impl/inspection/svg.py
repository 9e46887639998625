"""Inline SVG grouped bar charts for the HTML report (SPEC.md section 16.4).

Rules of this file: pure string building from values it is handed (no store, no clock, no
I/O, no plotting library), so the same input gives the same bytes. Every piece of text goes
through :func:`html.escape`. Values arrive as the stored decimal strings; they are parsed
with :class:`decimal.Decimal` (exactly, so geometry never overflows a float) and only the
stored string is ever printed. Which metric to chart and how to name things is the
report's business (:mod:`runstore.inspection.report`); this file only draws.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from decimal import ROUND_CEILING
from decimal import ROUND_FLOOR
from decimal import Decimal
from html import escape
from typing import Final

PALETTE: Final = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#000000",
)
"""Okabe-Ito colours (distinguishable with the common colour-vision deficiencies)."""

_NUMBER: Final = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_BAR: Final = 16
_GROUP_PAD: Final = 12
_MIN_GROUP: Final = 80
_MIN_PLOT: Final = 480
_PLOT_HEIGHT: Final = 220
_LEFT: Final = 72
_RIGHT: Final = 12
_LEGEND_ITEM: Final = 170
_LEGEND_ROW: Final = 18
_LABEL_ROOM: Final = 36
_CHAR: Final = 7
_TICKS: Final = 5


def number(text: str) -> Decimal | None:
    """``text`` as a finite decimal when it is a plain decimal number (JSON's number
    syntax, leading zeros allowed); None otherwise (not charted, no minimum or maximum)."""
    if _NUMBER.fullmatch(text) is None:
        return None
    value = Decimal(text)
    return value if value.is_finite() else None


def colour(index: int, count: int) -> str:
    """The colour of series ``index`` of ``count``: the palette while it lasts, else hues
    spread by the golden angle (so no two series share a colour)."""
    if count <= len(PALETTE):
        return PALETTE[index]
    return f"hsl({(index * 137.508) % 360:.1f},60%,42%)"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, with an ellipsis when cut."""
    limit = max(limit, 2)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def ticks(low: Decimal, high: Decimal) -> list[Decimal]:
    """Round axis ticks (1, 2 or 5 times a power of ten apart) covering ``[low, high]``,
    zero included; about :data:`_TICKS` intervals."""
    low, high = min(low, Decimal(0)), max(high, Decimal(0))
    if low == high:
        high = low + 1
    raw = (high - low) / _TICKS
    step = Decimal(10).scaleb(raw.adjusted())
    for factor in (1, 2, 5):
        if Decimal(factor).scaleb(raw.adjusted()) >= raw:
            step = Decimal(factor).scaleb(raw.adjusted())
            break
    first = int((low / step).to_integral_value(rounding=ROUND_FLOOR))
    last = int((high / step).to_integral_value(rounding=ROUND_CEILING))
    return [step * i for i in range(first, last + 1)]


def tick_label(value: Decimal) -> str:
    """A tick value for the eye: positional for moderate magnitudes, else exponent form."""
    if value.is_zero():
        return "0"
    value = value.normalize()
    return format(value, "f") if -6 <= value.adjusted() < 9 else format(value, "e")


def _fmt(coordinate: Decimal) -> str:
    """A coordinate with two decimals (enough for a screen, and byte-stable)."""
    return format(coordinate.quantize(Decimal("0.01")), "f")


def _text(x: int, y: int, full: str, limit: int, anchor: str) -> str:
    """A label cut to ``limit`` characters; a cut label keeps the full text as a tooltip."""
    shown = truncate(full, limit)
    hint = f"<title>{escape(full)}</title>" if shown != full else ""
    return f'<text x="{x}" y="{y}" text-anchor="{anchor}">{hint}{escape(shown)}</text>'


def grouped_bars(
    *,
    caption: str,
    groups: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[int, int], str],
) -> str:
    """An SVG chart: along x one group per ``groups`` entry, in each one bar per ``series``
    entry with a value (``values[(group, series)]``, a stored decimal string that
    :func:`number` accepts; a missing pair leaves a gap), a legend of the series' colours,
    a y axis with round ticks and a zero line. Each bar is a ``<rect class="bar">`` (class
    ``bar neg`` below zero) carrying ``data-group``, ``data-series`` and ``data-value`` (the
    stored string) and a ``<title>`` for hovering. Wider with more groups, never narrower
    than a minimum; long names are cut with their full text in a ``<title>``."""
    group_width = max(
        _MIN_GROUP, len(series) * _BAR + 2 * _GROUP_PAD, _MIN_PLOT // max(1, len(groups))
    )
    plot_width = max(1, len(groups)) * group_width
    width = _LEFT + plot_width + _RIGHT
    per_row = max(1, width // _LEGEND_ITEM)
    legend_height = -(-len(series) // per_row) * _LEGEND_ROW + 8
    top = legend_height + 10
    bottom = top + _PLOT_HEIGHT
    height = bottom + _LABEL_ROOM
    parsed = {key: number(text) for key, text in values.items()}
    numbers = [value for value in parsed.values() if value is not None]
    axis = ticks(min(numbers, default=Decimal(0)), max(numbers, default=Decimal(0)))

    def y(value: Decimal) -> Decimal:
        return top + (axis[-1] - value) / (axis[-1] - axis[0]) * _PLOT_HEIGHT

    parts = [
        f'<svg class="chart" width="{width}" font-family="sans-serif" font-size="11" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(caption)}">',
        f"<title>{escape(caption)}</title>",
        *_legend(series, per_row),
        *_axis(axis, y, width),
    ]
    zero = y(Decimal(0))
    label_limit = (group_width - 4) // _CHAR
    for g, group in enumerate(groups):
        left = _LEFT + g * group_width
        inner = left + (group_width - len(series) * _BAR) // 2
        for s, name in enumerate(series):
            value = parsed.get((g, s))
            if value is not None:
                parts.append(
                    _bar(
                        inner + s * _BAR,
                        y(value),
                        zero,
                        s,
                        len(series),
                        group,
                        name,
                        values[(g, s)],
                    )
                )
        middle = left + group_width // 2
        parts.append(_text(middle, bottom + 16, group, label_limit, "middle"))
    parts.append("</svg>")
    return "\n".join(parts)


def _bar(
    x: int, end: Decimal, zero: Decimal, index: int, count: int, group: str, name: str, text: str
) -> str:
    top, bottom = min(end, zero), max(end, zero)
    css = "bar neg" if end > zero else "bar"
    return (
        f'<rect class="{css}" x="{x + 1}" y="{_fmt(top)}" width="{_BAR - 2}" '
        f'height="{_fmt(bottom - top)}" fill="{colour(index, count)}" '
        f'data-group="{escape(group)}" data-series="{escape(name)}" '
        f'data-value="{escape(text)}"><title>{escape(name)} on {escape(group)}: '
        f"{escape(text)}</title></rect>"
    )


def _legend(series: Sequence[str], per_row: int) -> list[str]:
    parts = []
    for s, name in enumerate(series):
        x = _LEFT + (s % per_row) * _LEGEND_ITEM
        y = 6 + (s // per_row) * _LEGEND_ROW
        parts.append(
            f'<rect class="swatch" x="{x}" y="{y}" width="12" height="12" '
            f'fill="{colour(s, len(series))}"/>'
        )
        parts.append(_text(x + 16, y + 10, name, (_LEGEND_ITEM - 24) // _CHAR, "start"))
    return parts


def _axis(axis: Sequence[Decimal], y: Callable[[Decimal], Decimal], width: int) -> list[str]:
    parts = []
    for tick in axis:
        at = _fmt(y(tick))
        css, stroke = ("zero", "#555555") if tick.is_zero() else ("grid", "#e4e4e4")
        parts.append(
            f'<line class="{css}" x1="{_LEFT}" x2="{width - _RIGHT}" y1="{at}" y2="{at}" '
            f'stroke="{stroke}"/>'
        )
        parts.append(
            f'<text class="tick" x="{_LEFT - 6}" y="{at}" text-anchor="end" '
            'dominant-baseline="middle">'
            f"{tick_label(tick)}</text>"
        )
    return parts
