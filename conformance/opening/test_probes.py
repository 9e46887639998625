"""Every check of every capability probe, fed a fake kernel that lacks exactly the capability
it checks, refuses the store; and ``durable.rename_noreplace``, which the probes and the
publisher rely on, is atomic: an emulation that checks the destination (``os.path.exists``,
``lexists``, ``os.lstat``, ``os.stat``, ``os.access``) and then renames is caught by
blinding those checks to the destination, as a racing creator does (each with a test of
its test).

A fake is installed at the seam the probe really uses: a ``runstore.durable`` function as
``runstore.store.probes`` calls it, the ``fcntl`` the probe's forked child calls, the ``os`` the
probe module sees, SQLite's own system calls (:mod:`runstore.testing.sqlite_kernel`), or
``runstore.sql.execute`` for the probe's two WAL connections (within one process SQLite
excludes a second writer without kernel locks, so a writer that is not excluded is faked
there).

Each case names the check it defeats (its call site in probes.py, found with ``ast``) and
the test asserts that the refusal came through that very site, so a probe that ignores one
of its failures (and is refused later, by chance, or not at all) fails its case; a
meta-test requires a case for every check, so a new check without one fails the suite.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import fcntl
import itertools
import os
import re
import shutil
import signal
import sqlite3
import types
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from runstore import RunStore
from runstore import durable
from runstore import sql
from runstore.errors import CapabilityProbeError
from runstore.store import probes
from runstore.store.probes import PROBE_PREFIX
from runstore.store.store_root import INIT_LOCK_NAME
from runstore.testing import sqlite_kernel

PROBES_FILE = os.path.realpath(probes.__file__)


def probe_sites() -> dict[str, tuple[int, int]]:
    """Every check in probes.py, keyed ``function:callee(first argument)``: each ``_fail``,
    ``_step`` and ``_expect_tree`` call and each direct CapabilityProbeError, with its lines."""
    tree = ast.parse(Path(PROBES_FILE).read_text(encoding="utf-8"))
    callees = {"_fail", "_step", "_expect_tree", "CapabilityProbeError"}
    sites: dict[str, tuple[int, int]] = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or function.name in {"_fail", "_step"}:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in callees:
                first = ast.unparse(node.args[0]) if node.args else ""
                key = f"{function.name}:{ast.unparse(node.func)}({first})"
                assert key not in sites, f"two checks share the key {key}"
                sites[key] = (node.lineno, node.end_lineno or node.lineno)
    return sites


SITES = probe_sites()


def raised_through(error: BaseException) -> list[int]:
    """The probes.py lines on the traceback of ``error``."""
    lines = []
    traceback = error.__traceback__
    while traceback is not None:
        if os.path.realpath(traceback.tb_frame.f_code.co_filename) == PROBES_FILE:
            lines.append(traceback.tb_lineno)
        traceback = traceback.tb_next
    return lines


def oserror(code: int, target: str = "") -> OSError:
    return OSError(code, os.strerror(code), target)


def probe_dirs(root: str | Path) -> list[str]:
    return sorted(name for name in os.listdir(root) if name.startswith(PROBE_PREFIX))


Install = Callable[[pytest.MonkeyPatch, Path, contextlib.ExitStack], None]


@dataclass(frozen=True)
class Case:
    install: Install
    message: str  # a regular expression the refusal's message must match
    sites: tuple[str, ...]  # keys of SITES the refusal must come through


CASES: dict[str, Case] = {}


def add(name: str, install: Install, message: str, *sites: str) -> None:
    assert name not in CASES, name
    CASES[name] = Case(install, message, sites)


def fail(function: str, text: str, *more_sites: str) -> tuple[str, ...]:
    """The message and site of ``_fail(text)`` in ``function``."""
    return re.escape(text), f"{function}:_fail({text!r})", *more_sites


def step(function: str, what: str) -> tuple[str, str]:
    """The message and site of ``_step(what, ...)`` in ``function``."""
    return re.escape(f"cannot {what}: "), f"{function}:_step({what!r})"


# --- fakes ---------------------------------------------------------------------------------


def seam(name: str, make: Callable[[Any, Path], Callable[..., Any]]) -> Install:
    """Replace ``durable.<name>`` (as probes.py calls it) with ``make(real, root)``."""

    def install(patch: pytest.MonkeyPatch, root: Path, stack: contextlib.ExitStack) -> None:
        patch.setattr(durable, name, make(getattr(durable, name), root))

    return install


def failing(name: str, when: Callable[[Path, str], bool], code: int) -> Install:
    """``durable.<name>(path, ...)`` fails with ``code`` where ``when(root, path)``."""

    def make(real: Callable[..., Any], root: Path) -> Callable[..., Any]:
        def fake(path: str, *args: Any, **kwargs: Any) -> Any:
            if when(root, path):
                raise oserror(code, path)
            return real(path, *args, **kwargs)

        return fake

    return seam(name, make)


Behave = Callable[[int, Callable[[], Any]], Any]


def numbered(name: str, behave: Behave) -> Install:
    """The probe's calls of the lock function ``durable.<name>(fd, label, ...)``, numbered
    from 1, go through ``behave(n, real_call)``; the init lock's calls are left alone."""

    def make(real: Callable[..., Any], root: Path) -> Callable[..., Any]:
        calls = itertools.count(1)

        def fake(fd: int, label: str, **kwargs: Any) -> Any:
            if PROBE_PREFIX not in label:
                return real(fd, label, **kwargs)
            return behave(next(calls), lambda: real(fd, label, **kwargs))

        return fake

    return seam(name, make)


