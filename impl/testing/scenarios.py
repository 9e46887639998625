"""Named model scenarios (rendered as the transcripts under ``vectors/traces/`` by
:mod:`runstore.testing.trace`) and the transcript helpers they and the model's tests share.

Rules of this file: each scenario is a function of a
:class:`~runstore.testing.transcript.Transcript` whose docstring is the transcript's title; its
fixtures come from :mod:`runstore.testing.fixtures` (pure record construction; digests are
SHA-256 of a label). Changing a scenario changes a committed transcript: regenerate with
``tools/regen``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.model import DiskView
from runstore.model import attempts
from runstore.model import finalization
from runstore.model import leases
from runstore.model import observations
from runstore.model import publication
from runstore.model import recovery
from runstore.model import registration
from runstore.receipts import ClaimDisposition
from runstore.receipts import OwnedAttempt
from runstore.records import ObservationSlot
from runstore.requests import Accepted
from runstore.requests import Failed
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.requests import Reference
from runstore.requests import Retry
from runstore.requests import RetryAuthorization
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome
from runstore.testing.fixtures import EXECUTION_PATH
from runstore.testing.fixtures import OTHER_OWNER
from runstore.testing.fixtures import OWNER
from runstore.testing.fixtures import STAGE
from runstore.testing.fixtures import SlotFixture
from runstore.testing.fixtures import artifact
from runstore.testing.fixtures import lease
from runstore.testing.fixtures import observation
from runstore.testing.fixtures import slot_fixture
from runstore.testing.transcript import Transcript


def run_to(
    t: Transcript, guard: OwnedAttempt, path: tuple[AttemptState, ...], now: int
) -> OwnedAttempt:
    """Advance ``guard`` along ``path``, one nanosecond apart from ``now``."""
    for offset, phase in enumerate(path):
        guard = owned(t.do(attempts.advance, guard=guard, phase=phase, now_ns=now + offset))
    return guard


def owned(result: object) -> OwnedAttempt:
    """``result``, which must be a guard."""
    assert isinstance(result, OwnedAttempt), result
    return result


def claimed(result: object) -> OwnedAttempt:
    """The guard of a ``begin_finalization`` result, which must have taken the claim."""
    assert isinstance(result, ClaimDisposition) and result.claimed, result
    return result.attempt


def register(t: Transcript, fixture: SlotFixture) -> None:
    """Register ``fixture`` with ``register_slots``."""
    t.do(
        registration.register_slots,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slots=fixture.observation_slots,
    )


def reserve_in(
    t: Transcript,
    fixture: SlotFixture,
    authorization: RetryAuthorization,
    name: str,
    *,
    expires: int = 10_000,
    now: int = 1_000,
    owner: str = OWNER,
) -> object:
    """``reserve`` the fixture's slot under a new lease ``name``."""
    return t.do(
        attempts.reserve,
        slot_id=fixture.slot_id,
        authorization=authorization,
        lease=lease(name, expires, owner),
        now_ns=now,
    )


def finalize(
    t: Transcript, guard: OwnedAttempt, name: str, *, expires: int = 10_000, now: int
) -> object:
    """``begin_finalization`` with a finalization lease ``name`` of the guard's owner."""
    return t.do(
        finalization.begin_finalization,
        guard=guard,
        lease=lease(name, expires, guard.owner_token),
        now_ns=now,
    )


def observe(
    t: Transcript,
    guard: OwnedAttempt,
    slot: ObservationSlot,
    label: str,
    *,
    now: int,
    select: bool = True,
    valid: bool = True,
    completion: Completion = Completion.REACHED,
    score: int = 1,
    references: tuple[Reference, ...] = (),
) -> object:
    """``register_observation`` of an observation of ``guard``'s attempt for ``slot``,
    published as the observation artifact ``label``, with ``references``."""
    return t.do(
        observations.register_observation,
        guard=guard,
        observation=observation(slot, guard, valid=valid, completion=completion, score=score),
        artifact=artifact(ArtifactKind.OBSERVATION, label),
        references=references,
        select=select,
        now_ns=now,
    )


def conclude(
    t: Transcript,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    label: str,
    *,
    now: int,
    references: tuple[Reference, ...] = (),
    finished: int | None = None,
) -> object:
    """``commit_finalization`` with the attempt artifact ``label``, committed at ``now``
    and finished at ``finished`` (default ``now``)."""
    return t.do(
        finalization.commit_finalization,
        guard=guard,
        outcome=outcome,
        artifact=artifact(ArtifactKind.ATTEMPT, label),
        references=references,
        finished_at_ns=now if finished is None else finished,
        now_ns=now,
    )


# --- scenarios -------------------------------------------------------------------------


