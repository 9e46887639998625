"""Teeth of the power-loss sweeps: in a scratch copy of the package, drop one durability
step the store's guarantees rest on, and check that the power-loss sweep reports a lost
acknowledged result with the shrunk sequence of operations.

The mutations (:data:`MUTATIONS`; each replaces one text that must occur exactly once in
its file) drop, one at a time, every sync and rename of publication's placing, of
recovery (importing an accepted outcome and an orphan: the object's file, manifest,
directory and object syncs and the sync of ``artifacts/``; publishing an interrupted
failure: its rename, file fsyncs and syncs, and the creation of ``artifacts/``; the
quarantine: creating ``.quarantine/``, the rename and both syncs after it) and of creating
a store (``--init``'s root, the database, the probe directory) or an export directory
(its creation, file fsyncs, renames and directory sync), each run against the scenario
whose sweep can see it. A dropped rename may instead be caught by the reference run's own
check (``caught_as``). The few syncs SPEC.md section 14.11 argues redundant are marked
(``why_redundant``): their sweeps must still pass with them dropped, so the argument is
checked too.

For each, the scratch tree is ``<tmp>/runstore`` (the package as it is installed,
``tools/package_map.py``), and the power-loss check runs in a subprocess with
``PYTHONPATH=<tmp>``: ``python -m runstore.crashsim --faults powerloss --scenario NAME``.
A mutation is caught when the sweep exits with status 1, its output names a ``lost
acknowledged result`` (or a ``lost committed result``: a registration committed before the
cut names an object that is gone) and holds a ``SHRUNK`` report. The real sources are
only read.

Usage, from the repository root::

    python tools/powerloss_teeth.py            # every mutation; prints each shrunk report
    python tools/powerloss_teeth.py --only NAME
    python tools/powerloss_teeth.py --stale    # only check that every mutation applies

Exit status 1 when a mutation is not caught, a redundant one is caught, or one went
stale; else 0.
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
from dataclasses import replace
from pathlib import Path

from package_map import copy_package
from package_map import installed_path

ROOT = Path(__file__).resolve().parents[1]
LOSSES = ("lost acknowledged result", "lost committed result")
REFERENCE_FAILS = ("the completed reference run fails verification",)
"""A dropped rename: the run itself registers an object, or reports a stage quarantined,
that is not where it says (what any crash check sees, before any cut)."""


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    """The mutated file, relative to the repository root."""
    old: str
    new: str
    scenario: str
    why_redundant: str = ""
    """Set for a sync the campaign cannot see dropped because nothing depends on it (the
    argument, also in SPEC.md section 14.11): its run must then pass."""
    caught_as: tuple[str, ...] = LOSSES
    """What the failing sweep's output must name (any one of them)."""

    def redundant(self, why: str) -> Mutation:
        return replace(self, why_redundant=why)


def _drop(name: str, path: str, line: str, scenario: str, *, keep: str = "") -> Mutation:
    """A mutation removing ``line`` (which must end with a newline) when followed by
    ``keep`` (the context that makes it unique, kept as it is)."""
    return Mutation(name, path, line + keep, keep, scenario)


RECOVER = "impl/store/recovery/recover.py"
RECOVERY_DISK = "impl/store/recovery/disk.py"
OBJECTS = "impl/store/publication/objects.py"
FILE_PASS = "impl/store/publication/file_pass.py"
PUBLISH = "impl/store/publication/publish.py"
STAGING = "impl/store/publication/staging.py"
ATOMIC = "impl/inspection/atomic_file.py"
_PLACE_RENAME = "        durable.rename_noreplace(stage.object_path, destination)\n"
_PLACE_PARENTS = "parents: tuple[str, ...] = (os.path.dirname(destination),)"
_ROOT_SYNC_AFTER_DATABASE = (
    "            durable.fsync_dir(root)\n        except OSError as exc:\n"
    '            raise DurabilityError(f"cannot sync the new schema'
)