def nth(n: int, instead: Callable[[], Any]) -> Behave:
    return lambda call, real: instead() if call == n else real()


def raising(code: int) -> Callable[..., Any]:
    def fake(*args: Any, **kwargs: Any) -> Any:
        raise oserror(code)

    return fake


def module_seen_by_probes(name: str, module: types.ModuleType, **fakes: Any) -> Install:
    """Give probes.py (only) a copy of ``module`` with some functions replaced: for ``fcntl``
    the only caller there is the forked lock-probe child."""

    def install(patch: pytest.MonkeyPatch, root: Path, stack: contextlib.ExitStack) -> None:
        patch.setattr(probes, name, types.SimpleNamespace(**{**vars(module), **fakes}))

    return install


def in_probe(root: Path, path: str) -> bool:
    return PROBE_PREFIX in path


def renamed(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "rename-target"))


def with_stale_probe_directory(install: Install) -> Install:
    def both(patch: pytest.MonkeyPatch, root: Path, stack: contextlib.ExitStack) -> None:
        (root / (PROBE_PREFIX + "0123456789abcdef") / "nested").mkdir(parents=True)
        install(patch, root, stack)

    return both


# The case table (kept one case to a statement, as a table)
# fmt: off

# --- the probe directory, its files, and clearing stale ones ---------------------------------

add("probe directory cannot be created", failing("mkdir", in_probe, errno.EROFS),
    *step("run_probes", "create the probe directory"))
add("probe directory cannot be removed", failing("remove_tree", in_probe, errno.EBUSY),
    *step("run_probes", "remove the probe directory"))
add("stale probe directory cannot be removed",
    with_stale_probe_directory(failing("remove_tree", in_probe, errno.EBUSY)),
    *step("clear_stale_probe_directories", "remove a stale probe directory"))
_OTHER = "run_probes:CapabilityProbeError(f'a capability probe failed: {exc}')"
for _code in (errno.ENOSPC, errno.EIO):
    add(f"probe files cannot be written ({errno.errorcode[_code]})",
        module_seen_by_probes("os", os, write=raising(_code)),
        "a capability probe failed: " + re.escape(f"[Errno {_code}]"), _OTHER)


def _listdir(path: str) -> list[str]:
    if os.path.basename(path).startswith("rename-"):
        raise oserror(errno.EIO, path)
    return os.listdir(path)


add("probe trees cannot be read back", module_seen_by_probes("os", os, listdir=_listdir),
    "a capability probe failed: .*Input/output error", _OTHER)

