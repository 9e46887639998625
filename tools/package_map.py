"""The package-dir map of ``pyproject.toml``, read in one place.

Rules of this file: reads ``[tool.setuptools] package-dir`` and the folders it names; writes
only under a target the caller gives. The one import namespace ``runstore`` is mapped onto
several top-level folders (``runstore`` -> ``impl/``, ``runstore.model`` -> ``model/``,
``runstore.crashsim`` -> ``crashsim/``). Everything that rebuilds the installed layout from
the source tree reads the map here: the type check's link tree (``tools/typecheck.py``),
the writer mutants' import shim (``tools/writer_mutations.py``), the power-loss teeth's
scratch package (``tools/powerloss_teeth.py``) and the layer test
(``conformance/meta/test_layers.py``).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

IGNORED = shutil.ignore_patterns("__pycache__")


def package_dirs(root: Path) -> list[tuple[str, Path]]:
    """``(package, folder)`` for each entry of ``root``'s package-dir map, each package
    before the sub-packages mapped into it (so a later entry replaces what an earlier one
    placed at its path)."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    ordered = sorted(mapping.items(), key=lambda item: (item[0].count("."), item[0]))
    return [(package, root / folder) for package, folder in ordered]


def module_files(root: Path) -> dict[str, Path]:
    """Every module of the namespace, by dotted name (a package by its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for package, folder in package_dirs(root):
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def installed_path(root: Path, path: str) -> Path:
    """Where the repository file ``path`` (relative to ``root``, such as
    ``impl/store/events.py``) lies in the installed layout, relative to site-packages
    (``runstore/store/events.py``). ValueError for a file outside every mapped folder."""
    absolute = (root / path).resolve()
    for package, folder in reversed(package_dirs(root)):
        if absolute.is_relative_to(folder.resolve()):
            inside = absolute.relative_to(folder.resolve())
            return Path(*package.split(".")) / inside
    raise ValueError(f"{path} is in no folder of the package-dir map")


def copy_package(root: Path, target: Path) -> Path:
    """Copy the namespace from ``root``'s source tree into ``target`` laid out as it is
    installed (``target/runstore/...``, every mapped folder at its package's path); returns
    ``target``, which goes on ``PYTHONPATH``."""
    for package, folder in package_dirs(root):
        destination = target.joinpath(*package.split("."))
        shutil.copytree(folder, destination, ignore=IGNORED, dirs_exist_ok=True)
    return target
