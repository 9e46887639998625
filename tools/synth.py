"""A synthetic large store for benchmarks: the committed state the runner leaves after
running one-shot measurement slots to ``Accepted``, written straight into the database.

Rules of this file: the benchmarks' kit (``tools/bench_inspect.py``,
``tools/bench_lifecycle.py``), outside the package; the slots and their documents are
``tools/synth_plan.py``'s. The store is made by
:meth:`runstore.RunStore.open`, then filled through one :func:`runstore.sql.connect` connection (the
triggers police each row) in ``executemany`` transactions, unsynced until one ``os.sync()``. No byte
is decided here: records, ids, attempt records, payloads and outcome documents come from the value
layer the writer calls, objects hold what ``objects.complete`` writes (manifest and tree hash
computed in memory), and the steps and clock readings are ``runstore.runner.attempt``'s (SPEC.md 11,
15.4) on a clock moving :data:`TICK_NS` per reading; tokens come from a seeded RNG. Slot
``i`` is candidate ``c<i // 100>`` on problem ``p<i % 100>``; every :data:`RETRY_EVERY`-th
slot first has a ``Failed(worker_failed)`` attempt. ``conformance/meta/test_synth.py`` compares
a small one with what the real runner writes, byte for byte (tokens aside).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import attrs
from runstore import canonical
from runstore import outcome_json
from runstore import payloads
from runstore import records
from runstore import sql
from runstore.attempt_record import attempt_document
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import LeasePurpose
from runstore.identity import run_attempt_id
from runstore.manifest import MANIFEST_NAME
from runstore.manifest import OUTCOME_NAME
from runstore.manifest import ManifestFile
from runstore.manifest import manifest_bytes
from runstore.requests import Accepted
from runstore.requests import Failed
from runstore.requests import TerminalOutcome
from runstore.store import RunStore
from runstore.store import store_root
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.testing.fixtures import EXECUTION_PATH
from runstore.tree_hash import Entry
from runstore.tree_hash import tree_sha256
from synth_plan import CAMPAIGN
from synth_plan import RETRY_EVERY
from synth_plan import Document
from synth_plan import SlotPlan
from synth_plan import attempt_files
from synth_plan import slot_documents
from synth_plan import slot_plans
from synth_plan import worker_result

__all__ = [
    "CAMPAIGN",
    "LEASE_NS",
    "RETRY_EVERY",
    "SlotPlan",
    "SynthSummary",
    "slot_plans",
    "synthesize",
    "worker_result",
]

START_NS: Final = 1_700_000_000 * 10**9  # the clock's first reading is START_NS + TICK_NS
TICK_NS: Final = 1_000
LEASE_NS: Final = 30 * 10**9  # requested and never renewed (an attempt takes microseconds)
WORKER_FAILED: Final = "worker_failed"
_BATCH_SLOTS: Final = 2_000
_DISK_THREADS: Final = 2
_CACHE_KIB: Final = 1 << 20  # 1 GiB of page cache: keys are digests, inserts land anywhere

Row = tuple[object, ...]
Slot = tuple[Document, ...]
"""A slot's ``record_json`` documents (:func:`slot_documents`)."""
_End = tuple[TerminalOutcome, str]  # a terminal edge's outcome and final artifact id
_Deps = list[tuple[str, Document]]


@attrs.frozen
class SynthSummary:
    """What :func:`synthesize` wrote, and how long it took."""

    root: str
    slots: int
    attempts: int
    failed: int
    artifacts: int
    events: int
    seconds: float


def _text(document: JSON) -> str:
    return canonical.encode(document).decode("utf-8")