MUTATIONS = (
    # --- publication and creating the database -------------------------------------------
    Mutation(
        "publication-rename-sync",
        PUBLISH,
        _PLACE_PARENTS,
        "parents: tuple[str, ...] = ()",
        "publish_artifact",
    ),
    Mutation(
        "object-file-fsync",
        FILE_PASS,
        "        if sync and lane is not None:\n            lane.submit(fd, absolute)\n"
        "            fd = -1\n        elif sync:\n            fsync_fd(fd, absolute)\n",
        "        if False:\n            lane.submit(fd, absolute)\n"
        "            fd = -1\n        elif False:\n            fsync_fd(fd, absolute)\n",
        "publish_artifact",
    ),
    Mutation(
        "root-sync-after-database",
        "impl/store/store_open.py",
        _ROOT_SYNC_AFTER_DATABASE,
        _ROOT_SYNC_AFTER_DATABASE.replace("durable.fsync_dir(root)", "pass"),
        "init_register",
    ),
    # --- recovery: importing an accepted outcome and an orphan ---------------------------
    Mutation(
        "recovery-import-object-sync",
        RECOVER,
        "found = disk.read_object(work.root, candidate.name, sync=True)",
        "found = disk.read_object(work.root, candidate.name, sync=False)",
        "recover_accepted_import",
    ),
    _drop(
        "recovery-import-artifacts-sync",
        RECOVER,
        "    disk.sync_artifacts(work.root)\n",
        "recover_accepted_import",
        keep="    artifact = objects.registration(ArtifactKind.ATTEMPT, found.completed",
    ),
    Mutation(
        "recovery-orphan-object-sync",
        RECOVER,
        "found = disk.read_object(work.root, name, sync=True)",
        "found = disk.read_object(work.root, name, sync=False)",
        "recover_orphan_import",
    ),
    _drop(
        "recovery-orphan-artifacts-sync",
        RECOVER,
        "    disk.sync_artifacts(work.root)\n",
        "recover_orphan_import",
        keep="    work.imported.extend(",
    ),
    Mutation(
        "verify-file-fsync",
        OBJECTS,
        'f"{object_dir}/{path}", file, sync=sync, tree=tree, expected=stamps[path]',
        'f"{object_dir}/{path}", file, sync=False, tree=tree, expected=stamps[path]',
        "recover_orphan_import",
    ),
    Mutation(
        "verify-manifest-fsync",
        OBJECTS,
        "manifest = _read_manifest(object_dir, manifest_file, sync=sync)",
        "manifest = _read_manifest(object_dir, manifest_file, sync=False)",
        "recover_orphan_import",
    ),
    _drop(
        "verify-directory-syncs",
        OBJECTS,
        "        _sync_directories(object_dir, found.directories)\n",
        "recover_orphan_import",
        keep="        fsync_dir(object_dir)\n    return CompletedObject(",
    ),
    _drop(
        "verify-object-directory-sync",
        OBJECTS,
        "        fsync_dir(object_dir)\n",
        "recover_orphan_import",
        keep="    return CompletedObject(\n        tree_sha256=tree.hexdigest(),\n"
        "        manifest_sha256=manifest_sha256(manifest),\n        manifest=manifest,\n"
        "        files=files,",
    ),
    # --- recovery: publishing an interrupted failure ---------------------------------------
    Mutation(
        "recovery-failure-rename-sync",
        PUBLISH,
        _PLACE_PARENTS,
        "parents: tuple[str, ...] = ()",
        "recover_expired_reservation",
    ),
    Mutation(
        "recovery-failure-rename",
        PUBLISH,
        _PLACE_RENAME,
        "        pass\n",
        "recover_expired_reservation",
        caught_as=REFERENCE_FAILS,
    ),
    _drop(
        "recovery-failure-file-fsync",
        FILE_PASS,
        "        fsync_fd(fd, path)\n",
        "recover_expired_claim",
        keep="        status = os.fstat(fd)",
    ),
    _drop(
        "recovery-failure-object-directory-sync",
        OBJECTS,
        "    fsync_dir(object_dir)\n",
        "recover_expired_reservation",
        keep="    return CompletedObject(\n        tree_sha256=tree.hexdigest(),\n"
        "        manifest_sha256=manifest_sha256(manifest),\n        manifest=manifest,\n"
        "        files=tuple(listed),",
    ),
    Mutation(
        "recovery-artifacts-creation-sync",
        STAGING,
        "            durable.fsync_dir(root)\n        except OSError as exc:\n"
        '            raise _sync_failed(f"syncing {root}", exc) from exc',
        "            pass\n        except OSError as exc:\n"
        '            raise _sync_failed(f"syncing {root}", exc) from exc',
        "recover_unpublished",
    ),
    _drop(
        "recovery-stage-creation-sync",
        STAGING,
        "        durable.fsync_dir(parent)\n",
        "recover_unpublished",
        keep="    except OSError as exc:\n        remove_stage(stage)",
    ).redundant(
        "recovery's own stage needs no durable entry: it holds no lease, recovery removes "
        "or quarantines a stage whole, and its object is made durable at its address by "
        "the sync of artifacts/ after the rename"
    ),
    # --- recovery: quarantine ---------------------------------------------------------------
    _drop(
        "quarantine-creation-sync",
        RECOVERY_DISK,
        '        _synced(f"syncing {parent}", lambda: durable.fsync_dir(parent))\n',
        "recover_stage_quarantine",
        keep="    elif not stat.S_ISDIR(info.st_mode):",
    ),
    Mutation(
        "quarantine-rename",
        RECOVERY_DISK,
        "            durable.rename_noreplace(source, os.path.join(holding, taken))\n",
        "            pass\n",
        "recover_stage_quarantine",
        caught_as=(*LOSSES, *REFERENCE_FAILS),
    ),
    _drop(
        "quarantine-destination-sync",
        RECOVERY_DISK,
        '    _synced(f"syncing {holding}", lambda: durable.fsync_dir(holding))\n',
        "recover_stage_quarantine",
    ),
    _drop(
        "quarantine-source-sync",
        RECOVERY_DISK,
        '    _synced(f"syncing {parent}", lambda: durable.fsync_dir(parent))\n',
        "recover_stage_quarantine",
        keep="    return True",
    ),
    # --- recovery: its lock ---------------------------------------------------------------
    Mutation(
        "recovery-lock-creation-syncs",
        "impl/store/lock_file.py",
        "                durable.fsync_fd(fd, self.path)\n"
        "                durable.fsync_dir(self._root)\n",
        "                pass\n",
        "recover_unpublished",
    ).redundant(
        "a lock file's durability protects no result: a power cut ends every process that "
        "could hold it, and a lost lock file is created again by the next pass"
    ),
    # --- creating a store: its root, the probe directory ---------------------------------
    Mutation(
        "root-parent-sync",
        "impl/store/store_root.py",
        "        durable.mkdir(path)\n",
        "        os.mkdir(path, 0o700)\n",
        "init_root",
    ),
    _drop(
        "mkdir-parent-sync",
        "impl/durable.py",
        "    _sync_directory(os.path.dirname(path), follow=True)\n",
        "init_root",
        keep='    _after("mkdir", path)',
    ),
    Mutation(
        "probe-directory-parent-sync",
        "impl/store/probes.py",
        '_step("create the probe directory", durable.mkdir, directory)',
        '_step("create the probe directory", os.mkdir, directory, 0o700)',
        "init",
    ).redundant(
        "nothing durable is ever in a probe directory: the next opening removes whatever a "
        "cut leaves of it, whole, and reads nothing in it"
    ),
    Mutation(
        "probe-directory-removal-syncs",
        "impl/store/probes.py",
        '    _step("remove the probe directory", durable.remove_tree, directory)\n'
        '    _step("sync the store root", durable.fsync_dir, root)\n',
        '    _step("remove the probe directory", durable.remove_tree, directory, '
        "sync_parent=False)\n",
        "init",
    ).redundant(
        "a probe directory a cut brings back is removed whole by the next opening, which "
        "reads nothing in it"
    ),
    Mutation(
        "database-file-fsync",
        "impl/store/store_open.py",
        "            durable.fsync_fd(descriptor, os.path.join(root, store_root.DATABASE_NAME))\n",
        "            pass\n",
        "init_register",
    ).redundant(
        "SQLite in WAL mode with synchronous=FULL makes the schema commit durable by its "
        "own fsync of the WAL (the model's database rule is that guarantee); the file's "
        "own fsync is kept as a second line"
    ),
    # --- an export directory ----------------------------------------------------------------
    Mutation(
        "export-directory-parent-sync",
        "impl/inspection/export.py",
        "        durable.mkdir(target, _DIRECTORY_MODE)\n",
        "        os.mkdir(target, _DIRECTORY_MODE)\n",
        "export",
    ),
    _drop(
        "export-file-fsync",
        ATOMIC,
        "                durable.fsync_fd(pending.stream.fileno(), "
        "self._path(pending.temporary))\n",
        "export",
    ),
    Mutation(
        "export-rename",
        ATOMIC,
        "                os.replace(self._path(pending.temporary), self._path(pending.name))\n",
        "                pass\n",
        "export",
    ),
    _drop(
        "export-directory-sync",
        ATOMIC,
        "            durable.fsync_dir(self.directory)\n",
        "export",
    ),
)
NAMES = tuple(mutation.name for mutation in MUTATIONS)


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