def happy_path_accepted(t: Transcript) -> None:
    """A one-shot slot: reserve, execute, publish a dataset from a stage, renew, claim,
    select the result, accept."""
    fixture = slot_fixture()
    t.do(
        registration.register_one_shot,
        decision=fixture.decision,
        run=fixture.run,
        attempt_slot=fixture.attempt_slot,
        observation_slot=fixture.observation_slots[0],
    )
    guard = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0"))
    guard = run_to(t, guard, EXECUTION_PATH, 1_100)
    t.do(
        publication.begin_staging, guard=guard, lease_id="stage-0", staging_path=STAGE, now_ns=1_200
    )
    dataset = artifact(ArtifactKind.DATASET, "dataset")
    t.do(
        publication.publish_staged_artifact,
        guard=guard,
        staging_lease_id="stage-0",
        artifact=dataset,
        now_ns=1_300,
    )
    t.do(leases.renew, guard=guard, expires_at_ns=20_000, now_ns=1_400)
    guard = run_to(t, guard, (AttemptState.VALIDATING, AttemptState.EVALUATING), 1_500)
    guard = claimed(finalize(t, guard, "claim-0", expires=20_000, now=1_600))
    observe(t, guard, fixture.observation_slots[0], "result-0", now=1_700)
    dependency = Reference("dataset", dataset.id)
    conclude(t, guard, Accepted(), "attempt-0", now=1_800, references=(dependency,))


def failure_then_authorized_retry_accepted(t: Transcript) -> None:
    """Attempt 0 selects its result under its claim and then fails; reservations without
    retry authorization are refused; an authorized retry keeps the earlier selection and
    is accepted with its own valid, complete result."""
    fixture = slot_fixture()
    register(t, fixture)
    member = fixture.observation_slots[0]
    first = owned(reserve_in(t, fixture, Next(retry=False), "reservation-0"))
    first = run_to(t, first, EXECUTION_PATH, 1_100)
    first = claimed(finalize(t, first, "claim-0", now=1_200))
    observe(t, first, member, "result-0", now=1_300, score=7)
    failure = Failed(code="evaluator_crashed", details={"exit_status": 3})
    conclude(t, first, failure, "attempt-0", now=1_400)
    for refused in (FirstAttempt(), Next(retry=False), Retry(next_index=0, max_index=0)):
        reserve_in(t, fixture, refused, "reservation-1", now=2_000)
    second = owned(
        reserve_in(t, fixture, Retry(next_index=1, max_index=2), "reservation-1", now=2_000)
    )
    second = run_to(t, second, EXECUTION_PATH, 2_100)
    second = claimed(finalize(t, second, "claim-1", now=2_200))
    observe(t, second, member, "result-1", now=2_300, score=9)
    conclude(t, second, Accepted(), "attempt-1", now=2_400)


def two_contenders_one_superseded(t: Transcript) -> None:
    """Two overlapping attempts of one slot race for the claim: the first to finalize
    claims the slot, the other gets a superseded decision, cannot select or accept, and
    commits Superseded; once the winner is accepted the slot refuses new reservations."""
    fixture = slot_fixture()
    register(t, fixture)
    member = fixture.observation_slots[0]
    first = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0"))
    second = owned(
        reserve_in(t, fixture, Next(retry=True), "reservation-1", now=1_010, owner=OTHER_OWNER)
    )
    second = run_to(t, second, EXECUTION_PATH, 1_100)
    first = run_to(t, first, EXECUTION_PATH, 1_200)
    second = claimed(finalize(t, second, "claim-1", now=1_300))
    disposition = finalize(t, first, "claim-0", now=1_310)
    assert isinstance(disposition, ClaimDisposition) and not disposition.claimed
    first = disposition.attempt
    observe(t, first, member, "result-0", now=1_320)
    conclude(t, first, Accepted(), "attempt-0", now=1_330)
    conclude(t, first, Superseded(), "attempt-0", now=1_340)
    observe(t, second, member, "result-1", now=1_400)
    conclude(t, second, Accepted(), "attempt-1", now=1_500)
    reserve_in(t, fixture, Next(retry=True), "reservation-2", now=1_600)


def expired_owner_recovered(t: Transcript) -> None:
    """An owner stops renewing: its lease is live one nanosecond before expiry and
    expired at it; the expired owner cannot write; recovery finalizes the attempt as
    Failed(interrupted_attempt), and a second recovery finds nothing to do."""
    fixture = slot_fixture()
    register(t, fixture)
    guard = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0", expires=5_000))
    guard = run_to(t, guard, EXECUTION_PATH, 1_100)
    t.ask(recovery.recoverable, t_ns=4_999)
    t.ask(recovery.recoverable, t_ns=5_000)
    t.do(attempts.advance, guard=guard, phase=AttemptState.VALIDATING, now_ns=5_000)
    t.do(recovery.recover, t_ns=6_000, disk=DiskView())
    t.ask(recovery.recoverable, t_ns=6_000)
    t.do(recovery.recover, t_ns=6_001, disk=DiskView())