_TABLES: Final = (
    *("applicability_decisions", "resolved_runs", "attempt_slots", "observation_slots"),
    *("attempt_observation_slots", "attempts", "artifacts", "events", "leases"),
    *("leased_artifacts", "finalization_claims", "observations", "selected_observations"),
    "attempt_artifacts",
)
"""The tables rows are inserted into, referenced rows first (transitions go in with their
updates). Rows hold every column in schema v1's order, so statements name no columns."""
_TRANSITION: Final = "INSERT INTO attempt_transitions VALUES (?, ?, ?, ?, ?, ?)"
_UPDATE: Final = (
    "UPDATE attempts SET state = ?, revision = ?, updated_at_ns = ?, finished_at_ns = ?, "
    "failure_code = ?, final_artifact_id = ?, final_artifact_kind = ?, record_json = ? "
    "WHERE id = ?"
)
_RELEASES: Final = (
    "UPDATE leases SET released_at_ns = ? WHERE id = ?",  # a stage, by its publication
    "UPDATE leases SET released_at_ns = max(?, acquired_at_ns) "  # an attempt's, at its end
    "WHERE attempt_id = ? AND released_at_ns IS NULL",
)


@attrs.define
class _Batch:
    """Rows and objects of consecutive slots, inserted together by :meth:`flush`."""

    inserts: dict[str, list[Row]] = attrs.Factory(lambda: {table: [] for table in _TABLES})
    history: dict[int, tuple[list[Row], list[Row]]] = attrs.Factory(dict)  # updates, transitions
    claim_deletes: list[tuple[str, str]] = attrs.Factory(list)
    releases: tuple[list[Row], list[Row]] = attrs.Factory(lambda: ([], []))  # of _RELEASES
    objects: list[tuple[str, dict[str, bytes]]] = attrs.Factory(list)

    def flush(self, connection: sqlite3.Connection) -> None:
        """Insert the batch in one transaction, in an order the triggers accept: referenced
        rows first, revisions in order, then claims deleted and leases released."""
        connection.execute("BEGIN IMMEDIATE")
        for table, rows in self.inserts.items():
            if rows:
                values = ", ".join("?" * len(rows[0]))
                connection.executemany(f"INSERT INTO {table} VALUES ({values})", rows)
        for revision in sorted(self.history):
            connection.executemany(_UPDATE, self.history[revision][0])
            connection.executemany(_TRANSITION, self.history[revision][1])
        claims = "DELETE FROM finalization_claims WHERE slot_id = ? AND attempt_id = ?"
        connection.executemany(claims, self.claim_deletes)
        for statement, rows in zip(_RELEASES, self.releases, strict=True):
            connection.executemany(statement, rows)
        connection.execute("COMMIT")


