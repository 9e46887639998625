"""Shared helpers for the store-side recovery tests (``conformance/test_recovery_*.py``).

Recovery resolves what a dead publisher left, so these helpers leave it on purpose, on a
real store, by calling ``world.store`` directly (never in lockstep: the model does not see
these leftovers, and the recovery tests compare with exact values from SPEC.md section 14,
not with the model):

- :func:`crash_finalization` and :func:`crash_artifact` make the publisher's clock raise
  :class:`Crash` at a chosen sample (SPEC.md section 11 numbers them), which is where a
  process death would stop it: after the rename (``publish_finalization`` sample 3 or 4,
  ``publish_artifact`` sample 2 or 3) a verified orphan and a registered stage whose lock is
  released stay behind;
- :func:`crash_populate` raises from ``populate``: a registered stage and no object;
- :func:`make_object` and :func:`forge_outcome` build completed objects the publisher
  would refuse to write (a malformed or unauthorized ``outcome.json``), with the store's own
  completion and document code, and place them at their content address.

Durable state is read through a fresh read-only connection (``world.rows``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Failed
from runstore import OwnedAttempt
from runstore import RecoveryReport
from runstore import Reference
from runstore import TerminalAttempt
from runstore import TerminalOutcome
from runstore.requests import interrupted_outcome
from runstore.store.publication import objects
from runstore.store.publication import outcome_document

from conformance.closed_store import reading
from conformance.publication.world import DATA
from conformance.publication.world import Payload
from conformance.publication.world import PublicationWorld

INTERRUPTED = "interrupted_attempt"
"""The failure code of recovery's own failures."""
ADDRESS = re.compile(r"[a-z]+-[0-9a-f]{64}")
"""A content address's name (``<kind>-<tree sha256>``)."""


class Crash(Exception):
    """The publisher "dies" here: raised from a clock sample or from ``populate``."""


@attrs.frozen
class FixedClock:
    """A picklable clock that always reads ``t`` (for recoverers in other processes)."""

    t: int

    def __call__(self) -> int:
        return self.t


def crashing_clock(first: int, crash_at: int) -> Callable[[], int]:
    """A clock reading ``first``, ``first + 1``, ... that raises :class:`Crash` at its
    ``crash_at``-th sample (1-based)."""
    count = 0

    def clock() -> int:
        nonlocal count
        count += 1
        if count == crash_at:
            raise Crash(f"clock sample {count}")
        return first + count - 1

    return clock


def addresses(world: PublicationWorld, kind: ArtifactKind | None = None) -> list[Path]:
    """The content-addressed entries of ``artifacts/`` (of ``kind``), sorted."""
    if not world.artifacts.exists():
        return []
    prefix = "" if kind is None else f"{kind.value}-"
    return sorted(
        p
        for p in world.artifacts.iterdir()
        if ADDRESS.fullmatch(p.name) and p.name.startswith(prefix)
    )


def quarantined(world: PublicationWorld) -> list[str]:
    """The names under ``artifacts/.quarantine/``, sorted."""
    holding = world.artifacts / ".quarantine"
    return sorted(p.name for p in holding.iterdir()) if holding.exists() else []


def store_path(path: Path) -> str:
    """The store path of an entry of ``artifacts/``."""
    return f"artifacts/{path.name}"


def crash_finalization(
    world: PublicationWorld,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference] = (),
    payload: Payload = DATA,
    *,
    start: int = 2_000,
    crash_at: int = 3,
) -> Path:
    """``publish_finalization`` dying at clock sample ``crash_at`` (3: after the rename,
    4: inside the final transaction); the clock reads ``start``, so the document's finish
    time is ``start + 1``. Returns the verified orphan it left."""
    before = set(addresses(world, ArtifactKind.ATTEMPT))
    clock = crashing_clock(start, crash_at)
    with pytest.raises(Crash):
        world.store.publish_finalization(guard, outcome, references, payload, clock)
    (orphan,) = set(addresses(world, ArtifactKind.ATTEMPT)) - before
    return orphan


def crash_artifact(
    world: PublicationWorld,
    guard: OwnedAttempt,
    kind: ArtifactKind,
    payload: Payload = DATA,
    *,
    start: int = 2_000,
    crash_at: int = 2,
) -> Path:
    """``publish_artifact`` dying at clock sample ``crash_at`` (2: after the rename, 3:
    inside the final transaction). Returns the verified orphan it left."""
    before = set(addresses(world, kind))
    with pytest.raises(Crash):
        world.store.publish_artifact(guard, kind, payload, crashing_clock(start, crash_at))
    (orphan,) = set(addresses(world, kind)) - before
    return orphan


