"""Scratch copies of the working tree, the only place a mutant is ever written.

A copy holds every file git tracks or would track (``git ls-files --cached --others
--exclude-standard``, as they are on disk now, so uncommitted work is what gets mutated),
and an import directory, ``.mutate-import/runstore``, whose entries link to the copy's
``impl/`` (and ``model``, ``crashsim`` to the copy's folders): with it first on
``PYTHONPATH`` the copy's package is the one every test, and every subprocess a test
starts, imports (the editable install's finder comes after the path finder). Rules of this
file: a copy is rebuilt from scratch at every run (never trusted across runs), and nothing
here writes outside ``.mutate/``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from mutation.settings import ROOT

IMPORT_DIR = ".mutate-import"
PRISTINE = ".mutate-pristine"
"""Inside a copy: the unmutated sources of ``impl/``, for finding what a mutant changed."""


def tracked_files(root: Path = ROOT) -> list[str]:
    """The files of the working tree a copy holds (relative paths, existing files only)."""
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    names = sorted({name for name in done.stdout.decode().split("\0") if name})
    return [name for name in names if (root / name).is_file()]


BOOKKEEPING = ("tools/mutation_baseline.toml", "tools/mutation_equivalents.toml")
"""Files no mutant's fate depends on (scores written after a module; equivalents applied
when results are read), left out of :func:`tree_digest` so that recording a score or
arguing an equivalent does not void the sessions a run may resume."""


def tree_digest(files: Sequence[str], root: Path = ROOT) -> str:
    """A digest of the files' names, modes and bytes (but :data:`BOOKKEEPING`): a
    session's results hold for this tree only."""
    digest = hashlib.sha256()
    for name in files:
        if name in BOOKKEEPING:
            continue
        path = root / name
        digest.update(name.encode() + b"\0")
        digest.update(oct(path.stat().st_mode & 0o111).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def make_copy(destination: Path, files: Sequence[str], root: Path = ROOT) -> Path:
    """Build a fresh copy of ``files`` at ``destination`` (replacing any old one)."""
    if destination.exists():
        shutil.rmtree(destination)
    for name in files:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    package = destination / IMPORT_DIR / "runstore"
    package.mkdir(parents=True)
    for entry in sorted((destination / "impl").iterdir()):
        if entry.name != "__pycache__":
            os.symlink(os.path.relpath(entry, package), package / entry.name)
    for folder in ("model", "crashsim"):
        os.symlink(os.path.relpath(destination / folder, package), package / folder)
    shutil.copytree(destination / "impl", destination / PRISTINE / "impl")
    return destination


def copy_environment(copy: Path) -> dict[str, str]:
    """The environment a test run in ``copy`` needs: its package first on the path."""
    env = dict(os.environ)
    path = [str(copy / IMPORT_DIR), str(copy / "tools")]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
