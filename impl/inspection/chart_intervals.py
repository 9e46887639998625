"""The interval plot: one row per problem, in it one line per candidate from the median's
interval's low to its high end, a dot at the median and a ring per repetition (SPEC.md
section 16.4).

Rules of this file: drawing only, from the rows, series and :class:`Interval` values it is
handed (no store, no statistics: the caller computed them), through
:mod:`runstore.inspection.svg` and :mod:`runstore.inspection.chart_scale`. The chart has a
fixed width that fits the page at 1280 px (it grows downwards with the problems, never
sideways with the candidates), and every text goes through :func:`html.escape`. On a log
axis a median or repetition ``<= 0`` is not drawn and an interval reaching ``<= 0`` starts
at the axis's left end (its group is marked ``clipped``); the caller says so on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Final

import attrs
from runstore.inspection import svg
from runstore.inspection.chart_scale import Scale
from runstore.inspection.chart_scale import scale

WIDTH: Final = 1140
"""The chart's width in pixels: the page's content width at 1280 px."""
_LABELS: Final = 210
"""Room for the problems' names on the left."""
_RIGHT: Final = 30
_TOP: Final = 40
_BOTTOM: Final = 26
_MIN_BAND: Final = 20
_BAND_PAD: Final = 8
_STACK: Final = 64
"""About how many pixels the candidates of one problem share."""
_REPEAT_EVERY: Final = 720
"""A chart taller than this repeats its tick labels about this often."""
_STRIP: Final = 18


@attrs.frozen(kw_only=True)
class Interval:
    """One candidate x problem pair: its row (problem) and series (candidate) index, the
    ids written into ``data-problem`` and ``data-candidate``, the median and its interval,
    each repetition's value with its stored text, and the tooltip (plain text)."""

    row: int
    series: int
    problem: str
    candidate: str
    median: float
    low: float
    high: float
    repetitions: tuple[tuple[float, str], ...]
    tooltip: str


@attrs.frozen(kw_only=True)
class _Layout:
    """Where things go: the plot's left and right ends, each band's height, each series'
    offset inside a band, and every ``repeat`` rows a strip repeating the tick labels (0:
    none), so a tall chart can be read without scrolling back to its top."""

    axis: Scale
    bands: int
    stride: int
    rows: int
    band: int
    repeat: int
    top: int = _TOP

    @property
    def left(self) -> int:
        return _LABELS

    @property
    def right(self) -> int:
        return WIDTH - _RIGHT

    def row_top(self, row: int) -> int:
        strips = row // self.repeat if self.repeat else 0
        return self.top + row * self.band + strips * _STRIP

    @property
    def bottom(self) -> int:
        return self.row_top(self.rows - 1) + self.band if self.rows else self.top

    def x(self, value: float) -> float | None:
        fraction = self.axis.fraction(value)
        return None if fraction is None else self.left + fraction * (self.right - self.left)

    def y(self, row: int, series: int) -> float:
        block = self.bands * self.stride
        start = self.row_top(row) + (self.band - block) / 2
        return start + series * self.stride + self.stride / 2


def values_of(intervals: Sequence[Interval]) -> list[float]:
    """Every value a chart of ``intervals`` places: medians, interval ends, repetitions."""
    found: list[float] = []
    for item in intervals:
        found += [item.median, item.low, item.high, *(value for value, _ in item.repetitions)]
    return found