@attrs.define
class _World:
    """The synthesizer's running state: clock, counters, tokens and the open batch."""

    rng: random.Random
    now: int = START_NS
    sequences: Iterator[int] = attrs.Factory(lambda: itertools.count(1))
    fencing: Iterator[int] = attrs.Factory(lambda: itertools.count(1))
    batch: _Batch = attrs.Factory(_Batch)
    artifacts: int = 0

    def make(self, plans: Sequence[SlotPlan]) -> _Batch:
        """The rows and objects of the planned slots, next after those made before."""
        self.batch = _Batch()
        for plan in plans:
            _synthesize_slot(self, plan)
        return self.batch

    def clock(self) -> int:
        self.now += TICK_NS
        return self.now

    def token(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def add(self, table: str, *row: object) -> None:
        self.batch.inserts[table].append(row)

    def event(self, kind: str, attempt_id: str, at_ns: int, payload: Document) -> int:
        sequence = next(self.sequences)
        self.add("events", sequence, kind, attempt_id, at_ns, _text(payload))
        return sequence

    def publish(self, kind: ArtifactKind, files: dict[str, bytes], at_ns: int) -> Document:
        """Register the completed object of ``files`` and its manifest, verified at
        ``at_ns``, and queue its files; returns its outcome-document entry."""
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
        listed = [
            ManifestFile(path=n, sha256=h, size_bytes=len(files[n])) for n, h in digests.items()
        ]
        files = {**files, MANIFEST_NAME: manifest_bytes(listed)}
        tree = tree_sha256(Entry(path=name, type="file", data=data) for name, data in files.items())
        artifact_id, path = objects.address(kind, tree)
        manifest = hashlib.sha256(files[MANIFEST_NAME]).hexdigest()
        columns = (artifact_id, kind.value, path, tree, manifest)
        self.add("artifacts", *columns, at_ns)
        self.batch.objects.append((path, files))
        self.artifacts += 1
        return outcome_json.artifact_entry(*columns)


def _write_objects(root: str, objects: Sequence[tuple[str, dict[str, bytes]]]) -> None:
    """Write completed objects at their addresses (unsynced: :func:`synthesize` syncs once)."""
    for path, files in objects:
        os.mkdir(os.path.join(root, path), 0o700)
        for name, data in files.items():
            with open(os.path.join(root, path, name), "xb") as handle:
                handle.write(data)


@attrs.define
class _Attempt:
    """One attempt as the writer changes it: each revision an event, a transition and the
    projection's row (inserted at reservation, then updated, ``record_json`` rewritten)."""

    world: _World
    slot: Slot
    slot_id: str
    retry_index: int
    id: str
    owner: str
    reservation: str
    started_at_ns: int
    state: AttemptState = AttemptState.RESERVED
    revision: int = -1

    @classmethod
    def reserve(cls, world: _World, slot: Slot, retry_index: int) -> _Attempt:
        """``reserve``: revision 0 and the reservation lease."""
        now, owner, lease_id = world.clock(), world.token(), f"lease-{world.token()}"
        slot_id = str(slot[2]["id"])
        attempt_id = run_attempt_id(slot_id, retry_index)
        attempt = cls(world, slot, slot_id, retry_index, attempt_id, owner, lease_id, now)
        payload = payloads.reserved_payload(attempt.slot_id, retry_index)
        attempt.move(now, payloads.ATTEMPT_RESERVED, payload)
        attempt.lease(lease_id, LeasePurpose.RESERVATION, now + LEASE_NS)
        return attempt

    def lease(self, lease_id: str, purpose: LeasePurpose, expires: int, path: str = "") -> None:
        """A lease of this attempt's owner acquired at the clock's latest reading (a
        staging lease with its stage's store ``path``)."""
        row = (lease_id, next(self.world.fencing), self.owner, self.id, purpose, self.world.now)
        self.world.add("leases", *row, expires, None, path or None)

    def move(self, at_ns: int, kind: str, payload: Document, end: _End | None = None) -> None:
        """One revision (to ``payload["to"]``): its event, its transition, and the row's
        insert or update; ``end`` is a terminal edge's outcome and final artifact id."""
        attempt_id, source = self.id, None if self.revision < 0 else self.state
        sequence = self.world.event(kind, attempt_id, at_ns, payload)
        self.state, self.revision = AttemptState(str(payload["to"])), self.revision + 1
        updates, transitions = self.world.batch.history.setdefault(self.revision, ([], []))
        transitions.append((attempt_id, self.revision, source, self.state, at_ns, sequence))
        outcome, final = end if end is not None else (None, None)
        record = attempt_document(
            attempt_id=attempt_id,
            slot_id=self.slot_id,
            retry_index=self.retry_index,
            state=self.state,
            revision=self.revision,
            started_at_ns=self.started_at_ns,
            updated_at_ns=at_ns,
            outcome=outcome,
            final_artifact_id=final,
            finished_at_ns=None if end is None else at_ns,
        )
        if source is None:
            row = (self.slot_id, self.retry_index, self.state, 0, at_ns, at_ns, *[None] * 5)
            self.world.add("attempts", attempt_id, *row, _text(record))
            return
        code = outcome.code if isinstance(outcome, Failed) else None
        finished, final_kind = (None, None) if end is None else (at_ns, ArtifactKind.ATTEMPT)
        row = (self.state, self.revision, at_ns, finished, code, final, final_kind, _text(record))
        updates.append((*row, attempt_id))

    def advance(self, phase: AttemptState, at_ns: int | None = None) -> None:
        """``advance`` along an execution edge, or into finalizing without contending, at a
        new clock reading (or ``at_ns``, a reading a write batch shares)."""
        now = self.world.clock() if at_ns is None else at_ns
        revision = self.revision + 1
        if phase is AttemptState.FINALIZING:
            payload = payloads.finalizing_payload(self.state, revision, None)
            self.move(now, payloads.ATTEMPT_FINALIZING, payload)
        else:
            payload = payloads.transition_payload(self.state, phase, revision)
            self.move(now, payloads.ATTEMPT_TRANSITION, payload)

    def stage(self) -> str:
        """A stage's lease (a publication's first clock reading), of the reservation's
        owner and expiry; returns its id."""
        _, token = self.world.clock(), self.world.token()
        lease_id, path = staging.lease_id_for(token), staging.store_path_for(token)
        self.lease(lease_id, LeasePurpose.STAGING, self.started_at_ns + LEASE_NS, path)
        return lease_id


def _accepted_attempt(
    world: _World,
    documents: Slot,
    retry: int,
    observed: dict[str, bytes],
    result: Document,
    files: dict[str, bytes],
) -> None:
    """An attempt whose worker wrote ``observed`` (its observation artifact's files, read
    as ``result``) and left the attempt artifact's ``files``, in the runner's order:
    ``publish_artifact(observation)`` while executing (the artifact rooted under the
    reservation, its stage released), then one write batch at one clock reading:
    ``advance`` to validating, ``begin_finalization`` taking the claim,
    ``register_observation`` (valid, reached, selected); ``publish_finalization(Accepted)``."""
    attempt = _Attempt.reserve(world, documents, retry)
    for phase in EXECUTION_PATH:
        attempt.advance(phase)
    stage = attempt.stage()
    artifact = world.publish(ArtifactKind.OBSERVATION, observed, world.clock())
    artifact_id = str(artifact["id"])
    world.add("leased_artifacts", attempt.reservation, artifact_id)
    world.batch.releases[0].append((world.clock(), stage))
    now, lease_id = world.clock(), f"lease-{world.token()}"
    attempt.advance(AttemptState.VALIDATING, now)
    payload = payloads.finalizing_payload(attempt.state, attempt.revision + 1, payloads.CLAIMED)
    attempt.move(now, payloads.ATTEMPT_FINALIZING, payload)
    attempt.lease(lease_id, LeasePurpose.FINALIZATION, now + LEASE_NS)
    claim = (attempt.slot_id, attempt.id, lease_id, now, LeasePurpose.FINALIZATION)
    world.add("finalization_claims", *claim)
    slot_id, reached = str(documents[3]["id"]), Completion.REACHED
    observation = records.Observation(
        slot_id=slot_id, attempt_id=attempt.id, valid=True, completion=reached, result=result
    ).to_json()
    observation_id = str(observation["id"])
    row = (observation_id, slot_id, attempt.id, attempt.slot_id, 1, reached, artifact_id)
    world.add("observations", *row, ArtifactKind.OBSERVATION, now, _text(observation))
    world.add("selected_observations", slot_id, observation_id, 1, now)
    payload = payloads.observation_payload(observation_id, slot_id, artifact_id, [], True, True)
    world.event(payloads.OBSERVATION_REGISTERED, attempt.id, now, payload)
    produced = [outcome_json.observation_entry(observation, artifact, [])]
    _publish_finalization(attempt, Accepted(), files, [("observation", artifact)], produced)


def _publish_finalization(
    attempt: _Attempt,
    outcome: TerminalOutcome,
    files: dict[str, bytes],
    deps: _Deps,
    produced: list[Document],
) -> None:
    """``publish_finalization``: stage, finish time, outcome document, final artifact
    (``files`` and the outcome document), then the terminal commit (references,
    transition, claim deleted, leases released)."""
    world, (decision, run, slot, result) = attempt.world, attempt.slot
    attempt.stage()
    finished = world.clock()
    snapshot = outcome_json.snapshot_document(
        decision=decision,
        run=run,
        attempt_slot=slot,
        observation_slots=[result],
        produced=produced,
        selected=produced if isinstance(outcome, Accepted) else None,
    )
    document = outcome_json.outcome_document(
        attempt_id=attempt.id,
        slot_id=attempt.slot_id,
        retry_index=attempt.retry_index,
        finalizing_revision=attempt.revision,
        outcome=outcome,
        snapshot=snapshot,
        started_at_ns=attempt.started_at_ns,
        finished_at_ns=finished,
        dependencies=deps,
    )
    final = world.publish(ArtifactKind.ATTEMPT, {**files, OUTCOME_NAME: document}, world.clock())
    committed = world.clock()
    for role, entry in deps:
        world.add("attempt_artifacts", attempt.id, role, entry["id"])
    payload = payloads.finished_payload(outcome, attempt.revision + 1)
    attempt.move(finished, payloads.ATTEMPT_FINISHED, payload, (outcome, str(final["id"])))
    if isinstance(outcome, Accepted):
        world.batch.claim_deletes.append((attempt.slot_id, attempt.id))
    world.batch.releases[1].append((committed, attempt.id))


def _register(world: _World, slot: Slot) -> None:
    """``register_slots``' rows for the slot's records (all of them applicable)."""
    decision, run, measured, result = slot
    texts = [_text(document) for document in slot]
    keys: Row = (decision["id"], decision["candidate_id"], decision["problem_id"], 1)
    world.add("applicability_decisions", *keys, texts[0])
    keys = (run["id"], run["logical_spec_id"], run["decision_id"], run["candidate_id"], 1)
    world.add("resolved_runs", *keys, texts[1])
    keys = (measured["id"], run["id"], measured["logical_slot"], measured["execution_kind"])
    world.add("attempt_slots", *keys, measured["role"], texts[2])
    keys = (result["id"], run["id"], result["logical_slot"], result["kind"])
    world.add("observation_slots", *keys, result["checkpoint_index"], texts[3])
    world.add("attempt_observation_slots", result["id"], measured["id"], run["id"])


def _synthesize_slot(world: _World, plan: SlotPlan) -> None:
    """Register the slot; when planned, an attempt whose worker exited 1 (``advance`` into
    finalizing, ``publish_finalization(Failed)``); then an accepted attempt."""
    documents = slot_documents(plan)
    _register(world, documents)
    if plan.failed_first:
        attempt = _Attempt.reserve(world, documents, 0)
        for phase in (*EXECUTION_PATH, AttemptState.FINALIZING):
            attempt.advance(phase)
        failed = Failed(code=WORKER_FAILED, details={"exit_code": 1})
        _publish_finalization(attempt, failed, attempt_files(1), [], [])
    document, result = worker_result(plan.index)
    observed = {"result.json": document}
    _accepted_attempt(world, documents, int(plan.failed_first), observed, result, attempt_files(0))


def _new_store(root: str) -> str:
    """Create the store at ``root`` (made when missing) with the real opener, plus what
    publication leaves in a root: ``artifacts/`` and the recovery lock file."""
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    if os.path.lexists(os.path.join(root, store_root.DATABASE_NAME)):
        raise FileExistsError(f"{root} already holds a store")
    RunStore.open(root).close()
    staging.artifacts_directory(root)
    with staging.RecoveryLock(root, exclusive=False):
        pass
    return root


def synthesize(root: str, attempts: int, *, seed: int = 0) -> SynthSummary:
    """Build a new store at ``root`` holding exactly ``attempts`` terminal attempts, every
    slot accepted; ``seed`` picks the tokens. Refuses a root that holds a database
    (FileExistsError) and a bad count (ValueError). A pipeline: a thread makes the next
    batch while this one inserts the current one and two more write the previous one's
    objects (about three batches in memory)."""
    started = time.monotonic()
    plans = slot_plans(attempts)
    root = _new_store(root)
    world = _World(random.Random(seed))
    chunks = [plans[i : i + _BATCH_SLOTS] for i in range(0, len(plans), _BATCH_SLOTS)]
    connection = sql.connect(os.path.join(root, store_root.DATABASE_NAME))
    try:
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        with ThreadPoolExecutor(1) as maker, ThreadPoolExecutor(_DISK_THREADS) as disk:
            writing: list[Future[None]] = []
            made = maker.submit(world.make, chunks[0])
            for following in [*chunks[1:], None]:
                batch = made.result()
                if following is not None:
                    made = maker.submit(world.make, following)
                batch.flush(connection)
                for future in writing:
                    future.result()
                parts = [batch.objects[i::_DISK_THREADS] for i in range(_DISK_THREADS)]
                writing = [disk.submit(_write_objects, root, part) for part in parts]
            for future in writing:
                future.result()
    finally:
        connection.close()
    os.sync()
    counts = (len(plans), attempts, attempts - len(plans), world.artifacts)
    return SynthSummary(root, *counts, next(world.sequences) - 1, time.monotonic() - started)