# --- flock: calls 1 and 2 lock the two descriptors, 3 relocks the second -----------------

for _n, _what in ((1, "lock the first descriptor"), (2, "lock the second descriptor"),
                  (3, "relock after release")):
    add(f"flock call {_n} fails", numbered("flock", nth(_n, raising(errno.ENOLCK))),
        *step("probe_flock", _what))
for _n, _what in ((1, "unlock the first descriptor"), (2, "unlock the second descriptor")):
    add(f"funlock call {_n} fails", numbered("funlock", nth(_n, raising(errno.ENOLCK))),
        *step("probe_flock", _what))
add("flock refuses an uncontended lock", numbered("flock", nth(1, lambda: False)),
    *fail("probe_flock", "an uncontended exclusive flock was refused"))
add("flock never excludes (claims every lock, takes none)",
    numbered("flock", lambda call, real: True),
    *fail("probe_flock", "flock did not exclude a second open file description"))
_RELOCK = fail("probe_flock", "flock could not be reacquired after release")
add("funlock never releases", numbered("funlock", lambda call, real: None), *_RELOCK)
add("flock refuses the relock", numbered("flock", nth(3, lambda: False)), *_RELOCK)

# --- POSIX record locks: call 1 locks, call 2 unlocks ---------------------------------------

_POSIX = "probe_posix_record_lock"
add("record lock fails", numbered("posix_lock", nth(1, raising(errno.ENOLCK))),
    *step(_POSIX, "take the record lock"))
add("record lock release fails", numbered("posix_lock", nth(2, raising(errno.ENOLCK))),
    *step(_POSIX, "release the record lock"))
add("record lock is refused uncontended", numbered("posix_lock", nth(1, lambda: False)),
    *fail(_POSIX, "an uncontended POSIX record lock was refused"))
_TOOK = fail(_POSIX, "a child process took a POSIX record lock its parent holds")
add("record lock is taken in name only", numbered("posix_lock", nth(1, lambda: True)), *_TOOK)
add("the child's lockf ignores the parent's lock",
    module_seen_by_probes("fcntl", fcntl, lockf=lambda *args: None), *_TOOK)
_BLOCKED = fail(_POSIX, "a child process could not take a released POSIX record lock")
add("record lock release does not release", numbered("posix_lock", nth(2, lambda: True)),
    *_BLOCKED)
add("the child's lockf never succeeds",
    module_seen_by_probes("fcntl", fcntl, lockf=raising(errno.EAGAIN)), *_BLOCKED)
add("the lock-probe child is killed",
    module_seen_by_probes("fcntl", fcntl, lockf=lambda *a: os.kill(os.getpid(), signal.SIGKILL)),
    *fail("_child_can_lock", "the lock-probe process did not exit normally"))
add("the lock-probe child cannot be forked",
    module_seen_by_probes("os", os, fork=raising(errno.EAGAIN)),
    "cannot create the lock-probe process: ",
    "_child_can_lock:CapabilityProbeError(f'cannot create the lock-probe process: {exc}')",
)

# --- fsync: a missing file or directory sync (EINVAL where unsupported, EIO) ---------------

FSYNC_FAULTS: dict[str, tuple[str, Callable[[Path, str], bool], tuple[str, str]]] = {
    "a file": ("fsync_file", in_probe, step("probe_fsync", "sync a file")),
    "the probe directory": (
        "fsync_dir",
        lambda root, path: PROBE_PREFIX in path and not renamed(path),
        step("probe_fsync", "sync the probe directory"),
    ),
    "the store root while probing": (
        "fsync_dir",
        lambda root, path: path == str(root) and bool(probe_dirs(root)),
        step("probe_fsync", "sync the store root"),
    ),
    "the rename parent": (
        "fsync_dir",
        lambda root, path: PROBE_PREFIX in path and renamed(path),
        step("probe_noreplace_rename", "sync the rename parent"),
    ),
    "the store root after probing": (
        "fsync_dir",
        lambda root, path: path == str(root) and not probe_dirs(root),
        step("run_probes", "sync the store root"),
    ),
}
for (_name, (_function, _when, _expected)), _code in itertools.product(
    FSYNC_FAULTS.items(), (errno.EINVAL, errno.EIO)
):
    add(f"fsync of {_name} fails ({errno.errorcode[_code]})", failing(_function, _when, _code),
        _expected[0] + re.escape(f"[Errno {_code}]"), _expected[1])

