"""Run mypy --strict on the ``runstore`` package as it is laid out in the source tree.

mypy cannot follow setuptools' editable-install finder, and the package maps one import
namespace onto several top-level folders, so this builds a throwaway tree of symbolic
links (``.typecheck/runstore`` mirroring the package-dir mapping in pyproject.toml) and
checks it with ``mypy -p runstore``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".typecheck"


def build_tree() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(TREE, ignore_errors=True)
    # Longest package names last, so a subpackage mapped elsewhere replaces its parent's.
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        target = TREE.joinpath(*package.split("."))
        source = ROOT / folder
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            link = target / path.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(path)
        (target / "py.typed").touch()


def main() -> int:
    build_tree()
    env = dict(os.environ, MYPYPATH=str(TREE))
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["-p", "runstore"]
    return subprocess.call(command, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