def stale_revision_refused(t: Transcript) -> None:
    """A guard is good for one revision: reusing it after the attempt moved on is refused,
    and so is a guard whose owner token is not the reservation's."""
    fixture = slot_fixture()
    register(t, fixture)
    first = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0"))
    t.do(attempts.advance, guard=first, phase=AttemptState.MATERIALIZING, now_ns=1_100)
    t.do(attempts.advance, guard=first, phase=AttemptState.MATERIALIZING, now_ns=1_200)
    t.do(leases.renew, guard=first, expires_at_ns=20_000, now_ns=1_300)
    foreign = attrs.evolve(first, owner_token=OTHER_OWNER)
    t.do(attempts.advance, guard=foreign, phase=AttemptState.STARTING, now_ns=1_400)


def expired_lease_refused_at_exact_expiry(t: Transcript) -> None:
    """Expiry is exclusive: one nanosecond before expires_at_ns the owner may still write;
    at expires_at_ns every write, renewal and claim is refused with lease_expired."""
    fixture = slot_fixture()
    register(t, fixture)
    guard = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0", expires=2_000))
    guard = owned(
        t.do(attempts.advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=1_999)
    )
    t.do(attempts.advance, guard=guard, phase=AttemptState.STARTING, now_ns=2_000)
    t.do(leases.renew, guard=guard, expires_at_ns=3_000, now_ns=2_000)
    finalize(t, guard, "claim-0", expires=3_000, now=2_000)


def backward_clock_clamped(t: Transcript) -> None:
    """The caller's clock moves backward: each write is clamped to the attempt's preceding
    transition time, and lease checks use the clamped time too."""
    fixture = slot_fixture()
    register(t, fixture)
    guard = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0", expires=3_000))
    guard = owned(
        t.do(attempts.advance, guard=guard, phase=AttemptState.MATERIALIZING, now_ns=2_500)
    )
    guard = owned(t.do(attempts.advance, guard=guard, phase=AttemptState.STARTING, now_ns=500))
    for expiry in (2_400, 2_600, 3_500):
        t.do(leases.renew, guard=guard, expires_at_ns=expiry, now_ns=100)


def stream_checkpoints_accepted(t: Transcript) -> None:
    """A stream slot with two checkpoint slots: a failed attempt's selected checkpoint is
    retained, the retry selects the other one (not_reached is selectable) and is accepted
    because every checkpoint slot has a selection."""
    fixture = slot_fixture(kind=ExecutionKind.STREAM, checkpoints=2, name="stream")
    register(t, fixture)
    zero, one = fixture.observation_slots
    first = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0"))
    first = run_to(t, first, (*EXECUTION_PATH, AttemptState.CHECKPOINTING), 1_100)
    first = claimed(finalize(t, first, "claim-0", now=1_200))
    observe(t, first, zero, "checkpoint-0", now=1_300, completion=Completion.NOT_REACHED)
    conclude(t, first, Accepted(), "attempt-0", now=1_400)
    conclude(t, first, Failed(code="worker_lost", details={}), "attempt-0", now=1_500)
    retry = Retry(next_index=1, max_index=1)
    second = owned(reserve_in(t, fixture, retry, "reservation-1", now=2_000))
    second = run_to(t, second, EXECUTION_PATH, 2_100)
    second = claimed(finalize(t, second, "claim-1", now=2_200))
    observe(t, second, one, "checkpoint-1", now=2_300)
    conclude(t, second, Accepted(), "attempt-1", now=2_400)


def failure_without_claim_keeps_slot_open(t: Transcript) -> None:
    """A failing attempt enters finalizing through ``advance`` without contending for the
    claim: it cannot accept, and commits Failed (finishing before its commit time) while a
    concurrent retry takes the claim, selects its result and is accepted."""
    fixture = slot_fixture()
    register(t, fixture)
    member = fixture.observation_slots[0]
    failing = owned(reserve_in(t, fixture, FirstAttempt(), "reservation-0"))
    winner = owned(
        reserve_in(t, fixture, Next(retry=True), "reservation-1", now=1_010, owner=OTHER_OWNER)
    )
    failing = run_to(t, failing, (*EXECUTION_PATH, AttemptState.FINALIZING), 1_100)
    conclude(t, failing, Accepted(), "attempt-0", now=1_200)
    conclude(t, failing, Superseded(), "attempt-0", now=1_200)
    winner = run_to(t, winner, EXECUTION_PATH, 1_300)
    winner = claimed(finalize(t, winner, "claim-1", now=1_400))
    failure = Failed(code="worker_exit", details={"exit_status": 1})
    conclude(t, failing, failure, "attempt-0", now=1_500, finished=1_450)
    observe(t, winner, member, "result-1", now=1_600)
    conclude(t, winner, Accepted(), "attempt-1", now=1_700, finished=1_650)
    reserve_in(t, fixture, Next(retry=True), "reservation-2", now=1_800)


SCENARIOS: dict[str, Callable[[Transcript], None]] = {
    function.__name__: function
    for function in (
        happy_path_accepted,
        failure_then_authorized_retry_accepted,
        two_contenders_one_superseded,
        expired_owner_recovered,
        stale_revision_refused,
        expired_lease_refused_at_exact_expiry,
        backward_clock_clamped,
        stream_checkpoints_accepted,
        failure_without_claim_keeps_slot_open,
    )
}
"""Every named scenario, by name."""
