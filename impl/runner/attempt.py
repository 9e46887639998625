"""One attempt's lifecycle through the store: reserve, advance, renew, finish.

Rules of this file: every store call of an attempt lives here, in the order SPEC.md
section 15 ("One attempt") gives; the coordinator decides when to call them. Each function
either returns after its writes committed or raises the store's typed error, leaving what
committed so far for the next step or for recovery. Workers are reached only through the
executor interface: this module hands out a :class:`WorkOrder` and judges a
:class:`WorkResult`.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import TypeVar

import attrs
from runstore.batch import Pending
from runstore.batch import WriteBatch
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import SlotRole
from runstore.errors import AcceptanceUnsatisfiedError
from runstore.errors import BusyError
from runstore.errors import DurabilityError
from runstore.errors import RunStoreError
from runstore.receipts import ClaimDisposition
from runstore.receipts import ObservationReceipt
from runstore.receipts import OwnedAttempt
from runstore.receipts import PublishedFinalization
from runstore.receipts import TerminalAttempt
from runstore.records import Observation
from runstore.requests import Accepted
from runstore.requests import Failed
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import RetryAuthorization
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome
from runstore.runner import run_events
from runstore.runner.attempt_files import OutputUnwritable
from runstore.runner.attempt_files import attempt_files
from runstore.runner.attempt_files import write_files
from runstore.runner.environment import ENVIRONMENT_FILE
from runstore.runner.environment import Environments
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.inputs import read_inputs
from runstore.runner.lease_keeper import LeaseKeeper
from runstore.runner.plan import SlotPlan
from runstore.runner.worker_result import RESULT_MISSING
from runstore.runner.worker_result import UNSAFE_OUTPUT
from runstore.runner.worker_result import Failure
from runstore.runner.worker_result import Success
from runstore.runner.worker_result import judge
from runstore.runner.worker_result import text
from runstore.store import RunStore

Clock = Callable[[], int]

T = TypeVar("T")

PATIENCE_FIRST_PAUSE_S = 0.05

EXECUTION_PATH = (
    AttemptState.MATERIALIZING,
    AttemptState.STARTING,
    AttemptState.PREPARING,
    AttemptState.EXECUTING,
)
"""The phases an attempt passes before its worker runs (materializing: the inputs are read
and checked against the registered digests)."""


@attrs.frozen(kw_only=True)
class Finished:
    """A committed terminal outcome, with the failure code or the accepted metrics, and
    what the run reports of it: ``started_at_ns`` (the reservation's clock), the published
    attempt artifact's store-relative ``artifact_path``, the ``logs`` it holds
    (``stdout.log``, ``stderr.log``; none when no worker ran) and, for a failure, the tail
    of the worker's stderr (:func:`runstore.runner.run_events.stderr_tail`)."""

    plan: SlotPlan
    terminal: TerminalAttempt
    failure: Failure | None
    metrics: dict[str, JSON]
    started_at_ns: int
    artifact_path: str
    logs: tuple[str, ...] = ()
    stderr_tail: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Started:
    """An attempt whose worker was handed its order; the guard is the executing one and
    ``started_at_ns`` its reservation time. Its leases are the keeper's to renew."""

    plan: SlotPlan
    guard: OwnedAttempt
    order: WorkOrder
    started_at_ns: int


def lease_request(owner_token: str, now_ns: int, lease_ns: int) -> LeaseRequest:
    return LeaseRequest(
        lease_id=f"lease-{secrets.token_hex(16)}",
        owner_token=owner_token,
        expires_at_ns=now_ns + lease_ns,
    )


def start(
    store: RunStore,
    plan: SlotPlan,
    authorization: RetryAuthorization,
    lease_ns: int,
    clock: Clock,
    keeper: LeaseKeeper | None = None,
) -> Started | Finished:
    """:func:`start_many` of one slot; its refusal is raised."""
    (begun,) = start_many(store, [(plan, authorization)], lease_ns, clock, keeper)
    if isinstance(begun, RunStoreError):
        raise begun
    return begun


def start_many(
    store: RunStore,
    slots: Sequence[tuple[SlotPlan, RetryAuthorization]],
    lease_ns: int,
    clock: Clock,
    keeper: LeaseKeeper | None = None,
) -> list[Started | Finished | RunStoreError]:
    """Read each slot's inputs, then reserve its next attempt and advance it to executing,
    every slot's steps in one write batch (SPEC.md section 15.4: group commit; each slot's
    steps depend only on its own reservation). When an input no longer has its registered
    digest, that slot's steps stop at materializing and its attempt fails with
    ``input_changed``. Per slot, in order: what started (or finished), or the refusal that
    stopped it (a refused reservation: another coordinator got there first; a refused
    transition: the attempt is left to recovery). From its reservation on, ``keeper`` (when
    given) renews each attempt's leases and learns each new guard."""
    keeper = keeper or LeaseKeeper(lease_ns, clock)
    inputs = [read_inputs(p.candidate.files + p.problem.files) for p, _ in slots]  # no commit
    owners = [secrets.token_hex(16) for _ in slots]

    def reserve() -> list[tuple[int, LeaseRequest, Pending[OwnedAttempt], Pending[OwnedAttempt]]]:
        batch, steps = WriteBatch(), []
        for (plan, authorization), found, owner in zip(slots, inputs, owners, strict=True):
            assert plan.attempt_slot is not None
            now = clock()
            lease = lease_request(owner, now, lease_ns)
            reserved = guard = batch.reserve(plan.attempt_slot.id, authorization, lease, now)
            path = EXECUTION_PATH[:1] if isinstance(found, Failure) else EXECUTION_PATH
            for phase in path:
                guard = batch.advance(guard, phase, clock())
            steps.append((now, lease, reserved, guard))
        store.apply_batch(batch)
        return steps

    begun: list[Started | Finished | RunStoreError] = []
    for (plan, _), found, (now, lease, reserved, moved) in zip(
        slots, inputs, patient(reserve, lease_ns), strict=True
    ):
        try:
            reserved.result()
            guard = moved.result()
        except RunStoreError as refusal:
            begun.append(refusal)
            continue
        keeper.hold(guard, now, lease.expires_at_ns)
        if isinstance(found, Failure):
            try:
                begun.append(fail(store, plan, guard, found, None, clock, keeper, now))
            except RunStoreError as refusal:  # this slot's: the others started still count
                keeper.release(guard.attempt_id)
                begun.append(refusal)
            except BaseException:
                keeper.release(guard.attempt_id)
                raise
            continue
        begun.append(_started(plan, guard, found, now))
    return begun


def _started(
    plan: SlotPlan, guard: OwnedAttempt, inputs: tuple[tuple[str, bytes], ...], now: int
) -> Started:
    """The executing attempt's work order."""
    order = WorkOrder(
        key=guard.attempt_id,
        command=plan.candidate.command,
        env=(
            *plan.candidate.env,
            ("RUNSTORE_ATTEMPT", guard.attempt_id),
            ("RUNSTORE_CANDIDATE", plan.candidate.name),
            ("RUNSTORE_CANDIDATE_PARAMETERS", plan.candidate.parameters_json.decode("utf-8")),
            ("RUNSTORE_PARAMETERS", plan.problem.parameters_json.decode("utf-8")),
            ("RUNSTORE_PROBLEM", plan.problem.name),
            ("RUNSTORE_REPETITION", str(plan.repetition)),
            ("RUNSTORE_ROLE", "warmup" if is_warmup(plan) else "measurement"),
            *(
                ()
                if checkpoints(plan) is None
                else (("RUNSTORE_CHECKPOINTS", str(checkpoints(plan))),)
            ),
        ),
        inputs=inputs,
        timeout_ns=plan.timeout_ns,
        packages=plan.packages,
    )
    return Started(plan=plan, guard=guard, order=order, started_at_ns=now)


def _advance(
    store: RunStore, keeper: LeaseKeeper, guard: OwnedAttempt, phase: AttemptState, clock: Clock
) -> OwnedAttempt:
    moved = patient(lambda: store.advance(guard, phase, clock()), keeper.lease_ns)
    keeper.moved(moved)
    return moved


def patient(call: Callable[[], T], lease_ns: int) -> T:
    """``call()``, tried again while it meets ``busy`` (another process, such as a recovery
    pass, holds the store's write lock past the 5 s busy timeout), after pauses of 50 ms
    doubling to 1 s, for at most half a lease of pauses; then the ``busy`` propagates. A
    ``busy`` refusal committed nothing, and a publication tried again makes a new stage
    (the content-addressed object it places is the same), so trying again is safe."""
    pause, paused = PATIENCE_FIRST_PAUSE_S, 0.0
    while True:
        try:
            return call()
        except BusyError:
            if paused + pause > lease_ns / 2e9:
                raise
        time.sleep(pause)
        paused += pause
        pause = min(pause * 2, 1.0)


def finish(
    store: RunStore,
    started: Started,
    work: WorkResult,
    lease_ns: int,
    clock: Clock,
    keeper: LeaseKeeper | None = None,
    environments: Environments | None = None,
) -> Finished:
    """Judge the worker's result and commit the attempt's outcome: for a valid result,
    publish each observation it produced as an artifact, contend for the slot's claim,
    register the observations (selected when claimed) and publish ``Accepted``
    (``Superseded`` when another attempt holds the slot); otherwise publish ``Failed``
    with the verdict's code. The attempt artifact holds the worker's logs (and its outputs
    that are no observation). First, the result's environment document is published as an
    artifact unless ``environments`` (the run's) already holds it, and the outcome
    references it as ``environment``."""
    plan = started.plan
    verdict = judge(
        work, started.order.timeout_ns, warmup=is_warmup(plan), checkpoints=checkpoints(plan)
    )
    keeper = keeper or LeaseKeeper(lease_ns, clock)

    def publish(document: bytes) -> str:  # the first time this run meets the document
        populate, kind = write_files(((ENVIRONMENT_FILE, document),)), ArtifactKind.ENVIRONMENT
        call = functools.partial(store.publish_artifact, started.guard, kind, populate, clock)
        return patient(call, lease_ns).artifact.id

    run_environments = Environments() if environments is None else environments
    found = run_environments.references(work.environment, publish)
    if isinstance(verdict, Failure):
        began = started.started_at_ns
        return fail(store, plan, started.guard, verdict, work, clock, keeper, began, found)
    return _succeed(store, started, verdict, work, lease_ns, clock, keeper, found)


def is_warmup(plan: SlotPlan) -> bool:
    return plan.attempt_slot is not None and plan.attempt_slot.role is SlotRole.WARMUP


def checkpoints(plan: SlotPlan) -> int | None:
    """A stream's number of checkpoint slots; None for other slots."""
    if plan.attempt_slot is None or plan.attempt_slot.execution_kind is not ExecutionKind.STREAM:
        return None
    return len(plan.observation_slots)


def _succeed(
    store: RunStore,
    started: Started,
    success: Success,
    work: WorkResult,
    lease_ns: int,
    clock: Clock,
    keeper: LeaseKeeper,
    environment: Sequence[Reference],
) -> Finished:
    plan = started.plan
    guard = started.guard  # observations are published while executing, then judged
    try:
        published = [
            (
                produced,
                patient(
                    functools.partial(
                        store.publish_artifact,
                        guard,
                        ArtifactKind.OBSERVATION,
                        write_files(produced.files),
                        clock,
                    ),
                    lease_ns,
                ),
            )
            for produced in success.produced
        ]
    except OutputUnwritable as unwritable:
        # Nothing was registered for the refused stage; it stays for recovery to remove.
        failure = Failure(code=UNSAFE_OUTPUT, details={"detail": str(unwritable)})
        began = started.started_at_ns
        return fail(store, plan, guard, failure, work, clock, keeper, began, environment)
    slots = {slot.checkpoint_index: slot for slot in plan.observation_slots}

    def contend() -> tuple[LeaseRequest, ClaimDisposition]:
        """Validating, the claim's contention and every observation's registration (selected
        exactly when the attempt claimed), each step taking the guard the one before
        returns, in one write batch."""
        now = clock()
        claim = lease_request(guard.owner_token, now, lease_ns)
        batch = WriteBatch()
        validating = batch.advance(guard, AttemptState.VALIDATING, now)
        disposition = batch.begin_finalization(validating, claim, now)
        owner = disposition.then(_attempt_of)
        registrations = []
        for produced, receipt in published:
            observation = Observation(
                slot_id=slots[produced.index].id,
                attempt_id=guard.attempt_id,
                valid=True,
                completion=Completion.REACHED,
                result=produced.result,
            )
            registered = batch.register_observation(
                owner,
                observation,
                receipt.artifact,
                [],
                select=disposition.then(_claimed),
                now_ns=now,
            )
            registrations.append(registered)
            owner = registered.then(_attempt_of)
        store.apply_batch(batch)
        keeper.moved(validating.result())
        for registered in registrations:  # the first refusal, in step order
            registered.result()
        return claim, disposition.result()

    claim, disposition = patient(contend, lease_ns)
    guard = disposition.attempt
    keeper.claimed(guard, claim.expires_at_ns)
    observed = {Reference("observation", receipt.artifact.id) for _, receipt in published}
    references = sorted({*observed, *environment})
    outputs = not success.produced or bool(checkpoints(plan))
    if not disposition.claimed:
        final = _publish_final(
            store, guard, Superseded(), references, work, outputs, lease_ns, clock
        )
        return finished(plan, final, None, {}, started.started_at_ns, work)
    try:
        final = _publish_final(store, guard, Accepted(), references, work, outputs, lease_ns, clock)
    except AcceptanceUnsatisfiedError as refusal:
        if checkpoints(plan) is None:
            raise
        # A checkpoint slot has no selection: this attempt did not reach it and no earlier
        # one did. The check ran before anything was staged, so nothing is half-written.
        failure = Failure(
            code=RESULT_MISSING,
            details={
                "checkpoints": [p.index for p in success.produced],
                "detail": text(refusal.message),
            },
        )
        failed = Failed(code=failure.code, details=failure.details)
        final = _publish_final(store, guard, failed, references, work, outputs, lease_ns, clock)
        return finished(plan, final, failure, {}, started.started_at_ns, work)
    metrics = success.produced[-1].result["metrics"] if success.produced else {}
    assert isinstance(metrics, dict)
    return finished(plan, final, None, metrics, started.started_at_ns, work)


def _attempt_of(result: ClaimDisposition | ObservationReceipt) -> OwnedAttempt:
    return result.attempt


def _claimed(disposition: ClaimDisposition) -> bool:
    return disposition.claimed


def fail(
    store: RunStore,
    plan: SlotPlan,
    guard: OwnedAttempt,
    failure: Failure,
    work: WorkResult | None,
    clock: Clock,
    keeper: LeaseKeeper,
    started_at_ns: int,
    references: Sequence[Reference] = (),
) -> Finished:
    """Enter finalizing without contending for the claim and publish ``Failed`` (with
    ``references``: the worker's environment). ``started_at_ns``: the reservation's clock,
    for the report."""
    guard = _advance(store, keeper, guard, AttemptState.FINALIZING, clock)
    failed = Failed(code=failure.code, details=failure.details)
    final = _publish_final(store, guard, failed, references, work, True, keeper.lease_ns, clock)
    return finished(plan, final, failure, {}, started_at_ns, work)


def finished(
    plan: SlotPlan,
    final: PublishedFinalization,
    failure: Failure | None,
    metrics: dict[str, JSON],
    started_at_ns: int,
    work: WorkResult | None,
) -> Finished:
    """The :class:`Finished` of a published outcome: the attempt artifact holds the
    worker's logs exactly when a worker's result was published with it (``work``), and a
    failure keeps the tail of the stderr it published (only its last bytes are read)."""
    return Finished(
        plan=plan,
        terminal=final.terminal,
        failure=failure,
        metrics=metrics,
        started_at_ns=started_at_ns,
        artifact_path=final.artifact.path,
        logs=() if work is None else run_events.LOG_NAMES,
        stderr_tail=(
            run_events.stderr_tail(work.stderr) if failure is not None and work is not None else ()
        ),
    )


def _publish_final(
    store: RunStore,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    references: Sequence[Reference],
    work: WorkResult | None,
    outputs: bool,
    lease_ns: int,
    clock: Clock,
) -> PublishedFinalization:
    """Publish the outcome with the attempt artifact's files (its outputs when ``outputs``).
    Outputs the store's stage cannot hold as named are left out (``worker.json`` says why)
    and the finalization is published again, in a new stage: the outputs of an attempt
    artifact are a record of the worker's run, never a result."""
    files = () if work is None else attempt_files(work, include_outputs=outputs)
    publish = functools.partial(store.publish_finalization, guard, outcome, references)
    try:
        try:
            return patient(lambda: publish(write_files(files), clock), lease_ns)
        except OutputUnwritable as unwritable:
            if work is None or not outputs:
                raise
            kept = attempt_files(work, include_outputs=False, omitted=str(unwritable))
            return patient(lambda: publish(write_files(kept), clock), lease_ns)
    except OutputUnwritable as unwritable:  # the runtime's own files: the root is too long
        raise DurabilityError(f"the store cannot hold the attempt's files: {unwritable}") from None


__all__ = [
    "Finished",
    "OutputUnwritable",
    "Started",
    "attempt_files",
    "finish",
    "start",
    "start_many",
    "write_files",
]
