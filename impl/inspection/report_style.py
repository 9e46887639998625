"""The style sheet the HTML report inlines (SPEC.md section 16.4).

Rules of this file: one constant, plain CSS with no ``url(...)``, ``@import`` or web fonts,
so the page never fetches anything; marks that carry meaning (best, lowest, highest,
unstable, a verdict's shade, a slot's state) also carry text or a ``title``, never colour
alone. Names never wrap or collapse: header cells keep their text on one line, and wide
tables scroll sideways inside their box with the first column held in view; charts are as
wide as the content and shrink with the window, never cut.
"""

from __future__ import annotations

from typing import Final

STYLE: Final = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b;
  background: #fff; margin: 0; }
main { max-width: 1152px; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; overflow-wrap: anywhere; }
h2 { font-size: 1.3rem; margin: 2rem 0 .5rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.1rem; margin: 2rem 0 .25rem; overflow-wrap: anywhere; }
h4 { font-size: .95rem; margin: 1rem 0 .25rem; overflow-wrap: anywhere; }
p.meta, p.note, p.direction { color: #444; margin: .25rem 0 .75rem; max-width: 60rem; }
p.note { color: #555; }
code { font-size: .92em; background: #f3f3f3; padding: 0 .2rem; }
nav ul { list-style: none; padding: 0; margin: .5rem 0; display: flex; flex-wrap: wrap;
  gap: .25rem 1rem; }
nav a { color: #0057a3; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; margin-bottom: 1rem; max-width: 100%; }
table { border-collapse: separate; border-spacing: 0; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: .25rem 0; white-space: nowrap; }
th, td { border: 1px solid #d8d8d8; border-width: 0 1px 1px 0; padding: .2rem .5rem;
  text-align: right; vertical-align: top; white-space: nowrap; }
tr > :first-child { border-left-width: 1px; }
thead th { border-top-width: 1px; }
thead th:first-child { text-align: left; }
th { background: #f4f4f4; min-width: 4em; }
th[scope="row"] { text-align: left; position: sticky; left: 0; z-index: 1; }
th.corner { color: #666; font-weight: normal; font-style: italic; text-align: left; }
td.zero { color: #aaa; }
td.state { color: #666; font-style: italic; text-align: center; }
td.state.failed, td.state.interrupted { color: #b00020; }
td.state.running { color: #7a5b00; }
td.state.excluded, td.state.absent { color: #999; }
td.text { color: #444; text-align: left; }
td.stat span.value { display: block; }
td.stat span.about { display: block; font-size: .8em; line-height: 1.2; }
td.stat span.n { color: #777; }
td.stat.best { background: #e3f1e6; }
td.lowest { background: #dbeafe; }
td.highest { background: #fde7c7; }
span.mark { color: #1d4ed8; }
span.mark.best { color: #16723a; }
td.highest span.mark { color: #b45309; }
span.unstable { color: #b00020; font-weight: 700; }
td.ratio { white-space: normal; min-width: 7em; text-align: left; }
td.ratio span.words { white-space: nowrap; }
.ratio.same { background: #f3f3f3; color: #555; }
.ratio.better.s1 { background: #e4eefa; }
.ratio.better.s2 { background: #c4daf3; }
.ratio.better.s3 { background: #9dc2ec; }
.ratio.worse.s1 { background: #fdf0e1; }
.ratio.worse.s2 { background: #f9d6ab; }
.ratio.worse.s3 { background: #f4b874; }
span.ratio { padding: 0 .3rem; }
ul.legend { list-style: none; padding: 0; margin: .25rem 0 .5rem; display: flex;
  flex-wrap: wrap; gap: .15rem 1rem; font-size: .9em; }
ul.legend li { white-space: nowrap; }
svg.swatch { vertical-align: -1px; margin-right: .3rem; }
div.chart { margin: .25rem 0 1rem; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg.chart .axis { font-weight: 600; }
svg.chart .row, svg.chart .panel { fill: #222; }
div.panels { display: flex; flex-wrap: wrap; gap: .5rem; margin-bottom: 1rem; }
div.panels svg.chart { border: 1px solid #e4e4e4; }
"""
