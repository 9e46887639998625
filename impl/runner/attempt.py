"""One attempt's lifecycle through the store: reserve, advance, renew, finish.

Rules of this file: every store call of an attempt lives here, in the order SPEC.md
section 15 ("One attempt") gives; the coordinator decides when to call them. Each function
either returns after its writes committed or raises the store's typed error, leaving what
committed so far for the next step or for recovery. Workers are reached only through the
executor interface: this module hands out a :class:`WorkOrder` and judges a
:class:`WorkResult`.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable
from collections.abc import Sequence

import attrs
from runstore.canonical import JSON
from runstore.canonical import encode
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import SlotRole
from runstore.errors import AcceptanceUnsatisfiedError
from runstore.receipts import OwnedAttempt
from runstore.receipts import TerminalAttempt
from runstore.records import Observation
from runstore.requests import Accepted
from runstore.requests import Failed
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import RetryAuthorization
from runstore.requests import Superseded
from runstore.runner.campaign import InputFile
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.plan import SlotPlan
from runstore.runner.worker_result import INPUT_CHANGED
from runstore.runner.worker_result import RESULT_MISSING
from runstore.runner.worker_result import Failure
from runstore.runner.worker_result import Success
from runstore.runner.worker_result import judge
from runstore.runner.worker_result import output_problem
from runstore.runner.worker_result import text
from runstore.store import RunStore

Clock = Callable[[], int]

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
    """A committed terminal outcome, with the failure code or the accepted metrics."""

    plan: SlotPlan
    terminal: TerminalAttempt
    failure: Failure | None
    metrics: dict[str, JSON]


@attrs.define(kw_only=True)
class Started:
    """An attempt whose worker was handed its order; the guard is the executing one.
    ``started_at_ns`` is its reservation time, ``renewed_at_ns`` that of its latest lease
    (the reservation or the last renewal) and ``expires_at_ns`` that lease's expiry."""

    plan: SlotPlan
    guard: OwnedAttempt
    order: WorkOrder
    started_at_ns: int
    renewed_at_ns: int
    expires_at_ns: int


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
) -> Started | Finished:
    """Reserve the slot's next attempt, read its inputs (failing it with ``input_changed``
    when a file no longer has its registered digest) and advance it to executing. Refusals
    of ``reserve`` (another coordinator got there first) propagate."""
    assert plan.attempt_slot is not None
    now = clock()
    lease = lease_request(secrets.token_hex(16), now, lease_ns)
    guard = store.reserve(plan.attempt_slot.id, authorization, lease, now)
    guard = store.advance(guard, AttemptState.MATERIALIZING, clock())
    inputs = read_inputs(plan.candidate.files + plan.problem.files)
    if isinstance(inputs, Failure):
        return fail(store, plan, guard, inputs, None, clock)
    for phase in EXECUTION_PATH[1:]:
        guard = store.advance(guard, phase, clock())
    order = WorkOrder(
        key=guard.attempt_id,
        command=plan.candidate.command,
        env=(
            *plan.candidate.env,
            ("RUNSTORE_ATTEMPT", guard.attempt_id),
            ("RUNSTORE_CANDIDATE", plan.candidate.name),
            ("RUNSTORE_PARAMETERS", plan.problem.parameters_json.decode("utf-8")),
            ("RUNSTORE_PROBLEM", plan.problem.name),
            ("RUNSTORE_ROLE", "warmup" if is_warmup(plan) else "measurement"),
            *(
                ()
                if checkpoints(plan) is None
                else (("RUNSTORE_CHECKPOINTS", str(checkpoints(plan))),)
            ),
        ),
        inputs=inputs,
        timeout_ns=plan.timeout_ns,
    )
    return Started(
        plan=plan,
        guard=guard,
        order=order,
        started_at_ns=now,
        renewed_at_ns=now,
        expires_at_ns=lease.expires_at_ns,
    )


def read_inputs(files: Sequence[InputFile]) -> tuple[tuple[str, bytes], ...] | Failure:
    """Each file's bytes, or ``input_changed`` naming the first that is missing or differs
    from the digest the run was registered with."""
    read: list[tuple[str, bytes]] = []
    for file in files:
        try:
            with open(file.source, "rb") as handle:
                data = handle.read()
        except OSError as error:
            return Failure(
                code=INPUT_CHANGED, details={"file": file.name, "error": text(str(error))}
            )
        if hashlib.sha256(data).hexdigest() != file.sha256:
            return Failure(code=INPUT_CHANGED, details={"file": file.name, "sha256": file.sha256})
        read.append((file.name, data))
    return tuple(read)


def renew(store: RunStore, started: Started, lease_ns: int, clock: Clock) -> None:
    """Extend the attempt's leases to ``now + lease_ns`` (never shortening)."""
    now = clock()
    expires = max(now + lease_ns, started.expires_at_ns)
    store.renew(started.guard, expires, now)
    started.renewed_at_ns, started.expires_at_ns = now, expires


