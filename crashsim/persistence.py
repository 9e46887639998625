"""What a power cut may leave: a conservative POSIX persistence model over photographs of
the store root, for :mod:`runstore.crashsim.powerloss`.

The model (SPEC §14, "Power loss"). Each file and directory is an *identity* (an inode seen
in the photographs: one that disappears and comes back is a new identity). Each identity
has the version last seen (in the page cache) and its *durable* version: for a file, its
bytes and mode at its last fsync (a file never synced in the run has no bytes); for a
directory, its entries (name to identity) at its last fsync (a directory made in the run
and never synced has none). Everything in the fixture is durable when the run starts. A
power cut may then leave, independently:

* for each directory entry that differs between a directory's seen and durable entries
  (made, renamed or removed since the directory's last fsync): either, so a created entry
  may vanish, a removed one come back (with its identity's durable contents), and a
  renamed identity be found under its new name, its old one, both or neither;
* for each file whose seen bytes are not its durable bytes: the durable bytes, the seen
  bytes, or half of the seen bytes (a write partly present);
* for the database (``run.sqlite3`` with its ``-wal`` and ``-shm``), what SQLite guarantees
  in WAL mode with ``synchronous=FULL``: its files as they were right after the last
  statement that committed outside a transaction (a COMMIT, or a write in autocommit), or
  as they are at the cut (which holds that commit or a later one). The ``run.sqlite3``
  entry in the root follows the directory rule like any other; when it is lost, so are the
  sidecars (their entries are SQLite's to sync).

Two departures from "everything in the fixture is durable": a scenario's *unsynced* paths
(what a process that died before its syncs leaves while the machine stays up) are not
durable at the start, with everything beneath them; and when the photographs are of the
root's parent (a run that creates its root or an export directory beside it,
:func:`~runstore.crashsim.photographs.photograph_parent`), the root is at
:data:`~runstore.crashsim.photographs.STORE` and its own entry follows the directory rule
like any other.

Rules of this file: pure bookkeeping over photographs
(:mod:`runstore.crashsim.photographs`) and the persistence effects the durability seam
recorded (:data:`runstore.durable.Recorder`); no process is forked and no store opened
here. Paths are relative to what is photographed ("" is its top: the store root, or its
parent).
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import random
import re
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence

import attrs
from runstore.crashsim.images import Tree
from runstore.crashsim.photographs import DATABASE_FILES
from runstore.crashsim.photographs import PARENT_PREFIX
from runstore.crashsim.photographs import ROOT_PREFIX
from runstore.crashsim.photographs import Photo
from runstore.crashsim.photographs import inside
from runstore.store.probes import PROBE_PREFIX
from runstore.store.store_root import DATABASE_NAME


@attrs.frozen
class FileVersion:
    mode: int
    data: bytes
    link: bool = False
    """A symbolic link: ``data`` is its target, part of its creation (never undone)."""


@attrs.frozen
class DirVersion:
    mode: int
    entries: tuple[tuple[str, int], ...]
    """(name, identity) pairs, sorted by name."""

    def lookup(self) -> dict[str, int]:
        return dict(self.entries)


Version = FileVersion | DirVersion


@attrs.frozen
class Item:
    """One thing a power cut may undo: ``options[0]`` is what the page cache holds, the
    others what may be found instead. ``what`` names it for reports."""

    kind: str
    """"entry" (a directory entry), "data" (a file's bytes) or "database"."""
    identity: int
    name: str
    path: str
    """The entry's or file's path (relative to the root)."""
    options: tuple[object, ...]
    members: tuple[Item, ...] = ()
    """For a "group": the items it stands for (option 1 undoes each of them)."""

    @property
    def what(self) -> str:
        if self.kind == "entry":
            return f"entry {self.path}"
        if self.kind == "group":
            return f"everything in {self.path} ({len(self.members)} items)"
        return f"data of {self.path}" if self.kind == "data" else "the database's last commits"


@attrs.frozen
class Cut:
    """The page cache's state at one cut and what may be undone: each state of the cut is
    one option per item (:meth:`choices`), made into a tree by :meth:`materialize`."""

    root: int
    seen: Mapping[int, Version]
    items: tuple[Item, ...]
    database: Mapping[str, bytes]
    """The database files as they are at the cut (absent ones left out)."""
    store: str = ""
    """Where the store root is in the tree ("" unless the root's parent is modelled)."""

    def count(self) -> int:
        total = 1
        for item in self.items:
            total *= len(item.options)
        return total

    def choices(self, limit: int, seed: int, cap: int | None = None) -> list[tuple[int, ...]]:
        """Every choice vector when there are at most ``limit`` (and ``cap``); otherwise
        the page cache's state, everything undone, each item undone alone (each option),
        each item alone kept, and seeded random vectors up to ``limit``. With ``cap``, at
        most ``cap`` vectors: the page cache's state, everything undone, then items undone
        alone in a seeded order."""
        sizes = [len(item.options) for item in self.items]
        if cap is not None and self.count() > cap:
            return _capped(sizes, cap, random.Random(seed))
        if self.count() <= limit:
            return list(itertools.product(*(range(size) for size in sizes)))
        chosen: dict[tuple[int, ...], None] = {}
        nothing = tuple(0 for _ in sizes)
        everything = tuple(size - 1 for size in sizes)
        chosen[nothing] = None
        chosen[everything] = None
        for index, size in enumerate(sizes):
            for option in range(1, size):
                chosen[(*nothing[:index], option, *nothing[index + 1 :])] = None
            chosen[(*everything[:index], 0, *everything[index + 1 :])] = None
        generator = random.Random(seed)
        while len(chosen) < limit:
            chosen[tuple(generator.randrange(size) for size in sizes)] = None
        return list(chosen)

    def materialize(self, choice: Sequence[int]) -> Tree:
        """The tree a power cut leaves under ``choice`` (see the module docstring), in the
        format of :func:`runstore.crashsim.images.read_tree` (database files included)."""
        entries: dict[int, dict[str, int]] = {}
        files: dict[int, FileVersion] = {}
        database = self.database
        for item, option in _expanded(self.items, choice):
            value = item.options[option]
            if item.kind == "entry":
                table = entries.setdefault(item.identity, {})
                table[item.name] = value if isinstance(value, int) else -1
            elif item.kind == "data":
                assert isinstance(value, FileVersion)
                files[item.identity] = value
            else:
                assert isinstance(value, dict)
                database = value
        tree: Tree = []
        self._walk(self.root, "", entries, files, database, (), tree)
        return tree

    def _walk(
        self,
        identity: int,
        relative: str,
        entries: dict[int, dict[str, int]],
        files: dict[int, FileVersion],
        database: Mapping[str, bytes],
        ancestors: tuple[int, ...],
        tree: Tree,
    ) -> None:
        version = self.seen[identity]
        assert isinstance(version, DirVersion)
        table = version.lookup()
        table.update(entries.get(identity, {}))
        for name in sorted(table):
            child = table[name]
            path = f"{relative}/{name}" if relative else name
            if child < 0 or child in ancestors:
                continue
            if relative == self.store and name == DATABASE_NAME:
                for file in DATABASE_FILES:
                    if file in database or file == DATABASE_NAME:
                        tree.append((inside(relative, file), "f", 0o600, database.get(file, b"")))
                continue
            child_version = self.seen[child]
            if isinstance(child_version, DirVersion):
                tree.append((path, "d", child_version.mode, b""))
                self._walk(child, path, entries, files, database, (*ancestors, identity), tree)
            else:
                chosen = files.get(child, child_version)
                tree.append((path, "l" if chosen.link else "f", chosen.mode, chosen.data))


class Disk:
    """The persistence model of one run: fed the photograph at each boundary, in order,
    with the effects recorded since the previous one; :meth:`cut` says what a power cut
    at the latest photograph may leave."""

    def __init__(
        self,
        start: Photo,
        database: Mapping[str, bytes],
        unsynced: Sequence[str] = (),
        *,
        store: str = "",
    ) -> None:
        self.store = store
        """Where the store root is in the photographs: "" (they are of the root), or
        :data:`STORE` (they are of its parent, :func:`photograph_parent`)."""
        self._database_files = frozenset(inside(store, name) for name in DATABASE_FILES)
        self._database_name = inside(store, DATABASE_NAME)
        self._database = dict(database)
        self._safe_database = dict(database)
        self._next = 0
        self._by_ino: dict[int, int] = {}
        self._paths: dict[str, int] = {}
        self._last_path: dict[int, str] = {}
        self._aliases: dict[int, set[str]] = {}
        self.seen: dict[int, Version] = {}
        self.durable: dict[int, Version] = {}
        self._observe(start)
        self.durable = dict(self.seen)
        self._forget(start, [inside(store, pattern) for pattern in unsynced])

    def _forget(self, start: Photo, patterns: Sequence[str]) -> None:
        """Make each fixture path matching one of ``patterns`` (``fnmatch``, relative to
        the root; never the root or a database file) never synced, with everything beneath
        it: its entry is not in its directory's durable entries, a file has no durable
        bytes, a directory no durable entries."""
        matched = sorted(
            relative
            for relative in start
            if relative
            and relative not in self._database_files
            and any(fnmatch.fnmatchcase(relative, pattern) for pattern in patterns)
        )
        for relative in matched:
            parent = self._paths[os.path.dirname(relative)]
            kept = self.durable.get(parent)
            if isinstance(kept, DirVersion):
                name = os.path.basename(relative)
                entries = tuple(entry for entry in kept.entries if entry[0] != name)
                self.durable[parent] = DirVersion(kept.mode, entries)
            for path, identity in self._paths.items():
                if path == relative or path.startswith(relative + "/"):
                    self.durable.pop(identity, None)

    def observe(
        self,
        photo: Photo,
        effects: Sequence[Sequence[object]],
        database: Mapping[str, bytes] | None = None,
        *,
        safe: bool = False,
    ) -> list[tuple[str, str]]:
        """Take the photograph at the next boundary, the effects recorded before it and,
        when read there, the database files; ``safe`` when SQLite has made the database
        durable there (its files must then be given). Returns what the photograph shows
        happened to files outside the seam since the previous one: ("create", path) and
        ("write", path), which the seam does not record."""
        derived = self._observe(photo)
        for effect, *paths in effects:
            if effect not in ("fsync", "fsync_dir"):
                continue
            relative = self._resolve(str(paths[0]))
            if relative is None or relative in self._database_files:
                continue
            identity = self._paths[relative]
            self.durable[identity] = self.seen[identity]
        if database is not None:
            self._database = dict(database)
            if safe:
                self._safe_database = dict(database)
        elif safe:
            raise ValueError("a safe point needs the database files")
        return derived

    def cut(self) -> Cut:
        """The items a power cut now may undo, found from the root through seen and
        durable entries alike."""
        items: list[Item] = []
        root = self._paths[""]
        names = self._names()
        queue, visited = [root], {root}
        while queue:
            identity = queue.pop(0)
            seen, durable = self.seen[identity], self.durable.get(identity)
            if isinstance(seen, FileVersion):
                items.extend(self._file_items(identity, seen, durable, names))
                continue
            current = seen.lookup()
            kept = durable.lookup() if isinstance(durable, DirVersion) else {}
            for name in sorted(set(current) | set(kept)):
                now, before = current.get(name, -1), kept.get(name, -1)
                if now != before:
                    where = f"{names.get(identity, '?')}/{name}".lstrip("/")
                    items.append(Item("entry", identity, name, where, (now, before)))
                for child in (now, before):
                    if child >= 0 and child not in visited:
                        visited.add(child)
                        queue.append(child)
        if self._database != self._safe_database:
            options = (dict(self._database), dict(self._safe_database))
            name = self._database_name
            items.append(Item("database", -1, DATABASE_NAME, name, options))
        grouped = tuple(_grouped(items, self.store))
        return Cut(root, dict(self.seen), grouped, dict(self._database), self.store)

    def _file_items(
        self,
        identity: int,
        seen: FileVersion,
        durable: Version | None,
        names: Mapping[int, str],
    ) -> Iterator[Item]:
        if names.get(identity) == self._database_name:
            return
        # A file never synced in the run keeps its mode (metadata) but none of its bytes.
        kept = durable if isinstance(durable, FileVersion) else FileVersion(seen.mode, b"")
        if seen == kept or seen.link:
            return
        options: list[FileVersion] = [seen, kept]
        half = FileVersion(seen.mode, seen.data[: len(seen.data) // 2])
        if half not in options:
            options.append(half)
        yield Item("data", identity, "", names.get(identity, "?"), tuple(options))

    def _observe(self, photo: Photo) -> list[tuple[str, str]]:
        derived: list[tuple[str, str]] = []
        by_ino: dict[int, int] = {}
        paths: dict[str, int] = {}
        for relative, node in photo.items():
            if relative in self._database_files and relative != self._database_name:
                continue  # the sidecars: SQLite's, modelled with the database
            identity = self._by_ino.get(node.ino)
            previous = self.seen.get(identity) if identity is not None else None
            if identity is None or _kind(previous) != node.kind:
                identity = self._next
                self._next += 1
                if node.kind == "f":
                    derived.append(("create", relative))
            elif (
                node.kind == "f"
                and isinstance(previous, FileVersion)
                and previous.data != node.data
                and relative != self._database_name
            ):
                derived.append(("write", relative))
            by_ino[node.ino] = identity
            paths[relative] = identity
        children: dict[int, list[tuple[str, int]]] = {
            paths[p]: [] for p, node in photo.items() if node.kind == "d"
        }
        for relative, identity in paths.items():
            if relative:
                parent = paths[os.path.dirname(relative)]
                children[parent].append((os.path.basename(relative), identity))
        for relative, identity in paths.items():
            node = photo[relative]
            if node.kind == "d":
                self.seen[identity] = DirVersion(node.mode, tuple(sorted(children[identity])))
            elif relative == self._database_name:
                self.seen[identity] = FileVersion(node.mode, b"")
            else:
                self.seen[identity] = FileVersion(node.mode, node.data, node.kind == "l")
        self._by_ino, self._paths = by_ino, paths
        for relative, identity in paths.items():
            self._last_path[identity] = relative
            self._aliases.setdefault(identity, set()).add(relative)
        return derived

    def _resolve(self, path: str) -> str | None:
        """The relative path of a recorded effect's normalized path (None outside what is
        photographed); a normalized random suffix (a probe directory's, an export
        temporary's) is matched against the photograph."""
        if path == ROOT_PREFIX:
            return self.store
        if path.startswith(ROOT_PREFIX + "/"):
            relative = inside(self.store, path[len(ROOT_PREFIX) + 1 :])
        elif self.store and path.startswith(ROOT_PREFIX):  # a sibling: <root>.export
            relative = self.store + path[len(ROOT_PREFIX) :]
        elif self.store and path == PARENT_PREFIX:
            return ""
        elif self.store and path.startswith(PARENT_PREFIX + "/"):
            relative = path[len(PARENT_PREFIX) + 1 :]
        else:
            return None
        if relative in self._paths or "*" not in relative:
            return relative
        pattern = re.compile(re.escape(relative).replace(r"\*", "[0-9a-f]+"))
        matches = [p for p in self._paths if pattern.fullmatch(p)]
        if len(matches) != 1:
            raise RuntimeError(f"cannot tell which path {path} is: {matches}")
        return matches[0]

    def aliases(self, item: Item) -> set[str]:
        """Every path the thing ``item`` is about was seen under (for reports)."""
        if item.kind == "database":
            return {self._database_name}
        if item.kind == "data":
            return set(self._aliases.get(item.identity, ()))
        if item.kind == "group":
            return set().union(*(self.aliases(member) for member in item.members))
        found = {item.path}
        for child in item.options:
            if isinstance(child, int) and child >= 0:
                found |= self._aliases.get(child, set())
        return found

    def _names(self) -> dict[int, str]:
        """A name for each identity: its current path, else the last one it had."""
        return dict(self._last_path)


def _capped(sizes: Sequence[int], cap: int, generator: random.Random) -> list[tuple[int, ...]]:
    """At most ``cap`` choice vectors: nothing undone, everything undone, then single
    undos (each item, each option) in a seeded order."""
    nothing = tuple(0 for _ in sizes)
    chosen = dict.fromkeys([nothing, tuple(size - 1 for size in sizes)])
    singles = [
        (*nothing[:index], option, *nothing[index + 1 :])
        for index, size in enumerate(sizes)
        for option in range(1, size)
    ]
    generator.shuffle(singles)
    for single in singles:
        if len(chosen) >= cap:
            break
        chosen[single] = None
    return list(chosen)[:cap]


def _grouped(items: list[Item], store: str) -> list[Item]:
    """``items`` with those inside each probe directory made one group: what a cut leaves
    there is never read (the next opening removes a probe directory whole, reading nothing
    in it), so only the two extremes are kept: all as seen, or all undone."""
    inside: dict[str, list[Item]] = {}
    kept: list[Item] = []
    prefix = f"{store}/" if store else ""
    for item in items:
        top, _, rest = item.path.removeprefix(prefix).partition("/")
        if item.path.startswith(prefix) and top.startswith(PROBE_PREFIX) and rest:
            inside.setdefault(prefix + top, []).append(item)
        else:
            kept.append(item)
    for top, members in sorted(inside.items()):
        kept.append(Item("group", -1, top, top, (0, 1), tuple(members)))
    return kept


def _expanded(items: Sequence[Item], choice: Sequence[int]) -> Iterator[tuple[Item, int]]:
    for item, option in zip(items, choice, strict=True):
        if item.kind == "group":
            yield from ((member, option) for member in item.members)
        else:
            yield item, option


def _kind(version: Version | None) -> str:
    if version is None:
        return ""
    if isinstance(version, DirVersion):
        return "d"
    return "l" if version.link else "f"
