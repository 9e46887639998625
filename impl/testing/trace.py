"""The model's named scenarios as Markdown transcripts (spec review via model traces): the
command that prints, rewrites or checks the committed transcripts under ``vectors/traces/``.

Rules of this file: only :func:`main` touches files; scenarios are
:mod:`runstore.testing.scenarios`, rendering is :mod:`runstore.testing.transcript`.

Usage (from the repository root; ``tools/regen`` runs ``--all`` / ``--check`` with the
other generators)::

    python -m runstore.testing.trace SCENARIO      # print one transcript
    python -m runstore.testing.trace --all         # rewrite vectors/traces/*.md
    python -m runstore.testing.trace --check       # exit 1 if a committed transcript is stale
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from runstore.testing.scenarios import SCENARIOS
from runstore.testing.transcript import Transcript
from runstore.testing.transcript import render_transcript


def render_scenario(name: str) -> str:
    """Run the named scenario and render its transcript."""
    function = SCENARIOS[name]
    transcript = Transcript()
    function(transcript)
    title = " ".join((function.__doc__ or "").split())
    return render_transcript(name, title, transcript)


def main(argv: Sequence[str] | None = None) -> int:
    """Print, rewrite or check scenario transcripts; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m runstore.testing.trace")
    parser.add_argument("scenario", nargs="?", choices=sorted(SCENARIOS))
    parser.add_argument("--all", action="store_true", help="rewrite every committed transcript")
    parser.add_argument("--check", action="store_true", help="exit 1 if any transcript is stale")
    parser.add_argument(
        "--dir", type=Path, default=Path("vectors/traces"), help="transcript folder"
    )
    options = parser.parse_args(argv)
    if options.scenario is not None:
        sys.stdout.write(render_scenario(options.scenario))
        return 0
    if not (options.all or options.check):
        parser.error("name a scenario, or pass --all or --check")
    stale = []
    known = {f"{name}.md" for name in SCENARIOS}
    for extra in sorted(options.dir.glob("*.md")):
        if extra.name not in known:
            stale.append(extra)
            if options.all:
                extra.unlink()
    for name in sorted(SCENARIOS):
        path = options.dir / f"{name}.md"
        text = render_scenario(name)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if options.all:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'updated' if options.all else 'stale'}: {path}", file=sys.stderr)
    return 1 if stale and options.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
