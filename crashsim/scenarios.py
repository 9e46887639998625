"""The crash campaigns' scenarios: initialization and every writer operation.

Rules of this file: values and deterministic functions only. A :class:`Scenario` is a
fixture recipe (``setup`` steps run once on a fresh store, which is then closed) plus the
``steps`` whose every boundary is a crash point; the harness opens the store before them
(the step "open") and closes it after. A :class:`Step` is written once against the
:class:`~runstore.crashsim.writers.Writer` interface, so the same step runs on the store
and on the model; ``store_action`` exists only for the deliberately faulty scenarios of
:mod:`runstore.crashsim.faulty`. Guards flow between steps through a context dict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import attrs
from runstore import RunStore
from runstore.crashsim.writers import Writer
from runstore.model import scenarios as fx
from runstore.records import (
    Accepted,
    ArtifactKind,
    AttemptState,
    Censored,
    Failed,
    FirstAttempt,
    Next,
    OwnedAttempt,
    RetryAuthorization,
    Superseded,
    TerminalOutcome,
)

Context = dict[str, OwnedAttempt]
Action = Callable[[Writer, Context], object]
StoreAction = Callable[[RunStore, Context], object]

FIXTURE: Final = fx.slot_fixture(name="main")
"""The one-shot slot every writer scenario registers."""
MEMBER: Final = FIXTURE.observation_slots[0]


@attrs.frozen
class Step:
    """One writer operation of a scenario."""

    name: str
    action: Action
    store_action: StoreAction | None = None

    def on_store(self, store: RunStore, context: Context) -> object:
        """Run the step on an open store."""
        if self.store_action is not None:
            return self.store_action(store, context)
        return self.action(store, context)


@attrs.frozen
class Scenario:
    """A campaign's scenario: its fixture recipe and its crash-tested steps."""

    name: str
    setup: tuple[Step, ...]
    steps: tuple[Step, ...]
    initialized: bool = True
    """False for the initialization campaign, whose fixture is an empty root."""


# --- step builders ------------------------------------------------------------------------


def register() -> Step:
    def action(writer: Writer, context: Context) -> object:
        return writer.register_one_shot(
            FIXTURE.candidate, FIXTURE.run, FIXTURE.attempt_slot, MEMBER
        )

    return Step("register_one_shot", action)


def reserve(
    name: str,
    authorization: RetryAuthorization,
    lease_id: str,
    now: int,
    owner: str = fx.OWNER,
) -> Step:
    def action(writer: Writer, context: Context) -> object:
        lease = fx.lease(lease_id, 10_000, owner)
        guard = writer.reserve(FIXTURE.slot_id, authorization, lease, now)
        context[name] = guard
        return guard

    return Step(f"reserve {name}", action)


def advance(name: str, phase: AttemptState, now: int) -> Step:
    def action(writer: Writer, context: Context) -> object:
        guard = writer.advance(context[name], phase, now)
        context[name] = guard
        return guard

    return Step(f"advance {name} to {phase.value}", action)


def path(name: str, phases: Sequence[AttemptState], now: int) -> tuple[Step, ...]:
    return tuple(advance(name, phase, now + offset) for offset, phase in enumerate(phases))


def renew(name: str, expires: int, now: int) -> Step:
    def action(writer: Writer, context: Context) -> object:
        return writer.renew(context[name], expires, now)

    return Step(f"renew {name}", action)


def finalize(name: str, lease_id: str, now: int) -> Step:
    def action(writer: Writer, context: Context) -> object:
        guard = context[name]
        disposition = writer.begin_finalization(
            guard, fx.lease(lease_id, 10_000, guard.owner_token), now
        )
        context[name] = disposition.attempt
        return disposition

    return Step(f"begin_finalization {name}", action)


def observe(name: str, label: str, select: bool, now: int) -> Step:
    def action(writer: Writer, context: Context) -> object:
        guard = context[name]
        return writer.register_observation(
            guard,
            fx.observation(MEMBER, guard),
            fx.artifact(ArtifactKind.OBSERVATION, label),
            select,
            now,
        )

    selected = "selected" if select else "unselected"
    return Step(f"register_observation {name} {selected}", action)


