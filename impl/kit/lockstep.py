"""The model-as-oracle lockstep over the protocol (SPEC.md section 18.4): a Hypothesis
rule-based machine draws writer calls (and, at level ``store``, publications, publishers
that die part way and recovery passes), makes each on the model and on the driver through
:class:`~.pair.Pair`, and compares outcomes and then projections.

Rules of this file: every example opens a fresh root on the one driver process; guards
come from the model (current, stale and forged); a failure is shrunk by Hypothesis, and the
transcript of the shrunk run (its request and response lines) is kept in
:attr:`LockstepRun.transcript` for ``runstore conformance --replay``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from typing import Any

import attrs
from hypothesis import HealthCheck
from hypothesis import Verbosity
from hypothesis import assume as reject_unless
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import rule
from hypothesis.stateful import run_state_machine_as_test
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.receipts import OwnedAttempt
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import FirstAttempt
from runstore.requests import LeaseRequest
from runstore.requests import Next
from runstore.requests import Reference
from runstore.requests import Retry
from runstore.requests import Superseded
from runstore.testing import fixtures as sc
from runstore.testing.publishing import ClockScript
from runstore.testing.publishing import Payload
from runstore.testing.script import Call

from .cases import Drivers
from .client import ProtocolFailure
from .client import Transcript
from .pair import Pair

OWNERS = (sc.OWNER, sc.OTHER_OWNER)
LEASE_IDS = tuple(f"lease-{n}" for n in range(8))
FIXTURES = sc.LOCKSTEP_SLOTS
CONFLICTING = sc.CONFLICTING
UNREGISTERED = sc.UNREGISTERED
SLOT_IDS = (FIXTURES[0].slot_id, FIXTURES[1].slot_id, UNREGISTERED.slot_id)
MEMBERS = {f.slot_id: f.observation_slots[0] for f in (*FIXTURES, UNREGISTERED)}
ALL_STATES = tuple(AttemptState)

# The writer's own lockstep machine (conformance/writer/test_stateful.py) draws these too.
authorizations = st.one_of(
    st.just(FirstAttempt()),
    st.builds(Next, retry=st.booleans()),
    st.integers(0, 3).flatmap(
        lambda n: st.builds(Retry, next_index=st.just(n), max_index=st.integers(n, n + 2))
    ),
)
outcomes = st.one_of(
    st.just(Accepted()),
    st.just(Superseded()),
    st.builds(Censored, reason=st.sampled_from(["budget", "timeout", 'délai "x"'])),
    st.builds(
        Failed, code=st.sampled_from(["worker_crashed", "oom"]), details=st.just({"exit": 3})
    ),
)
artifacts = st.builds(
    sc.artifact,
    st.sampled_from([ArtifactKind.ATTEMPT, ArtifactKind.OBSERVATION, ArtifactKind.DATASET]),
    st.sampled_from(["x", "y", "z"]),
)
payloads = st.one_of(
    st.builds(
        lambda first, nested: Payload(
            files=(("data.bin", bytes([first])),) + ((("sub/é.txt", b"nested"),) if nested else ()),
            executables=frozenset({"data.bin"}) if first == 2 else frozenset(),
        ),
        st.integers(0, 2),
        st.booleans(),
    ),
    st.just(Payload(files=(("manifest.json", b"{}"),))),
)


@attrs.define
class LockstepRun:
    """What a lockstep campaign did: examples run, and on failure its message and the
    shrunk run's transcript."""

    examples: int = 0
    failure: str = ""
    transcript: str = ""
    shrink_seconds: float = 20.0
    shrink_deadline: float | None = None
    """Once a failure is found, shrinking stops here: later examples are rejected."""

    def failed(self, message: str, transcript: str) -> None:
        """Keep the shortest failing run seen (the shrinker's best)."""
        if self.shrink_deadline is None:
            self.shrink_deadline = time.monotonic() + self.shrink_seconds
        if not self.transcript or len(transcript) <= len(self.transcript):
            self.failure, self.transcript = message, transcript