# --- no-replace rename: fakes of durable.rename_noreplace -----------------------------------

_RENAME = "probe_noreplace_rename"
_UNAVAILABLE = f"{_RENAME}:_fail(f'no-replace rename is unavailable here: {{exc}}')"
_REPLACED = f"{_RENAME}:_fail(f'no-replace rename replaced {{os.path.basename(destination)}}')"
_HOLDS = "_expect_tree:_fail(f'{os.path.basename(path)} changed: holds {names}')"
_CONTENT = "_expect_tree:_fail(f'{os.path.basename(path)}/{name} changed content')"


def renaming(rename: Callable[[str, str], None]) -> Install:
    return seam("rename_noreplace", lambda real, root: rename)


def exists(destination: str) -> FileExistsError:
    return FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)


def refuse_taken(destination: str) -> None:
    if os.path.lexists(destination):
        raise exists(destination)


def replace_anything(source: str, destination: str) -> None:
    shutil.rmtree(destination, ignore_errors=True)
    os.rename(source, destination)


def replace_empty(source: str, destination: str) -> None:
    """os.rename, with only a populated directory refused (as EEXIST)."""
    try:
        os.rename(source, destination)
    except OSError as exc:
        if exc.errno != errno.ENOTEMPTY:
            raise
        raise exists(destination) from exc


def refuse_after_moving_the_source(source: str, destination: str) -> None:
    for name in os.listdir(source):
        os.rename(os.path.join(source, name), os.path.join(destination, name + ".moved"))
    raise exists(destination)


def refuse_after_emptying(source: str, destination: str) -> None:
    for name in os.listdir(destination):
        os.unlink(os.path.join(destination, name))
    raise exists(destination)


def refuse_after_rewriting(source: str, destination: str) -> None:
    for name in os.listdir(destination):
        Path(destination, name).write_bytes(b"overwritten\n")
    raise exists(destination)


def refuse_after_filling_empty(source: str, destination: str) -> None:
    if not os.listdir(destination):
        shutil.copytree(source, destination, dirs_exist_ok=True)
    raise exists(destination)


def always_refuse(source: str, destination: str) -> None:
    raise exists(destination)


def copy_not_move(source: str, destination: str) -> None:
    refuse_taken(destination)
    shutil.copytree(source, destination)


def lose_the_files(source: str, destination: str) -> None:
    refuse_taken(destination)
    os.rename(source, destination)
    for name in os.listdir(destination):
        os.unlink(os.path.join(destination, name))


add("rename is plain os.rename", renaming(os.rename),
    "no-replace rename is unavailable here: .*Directory not empty", _UNAVAILABLE)
for _code in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
    add(f"rename is unavailable ({errno.errorcode[_code]})", renaming(raising(_code)),
        "no-replace rename is unavailable here: " + re.escape(f"[Errno {_code}]"),
        _UNAVAILABLE)
add("rename replaces a populated destination", renaming(replace_anything),
    "no-replace rename replaced rename-populated", _REPLACED)
add("rename replaces an empty destination", renaming(replace_empty),
    "no-replace rename replaced rename-empty", _REPLACED)
add("refusal moves the source's files", renaming(refuse_after_moving_the_source),
    re.escape("rename-source changed: holds []"), f"{_RENAME}:_expect_tree(source)",
    _HOLDS)
add("refusal empties the populated destination", renaming(refuse_after_emptying),
    re.escape("rename-populated changed: holds []"), f"{_RENAME}:_expect_tree(populated)",
    _HOLDS)
add("refusal rewrites a destination file", renaming(refuse_after_rewriting),
    "rename-populated/resident changed content", f"{_RENAME}:_expect_tree(populated)",
    _CONTENT)
