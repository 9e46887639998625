"""Run mypy --strict on the ``runstore`` package as it is laid out in the source tree.

mypy cannot follow setuptools' editable-install finder, and the package maps one import
namespace onto several top-level folders, so this builds a throwaway tree of symbolic
links (``.typecheck/runstore`` mirroring the package-dir map, read by
``tools/package_map.py``) and checks it with ``mypy -p runstore``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from package_map import package_dirs

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".typecheck"


def build_tree() -> None:
    shutil.rmtree(TREE, ignore_errors=True)
    # Parents first, so a subpackage mapped elsewhere replaces its parent's links.
    for package, source in package_dirs(ROOT):
        target = TREE.joinpath(*package.split("."))
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
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    sys.exit(main())
