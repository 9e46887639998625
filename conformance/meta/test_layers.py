"""The package's layers and their import directions, held as data (README, "Layout").

Every module of the ``runstore`` namespace belongs to exactly one layer of :data:`LAYERS`,
and may import only the layers :data:`ALLOWED` lists for it; a new module must be placed in
a layer (or it fails here), and a new forbidden import fails CI. Read by AST, so a lazy
import inside a function counts as much as one at the top. Also checked: no import cycle,
at import time or through lazy imports (no two modules import each other), the pure
layers import only the standard modules of :data:`PURE_IMPORTS`, no package module
reaches another module's private names (the seams' observers are installed through their
documented ``install_observer`` hooks), importing the model or the testing package loads
neither ``sqlite3`` nor ``fcntl``, and no source module is over 500 lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from package_map import module_files

ROOT = Path(__file__).resolve().parents[2]

LAYERS: dict[str, tuple[str, ...]] = {
    "root": ("runstore",),
    "seams": ("runstore.sql", "runstore.durable"),
    # Every other module directly in the package root (impl/*.py): values and leaf rules.
    "value": ("runstore.?",),
    "store": ("runstore.store", "runstore.store.*"),
    "analysis": ("runstore.analysis", "runstore.analysis.*"),
    "inspection": ("runstore.inspection", "runstore.inspection.*"),
    "model": ("runstore.model", "runstore.model.*"),
    "testing values": (
        "runstore.testing",
        "runstore.testing.factories",
        "runstore.testing.fixtures",
    ),
    "testing": ("runstore.testing.*",),
    "crashsim": ("runstore.crashsim", "runstore.crashsim.*"),
    "runner": ("runstore.runner", "runstore.runner.*"),
    "audit": ("runstore.audit", "runstore.audit.*"),
    "kit": ("runstore.kit", "runstore.kit.*"),
    "cli": ("runstore.cli", "runstore.cli.*"),
}
"""Layer -> its modules, by package: ``name.*`` matches the submodules of ``name`` and
``runstore.?`` a module directly in the package root (not a sub-package). The first layer
that matches wins; a module no layer matches (a new sub-package) fails here until it is
placed."""

TESTING = {
    "value",
    "root",
    "seams",
    "store",
    "analysis",
    "inspection",
    "model",
    "testing values",
    "testing",
    "audit",
}
"""What the testing kit may import: everything of the runtime but the runner and the CLI."""

ALLOWED: dict[str, set[str]] = {
    "value": {"value"},
    "seams": {"value"},
    "root": {"value", "store"},  # the store only lazily (PEP 562), for RunStore itself
    "store": {"value", "seams", "store"},
    # The inspection reader reads a private copy through the store's schema check.
    "inspection": {"value", "seams", "store", "analysis", "inspection"},
    # Statistics: pure functions of numbers (no store, no files).
    "analysis": {"value", "analysis"},
    "model": {"value", "model"},
    "testing values": {"value", "testing values"},
    "testing": TESTING,
    # The crash simulator stands where the testing kit does, and uses it.
    "crashsim": TESTING | {"crashsim"},
    "runner": {"value", "store", "runner"},
    # The audit is the one runtime user of the model (it replays the event log through it).
    "audit": {"value", "store", "analysis", "inspection", "model", "audit"},
    # The conformance kit drives another implementation against the model, the testing
    # kit's lockstep and the crash simulator's scenarios; it serves this store as a driver.
    "kit": TESTING | {"crashsim", "kit"},
    # ``runstore conformance`` is the one command that loads the kit (lazily).
    "cli": {"value", "store", "analysis", "inspection", "runner", "audit", "kit", "cli"},
}
"""Layer -> the layers it may import (itself included where listed)."""

PURE_LAYERS = ("value", "analysis", "model", "testing values")
PURE_IMPORTS = frozenset(
    {
        "__future__",
        "abc",
        "attrs",
        "collections.abc",
        "enum",
        "functools",
        "hashlib",
        "json",
        "math",
        "re",
        "types",
        "typing",
        "unicodedata",
    }
)
"""What the pure layers may import from outside the package: no I/O, clock or SQLite."""


MODULES = module_files(ROOT)
"""Every module of the namespace, by dotted name, from pyproject's package-dir map."""


def _matches(module: str, pattern: str) -> bool:
    if pattern.endswith(".?"):
        parent = pattern[:-2]
        return (
            module.rpartition(".")[0] == parent
            and MODULES[module].name != "__init__.py"  # a sub-package is placed by name
        )
    if pattern.endswith(".*"):
        return module.startswith(pattern[:-1])
    return module == pattern


def layer_of(module: str) -> str:
    for layer, patterns in LAYERS.items():
        if any(_matches(module, pattern) for pattern in patterns):
            return layer
    raise AssertionError(f"{module} is in no layer")