add("refusal fills the empty destination", renaming(refuse_after_filling_empty),
    re.escape("rename-empty changed: holds ['payload']"), f"{_RENAME}:_expect_tree(empty)",
    _HOLDS)
add("rename to a free name is refused", renaming(always_refuse),
    "no-replace rename to a free name failed: .*File exists",
    f"{_RENAME}:_fail(f'no-replace rename to a free name failed: {{exc}}')")
add("rename copies instead of moving", renaming(copy_not_move),
    *fail(_RENAME, "the renamed source still exists"))
add("rename loses the moved files", renaming(lose_the_files),
    re.escape("rename-target changed: holds []"), f"{_RENAME}:_expect_tree(target)",
    _HOLDS)

# --- the WAL pair: fakes of sql.execute on the probe's two connections ---------------------

Run = Callable[[sqlite3.Connection, str], list[Any]]
Rewrite = Callable[[str, str, Run, sqlite3.Connection], Any]


def rewriting(rewrite: Rewrite) -> Install:
    """Route the probe's SQL through ``rewrite(role, statement, run, writer)``: role is
    "writer" or "reader" (the probe's first and second connection), ``run(connection,
    statement)`` runs a statement for real. None runs the statement unchanged. Statements
    on other connections are untouched."""

    def install(patch: pytest.MonkeyPatch, root: Path, stack: contextlib.ExitStack) -> None:
        real = sql.execute
        order: list[sqlite3.Connection] = []

        def execute(connection: sqlite3.Connection, text: str, params: Any = ()) -> list[Any]:
            files = [row[2] for row in connection.execute("PRAGMA database_list")]
            if not any(PROBE_PREFIX in name for name in files):
                return real(connection, text, params)
            if not any(connection is seen for seen in order):
                order.append(connection)
            role = "writer" if connection is order[0] else "reader"
            result = rewrite(role, text, lambda c, s: real(c, s, params), order[0])
            return real(connection, text, params) if result is None else result

        patch.setattr(sql, "execute", execute)

    return install


def on(role: str, statement: str, result: Callable[[Run, sqlite3.Connection], Any]) -> Rewrite:
    def rewrite(who: str, text: str, run: Run, writer: sqlite3.Connection) -> Any:
        return result(run, writer) if who == role and text.startswith(statement) else None

    return rewrite


def table_without(*replacements: tuple[str, str]) -> Rewrite:
    def rewrite(who: str, text: str, run: Run, writer: sqlite3.Connection) -> Any:
        if not text.startswith("CREATE TABLE probe"):
            return None
        for old, new in replacements:
            assert old in text
            text = text.replace(old, new)
        return run(writer, text)

    return rewrite


_PAIR = "_probe_wal_pair"
_COUNT = "SELECT count(*) FROM probe"
add("a second immediate WAL writer is not excluded",
    rewriting(on("reader", "BEGIN IMMEDIATE", lambda run, writer: [])),
    *fail(_PAIR, "a second immediate write transaction was not excluded"))
add("uncommitted data is visible (reads go through the writer)",
    rewriting(on("reader", _COUNT, lambda run, writer: run(writer, _COUNT))),
    *fail(_PAIR, "uncommitted data was visible to another connection"))
add("committed data is never visible",
    rewriting(on("reader", _COUNT, lambda run, writer: [(0,)])),
    *fail(_PAIR, "committed data was not visible to another connection"))
add("a rollback commits", rewriting(on("writer", "ROLLBACK", lambda run, w: run(w, "COMMIT"))),
    *fail(_PAIR, "rolled-back data was visible"))
_BAD_ROW = fail(_PAIR, "STRICT typing or the JSON object check did not refuse a bad row")
add("no STRICT typing",
    rewriting(table_without(("id INTEGER PRIMARY KEY", "id PRIMARY KEY"), (") STRICT", ")"))),
    *_BAD_ROW)
add("no JSON object CHECK",
    rewriting(table_without(("CHECK (json_valid(doc) AND json_type(doc) = 'object')", ""))),
    *_BAD_ROW)