class WriterLockstep(RuleBasedStateMachine):
    """Writer operations in lockstep; :func:`run_lockstep` binds ``drivers``."""

    drivers: Drivers
    run: LockstepRun

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="runstore-kit-lockstep-")
        driver = self.drivers.current()
        driver.transcript = self.transcript = Transcript()
        self.pair = Pair(driver, self.root)
        self.guards: list[OwnedAttempt] = []
        self.clock = 1_000
        self.opened = False

    def teardown(self) -> None:
        try:
            if self.opened and self.drivers.alive(self.pair.driver):
                self.pair.driver.request("close", {})
        except ProtocolFailure:
            self.drivers.end()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _call(self, action: Any) -> Any:
        """``action()``; on any failure the transcript so far is the run's (the shrunk
        example fails last), and a driver that broke the protocol is ended."""
        try:
            return action()
        except ProtocolFailure as failure:
            self.run.failed(f"protocol: {failure}", self.transcript.text())
            self.drivers.end()
            raise
        except Exception as error:
            self.run.failed(f"{type(error).__name__}: {error}", self.transcript.text())
            raise

    def _apply(self, call: Call, guard: OwnedAttempt | None = None) -> None:
        context: dict[str, OwnedAttempt] = {"g": guard} if guard is not None else {}
        kind, _ = self._call(lambda: self.pair.apply(call, context))
        kept = context.get("g")
        if kind == "ok" and kept is not None and kept is not guard:
            self.guards.append(kept)

    # --- drawing --------------------------------------------------------------------------

    def _now(self, data: st.DataObject) -> int:
        expiries = sorted({lease.expires_at_ns for lease in self.pair.model.state.leases.values()})
        choices = [st.integers(0, 2).map(lambda d: self.clock + d)] * 3
        choices.append(st.integers(-8, 25).map(lambda d: max(0, self.clock + d)))
        if expiries:
            choices += [st.sampled_from(expiries), st.sampled_from(expiries).map(lambda e: e - 1)]
        now = data.draw(st.one_of(*choices, st.sampled_from([-1, 2**63])), label="now")
        if 0 <= now < 2**63:
            self.clock = max(self.clock, now)
        return int(now)

    def _lease(self, data: st.DataObject, owner: str | None = None) -> LeaseRequest:
        return LeaseRequest(
            lease_id=data.draw(st.sampled_from(LEASE_IDS), label="lease_id"),
            owner_token=owner or data.draw(st.sampled_from(OWNERS), label="owner"),
            expires_at_ns=max(0, self.clock + data.draw(st.integers(-3, 60), label="ttl")),
        )

    def _current(self) -> list[OwnedAttempt]:
        state = self.pair.model.state
        return [
            g
            for g in self.guards
            if (row := state.attempts.get(g.attempt_id)) is not None
            and (row.revision, row.state) == (g.revision, g.state)
        ]

    def _guard(self, data: st.DataObject) -> OwnedAttempt | None:
        if not self.guards:
            return None
        current = self._current()
        pool = data.draw(
            st.sampled_from([current] * 3 + [self.guards] if current else [self.guards])
        )
        guard = data.draw(st.sampled_from(pool), label="guard")
        forgery = data.draw(
            st.sampled_from(["none"] * 4 + ["owner", "lease", "claim", "revision"]), label="forgery"
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

    # --- rules ----------------------------------------------------------------------------

    @initialize(data=st.data(), count=st.integers(1, 2), attempts=st.integers(0, 2))
    def register_and_reserve(self, data: st.DataObject, count: int, attempts: int) -> None:
        deadline = self.run.shrink_deadline
        reject_unless(deadline is None or time.monotonic() <= deadline)
        self.run.examples += 1
        self._call(self.pair.open)
        self.opened = True
        for fixture in FIXTURES[:count]:
            self._register(fixture)
        for _ in range(attempts):
            slot = data.draw(st.sampled_from(SLOT_IDS[:count]), label="slot")
            lease = self._lease(data)
            self._apply(Call("reserve", "reserve", self._reserve_args(slot, lease), "g"))

    def _reserve_args(self, slot: str, lease: LeaseRequest) -> dict[str, Any]:
        return {
            "slot_id": slot,
            "authorization": Next(retry=True),
            "lease": lease,
            "now_ns": self.clock,
        }

    def _register(self, fixture: Any) -> None:
        arguments = {
            "decision": fixture.decision,
            "run": fixture.run,
            "attempt_slot": fixture.attempt_slot,
            "observation_slot": fixture.observation_slots[0],
        }
        self._apply(Call("register", "register_one_shot", arguments))

    @rule(which=st.sampled_from([0, 1, 2]))
    def register(self, which: int) -> None:
        self._register((*FIXTURES, CONFLICTING)[which])

    @rule(data=st.data(), slot=st.sampled_from(SLOT_IDS), authorization=authorizations)
    def reserve(self, data: st.DataObject, slot: str, authorization: Any) -> None:
        arguments = {
            "slot_id": slot,
            "authorization": authorization,
            "lease": self._lease(data),
            "now_ns": self._now(data),
        }
        self._apply(Call("reserve", "reserve", arguments, "g"))

    @rule(data=st.data(), phase=st.sampled_from(ALL_STATES))
    def advance(self, data: st.DataObject, phase: AttemptState) -> None:
        guard = self._guard(data)
        if guard is not None:
            arguments = {"phase": phase, "now_ns": self._now(data)}
            self._apply(Call("advance", "advance", arguments, "g"), guard)

    @rule(data=st.data(), extension=st.integers(-5, 60))
    def renew(self, data: st.DataObject, extension: int) -> None:
        guard = self._guard(data)
        if guard is not None:
            arguments = {"expires_at_ns": max(0, self.clock + extension), "now_ns": self._now(data)}
            self._apply(Call("renew", "renew", arguments, "g"), guard)

    @rule(data=st.data())
    def begin_finalization(self, data: st.DataObject) -> None:
        guard = self._guard(data)
        if guard is not None:
            arguments = {"lease": self._lease(data, guard.owner_token), "now_ns": self._now(data)}
            self._apply(Call("begin_finalization", "begin_finalization", arguments, "g"), guard)

    @rule(data=st.data(), artifact=artifacts, select=st.booleans(), valid=st.booleans())
    def register_observation(
        self, data: st.DataObject, artifact: Any, select: bool, valid: bool
    ) -> None:
        guard = self._guard(data)
        if guard is None:
            return
        observation = sc.observation(
            MEMBERS.get(guard.slot_id, MEMBERS[SLOT_IDS[2]]), guard, valid=valid
        )
        known = sorted(self.pair.model.state.artifacts) or [artifact.id]
        references = data.draw(
            st.lists(st.builds(Reference, st.just("source"), st.sampled_from(known)), max_size=1)
        )
        arguments = {
            "observation": observation,
            "artifact": artifact,
            "references": references,
            "select": select,
            "now_ns": self._now(data),
        }
        self._apply(Call("register_observation", "register_observation", arguments, "g"), guard)

    @rule(data=st.data(), outcome=outcomes, artifact=artifacts)
    def commit_finalization(self, data: st.DataObject, outcome: Any, artifact: Any) -> None:
        guard = self._guard(data)
        if guard is None:
            return
        now = self._now(data)
        finished = data.draw(st.integers(-30, 3).map(lambda d: max(0, now + d)), label="finished")
        arguments = {
            "outcome": outcome,
            "artifact": artifact,
            "references": [],
            "finished_at_ns": finished,
            "now_ns": now,
        }
        self._apply(Call("commit_finalization", "commit_finalization", arguments, "g"), guard)

    @rule(data=st.data(), select=st.booleans())
    def drive_an_owned_attempt(self, data: st.DataObject, select: bool) -> None:
        """A current guard taken along the success path (so programs reach finalizing)."""
        current = self._current()
        if not current:
            return
        guard: Any = data.draw(st.sampled_from(current), label="driven")
        for phase in (*sc.EXECUTION_PATH, AttemptState.VALIDATING):
            call = Call("drive", "advance", {"phase": phase, "now_ns": self.clock}, "g")
            self._apply(call, guard)
            if self.guards[-1].attempt_id != guard.attempt_id or self.guards[-1].state is not phase:
                return
            guard = self.guards[-1]
        lease = LeaseRequest(
            lease_id="claim-" + guard.attempt_id[-6:],
            owner_token=guard.owner_token,
            expires_at_ns=self.clock + 50,
        )
        arguments = {"lease": lease, "now_ns": self.clock}
        self._apply(Call("drive", "begin_finalization", arguments, "g"), guard)

    @invariant()
    def projections_equal(self) -> None:
        self._call(lambda: self.pair.check_projection("the last step"))


class StoreLockstep(WriterLockstep):
    """Writer operations plus publication and recovery."""

    def _clock_script(self, data: st.DataObject, guard: OwnedAttempt) -> ClockScript:
        start = max(0, min(self._now(data), 2**62))
        shape = data.draw(st.sampled_from(["steady"] * 3 + ["backward", "expiry", "range"]))
        samples = [start, start + 1, start + 2, start + 3]
        if shape == "backward":
            samples = [start, max(0, start - 5), max(0, start - 9), start + 1]
        elif shape == "expiry":
            expiries = sorted({x.expires_at_ns for x in self.pair.model.state.leases.values()})
            jump = data.draw(st.sampled_from(expiries or [start + 10_000]), label="jump")
            samples = [start, start + 1, jump, jump + 1]
        elif shape == "range":
            samples[data.draw(st.integers(0, 3), label="position")] = 2**63
        self.clock = max(self.clock, *(t for t in samples if t < 2**63))
        return ClockScript(samples=tuple(samples))

    @rule(data=st.data(), payload=payloads)
    def publish_artifact(self, data: st.DataObject, payload: Payload) -> None:
        guard = self._guard(data)
        if guard is None:
            return
        kind = data.draw(st.sampled_from([ArtifactKind.DATASET, ArtifactKind.OBSERVATION]))
        arguments = {"kind": kind, "populate": payload, "clock": self._clock_script(data, guard)}
        self._apply(Call("publish_artifact", "publish_artifact", arguments, "g"), guard)

    @rule(data=st.data(), outcome=outcomes, payload=payloads)
    def publish_finalization(self, data: st.DataObject, outcome: Any, payload: Payload) -> None:
        guard = self._guard(data)
        if guard is None:
            return
        arguments = {
            "outcome": outcome,
            "references": [],
            "populate": payload,
            "clock": self._clock_script(data, guard),
        }
        self._apply(Call("publish_finalization", "publish_finalization", arguments, "g"), guard)

    @rule(data=st.data())
    def recover(self, data: st.DataObject) -> None:
        expiries = sorted({x.expires_at_ns for x in self.pair.model.state.leases.values()})
        choices = [st.integers(0, 2).map(lambda d: self.clock + d)]
        if expiries:
            choices.append(st.sampled_from(expiries))
            choices.append(st.just(max(self.clock, expiries[-1]) + 1))
        t_ns = data.draw(st.one_of(*choices), label="recovery time")
        self.clock = max(self.clock, t_ns)
        self._apply(Call("recover", "recover", {"clock": ClockScript(samples=(t_ns,))}))


def run_lockstep(
    drivers: Drivers, *, store: bool, examples: int, steps: int, shrink_seconds: float = 20.0
) -> LockstepRun:
    """Run the machine (``store``: with publication and recovery) for ``examples``
    programs of up to ``steps`` steps; the result says whether (and how) it failed."""
    base = StoreLockstep if store else WriterLockstep
    run = LockstepRun(shrink_seconds=shrink_seconds)
    machine = type(base.__name__, (base,), {"drivers": drivers, "run": run})
    options = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        derandomize=True,
        verbosity=Verbosity.quiet,
    )
    try:
        run_state_machine_as_test(machine, settings=options)
    except Exception as error:  # a failure the machine did not record
        if not run.transcript:
            run.failure = f"{type(error).__name__}: {error}"
    return run
