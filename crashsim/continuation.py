"""What a user runs after a crash, on the reopened store and on the model, in lockstep.

Rules of this file: the continuation uses only public writer calls and fresh leases that
start after every lease in the recovered state has expired (the crashed process is dead
and recovery does not exist yet, so its attempt is never resumed). Each call runs on the
model first and then on the store; the two outcomes (result or refusal code) must be
equal. The checks: an explicitly authorized retry (``Next(retry=True)``) of an unsatisfied
slot runs to a terminal outcome (accepted when it wins the claim), a satisfied slot
refuses reservation with ``slot_satisfied``, at most one attempt per slot is ever
accepted, and the final durable projection equals the model's.
"""

from __future__ import annotations

from collections.abc import Callable

from runstore import RunStore
from runstore import model as m
from runstore.crashsim.scenarios import FIXTURE, MEMBER
from runstore.enums import ArtifactKind, AttemptState
from runstore.receipts import ClaimDisposition, OwnedAttempt
from runstore.requests import Accepted, Failed, LeaseRequest, Next, Superseded
from runstore.testing import fixtures as fx
from runstore.testing.lockstep import Diverged, ModelWriter, Outcome, Writer, lockstep, outcome
from runstore.testing.projection import model_projection, store_projection


class _Lockstep:
    def __init__(self, store: RunStore, state: m.ModelState) -> None:
        self.store = store
        self.model = ModelWriter(state)
        self.calls = 0

    def both(self, what: str, call: Callable[[Writer], object]) -> Outcome:
        self.calls += 1
        try:
            return outcome(lambda: lockstep(self.model, self.store, call))
        except Diverged as error:
            raise Diverged(f"continuation {what}: {error}") from error


def start_time(state: m.ModelState) -> int:
    """A time after every lease expiry and every recorded instant of ``state``."""
    instants = [lease.expires_at_ns for lease in state.leases.values()]
    instants += [event.at_ns for event in state.events]
    return max(instants, default=0) + 1_000


def continue_as_user(store: RunStore, state: m.ModelState) -> str:
    """Run the continuation from ``state`` (the model state the store matched); returns a
    one-line note of what happened, raising :class:`Diverged` on any disagreement."""
    step = _Lockstep(store, state)
    step.both(
        "register_one_shot",
        lambda w: w.register_one_shot(FIXTURE.candidate, FIXTURE.run, FIXTURE.attempt_slot, MEMBER),
    )
    now = start_time(step.model.state)
    slot = FIXTURE.slot_id
    lease = fx.lease("continuation-reservation", now + 100_000)
    if step.model.state.slot_satisfied(slot):
        result = step.both(
            "reserve (satisfied)", lambda w: w.reserve(slot, Next(retry=True), lease, now)
        )
        if result != ("refused", "slot_satisfied"):
            raise Diverged(f"a satisfied slot did not refuse reservation: {result!r}")
        note = "satisfied slot refused a retry"
    else:
        note = _retry(step, now, lease)
    _check_final(store, step.model.state)
    return note


def _retry(step: _Lockstep, now: int, lease: LeaseRequest) -> str:
    slot = FIXTURE.slot_id
    kind, result = step.both("reserve", lambda w: w.reserve(slot, Next(retry=True), lease, now))
    if kind != "ok" or not isinstance(result, OwnedAttempt):
        raise Diverged(f"an authorized retry of an unsatisfied slot was refused: {result!r}")
    guard = result
    for offset, phase in enumerate(fx.EXECUTION_PATH, 1):
        guard = _advance(step, guard, phase, now + offset)
    executing = guard
    claim = fx.lease("continuation-claim", now + 100_000)
    kind, result = step.both(
        "begin_finalization", lambda w: w.begin_finalization(executing, claim, now + 10)
    )
    if not isinstance(result, ClaimDisposition):
        raise Diverged(f"the retry could not begin finalization: {result!r}")
    guard = result.attempt
    attempt = fx.artifact(ArtifactKind.ATTEMPT, f"continuation-{guard.attempt_id}")
    if not result.claimed:
        final = guard
        step.both(
            "commit Superseded",
            lambda w: w.commit_finalization(final, Superseded(), attempt, (), now + 19, now + 20),
        )
        return "retry superseded (the crashed attempt still holds the claim)"
    claimed = guard
    observation = fx.observation(MEMBER, claimed)
    published = fx.artifact(ArtifactKind.OBSERVATION, f"continuation-{claimed.attempt_id}")
    step.both(
        "register_observation",
        lambda w: w.register_observation(claimed, observation, published, (), True, now + 11),
    )
    kind, result = step.both(
        "commit Accepted",
        lambda w: w.commit_finalization(claimed, Accepted(), attempt, (), now + 19, now + 20),
    )
    if kind == "ok":
        again = fx.lease("continuation-again", now + 100_000)
        refused = step.both(
            "reserve after acceptance",
            lambda w: w.reserve(FIXTURE.slot_id, Next(retry=True), again, now + 30),
        )
        if refused != ("refused", "slot_satisfied"):
            raise Diverged(f"the filled slot did not refuse reservation: {refused!r}")
        return "retry accepted; the slot then refused another"
    failure = Failed(code="continuation_unaccepted", details={"refusal": str(result)})
    step.both(
        "commit Failed",
        lambda w: w.commit_finalization(claimed, failure, attempt, (), now + 19, now + 20),
    )
    return f"retry not accepted ({result}); committed Failed"


def _advance(step: _Lockstep, guard: OwnedAttempt, phase: AttemptState, now: int) -> OwnedAttempt:
    _, result = step.both(f"advance to {phase.value}", lambda w: w.advance(guard, phase, now))
    if not isinstance(result, OwnedAttempt):
        raise Diverged(f"the retry could not advance to {phase.value}: {result!r}")
    return result


def _check_final(store: RunStore, state: m.ModelState) -> None:
    projection = store_projection(store.database_path)
    if projection != model_projection(state):
        raise Diverged("after the continuation the store's projection differs from the model's")
    accepted: dict[str, int] = {}
    for row in projection["attempts"]:
        if row[3] == "accepted":
            accepted[row[1]] = accepted.get(row[1], 0) + 1
    for slot, count in accepted.items():
        if count > 1:
            raise Diverged(f"slot {slot} has {count} accepted attempts")
