"""``--changed-since REV``: the lines of ``impl/`` a change touched, module by module.

The change is the working tree (committed or not) against ``REV``: ``git diff -U0`` gives
each hunk's lines on the new side; a hunk that only deletes marks the line before and the
line after the deletion; a module git does not know yet (untracked) is changed in every
line. Rules of this file: reading git only; a revision git cannot resolve is a
:class:`ChangeError`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from mutation.settings import ROOT

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)


class ChangeError(Exception):
    """The revision cannot be compared with the working tree."""


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise ChangeError(done.stderr.strip() or f"git {' '.join(args)} failed")
    return done.stdout


def lines_of_diff(diff: str) -> set[int]:
    """The new-side lines a ``git diff -U0`` of one file touches (see above)."""
    lines: set[int] = set()
    for match in HUNK.finditer(diff):
        start, count = int(match.group(1)), int(match.group(2) or "1")
        lines.update(range(start, start + count) if count else (start, start + 1))
    return lines


def changed_lines(revision: str) -> dict[str, set[int]]:
    """Each changed module of ``impl/`` and its changed lines (new-side numbers)."""
    try:
        _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except ChangeError:
        raise ChangeError(f"{revision!r} is not a commit git knows here") from None
    result: dict[str, set[int]] = {}
    names = _git("diff", "--name-only", "--no-renames", "--diff-filter=AM", revision, "--", "impl")
    for name in names.split():
        if not name.endswith(".py"):
            continue
        lines = lines_of_diff(_git("diff", "-U0", "--no-renames", revision, "--", name))
        if lines:
            result[name] = lines
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", "impl")
    for name in untracked.split():
        if name.endswith(".py"):
            count = len((ROOT / name).read_text(encoding="utf-8").splitlines())
            result[name] = set(range(1, count + 1))
    return {name: lines for name, lines in sorted(result.items()) if (ROOT / Path(name)).exists()}
