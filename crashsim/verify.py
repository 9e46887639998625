"""After a crash: reopen the store, check SQLite's integrity, check every completed object
on disk, match the durable projection against the acceptable model states, and run the
user's continuation (resuming a publication scenario first).

Rules of this file: runs in a process that forks nothing of its own after opening the
store (the trial child), and closes every connection it opens. Returns a :class:`Verdict`;
never raises for a finding (an unexpected exception is itself reported as a failure).
Every completed object under ``artifacts/`` (a name not starting with ``.``) must verify
(:func:`runstore.store.publication.objects.verify`, reading every byte, without syncing), be named
``<kind>-<tree sha256>`` for the tree hash it verifies with, and agree with its artifact
row when it has one; stages (``artifacts/.staging-*``, registered or not) may be left
behind, since removing or quarantining them is recovery's job. Nothing else may start
with ``.`` there.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import sqlite3
from collections.abc import Collection
from collections.abc import Sequence

import attrs
from runstore import RunStore
from runstore import model as m
from runstore.audit.projection import Projection
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.crashsim.continuation import Resumption
from runstore.crashsim.continuation import continue_as_user
from runstore.crashsim.recovered import recover_in_lockstep
from runstore.crashsim.timing import Phases
from runstore.enums import ArtifactKind
from runstore.errors import RunStoreError
from runstore.store.probes import PROBE_PREFIX
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.store.recovery.disk import QUARANTINE_NAME
from runstore.testing.lockstep import Diverged

Acceptable = Sequence[tuple[str, m.ModelState]]
"""``(label, state)`` pairs: the model states the store may be in ("before", "after")."""


@attrs.frozen
class Verdict:
    """``ok`` is False for any finding; ``detail`` says what (or what the continuation did)."""

    ok: bool
    matched: str = ""
    detail: str = ""


def verify(
    root: str,
    acceptable: Acceptable,
    resumption: Resumption | None = None,
    published: Collection[str] = (),
    phases: Phases | None = None,
    unsynced: Collection[str] = (),
) -> Verdict:
    """Reopen ``root`` and check it against ``acceptable``, then continue as a user would
    (through ``resumption`` when given). Each of the ``published`` store paths that has an
    artifact row must exist on disk. An unregistered object matching one of the
    ``unsynced`` patterns (a dead process's object that was never synced, after a power
    cut) may fail to verify. Time spent is added to ``phases`` when given."""
    timing = phases if phases is not None else Phases()
    copy = f"{root}-resumed"
    if resumption is not None:
        with timing.measure("resume copy"):
            shutil.copytree(root, copy, symlinks=True)
    verdict = _verify_once(root, acceptable, None, published, timing, unsynced)
    if not verdict.ok or resumption is None:
        return verdict
    resumed = _verify_once(copy, acceptable, resumption, published, timing, unsynced)
    if not resumed.ok:
        return attrs.evolve(resumed, detail=f"resuming instead: {resumed.detail}")
    return attrs.evolve(verdict, detail=f"{verdict.detail}; resuming instead: {resumed.detail}")


def _verify_once(
    root: str,
    acceptable: Acceptable,
    resumption: Resumption | None,
    published: Collection[str],
    timing: Phases,
    unsynced: Collection[str],
) -> Verdict:
    try:
        with timing.measure("reopen"):
            store = RunStore.open(root)
    except RunStoreError as error:
        return Verdict(ok=False, detail=f"reopening the store failed: {error}")
    try:
        return _check_open_store(store, acceptable, resumption, published, timing, unsynced)
    except Diverged as error:
        return Verdict(ok=False, detail=str(error))
    except Exception as error:  # a crash of the checker is a finding, not a pass
        return Verdict(ok=False, detail=f"verification raised {error!r}")
    finally:
        with timing.measure("close"):
            store.close()


def _check_open_store(
    store: RunStore,
    acceptable: Acceptable,
    resumption: Resumption | None,
    published: Collection[str],
    timing: Phases,
    unsynced: Collection[str],
) -> Verdict:
    leftovers = sorted(n for n in os.listdir(store.root) if n.startswith(PROBE_PREFIX))
    if leftovers:
        return Verdict(ok=False, detail=f"probe directories survived reopening: {leftovers}")
    with timing.measure("sqlite checks"):
        problem = sqlite_checks(store.database_path)
    if problem is not None:
        return Verdict(ok=False, detail=problem)
    with timing.measure("projection"):
        projection = store_projection(store.database_path)
    with timing.measure("objects"):
        problem = object_problem(store.root, projection, published, unsynced)
    if problem is not None:
        return Verdict(ok=False, detail=problem)
    for index, (label, state) in enumerate(acceptable):
        if projection == model_projection(state):
            if resumption is not None:
                with timing.measure("resumption"):
                    note = resumption.resume(store, state, index)
                return Verdict(ok=True, matched=label, detail=note)
            with timing.measure("recovery"):
                recovered = recover_in_lockstep(store, state)
            with timing.measure("sqlite checks"):
                problem = sqlite_checks(store.database_path)
            if problem is None:
                with timing.measure("objects"):
                    projection = store_projection(store.database_path)
                    problem = object_problem(store.root, projection, published, unsynced)
            if problem is not None:
                return Verdict(ok=False, matched=label, detail=f"after recovery: {problem}")
            with timing.measure("continuation"):
                note = "recovered; " + continue_as_user(store, recovered, strict=True)
            return Verdict(ok=True, matched=label, detail=note)
    labels = " or ".join(label for label, _ in acceptable)
    differences = "; ".join(
        f"vs {label}: {difference(projection, model_projection(state))}"
        for label, state in acceptable
    )
    return Verdict(
        ok=False, detail=f"the projection matches no model state ({labels}): {differences}"
    )


def sqlite_checks(database_path: str) -> str | None:
    """Schema version 1, ``PRAGMA integrity_check`` ok and no ``foreign_key_check`` rows,
    read through a fresh read-only connection; returns a finding or None."""
    connection = sqlite3.connect(f"file:{database_path}?mode=ro", uri=True)
    try:
        version = connection.execute("PRAGMA user_version").fetchall()
        integrity = connection.execute("PRAGMA integrity_check").fetchall()
        foreign = connection.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        connection.close()
    if version != [(1,)]:
        return f"user_version is {version!r} after reopening, not 1"
    if integrity != [("ok",)]:
        return f"integrity_check: {integrity[:5]!r}"
    if foreign:
        return f"foreign_key_check: {foreign[:5]!r}"
    return None


def object_problem(
    root: str,
    projection: Projection,
    published: Collection[str] = (),
    unsynced: Collection[str] = (),
) -> str | None:
    """The first registered ``published`` path missing on disk, completed object under
    ``artifacts/`` that does not verify (unless it is unregistered and matches one of the
    ``unsynced`` patterns), is misnamed or disagrees with its artifact row, or unexpected
    hidden entry there; None when all is well."""
    rows = {row[2]: row for row in projection["artifacts"]}
    for path in published:
        if path in rows and not os.path.isdir(os.path.join(root, path)):
            return f"the registered object {path} is not on disk"
    directory = os.path.join(root, staging.ARTIFACTS_DIR)
    if not os.path.isdir(directory):
        return None
    kinds = {kind.value for kind in ArtifactKind}
    for name in sorted(os.listdir(directory)):
        if name.startswith(staging.STAGE_PREFIX) or name == QUARANTINE_NAME:
            continue
        if name.startswith("."):
            return f"unexpected hidden entry artifacts/{name}"
        path = f"{staging.ARTIFACTS_DIR}/{name}"
        try:
            completed = objects.verify(os.path.join(directory, name), sync=False)
        except RunStoreError as error:
            if path not in rows and any(fnmatch.fnmatchcase(path, p) for p in unsynced):
                continue
            return f"the completed object artifacts/{name} does not verify: {error}"
        kind = name.partition("-")[0]
        if kind not in kinds or name != f"{kind}-{completed.tree_sha256}":
            return f"artifacts/{name} verifies with tree hash {completed.tree_sha256}"
        row = rows.get(f"{staging.ARTIFACTS_DIR}/{name}")
        digests = (kind, completed.tree_sha256, completed.manifest_sha256)
        if row is not None and (row[1], row[3], row[4]) != digests:
            return f"artifacts/{name} disagrees with its artifact row {row!r}"
    return None


def difference(store: Projection, model: Projection, limit: int = 300) -> str:
    """A brief table-by-table difference: rows only the store has (+) or only the model has
    (-)."""
    parts = []
    for table in model:
        extra = [row for row in store.get(table, []) if row not in model[table]]
        missing = [row for row in model[table] if row not in store.get(table, [])]
        if extra or missing:
            parts.append(f"{table} +{_brief(extra)} -{_brief(missing)}")
    text = ", ".join(parts) or "no difference"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _brief(rows: list[object]) -> str:
    more = ", ..." if len(rows) > 2 else ""
    return "[" + ", ".join(repr(row)[:60] for row in rows[:2]) + more + "]"