def crash_populate(world: PublicationWorld, guard: OwnedAttempt, *, start: int = 2_000) -> Path:
    """``publish_artifact`` whose ``populate`` dies after writing a file: returns the
    registered stage it left (its lock released, its lease unreleased)."""
    before = set(world.stages())

    def populate(path: str) -> None:
        Path(path, "partial.bin").write_bytes(b"half")
        raise Crash("populate")

    with pytest.raises(Crash):
        world.store.publish_artifact(
            guard, ArtifactKind.DATASET, populate, crashing_clock(start, 99)
        )
    (stage,) = set(world.stages()) - before
    return stage


def make_object(
    world: PublicationWorld,
    kind: ArtifactKind,
    payload: Mapping[str, bytes],
    runtime: Mapping[str, bytes] | None = None,
) -> Path:
    """Complete an object holding ``payload`` (and the ``runtime`` files, e.g. an
    ``outcome.json`` the publisher would never write) with the store's completion code and
    place it at its content address, registered by nothing."""
    scratch = world.root / "scratch-object"
    scratch.mkdir()
    for name, data in payload.items():
        (scratch / name).write_bytes(data)
    inventory = objects.scan(str(scratch), reserved=("manifest.json", *(runtime or {})))
    completed = objects.complete(str(scratch), inventory, dict(runtime or {}))
    destination = world.root / objects.address(kind, completed.tree_sha256)[1]
    world.artifacts.mkdir(exist_ok=True)
    os.rename(scratch, destination)
    return destination


def forge_outcome(
    world: PublicationWorld,
    attempt_id: str,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    finished_at_ns: int,
) -> bytes:
    """The ``outcome.json`` the store would build now for these claims (read through a
    fresh read-only connection), whether or not any publisher could have written it."""
    with reading(world.database_path) as connection:
        return outcome_document.outcome_document(
            connection, attempt_id, outcome, references, finished_at_ns
        )


def recover(world: PublicationWorld, t: int) -> RecoveryReport:
    """One recovery pass whose clock reads ``t``."""
    return world.store.recover(FixedClock(t))


def interrupted(cause: str, state: AttemptState) -> Failed:
    """The failure recovery commits: ``Failed("interrupted_attempt", {cause, state})``."""
    return interrupted_outcome(cause, state)


def receipt_of(world: PublicationWorld, attempt_id: str, report: RecoveryReport) -> TerminalAttempt:
    """The report's one terminal receipt for ``attempt_id``, checked against the database:
    its event is the attempt's only terminal event, at the receipt's finish time."""
    (terminal,) = [t for t in report.terminals if t.attempt_id == attempt_id]
    ((sequence, _, at_ns, _),) = terminal_events(world, attempt_id)
    assert (terminal.event_sequence, terminal.finished_at_ns) == (sequence, at_ns)
    return terminal


def check_interrupted(
    world: PublicationWorld,
    attempt_id: str,
    cause: str,
    state: AttemptState,
    at_ns: int | None = None,
) -> None:
    """The attempt committed recovery's own failure (its one terminal event), with
    ``cause`` and the interrupted ``state`` (finished at ``at_ns`` when given), in a final
    artifact holding only ``outcome.json`` and ``manifest.json``."""
    row = attempt_row(world, attempt_id)
    assert (row["state"], row["failure_code"]) == ("failed", INTERRUPTED)
    ((_, _, finished, payload),) = terminal_events(world, attempt_id)
    assert payload["details"] == {"cause": cause, "interrupted_state": state.value}
    assert finished == row["finished_at_ns"]
    if at_ns is not None:
        assert finished == at_ns
    final = world.root / "artifacts" / row["final_artifact_id"].removeprefix("run-store-v1:")
    assert sorted(p.name for p in final.iterdir()) == ["manifest.json", "outcome.json"]


def attempt_row(world: PublicationWorld, attempt_id: str) -> dict[str, Any]:
    """The attempt's projection row as a dict."""
    columns = (
        "state, revision, updated_at_ns, finished_at_ns, failure_code, censor_reason, "
        "final_artifact_id"
    )
    (row,) = world.rows(f"SELECT {columns} FROM attempts WHERE id = ?", (attempt_id,))
    return dict(zip([c.strip() for c in columns.split(",")], row, strict=True))


