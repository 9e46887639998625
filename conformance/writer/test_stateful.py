"""The writer in lockstep with the model.

A Hypothesis rule-based machine applies every writer operation, with generated arguments
(stale and forged guards, wrong owners, expired and released leases, exact-expiry instants,
backward clocks, out-of-range times, conflicting registrations, retries past their bound),
to the pure model and to a real store on disk through two ``RunStore`` handles on one root.
Each step must give the same result or the same refusal code, and after every step the
whole durable projection, read through a fresh read-only connection, must equal the model's.
Publication runs with real files in the store's temporary root (the model reads what the
callback wrote and hashes it with its own content module), with clocks that step back,
jump past expiries or leave the range (a publication refused after its rename leaves a
verified orphan, one refused earlier a registered stage); after every step each registered
artifact must be on disk at its address and verify against its manifest and tree hash.
Recovery runs at drawn times (often just at or past the owners' expiries), the model seeing
the disk through :func:`runstore.testing.disk.disk_view`, with stage locks sometimes held
as a live publisher's would be; its report must equal the model's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import Phase
from hypothesis import event
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import rule
from runstore import TERMINAL_STATES
from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Completion
from runstore import LeaseRequest
from runstore import Next
from runstore import Observation
from runstore import OwnedAttempt
from runstore import Pending
from runstore import PublishedArtifact
from runstore import PublishedFinalization
from runstore import Reference
from runstore import RunStore
from runstore import RunStoreError
from runstore import WriteBatch
from runstore import edges
from runstore import model as m
from runstore import payloads
from runstore import sql
from runstore.audit import audit_connection
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.kit.lockstep import authorizations  # shared with the conformance kit's machine
from runstore.kit.lockstep import outcomes
from runstore.store import attempts
from runstore.store import finalization
from runstore.store.guard import load_attempt
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.testing import fixtures as sc
from runstore.testing.disk import disk_view
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import StageTokens
from runstore.testing.lockstep import Writer
from runstore.testing.lockstep import lockstep
from runstore.testing.lockstep import outcome as outcome_of
from runstore.testing.publishing import ClockScript
from runstore.testing.publishing import Payload
from runstore.testing.publishing import at

from conformance.closed_store import reading

OWNERS = (sc.OWNER, sc.OTHER_OWNER)
LEASE_IDS = tuple(f"lease-{n}" for n in range(10))
FIXTURES = sc.LOCKSTEP_SLOTS
CONFLICTING = sc.CONFLICTING  # same run and logical slot as "a", a different record
UNREGISTERED = sc.UNREGISTERED
SLOT_IDS = (FIXTURES[0].slot_id, FIXTURES[1].slot_id, UNREGISTERED.slot_id)
OBSERVATION_SLOTS = tuple(f.observation_slots[0] for f in (*FIXTURES, UNREGISTERED))
ALL_STATES = tuple(AttemptState)
DRIVE_PATH = (AttemptState.RESERVED, *sc.EXECUTION_PATH)


def artifact(kind: ArtifactKind, seed: int, manifest: int = 0) -> ArtifactRegistration:
    base = sc.artifact(kind, f"seed-{seed}")
    if manifest == 0:
        return base
    return attrs.evolve(base, manifest_sha256=sc.digest(f"manifest-{seed}-{manifest}"))


kinds = st.sampled_from([ArtifactKind.ATTEMPT, ArtifactKind.OBSERVATION, ArtifactKind.DATASET])
attempt_artifacts = st.one_of(
    st.builds(artifact, st.just(ArtifactKind.ATTEMPT), st.integers(0, 3)),
    st.builds(artifact, kinds, st.integers(0, 3), st.sampled_from([0, 1])),
)
observation_artifacts = st.one_of(
    st.builds(artifact, st.just(ArtifactKind.OBSERVATION), st.integers(0, 3)),
    st.builds(artifact, kinds, st.integers(0, 3), st.sampled_from([0, 1])),
)

contents = st.builds(
    lambda first, nested, empty: Payload(
        files=(("data.bin", bytes([first])),)
        + ((("sub/é.txt", b"nested"),) if nested else ())
        + ((("empty", b""),) if empty else ())
    ),
    st.integers(0, 2),
    st.booleans(),
    st.booleans(),
)
hostile_contents = st.sampled_from(
    [
        Payload(files=(("data.bin", b"1"),), symlinks=(("link", "data.bin"),)),
        Payload(files=(("data.bin", b"1"),), directories=("hollow",)),
        Payload(files=(("manifest.json", b"{}"),)),
        Payload(files=(("outcome.json", b"{}"),)),
    ]
)
publish_kinds = st.sampled_from(
    [ArtifactKind.DATASET, ArtifactKind.OBSERVATION, ArtifactKind.RESULT, ArtifactKind.ATTEMPT]
)


def reference_lists(roles: list[str], known: list[str]) -> st.SearchStrategy[list[Any]]:
    """Up to two references to ``known`` artifact ids (repeats included), and now and then a
    plain ``(role, artifact_id)`` pair, which both sides refuse as ill typed (a role no
    ``Reference`` takes, such as ``final`` or ``""``, cannot be built at all)."""
    reference = st.builds(Reference, st.sampled_from(roles), st.sampled_from(known))
    plain = st.tuples(st.sampled_from([*roles, "final", ""]), st.sampled_from(known))
    return st.lists(st.one_of(reference, reference, reference, plain), max_size=2)


class WriterMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="runstore-lockstep-")
        self.stores = [RunStore.open(self.root), RunStore.open(self.root)]
        self.tokens = staging.install_token_source(StageTokens())
        self.model = ModelWriter(
            m.ModelState(), tokens=StageTokens(), disk=lambda state: disk_view(self.root, state)
        )
        self.guards: list[OwnedAttempt] = []
        self.held: dict[str, int] = {}
        """Stage lock files this test holds, as a live publisher in another process would."""
        self.clock = 1_000
        self.lease_serial = 0

    def teardown(self) -> None:
        try:
            self.the_audit_replays_the_event_log_to_the_same_projection()
        finally:
            for fd in self.held.values():
                os.close(fd)
            staging.install_token_source(self.tokens)
            for store in self.stores:
                store.close()
            shutil.rmtree(self.root)

    def the_audit_replays_the_event_log_to_the_same_projection(self) -> None:
        """Once per program (the log holds every step): ``runstore audit``'s replay of the
        committed log reaches the store's projection."""
        with reading(self.stores[0].database_path) as connection:
            report = audit_connection(connection, self.root)
        assert report.divergence is None, report.divergence
        if report.events >= 10:
            event("audit replayed 10 or more events")

    # --- drawing arguments ---------------------------------------------------------------

    def _now(self, data: st.DataObject) -> int:
        """Mostly a clock creeping forward; sometimes backward, exactly at or just before a
        lease's expiry, or out of range."""
        expiries = sorted({lease.expires_at_ns for lease in self.model.state.leases.values()})
        choices = [
            st.integers(0, 2).map(lambda d: self.clock + d),
            st.integers(0, 2).map(lambda d: self.clock + d),
            st.integers(-8, 25).map(lambda d: max(0, self.clock + d)),
        ]
        if expiries:
            choices.append(st.sampled_from(expiries))
            choices.append(st.sampled_from(expiries).map(lambda e: e - 1))
        choices = choices * 2 + [st.sampled_from([-1, 2**63])]
        now = data.draw(st.one_of(*choices), label="now")
        if 0 <= now < 2**63:
            self.clock = max(self.clock, now)
        return now

    def _lease(self, data: st.DataObject, owner: str | None = None) -> LeaseRequest:
        return LeaseRequest(
            lease_id=data.draw(st.sampled_from(LEASE_IDS), label="lease_id"),
            owner_token=owner or data.draw(st.sampled_from(OWNERS), label="owner"),
            expires_at_ns=max(0, self.clock + data.draw(st.integers(-3, 60), label="ttl")),
        )

    def _current(self) -> list[OwnedAttempt]:
        """The guards that are still their attempt's current guard."""
        return [
            g
            for g in self.guards
            if (row := self.model.state.attempts.get(g.attempt_id)) is not None
            and (row.revision, row.state) == (g.revision, g.state)
        ]

    def _guard(self, data: st.DataObject) -> OwnedAttempt:
        current = self._current()
        pool = data.draw(
            st.sampled_from([current, current, current, self.guards])
            if current
            else st.just(self.guards),
            label="pool",
        )
        guard = data.draw(st.sampled_from(pool), label="guard")
        forgery = data.draw(
            st.sampled_from(["none", "none", "none", "owner", "lease", "claim", "revision"]),
            label="forgery",
        )
        if forgery == "owner":
            return attrs.evolve(guard, owner_token="intruder")
        if forgery == "lease":
            return attrs.evolve(guard, lease_id="lease-forged")
        if forgery == "claim":
            return attrs.evolve(guard, claim_lease_id=None if guard.claim_lease_id else "lease-0")
        if forgery == "revision":
            return attrs.evolve(guard, revision=guard.revision + 1)
        return guard

    def _clock(self, data: st.DataObject, guard: OwnedAttempt) -> ClockScript:
        """A publisher's clock (four readings): mostly steady from a drawn start; sometimes
        stepping back, jumping after the rename to (or just before) the guard's own
        reservation expiry or another lease's, or leaving the range at one reading."""
        start = max(0, min(self._now(data), 2**62))
        shape = data.draw(
            st.sampled_from(["steady"] * 3 + ["backward", "expiry", "expiry", "range"]),
            label="clock",
        )
        samples = [start, start + 1, start + 2, start + 3]
        if shape == "backward":
            samples = [start, max(0, start - 5), max(0, start - 9), start + 1]
        elif shape == "expiry":
            own = [
                lease.expires_at_ns
                for lease in self.model.state.leases.values()
                if lease.id == guard.lease_id
            ]
            expiries = sorted({lease.expires_at_ns for lease in self.model.state.leases.values()})
            jump = data.draw(st.sampled_from(own * 3 + expiries or [start + 10_000]), label="jump")
            jump = max(0, jump - data.draw(st.sampled_from([0, 0, 1]), label="before"))
            samples = [start, start + 1, jump, jump + 1]
        elif shape == "range":
            samples[data.draw(st.integers(0, 3), label="position")] = 2**63
        self.clock = max(self.clock, *(t for t in samples if t < 2**63))
        return ClockScript(samples=tuple(samples))

    def _store(self, data: st.DataObject) -> RunStore:
        return self.stores[data.draw(st.integers(0, 1), label="handle")]

    # --- lockstep -------------------------------------------------------------------------

    def _lockstep(self, store: RunStore, call: Callable[[Writer], Any]) -> Any:
        """:func:`~runstore.testing.lockstep.lockstep`: the same result, or the same refusal
        code with the model's state object unchanged. Returns the result, or None after a
        refusal."""
        try:
            result = lockstep(self.model, store, call)
        except RunStoreError as error:
            event(f"refused: {error.code}")
            return None
        if hasattr(result, "state"):
            event(f"reached: {result.state.value}")
        if isinstance(result, PublishedArtifact):
            event(f"published: {result.artifact.kind.value}")
        if isinstance(result, PublishedFinalization):
            event(f"published: {result.terminal.state.value}")
        return result

    def _keep(self, guard: object) -> None:
        if isinstance(guard, OwnedAttempt):
            self.guards.append(guard)

    # --- rules ----------------------------------------------------------------------------

    @initialize(data=st.data(), count=st.integers(1, 2), attempts=st.integers(0, 3))
    def register_and_reserve(self, data: st.DataObject, count: int, attempts: int) -> None:
        """Start most programs with registered slots and a few live attempts (still in
        lockstep), so that generated steps spend their budget past the first refusals.
        Unregistered slots stay reachable through the third slot id."""
        for which in range(count):
            self.register_one_shot(data, which)
        for number in range(attempts):
            self.lease_serial += 1
            slot = FIXTURES[number % count].slot_id
            lease = LeaseRequest(
                lease_id=f"lease-u{self.lease_serial}",
                owner_token=OWNERS[number % 2],
                expires_at_ns=self.clock + 200,
            )
            self._keep(
                self._lockstep(
                    self._store(data),
                    lambda w, r=lease, t=slot: w.reserve(t, Next(retry=True), r, self.clock),
                )
            )

    @rule(data=st.data(), which=st.sampled_from([0, 0, 1, 1, 2]))
    def register_one_shot(self, data: st.DataObject, which: int) -> None:
        fixture = (*FIXTURES, CONFLICTING)[which]
        args = (fixture.decision, fixture.run, fixture.attempt_slot, fixture.observation_slots[0])
        self._lockstep(self._store(data), lambda w: w.register_one_shot(*args))

    @rule(data=st.data(), slot=st.sampled_from(SLOT_IDS), authorization=authorizations)
    def reserve(self, data: st.DataObject, slot: str, authorization: Any) -> None:
        store, lease, now = self._store(data), self._lease(data), self._now(data)
        self._keep(self._lockstep(store, lambda w: w.reserve(slot, authorization, lease, now)))

    @rule(data=st.data(), phase=st.sampled_from(ALL_STATES))
    def advance(self, data: st.DataObject, phase: AttemptState) -> None:
        if not self.guards:
            return
        guard, store, now = self._guard(data), self._store(data), self._now(data)
        legal = [
            b for a, b in edges.LEGAL_EDGES if a == guard.state and edges.is_advance_edge(a, b)
        ]
        phase = data.draw(st.sampled_from([*legal, *legal, *legal, phase]), label="phase")
        self._keep(self._lockstep(store, lambda w: w.advance(guard, phase, now)))

    @rule(data=st.data(), extension=st.integers(-5, 60))
    def renew(self, data: st.DataObject, extension: int) -> None:
        if not self.guards:
            return
        guard, store, now = self._guard(data), self._store(data), self._now(data)
        expires = max(0, self.clock + extension)
        self._lockstep(store, lambda w: w.renew(guard, expires, now))

    @rule(data=st.data())
    def begin_finalization(self, data: st.DataObject) -> None:
        if not self.guards:
            return
        guard, store = self._guard(data), self._store(data)
        owner = data.draw(st.sampled_from([guard.owner_token, guard.owner_token, "intruder"]))
        lease, now = self._lease(data, owner), self._now(data)
        disposition = self._lockstep(store, lambda w: w.begin_finalization(guard, lease, now))
        if disposition is not None:
            self._keep(disposition.attempt)

    @rule(
        data=st.data(),
        slot=st.sampled_from(OBSERVATION_SLOTS),
        valid=st.booleans(),
        completion=st.sampled_from(list(Completion)),
        select=st.booleans(),
        artifact=observation_artifacts,
        score=st.integers(0, 2),
    )
    def register_observation(
        self,
        data: st.DataObject,
        slot: Any,
        valid: bool,
        completion: Completion,
        select: bool,
        artifact: ArtifactRegistration,
        score: int,
    ) -> None:
        if not self.guards:
            return
        guard, store, now = self._guard(data), self._store(data), self._now(data)
        own = [s for s in OBSERVATION_SLOTS if s.attempt_slot_id == guard.slot_id]
        slot = data.draw(st.sampled_from([*own, *own, *own, slot]), label="slot")
        others = [g.attempt_id for g in self.guards]
        author = data.draw(st.sampled_from([guard.attempt_id] * 3 + others), label="author")
        observation = Observation(
            slot_id=slot.id,
            attempt_id=author,
            valid=valid,
            completion=completion,
            result={"score": score},
        )
        known = [*sorted(self.model.state.artifacts), "run-store-v1:other-" + "0" * 64]
        references = data.draw(reference_lists(["result", "metrics"], known), label="references")
        receipt = self._lockstep(
            store,
            lambda w: w.register_observation(
                guard, observation, artifact, references, select=select, now_ns=now
            ),
        )
        self._keep(receipt and receipt.attempt)

    @rule(data=st.data(), outcome=outcomes, artifact=attempt_artifacts)
    def commit_finalization(
        self, data: st.DataObject, outcome: Any, artifact: ArtifactRegistration
    ) -> None:
        if not self.guards:
            return
        guard, store = self._guard(data), self._store(data)
        known = [*sorted(self.model.state.artifacts), artifact.id, "run-store-v1:other-" + "0" * 64]
        references = data.draw(reference_lists(["dataset", "source"], known), label="references")
        now = self._now(data)
        finished = data.draw(st.integers(-30, 3).map(lambda d: max(0, now + d)), label="finished")
        self._lockstep(
            store,
            lambda w: w.commit_finalization(guard, outcome, artifact, references, finished, now),
        )

    @rule(data=st.data(), size=st.integers(2, 5))
    def write_batch(self, data: st.DataObject, size: int) -> None:
        """Group commit (SPEC.md section 8, "Write batches"): ``size`` writer operations
        drawn as the single rules draw them, a guard now and then taken from an earlier step
        of the same batch (a pending), applied as one batch on the store and as the sequence
        of the model's operations: every step's result or refusal code must agree (a step
        whose pending was refused: batch_dependency_refused on both sides)."""
        recipe: list[Callable[[WriteBatch, list[Pending[Any]]], Pending[Any]]] = []
        chainable: list[tuple[int, bool]] = []
        """(step, whether its result holds the guard in ``.attempt``) of guard steps."""
        for number in range(size):
            operation = data.draw(
                st.sampled_from(
                    ["reserve", "advance", "advance", "renew", "begin_finalization", "commit"]
                ),
                label="operation",
            )
            now = self._now(data)
            if operation == "reserve":
                slot = data.draw(st.sampled_from(SLOT_IDS), label="slot")
                authorization = data.draw(authorizations, label="authorization")
                lease = self._lease(data)
                recipe.append(
                    lambda b, p, s=slot, a=authorization, r=lease, t=now: b.reserve(s, a, r, t)
                )
                chainable.append((number, False))
                continue
            chain = bool(chainable) and (
                not self.guards or data.draw(st.booleans(), label="chained")
            )
            if not chain and not self.guards:
                lease = self._lease(data)  # nothing to guard yet: a reservation instead
                recipe.append(
                    lambda b, p, r=lease, t=now: b.reserve(SLOT_IDS[0], Next(retry=True), r, t)
                )
                chainable.append((number, False))
                continue
            if chain:
                step, wrapped = data.draw(st.sampled_from(chainable), label="from step")
                guard: Any = (step, wrapped)
            else:
                guard = self._guard(data)

            def resolve(p: list[Pending[Any]], g: Any = guard) -> Any:
                if isinstance(g, OwnedAttempt):
                    return g
                return p[g[0]].then(lambda r: r.attempt) if g[1] else p[g[0]]

            if operation == "advance":
                phase = data.draw(st.sampled_from(ALL_STATES), label="phase")
                recipe.append(lambda b, p, r=resolve, f=phase, t=now: b.advance(r(p), f, t))
                chainable.append((number, False))
            elif operation == "renew":
                expires = max(0, self.clock + data.draw(st.integers(-5, 60), label="ttl"))
                recipe.append(lambda b, p, r=resolve, e=expires, t=now: b.renew(r(p), e, t))
                chainable.append((number, False))
            elif operation == "begin_finalization":
                lease = self._lease(data)
                recipe.append(
                    lambda b, p, r=resolve, c=lease, t=now: b.begin_finalization(r(p), c, t)
                )
                chainable.append((number, True))
            else:
                outcome = data.draw(outcomes, label="outcome")
                artifact = data.draw(attempt_artifacts, label="artifact")
                recipe.append(
                    lambda b, p, r=resolve, o=outcome, a=artifact, t=now: b.commit_finalization(
                        r(p), o, a, [], t, t
                    )
                )

        def call(writer: Writer) -> list[Any]:
            batch = WriteBatch()
            pendings: list[Pending[Any]] = []
            for build in recipe:
                pendings.append(build(batch, pendings))
            writer.apply_batch(batch)
            return [outcome_of(pending.result) for pending in pendings]

        results = self._lockstep(self._store(data), call)
        for kind, value in results or []:
            event(f"batch step: {kind}")
            if kind == "ok":
                self._keep(getattr(value, "attempt", value))

    @rule(
        data=st.data(),
        kind=publish_kinds,
        payload=st.one_of(contents, contents, contents, hostile_contents),
    )
    def publish_artifact(self, data: st.DataObject, kind: ArtifactKind, payload: Payload) -> None:
        if not self.guards:
            return
        guard, store = self._guard(data), self._store(data)
        clock = self._clock(data, guard)
        self._lockstep(store, lambda w: w.publish_artifact(guard, kind, payload, clock.fresh()))

    @rule(
        data=st.data(),
        outcome=outcomes,
        payload=st.one_of(contents, contents, contents, hostile_contents),
    )
    def publish_finalization(self, data: st.DataObject, outcome: Any, payload: Payload) -> None:
        if not self.guards:
            return
        guard, store = self._guard(data), self._store(data)
        clock = self._clock(data, guard)
        known = [*sorted(self.model.state.artifacts), "run-store-v1:other-" + "0" * 64]
        references = data.draw(reference_lists(["dataset"], known), label="references")
        self._lockstep(
            store,
            lambda w: w.publish_finalization(guard, outcome, references, payload, clock.fresh()),
        )

    @rule(data=st.data())
    def recover(self, data: st.DataObject) -> None:
        """A recovery pass: mostly after some or every owner expired (at, or just before, a
        lease's expiry, or past them all), sometimes at the creeping clock; stages, orphans
        and stranded claims come from publications refused part way (a clock leaving the
        range after the rename, a hostile payload) and from leases left to expire."""
        expiries = sorted({lease.expires_at_ns for lease in self.model.state.leases.values()})
        choices = [st.integers(0, 2).map(lambda d: self.clock + d)]
        if expiries:
            choices.append(st.sampled_from(expiries))
            choices.append(st.sampled_from(expiries).map(lambda e: max(0, e - 1)))
            choices.append(st.just(max(self.clock, expiries[-1]) + 1))
        t_ns = data.draw(st.one_of(*choices), label="recovery time")
        self.clock = max(self.clock, t_ns)
        report = self._lockstep(self._store(data), lambda w: w.recover(at(t_ns).fresh()))
        if report is not None:
            for name, items in (
                ("terminal", report.terminals),
                ("imported", report.imported_artifacts),
                ("quarantined", report.quarantined_stages),
                ("busy", report.busy_stages),
                ("rejected", report.rejected_artifacts),
            ):
                if items:
                    event(f"recovery: {name}")
            for terminal in report.terminals:
                event(f"recovered: {terminal.state.value}")
            for rejection in report.rejected_artifacts:
                event(f"recovery rejected: {rejection.code}")

    @rule(data=st.data(), outcome=outcomes, final=st.booleans(), dies=st.integers(1, 3))
    def die_while_publishing(
        self, data: st.DataObject, outcome: Any, final: bool, dies: int
    ) -> None:
        """A publisher of a current guard that dies at its ``dies``-th clock sample after
        staging (its clock leaves the range there, refused on both sides): before the
        rename a registered stage is left, after it a verified orphan too, which recovery
        imports (a final artifact) or registers (an independent one) once its owner
        expires."""
        current = self._current()
        if not current:
            return
        guard = data.draw(st.sampled_from(current), label="dying publisher")
        store, start = self._store(data), self.clock + 1
        samples = [start, start + 1, start + 2, start + 3]
        samples[dies if final else min(dies, 2)] = 2**63
        clock = ClockScript(samples=tuple(samples))
        self.clock = start + 3
        payload = Payload(files=(("log", f"died at {dies}".encode()),))
        if final:
            self._lockstep(
                store,
                lambda w: w.publish_finalization(guard, outcome, [], payload, clock.fresh()),
            )
        else:
            kind = ArtifactKind.DATASET
            self._lockstep(store, lambda w: w.publish_artifact(guard, kind, payload, clock.fresh()))

    @rule(data=st.data())
    def hold_or_release_a_stage_lock(self, data: st.DataObject) -> None:
        """Hold a stage's lock as a live publisher in another process would (recovery must
        then list the stage as busy and defer its attempt), or release one held."""
        directory = os.path.join(self.root, staging.ARTIFACTS_DIR)
        names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
        stages = [name for name in names if name.startswith(staging.STAGE_PREFIX)]
        choices = sorted({*stages, *self.held})
        if not choices:
            return
        name = data.draw(st.sampled_from(choices), label="stage")
        if name in self.held:
            os.close(self.held.pop(name))
            return
        lock = os.path.join(directory, name, staging.STAGE_LOCK_NAME)
        if not os.path.isfile(lock):
            return
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.held[name] = fd
        event("stage lock held")

    @rule(data=st.data())
    def a_second_acceptance_is_refused_by_the_schema(self, data: st.DataObject) -> None:
        """A rogue writer that skips every writer check (it runs the writer's own history
        steps directly) cannot accept a second attempt in a satisfied slot: the schema
        refuses it (the claim-ownership trigger first, one_accepted_attempt_per_slot behind
        it), and the invariant then shows nothing changed."""
        rogues = sorted(
            row.id
            for row in self.model.state.attempts.values()
            if row.state.value not in TERMINAL_STATES
            and self.model.state.slot_satisfied(row.slot_id)
        )
        if not rogues:
            return
        event("rogue acceptance attempted")
        connection = self.stores[0]._require_connection()
        record = load_attempt(connection, data.draw(st.sampled_from(rogues)))
        assert record is not None
        final = artifact(ArtifactKind.ATTEMPT, 9)
        with pytest.raises(sqlite3.IntegrityError), sql.immediate_transaction(connection):
            if record.state is not AttemptState.FINALIZING:
                payload = payloads.finalizing_payload(record.state, record.revision + 1, None)
                record, _ = attempts.transition(
                    connection,
                    record,
                    record.updated_at_ns,
                    AttemptState.FINALIZING,
                    payloads.ATTEMPT_FINALIZING,
                    payload,
                )
            at = record.updated_at_ns
            finalization.finish(connection, record, at, at, Accepted(), final, [])

    @rule(data=st.data(), outcome=st.one_of(st.just(Accepted()), outcomes), stop=st.integers(2, 10))
    def drive_an_owned_attempt(self, data: st.DataObject, outcome: Any, stop: int) -> None:
        """Drive one current guard a few valid steps at once (phases, claim, selected
        observation, terminal outcome), each step still in lockstep, so that generated
        programs reach claims, selections and acceptance often."""
        current = self._current()
        if not current:
            return
        guard: Any = data.draw(st.sampled_from(current), label="driven")
        store = self._store(data)
        steps = 0
        while guard is not None and steps < stop:
            steps += 1
            self.clock += 1
            now, state = self.clock, guard.state
            if state in DRIVE_PATH[:-1]:
                phase = DRIVE_PATH[DRIVE_PATH.index(state) + 1]
                guard = self._keep_and_return(
                    self._lockstep(store, lambda w, g=guard, p=phase, t=now: w.advance(g, p, t))
                )
            elif (
                state is not AttemptState.FINALIZING
                and not isinstance(outcome, Accepted)
                and (data.draw(st.booleans(), label="without claim"))
            ):
                guard = self._keep_and_return(
                    self._lockstep(
                        store,
                        lambda w, g=guard, t=now: w.advance(g, AttemptState.FINALIZING, t),
                    )
                )
            elif state is not AttemptState.FINALIZING:
                self.lease_serial += 1
                lease = LeaseRequest(
                    lease_id=f"lease-u{self.lease_serial}",
                    owner_token=guard.owner_token,
                    expires_at_ns=now + 100,
                )
                disposition = self._lockstep(
                    store, lambda w, g=guard, r=lease, t=now: w.begin_finalization(g, r, t)
                )
                guard = self._keep_and_return(disposition and disposition.attempt)
            elif guard.claim_lease_id is not None and not self._selected(guard):
                slot = next(o for o in OBSERVATION_SLOTS if o.attempt_slot_id == guard.slot_id)
                observation = Observation(
                    slot_id=slot.id,
                    attempt_id=guard.attempt_id,
                    valid=True,
                    completion=Completion.REACHED,
                    result={"score": steps},
                )
                seen = artifact(ArtifactKind.OBSERVATION, 10 + steps)
                receipt = self._lockstep(
                    store,
                    lambda w, g=guard, o=observation, a=seen, t=now: w.register_observation(
                        g, o, a, (), select=True, now_ns=t
                    ),
                )
                guard = receipt and receipt.attempt
            elif data.draw(st.booleans(), label="publish the outcome"):
                script = ClockScript(samples=(now,))
                self._lockstep(
                    store,
                    lambda w, g=guard, c=script: w.publish_finalization(
                        g, outcome, [], Payload(files=(("log", b"done"),)), c.fresh()
                    ),
                )
                self.clock += 4
                return
            else:
                final = artifact(ArtifactKind.ATTEMPT, 20 + self.clock % 7)
                self._lockstep(
                    store,
                    lambda w, g=guard, a=final, t=now: w.commit_finalization(
                        g, outcome, a, [], t, t
                    ),
                )
                return

    def _selected(self, guard: OwnedAttempt) -> bool:
        slots = [o.id for o in OBSERVATION_SLOTS if o.attempt_slot_id == guard.slot_id]
        return all(slot in self.model.state.selections for slot in slots)

    def _keep_and_return(self, guard: Any) -> Any:
        self._keep(guard)
        return guard

    # --- the invariant ----------------------------------------------------------------------

    @invariant()
    def durable_projection_equals_the_model(self) -> None:
        database = self.stores[0].database_path
        assert store_projection(database) == model_projection(self.model.state)

    @invariant()
    def every_published_artifact_verifies_at_its_address(self) -> None:
        """Registrations the rules made up (no directory) are skipped; an artifact the
        publisher registered must be on disk, complete and at its content address."""
        for registration in self.model.state.artifacts.values():
            path = f"{self.root}/{registration.path}"
            if not os.path.isdir(path):
                continue
            event("published artifact verified")
            completed = objects.verify(path, sync=False)
            assert completed.tree_sha256 == registration.content_sha256
            assert completed.manifest_sha256 == registration.manifest_sha256


TestWriterMatchesModel = WriterMatchesModel.TestCase
# At least this much in the test command (about two minutes); the nightly profile's larger
# numbers win when HYPOTHESIS_PROFILE=nightly is loaded.
TestWriterMatchesModel.settings = settings(
    max_examples=max(200, settings().max_examples),
    stateful_step_count=max(60, settings().stateful_step_count),
    # The explain phase re-runs a shrunk program hundreds of times (minutes here) only to
    # annotate lines; the shrunk program itself is the useful report.
    phases=[phase for phase in settings().phases if phase is not Phase.explain],
)