def interval_plot(
    *,
    caption: str,
    axis_title: str,
    rows: Sequence[str],
    series: Sequence[str],
    intervals: Sequence[Interval],
) -> str:
    """An SVG chart: one band per ``rows`` entry (top to bottom, its name on the left, cut
    with a tooltip when long), and in each band one line per :class:`Interval` of that row,
    in its series' colour (:func:`runstore.inspection.svg.colour` over ``series``), stacked
    in series order. The x axis (:func:`runstore.inspection.chart_scale.scale` over every
    value drawn) is labelled at the top, under ``axis_title`` followed by the axis's scale
    in words (``log scale`` or ``linear scale``), and again at the bottom (and, in a tall
    chart, every so many rows). Each pair is a ``<g class="pair">`` with a ``<title>``,
    its interval a ``<line class="ci">``, its median a ``<circle class="median">`` and each
    repetition a ``<circle class="rep" data-value=...>`` holding the stored text."""
    count = max(1, len(series))
    stride = max(3, min(8, _STACK // count))
    band = max(_MIN_BAND, count * stride + _BAND_PAD)
    layout = _Layout(
        axis=scale(values_of(intervals)),
        bands=count,
        stride=stride,
        rows=len(rows),
        band=band,
        repeat=-(-_REPEAT_EVERY // band) if len(rows) * band > _REPEAT_EVERY else 0,
    )
    height = layout.bottom + _BOTTOM
    parts = [
        svg.open_svg(
            WIDTH, height, caption, "chart intervals", scale="log" if layout.axis.log else "linear"
        ),
        *_bands(layout, rows),
        *_grid(layout, axis_title),
    ]
    for item in sorted(intervals, key=lambda i: (i.row, i.series)):
        parts.append(_pair(layout, item, svg.colour(item.series, len(series))))
    parts.append("</svg>")
    return "\n".join(parts)


def _bands(layout: _Layout, rows: Sequence[str]) -> list[str]:
    parts = []
    limit = svg.fit(_LABELS - 16)
    for index, name in enumerate(rows):
        top = layout.row_top(index)
        if index % 2:
            parts.append(
                f'<rect class="band" x="0" y="{top}" width="{WIDTH}" height="{layout.band}" '
                'fill="#f3f4f6"/>'
            )
        middle = top + layout.band / 2 + 4
        parts.append(svg.label(_LABELS - 10, middle, name, limit, "end", "row"))
    return parts


def _grid(layout: _Layout, axis_title: str) -> list[str]:
    axis = layout.axis
    title = f"{axis_title} · {axis.words}"
    parts = [svg.label(layout.left, 14, title, svg.fit(WIDTH - _LABELS), "start", "axis")]
    for value in axis.minor:
        x = layout.x(value)
        if x is not None:
            parts.append(svg.line(x, layout.top, x, layout.bottom, "minor", "#eeeeee"))
    for value, text in zip(axis.ticks, axis.labels, strict=True):
        x = layout.x(value)
        if x is None:  # never: a log axis's ticks are powers of ten
            continue
        zero = value == 0 and not axis.log
        stroke = "#666666" if zero else "#d4d4d4"
        parts.append(svg.line(x, layout.top, x, layout.bottom, "zero" if zero else "grid", stroke))
        if text:
            strips = range(layout.repeat, layout.rows, layout.repeat) if layout.repeat else ()
            at = [layout.top - 6, *(layout.row_top(row) - 5 for row in strips)]
            for y in (*at, layout.bottom + 15):
                parts.append(
                    f'<text class="tick" x="{svg.fmt(x)}" y="{y}" text-anchor="middle" '
                    f'stroke="#ffffff" stroke-width="3" paint-order="stroke">{escape(text)}</text>'
                )
    parts.append(svg.line(layout.left, layout.top, layout.left, layout.bottom, "edge", "#999999"))
    return parts


def _pair(layout: _Layout, item: Interval, colour: str) -> str:
    y = layout.y(item.row, item.series)
    radius = min(3.5, layout.stride / 2 + 1)
    width = min(2.0, max(1.0, layout.stride / 3))
    low, high, middle = layout.x(item.low), layout.x(item.high), layout.x(item.median)
    clipped = low is None
    start = layout.left if low is None else low
    parts = [
        f'<g class="pair{" clipped" if clipped else ""}" data-problem="{escape(item.problem)}" '
        f'data-candidate="{escape(item.candidate)}">',
        f"<title>{escape(item.tooltip)}</title>",
    ]
    if high is not None:
        parts.append(
            f'<line class="ci" x1="{svg.fmt(start)}" y1="{svg.fmt(y)}" x2="{svg.fmt(high)}" '
            f'y2="{svg.fmt(y)}" stroke="{colour}" stroke-width="{width:g}"/>'
        )
    for value, text in item.repetitions:
        x = layout.x(value)
        if x is not None:
            parts.append(
                f'<circle class="rep" cx="{svg.fmt(x)}" cy="{svg.fmt(y)}" '
                f'r="{max(1.2, radius - 1.5):g}" fill="#ffffff" stroke="{colour}" '
                f'data-value="{escape(text)}"/>'
            )
    if middle is not None:
        parts.append(
            f'<circle class="median" cx="{svg.fmt(middle)}" cy="{svg.fmt(y)}" r="{radius:g}" '
            f'fill="{colour}"/>'
        )
    parts.append("</g>")
    return "".join(parts)
