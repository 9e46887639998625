"""Shared helpers for the model's own tests (``conformance/test_model_*.py``): a
:class:`~runstore.testing.transcript.Transcript` with one registered slot, and short
steps (reserve, execute, claim, select, commit) that assert their results."""

from __future__ import annotations

from runstore import Accepted
from runstore import ArtifactKind
from runstore import Completion
from runstore import ExecutionKind
from runstore import Failed
from runstore import Next
from runstore import OwnedAttempt
from runstore import Reference
from runstore import RetryAuthorization
from runstore import SlotRole
from runstore import TerminalAttempt
from runstore import TerminalOutcome
from runstore.model import Refusal
from runstore.testing import fixtures
from runstore.testing import scenarios
from runstore.testing.fixtures import OWNER
from runstore.testing.fixtures import SlotFixture
from runstore.testing.fixtures import artifact
from runstore.testing.transcript import Transcript

ATTEMPT_ARTIFACT = artifact(ArtifactKind.ATTEMPT, "attempt")


def world(
    kind: ExecutionKind = ExecutionKind.ONE_SHOT,
    role: SlotRole = SlotRole.MEASUREMENT,
    checkpoints: int = 2,
) -> tuple[Transcript, SlotFixture]:
    """A transcript with one registered slot."""
    t = Transcript()
    fixture = fixtures.slot_fixture(kind, role, checkpoints)
    scenarios.register(t, fixture)
    assert fixture.slot_id in t.state.attempt_slots
    return t, fixture


owned = scenarios.owned


def refused(result: object) -> str:
    assert isinstance(result, Refusal), result
    return result.code


def receipt(result: object) -> TerminalAttempt:
    assert isinstance(result, TerminalAttempt), result
    return result


def reserved(
    t: Transcript,
    fixture: SlotFixture,
    *,
    name: str = "reservation-0",
    expires: int = 10_000,
    now: int = 1_000,
    owner: str = OWNER,
    authorization: RetryAuthorization | None = None,
) -> OwnedAttempt:
    authorization = authorization or Next(retry=True)
    return owned(
        scenarios.reserve_in(t, fixture, authorization, name, expires=expires, now=now, owner=owner)
    )


def executing(t: Transcript, guard: OwnedAttempt, now: int = 1_100) -> OwnedAttempt:
    return scenarios.run_to(t, guard, fixtures.EXECUTION_PATH, now)


def claimed(
    t: Transcript,
    guard: OwnedAttempt,
    *,
    name: str = "claim-0",
    expires: int = 10_000,
    now: int = 1_200,
) -> OwnedAttempt:
    return scenarios.claimed(scenarios.finalize(t, guard, name, expires=expires, now=now))


def select(
    t: Transcript,
    fixture: SlotFixture,
    guard: OwnedAttempt,
    label: str,
    now: int = 1_300,
    completion: Completion = Completion.REACHED,
    valid: bool = True,
) -> object:
    slot = fixture.observation_slots[0]
    return scenarios.observe(t, guard, slot, label, now=now, completion=completion, valid=valid)


def commit(
    t: Transcript,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    now: int = 1_400,
    label: str = "attempt",
    references: tuple[Reference, ...] = (),
) -> object:
    return scenarios.conclude(t, guard, outcome, label, now=now, references=references)


def accepted_world() -> tuple[Transcript, SlotFixture, OwnedAttempt]:
    """A one-shot slot whose first attempt is accepted; returns its last live guard."""
    t, fixture = world()
    guard = claimed(t, executing(t, reserved(t, fixture)))
    select(t, fixture, guard, "result-0")
    receipt(commit(t, guard, Accepted()))
    return t, fixture, guard


def failed(code: str = "worker_crashed") -> Failed:
    return Failed(code=code, details={"exit_status": 1})