def caught(status: int, output: str, caught_as: Sequence[str] = LOSSES) -> bool:
    """Whether the sweep failed naming one of ``caught_as`` (a loss must come shrunk)."""
    named = any(text in output for text in caught_as)
    shrunk = "SHRUNK" in output or not set(caught_as) <= set(LOSSES)
    return status == 1 and named and shrunk


def stale(mutation: Mutation) -> str:
    """Why ``mutation`` no longer applies (its text does not occur exactly once in its
    file); empty when it applies."""
    text = (ROOT / mutation.path).read_text(encoding="utf-8")
    count = text.count(mutation.old)
    return "" if count == 1 else f"the text to replace occurs {count} times in {mutation.path}"


def judge(mutation: Mutation, status: int, output: str) -> tuple[bool, str]:
    """Whether the run of ``mutation`` went as it must, and the verdict's word: a dropped
    sync is ``caught``; a redundant one's run passes (``redundant``)."""
    if mutation.why_redundant:
        passed = status == 0 and not caught(status, output)
        return passed, "redundant" if passed else "NOT-REDUNDANT"
    found = caught(status, output, mutation.caught_as)
    return found, "caught" if found else "MISSED"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this one")
    parser.add_argument(
        "--stale", action="store_true", help="only check that every mutation still applies"
    )
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - set(NAMES)
    if unknown:
        parser.error(f"unknown mutation {sorted(unknown)}; known: {list(NAMES)}")
    missed = 0
    for mutation in chosen:
        why = stale(mutation)
        if why or args.stale:
            print(f"STALE {mutation.name}: {why}" if why else f"applies {mutation.name}")
            missed += bool(why)
            continue
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="runstore-powerloss-teeth-") as base:
            scratch_package(Path(base), mutation)
            status, output = run_powerloss(Path(base), mutation.scenario)
        good, verdict = judge(mutation, status, output)
        missed += not good
        seconds = time.monotonic() - started
        print(f"{verdict} {mutation.name} ({mutation.scenario}, exit {status}, {seconds:.1f} s)")
        if mutation.why_redundant:
            print(f"  | why: {mutation.why_redundant}")
        shrunk = False
        for line in output.splitlines():
            shrunk = line.startswith("SHRUNK") or (shrunk and line.startswith("  "))
            if shrunk or line.startswith(("faults=", f"{mutation.scenario}: ", "    k=")):
                print(f"  | {line}")
        print(flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
