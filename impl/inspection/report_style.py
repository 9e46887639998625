"""The style sheet the HTML report inlines (SPEC.md section 16.4).

Rules of this file: one constant, plain CSS with no ``url(...)``, ``@import`` or web fonts,
so the page never fetches anything; marks that carry meaning (lowest, highest, a slot's
state) also carry text or a ``title``, never colour alone.
"""

from __future__ import annotations

from typing import Final

STYLE: Final = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b;
  background: #fff; margin: 0; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; overflow-wrap: anywhere; }
h2 { font-size: 1.25rem; margin: 2rem 0 .5rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; overflow-wrap: anywhere; }
p.meta, p.note { color: #555; margin: .25rem 0 .75rem; }
nav ul { list-style: none; padding: 0; margin: .5rem 0; display: flex; flex-wrap: wrap;
  gap: .25rem 1rem; }
nav a { color: #0057a3; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; margin-bottom: 1rem; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: .25rem 0; }
th, td { border: 1px solid #d8d8d8; padding: .2rem .5rem; text-align: right;
  vertical-align: top; }
th { background: #f4f4f4; max-width: 18rem; overflow-wrap: anywhere; }
th[scope="row"] { text-align: left; }
td.zero { color: #aaa; }
td.state { color: #666; font-style: italic; text-align: center; }
td.state.failed, td.state.interrupted { color: #b00020; }
td.state.running { color: #7a5b00; }
td.state.excluded, td.state.absent { color: #999; }
td.lowest { background: #dbeafe; }
td.lowest::after { content: " \\25BC"; color: #1d4ed8; font-size: .8em; }
td.highest { background: #fde7c7; }
td.highest::after { content: " \\25B2"; color: #b45309; font-size: .8em; }
span.lowest { background: #dbeafe; padding: 0 .3rem; }
span.highest { background: #fde7c7; padding: 0 .3rem; }
svg.chart { display: block; }
svg.chart .bar:hover { opacity: .75; }
"""
