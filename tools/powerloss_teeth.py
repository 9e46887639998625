"""Teeth of the power-loss sweeps: in a scratch copy of the package, drop one durability
step the store's guarantees rest on, and check that the power-loss sweep reports a lost
acknowledged result with the shrunk sequence of operations.

The mutations (each replaces one text that must occur exactly once in its file):

* ``publication-rename-sync``: no directory sync of ``artifacts/`` after a publication's
  rename (``impl/store/publication/publish.py``);
* ``object-file-fsync``: the object's files are not fsynced before its manifest is written
  (``impl/store/publication/file_pass.py``, with or without a sync lane);
* ``root-sync-after-database``: the store root is not synced after the database is created
  (``impl/store/store_open.py``).

For each, the scratch tree is ``<tmp>/runstore`` (the package as it is installed,
``tools/package_map.py``), and the power-loss check runs in a subprocess with
``PYTHONPATH=<tmp>``: ``python -m runstore.crashsim --faults powerloss --scenario NAME``.
A mutation is caught when the sweep exits with status 1, its output names a ``lost
acknowledged result`` and holds a ``SHRUNK`` report. The real sources are only read.

Usage, from the repository root::

    python tools/powerloss_teeth.py            # every mutation; prints each shrunk report
    python tools/powerloss_teeth.py --only NAME

Exit status 1 when a mutation is not caught (or went stale), else 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from package_map import copy_package
from package_map import installed_path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    """The mutated file, relative to the repository root."""
    old: str
    new: str
    scenario: str


MUTATIONS = (
    Mutation(
        "publication-rename-sync",
        "impl/store/publication/publish.py",
        "parents: tuple[str, ...] = (os.path.dirname(destination),)",
        "parents: tuple[str, ...] = ()",
        "publish_artifact",
    ),
    Mutation(
        "object-file-fsync",
        "impl/store/publication/file_pass.py",
        "        if sync and lane is not None:\n            lane.submit(fd, absolute)\n"
        "            fd = -1\n        elif sync:\n            fsync_fd(fd, absolute)\n",
        "        if False:\n            lane.submit(fd, absolute)\n"
        "            fd = -1\n        elif False:\n            fsync_fd(fd, absolute)\n",
        "publish_artifact",
    ),
    Mutation(
        "root-sync-after-database",
        "impl/store/store_open.py",
        "            durable.fsync_dir(root)\n        except OSError as exc:\n"
        '            raise DurabilityError(f"cannot sync the new schema',
        "            pass\n        except OSError as exc:\n"
        '            raise DurabilityError(f"cannot sync the new schema',
        "init_register",
    ),
)


def scratch_package(base: Path, mutation: Mutation | None) -> Path:
    """``base/runstore`` laid out like the installed package, with ``mutation`` applied;
    raises ValueError when its text does not occur exactly once."""
    copy_package(ROOT, base)
    if mutation is not None:
        target = base / installed_path(ROOT, mutation.path)
        text = target.read_text(encoding="utf-8")
        if text.count(mutation.old) != 1:
            raise ValueError(
                f"{mutation.name}: the text to replace occurs {text.count(mutation.old)} times"
            )
        target.write_text(text.replace(mutation.old, mutation.new), encoding="utf-8")
    return base


def run_powerloss(pythonpath: Path, scenario: str) -> tuple[int, str]:
    """Run the power-loss check of ``scenario`` on the package under ``pythonpath``."""
    check = "import runstore, sys; sys.exit(0 if runstore.__file__.startswith(sys.argv[1]) else 1)"
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    if subprocess.run([sys.executable, "-c", check, str(pythonpath)], env=env).returncode:
        raise RuntimeError("the scratch package is not the one imported")
    command = [sys.executable, "-m", "runstore.crashsim", "--faults", "powerloss"]
    completed = subprocess.run(
        [*command, "--scenario", scenario],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    return completed.returncode, completed.stdout + completed.stderr


def caught(status: int, output: str) -> bool:
    return status == 1 and "lost acknowledged result" in output and "SHRUNK" in output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this one")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"unknown mutation {sorted(unknown)}; known: {[m.name for m in MUTATIONS]}")
    missed = 0
    for mutation in chosen:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="runstore-powerloss-teeth-") as base:
            try:
                scratch_package(Path(base), mutation)
            except ValueError as error:
                print(f"STALE {mutation.name}: {error}", flush=True)
                missed += 1
                continue
            status, output = run_powerloss(Path(base), mutation.scenario)
        verdict = "caught" if caught(status, output) else "MISSED"
        missed += verdict == "MISSED"
        seconds = time.monotonic() - started
        print(f"{verdict} {mutation.name} ({mutation.scenario}, exit {status}, {seconds:.1f} s)")
        shrunk = False
        for line in output.splitlines():
            shrunk = line.startswith("SHRUNK") or (shrunk and line.startswith("  "))
            if shrunk or line.startswith("faults="):
                print(f"  | {line}")
        print(flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