add("JSON functions read nothing",
    rewriting(on("reader", "SELECT json_extract", lambda run, writer: [(None,)])),
    *fail(_PAIR, "JSON functions did not read a stored object"))
add("a TRUNCATE checkpoint stays busy",
    rewriting(on("writer", "PRAGMA wal_checkpoint", lambda run, writer: [(1, -1, -1)])),
    *fail(_PAIR, "a WAL checkpoint did not complete"))
add("WAL mode is declined",
    rewriting(on("writer", "PRAGMA journal_mode = WAL", lambda run, writer: [("delete",)])),
    "the WAL probe failed: journal_mode=WAL was refused",
    "probe_wal:CapabilityProbeError(f'the WAL probe failed: {exc.message}')")


def sqlite_writes_failing(code: int) -> Install:
    def install(patch: pytest.MonkeyPatch, root: Path, stack: contextlib.ExitStack) -> None:
        stack.enter_context(sqlite_kernel.failing_writes(code))

    return install


for _code, _text in ((errno.EIO, "disk I/O error"), (errno.ENOSPC, "database or disk is full")):
    add(f"SQLite's writes fail ({errno.errorcode[_code]})", sqlite_writes_failing(_code),
        f"the WAL probe failed: {_text}",
        "probe_wal:CapabilityProbeError(f'the WAL probe failed: {exc}')")

# fmt: on

# --- the tests -----------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_fake_kernel_lacking_a_capability_refuses_the_store(
    root: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    check = CASES[name]
    with monkeypatch.context() as patch, contextlib.ExitStack() as stack:
        check.install(patch, root, stack)
        with pytest.raises(CapabilityProbeError) as caught:
            RunStore.open(root)
    error = caught.value
    assert error.code == "capability_probe_failed"
    assert re.search(check.message, error.message), error.message
    lines = raised_through(error)
    for site in check.sites:
        first, last = SITES[site]
        assert any(first <= line <= last for line in lines), (site, lines, error.message)
    # Nothing half-written: no database file, only the init lock and probe directories,
    # which a refusal leaves for the next open to clear (as probes.run_probes documents).
    names = os.listdir(root)
    assert all(n == INIT_LOCK_NAME or n.startswith(PROBE_PREFIX) for n in names), names
    with RunStore.open(root) as store:  # the real kernel
        assert store.database_path == str(root / "run.sqlite3")
    assert probe_dirs(root) == []


def test_every_probe_check_has_a_fake_kernel_case() -> None:
    """Every check in probes.py (each ``_fail`` message, ``_step``, ``_expect_tree`` and
    direct CapabilityProbeError) has a case above, and every case's check exists: a check
    added without a fake-kernel case fails here."""
    declared = {site for check in CASES.values() for site in check.sites}
    assert sorted(set(SITES) - declared) == [], "checks without a fake-kernel case"
    assert sorted(declared - set(SITES)) == [], "cases for checks probes.py does not have"
    source = Path(PROBES_FILE).read_text(encoding="utf-8")
    calls = len(re.findall(r"\b(?:_fail|_step)\(", source)) - 2  # minus the definitions
    assert calls == sum(key.split(":")[1].startswith(("_fail(", "_step(")) for key in SITES)


# --- no-replace rename against a destination its checks cannot see --------------------------

Rename = Callable[[str, str], None]
Snapshot = tuple[str, dict[str, bytes]] | None


def snapshot(path: Path) -> Snapshot:
    if path.is_dir():
        return "directory", {
            str(item.relative_to(path)): item.read_bytes() if item.is_file() else b"<dir>"
            for item in sorted(path.rglob("*"))
        }
    return ("file", {"": path.read_bytes()}) if path.exists() else None