def events(world: PublicationWorld, attempt_id: str) -> list[tuple[int, str, int, Any]]:
    """``(sequence, kind, at_ns, payload)`` of the attempt's events, in order."""
    rows = world.rows(
        "SELECT sequence, kind, at_ns, payload_json FROM events WHERE attempt_id = ? "
        "ORDER BY sequence",
        (attempt_id,),
    )
    return [(seq, kind, at, json.loads(payload)) for seq, kind, at, payload in rows]


def terminal_events(world: PublicationWorld, attempt_id: str) -> list[tuple[int, str, int, Any]]:
    return [event for event in events(world, attempt_id) if event[1] == "attempt_finished"]


def leases(world: PublicationWorld, attempt_id: str) -> dict[str, int | None]:
    """Each of the attempt's leases and its release time."""
    rows = world.rows("SELECT id, released_at_ns FROM leases WHERE attempt_id = ?", (attempt_id,))
    return dict(rows)  # type: ignore[arg-type]


def claims(world: PublicationWorld) -> list[tuple[object, ...]]:
    return world.rows("SELECT attempt_id, lease_id FROM finalization_claims")


def references(world: PublicationWorld, attempt_id: str) -> list[tuple[object, ...]]:
    """``(role, artifact_id)`` of the attempt's reference rows, sorted."""
    return world.rows(
        "SELECT role, artifact_id FROM attempt_artifacts WHERE attempt_id = ? ORDER BY 1, 2",
        (attempt_id,),
    )


def entry(artifact: ArtifactRegistration) -> dict[str, str]:
    """The artifact entry an outcome document holds for ``artifact`` (SPEC.md section 13)."""
    return {
        "content_sha256": artifact.content_sha256,
        "id": artifact.id,
        "kind": artifact.kind.value,
        "manifest_sha256": artifact.manifest_sha256,
        "path": artifact.path,
    }


def registration_of(path: Path, kind: ArtifactKind, verified_at_ns: int) -> ArtifactRegistration:
    """The registration of the completed object at ``path`` (verified from its bytes)."""
    return objects.registration(kind, objects.verify(str(path), sync=False), verified_at_ns)


def flip_byte(path: Path) -> None:
    """Change one byte of the file at ``path`` (made writable first)."""
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))


def tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path`` with its bytes (None for a directory): what "moved
    intact" compares."""
    found: dict[str, bytes | None] = {}
    for item in sorted(path.rglob("*")):
        relative = str(item.relative_to(path))
        found[relative] = None if item.is_dir() else item.read_bytes()
    return found


# --- a publisher process that dies ------------------------------------------------------------

DIED = 71
"""The exit status of a publisher process killed on purpose (``os._exit``)."""
DEAD_TOKENS = 0x100
"""The first stage token of a dying publisher (distinct from the test process's tokens)."""


def _die_publishing(
    root: str,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: tuple[Reference, ...],
    crash_at: int,
) -> None:
    """Child body: publish the finalization and end the process with ``os._exit`` at clock
    sample ``crash_at`` (0: inside ``populate``), without any cleanup."""
    from runstore import RunStore
    from runstore.store.publication import staging
    from runstore.testing.lockstep import StageTokens

    staging.install_token_source(StageTokens(DEAD_TOKENS))
    store = RunStore.open(root)
    count = 0

    def clock() -> int:
        nonlocal count
        count += 1
        if count == crash_at:
            os._exit(DIED)
        return 2_000 + count - 1

    def populate(path: str) -> None:
        DATA(path)
        if crash_at == 0:
            os._exit(DIED)

    store.publish_finalization(guard, outcome, references, populate, clock)
    os._exit(0)


def die_publishing(
    world: PublicationWorld,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference] = (),
    *,
    crash_at: int,
) -> None:
    """Run ``publish_finalization`` in a fresh (``spawn``) process that dies at clock
    sample ``crash_at`` (0: inside ``populate``, 3: after the rename); its clock reads
    2000, 2001, ... so a document it wrote finished at 2001."""
    context = multiprocessing.get_context("spawn")
    process = context.Process(
        target=_die_publishing,
        args=(str(world.root), guard, outcome, tuple(references), crash_at),
    )
    process.start()
    process.join(60)
    assert process.exitcode == DIED
