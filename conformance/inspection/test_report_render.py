"""The HTML report as a real browser draws it (SPEC.md section 16.4): headless Chromium
renders a small page (7 candidates x 4 problems) and a 50 x 20 page at 1280 px wide to PNG,
and the PNG is decoded here with :mod:`zlib` and :mod:`struct` alone.

Checked on the pixels: the image is the requested size; every candidate's colour (its
legend swatch and its medians) appears as exact pixels; nothing is drawn in the page's
right margin (a table or chart wider than the page would spill there, or be cut at the
window's edge); and the interval chart spans the content width, its right end inside the
window. Without Chromium the test is skipped, except in CI (``CI=true``), where it fails:
CI installs it (``.ci/run``), so it can never silently not run there.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections import Counter
from pathlib import Path

import attrs
import pytest
from runstore.inspection.report import render_report
from runstore.inspection.svg import colour

from conformance.inspection.test_report_layout import WIDE_DECLARED
from conformance.inspection.test_report_layout import content_width
from conformance.inspection.test_report_layout import wide_texts
from conformance.inspection.test_report_layout import world
from conformance.needs import missing

WIDTH = 1280
HEIGHTS = {"small": 2400, "50x20": 5200}
"""Tall enough to hold the first chart and the first 20-column table below it."""
BAND = (243, 244, 246)
"""The fill of every second problem's band in the interval chart."""
WHITE = (255, 255, 255)
PAGE_PADDING = 24
"""``main``'s padding (1.5rem at 16 px): content starts this far inside ``main``."""


def chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
    )
    if found is None:
        missing("chromium is not installed (apt-get install chromium)")
    return found


@attrs.frozen
class Image:
    width: int
    height: int
    rows: tuple[bytes, ...]
    """Each row as R, G, B bytes (alpha dropped)."""

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        row = self.rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]

    def colours(self) -> Counter[tuple[int, int, int]]:
        found: Counter[tuple[int, int, int]] = Counter()
        for row in self.rows:
            found.update(zip(row[0::3], row[1::3], row[2::3], strict=True))
        return found


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def decode_png(data: bytes) -> Image:
    """An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) as rows of RGB."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks = 8, []
    header = b""
    while position < len(data):
        (length, kind) = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[position + 8 + length :][:4])[0]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, kind_of_colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and interlace == 0 and kind_of_colour in (2, 6), header
    step = 4 if kind_of_colour == 6 else 3
    stride = width * step
    raw = zlib.decompress(b"".join(chunks))
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        method, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if method == 1:
            for i in range(step, stride):
                line[i] = (line[i] + line[i - step]) & 255
        elif method == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous, strict=True))
        elif method == 3:
            for i in range(stride):
                left = line[i - step] if i >= step else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 255
        elif method == 4:
            for i in range(stride):
                left = line[i - step] if i >= step else 0
                corner = previous[i - step] if i >= step else 0
                line[i] = (line[i] + _paeth(left, previous[i], corner)) & 255
        else:
            assert method == 0, f"filter {method}"
        rows.append(
            bytes(line) if step == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3)
        )
        previous = line
    return Image(width=width, height=height, rows=tuple(rows))


def render(page: str, directory: Path, height: int) -> Image:
    binary = chromium()
    html, png = directory / "page.html", directory / "page.png"
    html.write_text(page, encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--force-color-profile=srgb",
                f"--user-data-dir={profile}",
                "--hide-scrollbars",
                f"--window-size={WIDTH},{height}",
                f"--screenshot={png}",
                html.as_uri(),
            ],
            capture_output=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0 and png.exists(), done.stderr.decode(errors="replace")[-2000:]
    return decode_png(png.read_bytes())


def rgb(hex_colour: str) -> tuple[int, int, int]:
    value = bytes.fromhex(hex_colour.removeprefix("#"))
    return value[0], value[1], value[2]


def small_texts() -> dict[tuple[str, str], list[dict[str, str]]]:
    return {
        (f"demo/cand-{i}", f"demo/problem-{j}"): [
            {"speed": repr(10 * (i + 1) * (j + 1) + r)} for r in range(5)
        ]
        for i in range(7)
        for j in range(4)
    }


@pytest.mark.parametrize("case", ["small", "50x20"])
def test_the_page_renders_at_1280_px_with_its_colours_and_nothing_cut(
    case: str, tmp_path: Path
) -> None:
    texts = small_texts() if case == "small" else wide_texts()
    report, results = world(texts, declared=WIDE_DECLARED)
    candidates = sorted({c for c, _ in texts})
    page = render_report(report, results, title=f"render {case}")
    image = render(page, tmp_path, HEIGHTS[case])
    assert (image.width, image.height) == (WIDTH, HEIGHTS[case])

    counts = image.colours()
    for index in range(len(candidates)):
        # The legend's swatch alone is 12 x 12 pixels of the colour.
        assert counts[rgb(colour(index, len(candidates)))] >= 100, (case, index)

    main = content_width() + 2 * PAGE_PADDING
    left, right = (WIDTH - main) // 2 + PAGE_PADDING, (WIDTH + main) // 2 - PAGE_PADDING
    for x in (*range(0, left - 4), *range(right + 4, WIDTH)):
        spilled = [y for y in range(image.height) if image.pixel(x, y) != WHITE]
        assert not spilled, f"{case}: drawn at x={x} (margin), rows {spilled[:3]}"

    band = [x for y in range(0, image.height, 4) for x in range(WIDTH) if image.pixel(x, y) == BAND]
    assert band, "no interval chart in view"
    assert min(band) >= left and right - 80 <= max(band) < right, (min(band), max(band))
    # The table below the chart is in view (its header's grey), so a table wider than the
    # page that were not in its scroll box would have spilled into the margin above.
    header_grey = rgb("#f4f4f4")
    assert counts[header_grey] > 1000, "no table in view"
