"""Calling a suite of sweeps in a fresh interpreter.

The crash, I/O fault and power-loss sweeps fork a child per trial, and a fork costs
more the larger the parent (python-sqlite-facts: 8 ms at 200 MiB, 36 ms at 1 GiB). Late in
a test session the pytest process has grown large, so a sweep run inside it pays that
on every trial (the I/O fault subset took 58 s there against 19 s alone). :func:`fresh`
runs the call in a new, small interpreter instead and returns its result (pickled through
a file; attrs records pickle as they are).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_RUN = """
import importlib, pickle, sys
module, function = sys.argv[1].split(":")
with open(sys.argv[2], "rb") as handle:
    arguments = pickle.load(handle)
result = getattr(importlib.import_module(module), function)(**arguments)
with open(sys.argv[3], "wb") as handle:
    pickle.dump(result, handle)
"""


def fresh(target: str, **arguments: Any) -> Any:
    """``module:function(**arguments)`` called in a new interpreter; its result. The
    project root is on the new interpreter's path, so ``module`` may be one of the suite's
    own (``conformance.crash.test_methods``: a test module's top-level function)."""
    with tempfile.TemporaryDirectory(prefix="runstore-fresh-") as directory:
        given, taken = Path(directory, "arguments"), Path(directory, "result")
        given.write_bytes(pickle.dumps(arguments))
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        completed = subprocess.run(
            [sys.executable, "-c", _RUN, target, str(given), str(taken)],
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if completed.returncode != 0:
            raise AssertionError(f"{target} failed:\n{completed.stdout}{completed.stderr}")
        return pickle.loads(taken.read_bytes())