def conclude(
    name: str,
    outcome: TerminalOutcome,
    label: str,
    now: int,
    references: tuple[tuple[str, str], ...] = (),
) -> Step:
    def action(writer: Writer, context: Context) -> object:
        artifact = fx.artifact(ArtifactKind.ATTEMPT, label)
        return writer.commit_finalization(context[name], outcome, artifact, references, now)

    return Step(f"commit_finalization {name} {outcome.state.value}", action)


# --- the catalog --------------------------------------------------------------------------

A = "attempt-a"
B = "attempt-b"
EXECUTING = fx.EXECUTION_PATH
OBSERVATION_ID = fx.artifact(ArtifactKind.OBSERVATION, "result-a").id

REGISTERED = (register(),)
RESERVED = (*REGISTERED, reserve(A, FirstAttempt(), "reservation-a", 1_000))
RUNNING = (*RESERVED, *path(A, EXECUTING, 1_100))
CLAIMED = (*RUNNING, finalize(A, "claim-a", 1_200))
OBSERVED = (*CLAIMED, observe(A, "result-a", True, 1_300))
# B (another owner, an explicitly authorized retry) claims first; A arrives second.
CONTENDED = (
    *RESERVED,
    reserve(B, Next(retry=True), "reservation-b", 1_010, owner=fx.OTHER_OWNER),
    *path(B, EXECUTING, 1_050),
    finalize(B, "claim-b", 1_090),
    *path(A, EXECUTING, 1_100),
)
# Every execution edge: R-M-S-P-E, E-C, C-V, V-Ev, Ev-E, E-V.
ALL_EDGES = (
    *EXECUTING,
    AttemptState.CHECKPOINTING,
    AttemptState.VALIDATING,
    AttemptState.EVALUATING,
    AttemptState.EXECUTING,
    AttemptState.VALIDATING,
)


def _scenario(name: str, setup: tuple[Step, ...], *steps: Step) -> Scenario:
    return Scenario(name=name, setup=setup, steps=steps)


SCENARIOS: Final[dict[str, Scenario]] = {
    scenario.name: scenario
    for scenario in (
        Scenario(name="init", setup=(), steps=(), initialized=False),
        _scenario("register_one_shot", (), register()),
        _scenario("reserve", REGISTERED, reserve(A, FirstAttempt(), "reservation-a", 1_000)),
        _scenario("advance", RESERVED, *path(A, ALL_EDGES, 1_100)),
        _scenario("renew", RUNNING, renew(A, 20_000, 1_150)),
        _scenario("renew_claimed", CLAIMED, renew(A, 20_000, 1_250)),
        _scenario("begin_finalization_claimed", RUNNING, finalize(A, "claim-a", 1_200)),
        _scenario("begin_finalization_superseded", CONTENDED, finalize(A, "claim-a", 1_200)),
        _scenario("register_observation_selected", CLAIMED, observe(A, "result-a", True, 1_300)),
        _scenario("register_observation_unselected", RUNNING, observe(A, "result-a", False, 1_300)),
        _scenario(
            "commit_accepted",
            OBSERVED,
            conclude(A, Accepted(), "attempt-a", 1_400, (("evidence", OBSERVATION_ID),)),
        ),
        _scenario("commit_censored", CLAIMED, conclude(A, Censored(reason="budget"), "a", 1_400)),
        _scenario(
            "commit_superseded",
            (*CONTENDED, finalize(A, "claim-a", 1_200)),
            conclude(A, Superseded(), "attempt-a", 1_400),
        ),
        _scenario(
            "commit_failed",
            OBSERVED,
            conclude(A, Failed(code="worker_crashed", details={"exit": 3}), "attempt-a", 1_400),
        ),
    )
}
"""Every campaign of the catalog, by name."""

FULL_IN_SUBSET: Final = ("init", "commit_accepted")
"""The scenarios the representative subset runs at every boundary."""
