"""Shared helpers for the publication tests (``conformance/test_publication_*.py``).

A :class:`PublicationWorld` is a :class:`writer_world.World` (a real store on a fresh root
driven in lockstep with the model) with shortcuts for the two publication entry points and
for looking at the files they leave: stages, completed objects, kernel locks, the
database's bytes. Publications made through :meth:`PublicationWorld.publish_artifact` and
:meth:`PublicationWorld.publish_finalization` run in lockstep (the model reads the same
payload back and consumes the same clock samples and stage tokens); a test that needs a
callback with side effects on the store calls ``world.store`` directly and does not
compare with the model afterwards.

The ``world`` fixture installs deterministic stage tokens (``runstore.store.publication.staging``'s
seam) for the store and the model alike and restores the previous source afterwards.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Censored
from runstore import Failed
from runstore import Next
from runstore import OwnedAttempt
from runstore import PublishedArtifact
from runstore import PublishedFinalization
from runstore import Reference
from runstore import RunStoreError
from runstore import Superseded
from runstore import TerminalOutcome
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.testing import fixtures as sc
from runstore.testing.lockstep import StageTokens
from runstore.testing.publishing import ClockScript
from runstore.testing.publishing import Payload
from runstore.testing.publishing import at
from runstore.testing.publishing import files

from conformance.writer.world import World

__all__ = ["ClockScript", "Payload", "at", "files"]

EXPIRES = 10_000
"""The reservation expiry of the deterministic scenarios."""
FAR = 2**62
"""An expiry beyond any real clock (for the scenarios that read ``time.time_ns``)."""
DATA = files(**{"data.bin": b"\x00\x01data", "notes/readme.txt": b"hello\n"})
"""An ordinary payload: a binary file and a nested text file."""


class PublicationWorld(World):
    """A :class:`World` with publication shortcuts and file probes."""

    @property
    def root(self) -> Path:
        return Path(self.store.root)

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    # --- scenarios ------------------------------------------------------------------------

    def executing(
        self,
        fixture: sc.SlotFixture,
        lease_id: str = "reservation-0",
        *,
        now: int = 1_000,
        expires: int = EXPIRES,
        register: bool = True,
    ) -> OwnedAttempt:
        """Register the fixture (unless told not to), reserve it under ``lease_id`` at
        ``now`` and walk to executing at ``now + 100 .. now + 103``."""
        if register:
            self.register(fixture)
        guard = self.start(fixture, lease_id, now=now, expires=expires)
        return self.walk(guard, sc.EXECUTION_PATH, now + 100)

    def finalizing(self, guard: OwnedAttempt, now: int) -> OwnedAttempt:
        """Enter finalizing without contending for the claim."""
        return self.advance(guard, AttemptState.FINALIZING, now)

    def ready_to_accept(
        self,
        fixture: sc.SlotFixture,
        *,
        now: int = 1_000,
        expires: int = EXPIRES,
        claim_expires: int | None = None,
    ) -> tuple[OwnedAttempt, PublishedArtifact]:
        """An attempt of ``fixture`` that holds the claim (``claim-0``) and has published
        (``publish_artifact``) and selected its observation at ``now + 200 .. now + 400``:
        everything ``Accepted`` needs. The claim expires with the reservation unless
        ``claim_expires`` says otherwise. Returns its guard and the observation's artifact."""
        guard = self.executing(fixture, now=now, expires=expires)
        claim_expiry = expires if claim_expires is None else claim_expires
        disposition = self.claim(guard, "claim-0", now + 200, claim_expiry)
        assert disposition.claimed
        guard = disposition.attempt
        result = files(**{"result.json": b'{"score":1}'})
        published = self.publish_artifact(guard, ArtifactKind.OBSERVATION, result, at(now + 300))
        observation = sc.observation(fixture.observation_slots[0], guard)
        self.observe(guard, observation, published.artifact, True, now + 400)
        return guard, published

    def terminal_scenario(self, name: str) -> tuple[OwnedAttempt, TerminalOutcome]:
        """A finalizing attempt and the outcome it may publish: ``accepted`` (claimed, its
        observation selected), ``censored`` and ``failed`` (finalizing without contending),
        ``superseded`` (a retry that lost the claim to the first attempt)."""
        fixture = sc.slot_fixture()
        if name == "accepted":
            return self.ready_to_accept(fixture)[0], Accepted()
        if name == "superseded":
            winner = self.executing(fixture)
            loser = self.start(fixture, "reservation-1", authorization=Next(retry=True), now=1_010)
            assert self.claim(winner, "claim-0", 1_200).claimed
            disposition = self.claim(loser, "claim-1", 1_300)
            assert not disposition.claimed
            return disposition.attempt, Superseded()
        guard = self.finalizing(self.executing(fixture), 1_500)
        if name == "censored":
            return guard, Censored(reason="budget")
        assert name == "failed"
        return guard, Failed(code="exit_status", details={"status": 3})

    # --- publication in lockstep ----------------------------------------------------------

    def publish_artifact(
        self,
        guard: OwnedAttempt,
        kind: ArtifactKind,
        payload: Payload,
        clock: ClockScript,
    ) -> PublishedArtifact:
        return self.lockstep(lambda w: w.publish_artifact(guard, kind, payload, clock.fresh()))

    def publish_finalization(
        self,
        guard: OwnedAttempt,
        outcome: TerminalOutcome,
        references: Sequence[Reference],
        payload: Payload,
        clock: ClockScript,
    ) -> PublishedFinalization:
        return self.lockstep(
            lambda w: w.publish_finalization(guard, outcome, references, payload, clock.fresh())
        )

    # --- files ----------------------------------------------------------------------------

    def stages(self) -> list[Path]:
        """The stage directories under ``artifacts/``, sorted."""
        if not self.artifacts.exists():
            return []
        return sorted(p for p in self.artifacts.iterdir() if p.name.startswith(".staging-"))

    def objects(self) -> list[Path]:
        """The completed objects (every entry of ``artifacts/`` but the stages), sorted."""
        if not self.artifacts.exists():
            return []
        return sorted(p for p in self.artifacts.iterdir() if not p.name.startswith(".staging-"))

    def database_bytes(self) -> dict[str, bytes]:
        """The bytes of the database and its WAL."""
        return {
            name: (self.root / name).read_bytes()
            for name in ("run.sqlite3", "run.sqlite3-wal")
            if (self.root / name).exists()
        }

    def artifact_rows(self) -> list[tuple[object, ...]]:
        return self.rows("SELECT id, kind, path, content_sha256, manifest_sha256 FROM artifacts")

    def lease(self, lease_id: str) -> tuple[object, ...]:
        """``(acquired_at_ns, expires_at_ns, released_at_ns, staging_path)`` of a lease."""
        (row,) = self.rows(
            "SELECT acquired_at_ns, expires_at_ns, released_at_ns, staging_path FROM leases "
            "WHERE id = ?",
            (lease_id,),
        )
        return row

    def stage_lease(self, number: int) -> tuple[object, ...]:
        """:meth:`lease` of the ``number``-th stage (deterministic tokens)."""
        return self.lease(f"staging-{number:032x}")

    def document(self, artifact: ArtifactRegistration) -> Any:
        """The decoded ``outcome.json`` of a published final artifact."""
        return json.loads((self.root / artifact.path / "outcome.json").read_bytes())

    def staging_leases(self) -> list[tuple[object, ...]]:
        """``(id, acquired, expires, released, staging_path)`` of every staging lease."""
        return self.rows(
            "SELECT id, acquired_at_ns, expires_at_ns, released_at_ns, staging_path "
            "FROM leases WHERE purpose = 'staging' ORDER BY acquired_at_ns, id"
        )


