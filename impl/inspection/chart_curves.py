"""Checkpoint curves: one small line chart per problem of a stream campaign, the metric over
the checkpoint index with one line per candidate (SPEC.md section 16.4).

Rules of this file: drawing only, from the :class:`Curve` values it is handed (the caller
took the median over repetitions), through :mod:`runstore.inspection.svg` and
:mod:`runstore.inspection.chart_scale`. A panel is small and of fixed size, so the page
wraps panels side by side and none is ever cut. Every text goes through
:func:`html.escape`. On a log axis a point ``<= 0`` is not drawn (its line joins the
points on either side); the caller says so on the page.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from html import escape
from typing import Final

import attrs
from runstore.inspection import svg
from runstore.inspection.chart_scale import Scale
from runstore.inspection.chart_scale import scale

WIDTH: Final = 276
HEIGHT: Final = 196
_LEFT: Final = 52
_RIGHT: Final = 12
_TOP: Final = 26
_BOTTOM: Final = 34
_MAX_X_TICKS: Final = 8


@attrs.frozen(kw_only=True)
class Curve:
    """One candidate on one problem: its series index, its id (``data-candidate``), the
    name its tooltip shows, and per checkpoint index the value drawn (with its text)."""

    series: int
    candidate: str
    name: str
    points: tuple[tuple[int, float, str], ...]


def _x_ticks(first: int, last: int) -> list[int]:
    """Checkpoint indices to label: every one, or every 2nd, 5th, 10th, ... so at most
    :data:`_MAX_X_TICKS` intervals show."""
    step = 1
    while (last - first) / step > _MAX_X_TICKS:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    start = -(-first // step) * step
    return list(range(start, last + 1, step))


def curve_panel(*, caption: str, title: str, series: int, curves: Sequence[Curve]) -> str:
    """A small SVG line chart titled ``title`` (cut with a tooltip when long): x is the
    checkpoint index (integer ticks), y the values (:func:`chart_scale.scale`: log when
    they span more than a hundredfold, said at the top right). Each curve is a
    ``<polyline class="curve">`` in its series' colour (of ``series`` colours) with a dot
    (``<circle class="point">``, a ``<title>`` giving the value) per checkpoint."""
    values = [value for curve in curves for _, value, _ in curve.points]
    checkpoints = [index for curve in curves for index, _, _ in curve.points]
    first, last = (min(checkpoints), max(checkpoints)) if checkpoints else (0, 0)
    axis = scale(values)
    plot_right, plot_bottom = WIDTH - _RIGHT, HEIGHT - _BOTTOM

    def x(index: int) -> float:
        if last == first:
            return (_LEFT + plot_right) / 2
        return _LEFT + (index - first) / (last - first) * (plot_right - _LEFT)

    def y(value: float) -> float | None:
        fraction = axis.fraction(value)
        return None if fraction is None else plot_bottom - fraction * (plot_bottom - _TOP)

    parts = [
        svg.open_svg(WIDTH, HEIGHT, caption, "chart curves", scale="log" if axis.log else "linear"),
        svg.label(4, 14, title, svg.fit(WIDTH - 70), "start", "panel"),
    ]
    if axis.log:
        parts.append(f'<text class="scale" x="{WIDTH - 4}" y="14" text-anchor="end">log</text>')
    parts += _y_axis(axis, y, plot_right)
    for index in _x_ticks(first, last):
        parts.append(
            f'<text class="tick" x="{svg.fmt(x(index))}" y="{plot_bottom + 14}" '
            f'text-anchor="middle">{index}</text>'
        )
    parts.append(
        f'<text class="axis" x="{(_LEFT + plot_right) // 2}" y="{HEIGHT - 4}" '
        'text-anchor="middle">checkpoint</text>'
    )
    for curve in sorted(curves, key=lambda c: c.series):
        parts.append(_curve(curve, svg.colour(curve.series, series), x, y))
    parts.append("</svg>")
    return "\n".join(parts)


def _y_axis(axis: Scale, y: Callable[[float], float | None], right: int) -> list[str]:
    parts = []
    for value, text in zip(axis.ticks, axis.labels, strict=True):
        at = y(value)
        if at is None:  # never: a log axis's ticks are powers of ten
            continue
        zero = value == 0 and not axis.log
        stroke = "#666666" if zero else "#dddddd"
        parts.append(svg.line(_LEFT, at, right, at, "zero" if zero else "grid", stroke))
        if text:
            parts.append(
                f'<text class="tick" x="{_LEFT - 4}" y="{svg.fmt(at + 4)}" text-anchor="end">'
                f"{escape(text)}</text>"
            )
    return parts


def _curve(
    curve: Curve, colour: str, x: Callable[[int], float], y: Callable[[float], float | None]
) -> str:
    placed = [
        (x(index), at, index, text)
        for index, value, text in curve.points
        if (at := y(value)) is not None
    ]
    points = " ".join(f"{svg.fmt(px)},{svg.fmt(py)}" for px, py, _, _ in placed)
    parts = [
        f'<g class="curve-group" data-candidate="{escape(curve.candidate)}">',
        f'<polyline class="curve" points="{points}" fill="none" stroke="{colour}" '
        f'stroke-width="1.5"><title>{escape(curve.name)}</title></polyline>',
    ]
    for px, py, index, text in placed:
        parts.append(
            f'<circle class="point" cx="{svg.fmt(px)}" cy="{svg.fmt(py)}" r="2" '
            f'fill="{colour}"><title>{escape(curve.name)}, checkpoint {index}: '
            f"{escape(text)}</title></circle>"
        )
    parts.append("</g>")
    return "".join(parts)