@contextlib.contextmanager
def blind_to(destination: str) -> Iterator[None]:
    """Make the usual existence checks report ``destination`` missing."""
    hidden = os.path.abspath(destination)

    def is_hidden(path: Any) -> bool:
        try:
            return os.path.abspath(os.fsdecode(os.fspath(path))) == hidden
        except TypeError:  # a descriptor
            return False

    def stat_like(real: Callable[..., Any]) -> Callable[..., Any]:
        def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
            if is_hidden(path):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
            return real(path, *args, **kwargs)

        return fake

    def predicate(real: Callable[..., bool]) -> Callable[..., bool]:
        return lambda path, *args, **kwargs: not is_hidden(path) and real(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        for name in ("stat", "lstat"):
            patch.setattr(os, name, stat_like(getattr(os, name)))
        patch.setattr(os, "access", predicate(os.access))
        for name in ("exists", "lexists", "isdir", "isfile", "islink"):
            patch.setattr(os.path, name, predicate(getattr(os.path, name)))
        yield


LAYOUTS = {  # destination: what sits there
    "empty directory": lambda path: path.mkdir(),
    "populated directory": lambda path: (path.mkdir(), (path / "resident").write_bytes(b"r\n")),
    "file": lambda path: path.write_bytes(b"resident file\n"),
}
SOURCES = {
    "directory": lambda path: (path.mkdir(), (path / "payload").write_bytes(b"p\n")),
    "file": lambda path: path.write_bytes(b"payload file\n"),
}


def assert_refuses(rename: Rename, tmp_path: Path, source_kind: str, layout: str) -> None:
    """``rename`` must refuse the destination with FileExistsError even though every
    existence check says it is free, leaving source and destination as they were."""
    source, destination = tmp_path / "source", tmp_path / "destination"
    SOURCES[source_kind](source)
    LAYOUTS[layout](destination)
    before = snapshot(source), snapshot(destination)
    with blind_to(str(destination)):
        try:
            rename(str(source), str(destination))
        except FileExistsError:
            pass
        except OSError as exc:
            raise AssertionError(f"refused with {exc!r}, not FileExistsError") from exc
        else:
            raise AssertionError(f"renamed over the {layout}")
    assert (snapshot(source), snapshot(destination)) == before


RENAME_CASES = [(source, layout) for source in SOURCES for layout in LAYOUTS]


@pytest.mark.parametrize(("source_kind", "layout"), RENAME_CASES)
def test_noreplace_rename_refuses_a_destination_its_checks_cannot_see(
    tmp_path: Path, source_kind: str, layout: str
) -> None:
    assert_refuses(durable.rename_noreplace, tmp_path, source_kind, layout)


def check_then_rename(check: Callable[[str], bool]) -> Rename:
    def rename(source: str, destination: str) -> None:
        if check(destination):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), destination)
        os.rename(source, destination)

    return rename


def _stats(function: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(path: str) -> bool:
        try:
            function(path)
        except FileNotFoundError:
            return False
        return True

    return check


CHECKS: dict[str, Callable[[str], bool]] = {  # looked up at call time, as an emulation would
    "os.path.exists": lambda path: os.path.exists(path),
    "os.path.lexists": lambda path: os.path.lexists(path),
    "os.lstat": _stats(lambda path: os.lstat(path)),
    "os.stat": _stats(lambda path: os.stat(path)),
    "os.access": lambda path: os.access(path, os.F_OK),
}


@pytest.mark.parametrize(("source_kind", "layout"), RENAME_CASES)
@pytest.mark.parametrize("check", sorted(CHECKS))
def test_teeth_a_check_then_rename_emulation_is_caught(
    tmp_path: Path, check: str, source_kind: str, layout: str
) -> None:
    """The test above fails a check-then-rename rename_noreplace, whatever it checks with,
    for every layout (whether os.rename then replaces or fails with another errno)."""
    with pytest.raises(AssertionError):
        assert_refuses(check_then_rename(CHECKS[check]), tmp_path, source_kind, layout)


def test_teeth_the_emulation_passes_without_the_race(tmp_path: Path) -> None:
    """Unblinded, the emulation refuses like the real thing: only the race exposes it."""
    destination = tmp_path / "destination"
    destination.mkdir()
    (tmp_path / "source").mkdir()
    with pytest.raises(FileExistsError):
        check_then_rename(CHECKS["os.path.lexists"])(str(tmp_path / "source"), str(destination))