def open_world(tmp_path: Path) -> Iterator[PublicationWorld]:
    """The body of each publication test file's ``world`` fixture: a world on
    ``tmp_path`` with deterministic stage tokens, closed and restored afterwards."""
    previous = staging.install_token_source(StageTokens())
    world = PublicationWorld(tmp_path)
    try:
        yield world
    finally:
        world.close()
        staging.install_token_source(previous)


def lock_is_free(path: str | os.PathLike[str], *, exclusive: bool = True) -> bool:
    """Whether a new descriptor can take a flock on ``path`` without waiting (taken and
    released again at once)."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    finally:
        os.close(fd)


def snapshot_tree(path: str | os.PathLike[str]) -> dict[str, object]:
    """Every entry under ``path`` (``path`` itself as ``"."``) with its kind and bytes, not
    following links: what "nothing was replaced" compares."""
    base = Path(path)
    entries: dict[str, object] = {}

    def describe(entry: Path, name: str) -> None:
        info = entry.lstat()
        if stat.S_ISDIR(info.st_mode):
            entries[name] = ("directory", info.st_ino)
            for child in sorted(entry.iterdir()):
                describe(child, f"{name}/{child.name}")
        elif stat.S_ISREG(info.st_mode):
            entries[name] = ("file", info.st_ino, entry.read_bytes())
        else:
            entries[name] = ("other", info.st_ino, stat.S_IFMT(info.st_mode))

    describe(base, ".")
    return entries


class ScriptedClock:
    """A clock returning ``readings`` in order (then failing the test), calling
    ``probe(index)`` before each reading so a test can look at the world at the moment of
    each sample."""

    def __init__(
        self, readings: Sequence[object], probe: Callable[[int], None] | None = None
    ) -> None:
        self.readings = list(readings)
        self.probe = probe
        self.count = 0

    def __call__(self) -> int:
        index = self.count
        self.count += 1
        assert index < len(self.readings), f"unexpected clock sample #{index + 1}"
        if self.probe is not None:
            self.probe(index)
        return self.readings[index]  # type: ignore[return-value]


def refusal_code(call: Callable[[], object]) -> str:
    """The code of the ``RunStoreError`` ``call`` raises (failing if it raises none)."""
    with pytest.raises(RunStoreError) as info:
        call()
    return info.value.code


def write_locked(database_path: str) -> bool:
    """Whether another connection is refused the write lock right now (no waiting)."""
    connection = sqlite3.connect(database_path, timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True
    finally:
        connection.close()
    return False


def check_object(world: PublicationWorld, artifact: ArtifactRegistration) -> Path:
    """The completed object of ``artifact`` verifies with exactly its digests, is addressed
    and identified by its tree hash, is registered with them, and its manifest lists every
    other file with its size and SHA-256."""
    directory = world.root / artifact.path
    verified = objects.verify(str(directory), sync=False)
    content, manifest = artifact.content_sha256, artifact.manifest_sha256
    assert (verified.tree_sha256, verified.manifest_sha256) == (content, manifest)
    assert (
        artifact.path
        == f"artifacts/{artifact.kind.value}-{content}"
        == f"artifacts/{directory.name}"
    )
    assert artifact.id == f"run-store-v1:{artifact.kind.value}-{content}"
    row = (artifact.id, artifact.kind.value, artifact.path, content, manifest)
    assert row in world.artifact_rows()
    raw = (directory / "manifest.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == manifest
    listed = {entry["path"]: entry for entry in json.loads(raw)["files"]}
    on_disk = {
        str(p.relative_to(directory)): p.read_bytes()
        for p in directory.rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }
    assert set(listed) == set(on_disk)
    for name, data in on_disk.items():
        assert listed[name]["size_bytes"] == len(data)
        assert listed[name]["sha256"] == hashlib.sha256(data).hexdigest()
    return directory


def without_staging(projection: dict[str, Any]) -> dict[str, Any]:
    """The projection with the staging leases left out (a stage's lease is committed before
    ``populate`` runs, so it survives every later failure)."""
    return projection | {"leases": [row for row in projection["leases"] if row[4] != "staging"]}


def unchanged_but_staging(world: PublicationWorld, before: dict[str, Any]) -> None:
    """Everything but staging leases is as in ``before``; the new staging lease is
    unreleased and every stage's lock is free."""
    after = world.projection()
    assert without_staging(after) == without_staging(before)
    new = [row for row in after["leases"] if row[4] == "staging" and row not in before["leases"]]
    assert new and all(row[7] is None for row in new)
    assert world.stages() and all(lock_is_free(stage / "lock") for stage in world.stages())


def refused_untouched(world: PublicationWorld, code: str, call: Callable[[], object]) -> None:
    """``call`` is refused with ``code``; the database is byte for byte as before and no
    stage (nor the recovery lock, nor ``artifacts/``) was created."""
    before = world.database_bytes()
    existed = {
        name: (world.root / name).exists() for name in ("artifacts", ".run-store-recovery.lock")
    }
    assert refusal_code(call) == code
    assert world.database_bytes() == before
    assert world.stages() == []
    assert {name: (world.root / name).exists() for name in existed} == existed


def orphan_verifies(world: PublicationWorld, kind: ArtifactKind) -> Path:
    """The single object of ``kind`` verifies, is addressed by its tree hash, and no
    artifact row names it."""
    (orphan,) = (p for p in world.objects() if p.name.startswith(f"{kind.value}-"))
    verified = objects.verify(str(orphan), sync=False)
    assert orphan.name == f"{kind.value}-{verified.tree_sha256}"
    assert world.rows(
        "SELECT count(*) FROM artifacts WHERE path = ?", (f"artifacts/{orphan.name}",)
    ) == [(0,)]
    return orphan
