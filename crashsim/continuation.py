"""What a user runs after a crash, on the reopened store and on the model, in lockstep.

Rules of this file: the continuation uses only public writer calls and fresh leases that
start after every lease in the state has expired (the crashed process is dead, and its
attempt is never resumed: after a crash the store is first recovered, see
:mod:`runstore.crashsim.recovered`). Each call runs on the
model first and then on the store; the two outcomes (result or refusal code) must be
equal. The checks: an explicitly authorized retry (``Next(retry=True)``) of an unsatisfied
slot runs to a terminal outcome (accepted when it wins the claim), a satisfied slot
refuses reservation with ``slot_satisfied``, at most one attempt per slot is ever
accepted, and the final durable projection equals the model's.

A publication scenario is first *resumed* (:class:`Resumption`), as its user would after a
crash, while the crashed attempt's leases are still live (the scenario's own times): the
interrupted step is run again from the start (a new stage; a stage or orphan the crash
left behind stays where it is, recovery's business), then the remaining steps and the
scenario's ``finish`` steps, all in lockstep. Stage tokens for the resumption start at
:data:`RESUME_TOKEN` on both sides, far from the scenario's own. Every final artifact a
resumed ``publish_finalization`` returns must verify on disk with its registered digests,
and its ``outcome.json`` must be exactly the model's document for the attempt as it was
before the call; an accepted one leaves exactly one accepted attempt in its slot. A
leftover unreleased staging lease of the attempt is released by its terminal commit (it
releases every lease of the attempt), so no recovery is needed before the generic
continuation then runs from the resumed state.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Final

import attrs
from runstore import RunStore
from runstore import model as m
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.crashsim.scenarios import FIXTURE
from runstore.crashsim.scenarios import MEMBER
from runstore.crashsim.scenarios import Scenario
from runstore.crashsim.scenarios import Step
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.errors import RunStoreError
from runstore.model import outcome_document
from runstore.receipts import ClaimDisposition
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedFinalization
from runstore.requests import Accepted
from runstore.requests import Failed
from runstore.requests import LeaseRequest
from runstore.requests import Next
from runstore.requests import Superseded
from runstore.store.publication import objects
from runstore.store.publication import staging
from runstore.testing import fixtures as fx
from runstore.testing import script
from runstore.testing.lockstep import Diverged
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import Outcome
from runstore.testing.lockstep import StageTokens
from runstore.testing.lockstep import Writer
from runstore.testing.lockstep import lockstep
from runstore.testing.lockstep import outcome
from runstore.testing.script import Context

if TYPE_CHECKING:
    from runstore.crashsim.harness import ModelRun

RESUME_TOKEN: Final = 0xC0_0000
"""The first stage token of a resumption (the scenarios draw theirs from 1 on)."""


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


def continue_as_user(store: RunStore, state: m.ModelState, *, strict: bool = False) -> str:
    """Run the continuation from ``state`` (the model state the store matched); returns a
    one-line note of what happened, raising :class:`Diverged` on any disagreement. With
    ``strict`` (after recovery) an authorized retry of an unsatisfied slot must win the
    slot's claim: recovery resolved every claim a crash stranded."""
    step = _Lockstep(store, state)
    step.both(
        "register_one_shot",
        lambda w: w.register_one_shot(FIXTURE.decision, FIXTURE.run, FIXTURE.attempt_slot, MEMBER),
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
        note = _retry(step, now, lease, strict)
    _check_final(store, step.model.state)
    return note


@attrs.frozen
class Resumption:
    """How to resume a publication scenario crashed in step ``op_index``: ``steps`` are the
    scenario's steps from the crashed one on, ``context`` the guards before it, and
    ``done[i]`` how many of its transactions the i-th acceptable state has committed (of
    ``count``)."""

    op_index: int
    steps: tuple[Step, ...]
    finish: tuple[Step, ...]
    context: Context
    after: Context
    count: int
    done: tuple[int, ...]

    @classmethod
    def of(
        cls, scenario: Scenario, run: ModelRun, op_index: int, done: Sequence[int]
    ) -> Resumption:
        return cls(
            op_index=op_index,
            steps=scenario.steps[max(op_index - 1, 0) :],
            finish=scenario.finish,
            context=dict(run.contexts[op_index]),
            after=dict(run.contexts[op_index + 1]),
            count=len(run.transactions[op_index]) - 1,
            done=tuple(done),
        )

    def completed(self, matched: int) -> bool:
        """Whether the crashed step completed in the ``matched``-th acceptable state
        (opening never counts as having run the steps)."""
        return self.op_index > 0 and self.done[matched] >= self.count

    def plan(self, matched: int) -> tuple[tuple[Step, ...], Context]:
        """The steps to run and the guards to start from, when the store matched the
        ``matched``-th acceptable state: the crashed step again unless it completed."""
        if self.completed(matched):
            return (*self.steps[1:], *self.finish), dict(self.after)
        return (*self.steps, *self.finish), dict(self.context)

    def resume(self, store: RunStore, state: m.ModelState, matched: int) -> str:
        """Resume from ``state`` (the ``matched``-th acceptable state), then run the
        generic continuation; returns a note, raising :class:`Diverged` on any
        disagreement."""
        steps, context = self.plan(matched)
        model = ModelWriter(state, tokens=StageTokens(RESUME_TOKEN))
        previous = staging.install_token_source(StageTokens(RESUME_TOKEN))
        accepted: set[str] = set()
        try:
            for step in steps:
                before = model.state
                try:
                    result = script.apply_in_lockstep(step.call, model, store, context)
                except Diverged as error:
                    raise Diverged(f"resuming {step.name}: {error}") from error
                except RunStoreError as error:
                    raise Diverged(f"resuming {step.name}: both refused: {error}") from error
                if isinstance(result, PublishedFinalization):
                    check_final_object(store.root, before, step, result)
                    if result.terminal.state is AttemptState.ACCEPTED:
                        accepted.add(result.terminal.slot_id)
        finally:
            staging.install_token_source(previous)
        note = continue_as_user(store, model.state)
        attempts = store_projection(store.database_path)["attempts"]
        for slot in accepted:
            count = sum(1 for row in attempts if row[1] == slot and row[3] == "accepted")
            if count != 1:
                raise Diverged(f"slot {slot} has {count} accepted attempts, not exactly one")
        ran = "continued after the completed step" if self.completed(matched) else "re-ran it"
        return f"{ran} ({len(steps)} steps); then {note}"


def check_final_object(
    root: str, before: m.ModelState, step: Step, receipt: PublishedFinalization
) -> None:
    """The published final artifact verifies with its registered digests, and its
    ``outcome.json`` is the model's document for the attempt as it was before the call."""
    path = os.path.join(root, receipt.artifact.path)
    completed = objects.verify(path, sync=False)
    digests = (completed.tree_sha256, completed.manifest_sha256)
    if digests != (receipt.artifact.content_sha256, receipt.artifact.manifest_sha256):
        raise Diverged(f"{receipt.artifact.path} verifies with other digests {digests}")
    arguments = step.call.arguments
    expected = outcome_document.outcome_document(
        before,
        receipt.terminal.attempt_id,
        arguments["outcome"],
        arguments["references"],
        receipt.terminal.finished_at_ns,
    )
    with open(os.path.join(path, "outcome.json"), "rb") as handle:
        found = handle.read()
    if found != expected:
        raise Diverged(f"{receipt.artifact.path}/outcome.json differs from the model's document")


def _retry(step: _Lockstep, now: int, lease: LeaseRequest, strict: bool) -> str:
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
        if strict:
            raise Diverged("after recovery an authorized retry still lost the slot's claim")
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
        lambda w: w.register_observation(
            claimed, observation, published, (), select=True, now_ns=now + 11
        ),
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
