"""SVG primitives the report's charts share (SPEC.md section 16.4).

Rules of this file: pure string building from values it is handed (no store, no clock, no
I/O, no plotting library), so the same input gives the same bytes. Every piece of text goes
through :func:`html.escape`. It owns the series colours, coordinate formatting and cut
labels; what to chart and how to lay it out is the business of the chart modules
(:mod:`runstore.inspection.chart_intervals`, :mod:`runstore.inspection.chart_curves`).
"""

from __future__ import annotations

import colorsys
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

GOLDEN_ANGLE: Final = 137.508
CHAR_WIDTH: Final = 6.6
"""About how wide one character of the charts' 11 px sans-serif font is."""


def colour(index: int, count: int) -> str:
    """The colour of series ``index`` of ``count`` as ``#rrggbb``: the palette while it
    lasts, else hues spread by the golden angle at a fixed lightness and saturation (no two
    series share a colour, and every colour is dark enough to read on white)."""
    if count <= len(PALETTE):
        return PALETTE[index]
    hue = (index * GOLDEN_ANGLE) % 360 / 360
    red, green, blue = colorsys.hls_to_rgb(hue, 0.42, 0.62)
    return "#" + "".join(f"{round(channel * 255):02x}" for channel in (red, green, blue))


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, with an ellipsis when cut."""
    limit = max(limit, 2)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def fit(width: float) -> int:
    """How many characters fit in ``width`` pixels."""
    return max(2, int(width / CHAR_WIDTH))


def fmt(coordinate: float) -> str:
    """A coordinate with two decimals (enough for a screen, and byte-stable), never
    ``-0.00``."""
    text = f"{coordinate:.2f}"
    return "0.00" if text == "-0.00" else text


def label(x: float, y: float, full: str, limit: int, anchor: str, css: str = "") -> str:
    """A text cut to ``limit`` characters; a cut text keeps the full one as a tooltip."""
    shown = truncate(full, limit)
    hint = f"<title>{escape(full)}</title>" if shown != full else ""
    klass = f' class="{css}"' if css else ""
    return (
        f'<text{klass} x="{fmt(x)}" y="{fmt(y)}" text-anchor="{anchor}">'
        f"{hint}{escape(shown)}</text>"
    )


def open_svg(width: int, height: int, caption: str, css: str, **data: str) -> str:
    """The opening tag of a chart with its accessible name and a ``<title>``; ``data``
    becomes ``data-*`` attributes (escaped)."""
    extra = "".join(f' data-{key}="{escape(value)}"' for key, value in sorted(data.items()))
    return (
        f'<svg class="{css}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11" role="img" aria-label="{escape(caption)}"'
        f"{extra}>\n<title>{escape(caption)}</title>"
    )


def line(x1: float, y1: float, x2: float, y2: float, css: str, stroke: str) -> str:
    return (
        f'<line class="{css}" x1="{fmt(x1)}" y1="{fmt(y1)}" x2="{fmt(x2)}" y2="{fmt(y2)}" '
        f'stroke="{stroke}"/>'
    )