def _deferred(node: ast.stmt) -> bool:
    """A function body or an ``if TYPE_CHECKING:`` block: not run when the module loads."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return True
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    )


def imports(module: str, *, import_time_only: bool = False) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for each import in ``module``'s source. Names imported
    from a package resolve to its submodule when one exists. With ``import_time_only``,
    imports inside functions and ``if TYPE_CHECKING:`` blocks are skipped."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))

    def visit(nodes: list[ast.stmt]) -> Iterator[tuple[str, int]]:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield alias.name, node.lineno
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                for alias in node.names:
                    candidate = f"{node.module}.{alias.name}"
                    yield (candidate if candidate in MODULES else node.module), node.lineno
            elif _deferred(node):
                if not import_time_only:
                    yield from visit(node.body)
            elif isinstance(node, ast.ClassDef | ast.If | ast.Try | ast.With):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []):
                        body = child.body if isinstance(child, ast.ExceptHandler) else [child]
                        yield from visit(body)

    yield from visit(tree.body)


def package_imports(module: str, **options: bool) -> set[str]:
    return {name for name, _ in imports(module, **options) if name in MODULES}


# --- the arrows -------------------------------------------------------------------------------


def test_every_module_is_in_exactly_one_layer_and_the_data_is_consistent() -> None:
    assert set(ALLOWED) == set(LAYERS)
    layers = {module: layer_of(module) for module in MODULES}
    for layer in LAYERS:
        assert layer in layers.values(), f"layer {layer} has no module"
    # The package root holds only the value layer, the two seams and sub-packages.
    root = {m for m in MODULES if m.count(".") == 1 and MODULES[m].name != "__init__.py"}
    assert {layers[m] for m in root} == {"value", "seams"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_allowed_arrows(module: str) -> None:
    layer = layer_of(module)
    forbidden = [
        f"line {line}: {imported} ({layer_of(imported)})"
        for imported, line in imports(module)
        if imported in MODULES and layer_of(imported) not in ALLOWED[layer]
    ]
    assert forbidden == [], f"{module} ({layer}) may import only {sorted(ALLOWED[layer])}"


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if layer_of(m) in PURE_LAYERS), ids=str
)
def test_pure_layers_import_no_io_clock_or_sqlite(module: str) -> None:
    outside = {
        name
        for name, _ in imports(module)
        if name not in MODULES and name.split(".")[0] != "runstore"
    }
    assert outside <= PURE_IMPORTS, f"{module} imports {sorted(outside - PURE_IMPORTS)}"


@pytest.mark.parametrize("import_time_only", [True, False], ids=["at-import-time", "even-lazily"])
def test_no_import_cycles(import_time_only: bool) -> None:
    """No module reaches itself through the package's imports: at import time (a cycle
    there can fail to load), nor counting the imports inside functions and ``if
    TYPE_CHECKING:`` blocks, so that no pair of modules (or longer ring) leans on each
    other and every dependency runs one way."""
    graph = {
        module: package_imports(module, import_time_only=import_time_only) for module in MODULES
    }
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def walk(module: str, stack: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                cycles.append([*stack[stack.index(imported) :], imported])
            elif imported not in state:
                walk(imported, [*stack, imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reaches_another_modules_private_names(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    aliases = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in MODULES:
                    aliases[alias.asname or alias.name] = target
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{aliases[node.value.id]}.{node.attr}")
    assert found == []


def test_the_seams_offer_a_documented_observer_hook() -> None:
    for seam in ("runstore.sql", "runstore.durable"):
        tree = ast.parse(MODULES[seam].read_text(encoding="utf-8"))
        hooks = [
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "install_observer"
        ]
        assert len(hooks) == 1, seam
        docstring = ast.get_docstring(hooks[0]) or ""
        assert "test hook" in docstring.lower() and "previous" in docstring


def test_every_package_is_installed() -> None:
    """A normal (not editable) install ships only the packages pyproject lists: every
    package of the source tree must be listed, and nothing else."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert listed == packages


# --- what an import loads ---------------------------------------------------------------------


def printed(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter (nothing already imported)."""
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.mark.parametrize(
    "statement",
    [
        "import runstore",
        "import runstore.model",
        "import runstore.testing",
        "from runstore import FirstAttempt, Next, Retry, Accepted, Failed, LeaseRequest",
        "from runstore.testing import one_shot, fixtures",
    ],
)
def test_the_value_layer_model_and_testing_factories_load_no_sqlite_or_fcntl(
    statement: str,
) -> None:
    code = f"{statement}; import sys; print(sorted({{'sqlite3', 'fcntl'}} & set(sys.modules)))"
    assert printed(code) == "[]"


def test_the_store_is_loaded_on_first_use() -> None:
    code = (
        "import sys, runstore; assert 'runstore.store' not in sys.modules; "
        "store = runstore.RunStore; assert 'sqlite3' in sys.modules; "
        "assert runstore.RUN_STORE_SCHEMA_VERSION == 1; "
        "import runstore.store; assert runstore.store.RunStore is store; print(store.__module__)"
    )
    assert printed(code) == "runstore.store.run_store"


def test_dask_is_imported_only_when_a_dask_executor_is_made() -> None:
    """The core install runs without the dask extra: the CLI, the runner and the local
    executor never import dask or distributed."""
    code = (
        "import sys, runstore.cli, runstore.runner.coordinator, runstore.runner.executors, "
        "runstore.runner.dask_executor, runstore.runner.dask_task, runstore.runner.local; "
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('dask', 'distributed')))"
    )
    assert printed(code) == "[]"


def test_the_public_vocabulary_is_importable_from_runstore() -> None:
    import runstore

    for name in runstore.__all__:
        assert getattr(runstore, name) is not None
    with pytest.raises(AttributeError):
        _ = runstore.no_such_name  # type: ignore[attr-defined]


# --- size --------------------------------------------------------------------------------------


def source_files() -> list[Path]:
    files = [
        path for folder in ("impl", "model", "crashsim") for path in (ROOT / folder).rglob("*.py")
    ]
    for path in (ROOT / "tools").rglob("*"):
        if path.is_file() and (
            path.suffix == ".py" or path.read_bytes().startswith(b"#!/usr/bin/env python")
        ):
            files.append(path)
    return sorted(files)


def test_no_source_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in source_files()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert long == {}