def finish(
    store: RunStore, started: Started, work: WorkResult, lease_ns: int, clock: Clock
) -> Finished:
    """Judge the worker's result and commit the attempt's outcome: for a valid result,
    publish each observation it produced as an artifact, contend for the slot's claim,
    register the observations (selected when claimed) and publish ``Accepted``
    (``Superseded`` when another attempt holds the slot); otherwise publish ``Failed``
    with the verdict's code. The attempt artifact holds the worker's logs (and its outputs
    that are no observation)."""
    plan = started.plan
    verdict = judge(
        work, started.order.timeout_ns, warmup=is_warmup(plan), checkpoints=checkpoints(plan)
    )
    if isinstance(verdict, Failure):
        return fail(store, plan, started.guard, verdict, work, clock)
    return _succeed(store, started, verdict, work, lease_ns, clock)


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
) -> Finished:
    plan = started.plan
    guard = store.advance(started.guard, AttemptState.VALIDATING, clock())
    published = [
        (
            produced,
            store.publish_artifact(
                guard, ArtifactKind.OBSERVATION, write_files(produced.files), clock
            ),
        )
        for produced in success.produced
    ]
    now = clock()
    disposition = store.begin_finalization(
        guard, lease_request(guard.owner_token, now, lease_ns), now
    )
    guard = disposition.attempt
    slots = {slot.checkpoint_index: slot for slot in plan.observation_slots}
    for produced, receipt in published:
        observation = Observation(
            slot_id=slots[produced.index].id,
            attempt_id=guard.attempt_id,
            valid=True,
            completion=Completion.REACHED,
            result=produced.result,
        )
        store.register_observation(
            guard, observation, receipt.artifact, [], select=disposition.claimed, now_ns=clock()
        )
    references = sorted({Reference("observation", receipt.artifact.id) for _, receipt in published})
    files = write_files(
        attempt_files(work, include_outputs=not success.produced or bool(checkpoints(plan)))
    )
    if not disposition.claimed:
        final = store.publish_finalization(guard, Superseded(), references, files, clock)
        return Finished(plan=plan, terminal=final.terminal, failure=None, metrics={})
    try:
        final = store.publish_finalization(guard, Accepted(), references, files, clock)
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
        final = store.publish_finalization(guard, failed, references, files, clock)
        return Finished(plan=plan, terminal=final.terminal, failure=failure, metrics={})
    metrics = success.produced[-1].result["metrics"] if success.produced else {}
    assert isinstance(metrics, dict)
    return Finished(plan=plan, terminal=final.terminal, failure=None, metrics=metrics)


def fail(
    store: RunStore,
    plan: SlotPlan,
    guard: OwnedAttempt,
    failure: Failure,
    work: WorkResult | None,
    clock: Clock,
) -> Finished:
    """Enter finalizing without contending for the claim and publish ``Failed``."""
    guard = store.advance(guard, AttemptState.FINALIZING, clock())
    files = () if work is None else attempt_files(work, include_outputs=True)
    final = store.publish_finalization(
        guard,
        Failed(code=failure.code, details=failure.details),
        [],
        write_files(files),
        clock,
    )
    return Finished(plan=plan, terminal=final.terminal, failure=failure, metrics={})


def attempt_files(work: WorkResult, *, include_outputs: bool) -> tuple[tuple[str, bytes], ...]:
    """The attempt artifact's files: ``worker.json`` (how the worker ended), its logs and,
    when asked, its outputs under ``outputs/``."""
    summary: dict[str, JSON] = {
        "detail": text(work.detail),
        "duration_ns": str(work.duration_ns),
        "exit_code": work.exit_code,
        "status": work.status.value,
        "stderr_truncated": work.stderr_truncated,
        "stdout_truncated": work.stdout_truncated,
    }
    files = [
        ("stderr.log", work.stderr),
        ("stdout.log", work.stdout),
        ("worker.json", encode(summary)),
    ]
    if include_outputs and work.outputs:
        problem = output_problem(work.outputs)
        if problem is None:
            files.extend(
                (f"outputs/{path}", data)
                for path, data in work.outputs
                if not path.startswith("checkpoints/")
            )
        else:
            summary["outputs_omitted"] = problem
            files[2] = ("worker.json", encode(summary))
    return tuple(files)


def write_files(files: Sequence[tuple[str, bytes]]) -> Callable[[str], None]:
    """A ``populate`` callback writing ``files`` (relative POSIX path, bytes) under its
    directory and closing each before returning."""

    def populate(directory: str) -> None:
        for path, data in files:
            target = os.path.join(directory, *path.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "xb") as handle:
                handle.write(data)

    return populate
