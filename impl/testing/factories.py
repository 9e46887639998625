"""Factories for consistent, valid records: for runstore's own tests, the crash simulator's
scenarios, and anyone writing tests against a store.

Rules of this file: values only (no I/O, no store, no clock, no randomness). It imports
only the value layer (records, requests, enums, canonical, identity), never the store, SQL
or filesystem modules, so ``import runstore.testing`` stays as light as the model
(``conformance/meta/test_layers.py`` holds it to that). Every factory is a pure function of its
arguments, so the same arguments give equal records with equal ids, and the records it
returns already agree with each other the way registration requires (same run, same
candidate, an applicable decision, slot ownership).

Names and sharing: a slot's ``name`` is its ``logical_slot`` (its observation slots are
``<name>/result`` and ``<name>/checkpoint-<i>``), so distinct names give distinct slot ids.
The decision and run depend only on ``candidate`` and ``problem``: slots built with the same
pair belong to one run, as the slots of a real sweep do, and the same name used for two
different kinds of slot in one run is a registration conflict, on purpose.
"""

from __future__ import annotations

import hashlib

import attrs
from runstore.canonical import JSON
from runstore.enums import ArtifactKind
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import ObservationSlotKind
from runstore.enums import SlotRole
from runstore.identity import run_attempt_id
from runstore.records import ApplicabilityDecision
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.requests import LeaseRequest

CANDIDATE = "candidate"
PROBLEM = "problem"
LOGICAL_SPEC = "spec"


def digest(seed: str) -> str:
    """The lowercase hex SHA-256 of ``seed``'s UTF-8 bytes: a stand-in content digest."""
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()


def decision(
    candidate: str = CANDIDATE, problem: str = PROBLEM, *, applicable: bool = True
) -> ApplicabilityDecision:
    """The decision that ``candidate`` applies (or, with ``applicable=False``, does not) to
    ``problem``, with empty evidence."""
    return ApplicabilityDecision(
        candidate_id=candidate, problem_id=problem, applicable=applicable, evidence={}
    )


def resolved_run(decision_record: ApplicabilityDecision) -> ResolvedRun:
    """The run resolving ``decision_record`` (same decision id and candidate id), with
    logical spec ``"spec"`` and an empty specification. It validates even for an excluded decision;
    registering it then is refused, which is what a test of that refusal needs."""
    return ResolvedRun(
        decision_id=decision_record.id,
        candidate_id=decision_record.candidate_id,
        logical_spec_id=LOGICAL_SPEC,
        specification={},
    )


@attrs.frozen(kw_only=True)
class OneShot:
    """The four records ``register_one_shot`` takes: an applicable decision, the run bound to
    it, a one-shot attempt slot of that run, and the result slot the attempt slot owns."""

    decision: ApplicabilityDecision
    run: ResolvedRun
    attempt_slot: AttemptSlot
    observation_slot: ObservationSlot

    def arguments(self) -> tuple[ApplicabilityDecision, ResolvedRun, AttemptSlot, ObservationSlot]:
        """``(decision, run, attempt_slot, observation_slot)``, in ``register_one_shot``'s
        order: ``store.register_one_shot(*bundle.arguments())``."""
        return (self.decision, self.run, self.attempt_slot, self.observation_slot)

    @property
    def slot_id(self) -> str:
        """The attempt slot's id (what ``reserve`` takes)."""
        return self.attempt_slot.id

    def attempt_id(self, retry_index: int = 0) -> str:
        """The id attempt ``retry_index`` of this slot will have."""
        return run_attempt_id(self.attempt_slot.id, retry_index)


@attrs.frozen(kw_only=True)
class Slots:
    """A decision, its run, an attempt slot of any kind and the observation slots it owns:
    the arguments of a general slot registration (``register_slots``)."""

    decision: ApplicabilityDecision
    run: ResolvedRun
    attempt_slot: AttemptSlot
    observation_slots: tuple[ObservationSlot, ...]

    def arguments(
        self,
    ) -> tuple[ApplicabilityDecision, ResolvedRun, AttemptSlot, tuple[ObservationSlot, ...]]:
        """``(decision, run, attempt_slot, observation_slots)``."""
        return (self.decision, self.run, self.attempt_slot, self.observation_slots)

    @property
    def slot_id(self) -> str:
        """The attempt slot's id (what ``reserve`` takes)."""
        return self.attempt_slot.id

    def attempt_id(self, retry_index: int = 0) -> str:
        """The id attempt ``retry_index`` of this slot will have."""
        return run_attempt_id(self.attempt_slot.id, retry_index)


def _attempt_slot(run: ResolvedRun, name: str, kind: ExecutionKind, role: SlotRole) -> AttemptSlot:
    return AttemptSlot(
        run_id=run.id, logical_slot=name, execution_kind=kind, role=role, specification={}
    )


def _observation_slot(owner: AttemptSlot, suffix: str, index: int | None) -> ObservationSlot:
    return ObservationSlot(
        run_id=owner.run_id,
        logical_slot=f"{owner.logical_slot}/{suffix}",
        kind=ObservationSlotKind.RESULT if index is None else ObservationSlotKind.CHECKPOINT,
        checkpoint_index=index,
        attempt_slot_id=owner.id,
    )


def one_shot(
    name: str = "slot",
    *,
    candidate: str = CANDIDATE,
    problem: str = PROBLEM,
    role: SlotRole = SlotRole.MEASUREMENT,
) -> OneShot:
    """A one-shot slot named ``name`` with its result slot ``<name>/result``, in the run of
    ``decision(candidate, problem)``. With the default role the bundle registers; with
    ``role=SlotRole.WARMUP`` every record is valid but ``register_one_shot`` refuses the
    bundle (``invalid_record``: a warm-up owns no observation slot)."""
    decision_record = decision(candidate, problem)
    run = resolved_run(decision_record)
    slot = _attempt_slot(run, name, ExecutionKind.ONE_SHOT, role)
    return OneShot(
        decision=decision_record,
        run=run,
        attempt_slot=slot,
        observation_slot=_observation_slot(slot, "result", None),
    )


def slots(
    name: str = "slot",
    *,
    kind: ExecutionKind = ExecutionKind.ONE_SHOT,
    role: SlotRole = SlotRole.MEASUREMENT,
    checkpoints: int = 2,
    candidate: str = CANDIDATE,
    problem: str = PROBLEM,
) -> Slots:
    """A slot named ``name`` of any kind and role, owning the observation slots its shape
    calls for: none for a warm-up, ``checkpoints`` checkpoint slots
    ``<name>/checkpoint-<i>`` (indices ``0 .. checkpoints-1``) for a stream measurement,
    and the one result slot ``<name>/result`` for a one-shot or fresh-observation
    measurement. ``checkpoints`` counts only for a stream measurement."""
    decision_record = decision(candidate, problem)
    run = resolved_run(decision_record)
    slot = _attempt_slot(run, name, kind, role)
    members: tuple[ObservationSlot, ...]
    if role is SlotRole.WARMUP:
        members = ()
    elif kind is ExecutionKind.STREAM:
        members = tuple(_observation_slot(slot, f"checkpoint-{i}", i) for i in range(checkpoints))
    else:
        members = (_observation_slot(slot, "result", None),)
    return Slots(decision=decision_record, run=run, attempt_slot=slot, observation_slots=members)


def stream(
    name: str = "stream",
    *,
    checkpoints: int = 2,
    candidate: str = CANDIDATE,
    problem: str = PROBLEM,
) -> Slots:
    """A stream measurement slot owning ``checkpoints`` checkpoint slots
    ``<name>/checkpoint-<i>`` with indices ``0 .. checkpoints-1``. ``checkpoints=0`` builds
    a stream without checkpoint slots, which registration refuses."""
    return slots(
        name,
        kind=ExecutionKind.STREAM,
        checkpoints=checkpoints,
        candidate=candidate,
        problem=problem,
    )


def warmup(
    name: str = "warmup",
    *,
    kind: ExecutionKind = ExecutionKind.ONE_SHOT,
    candidate: str = CANDIDATE,
    problem: str = PROBLEM,
) -> Slots:
    """A warm-up slot of execution kind ``kind``; it owns no observation slot."""
    return slots(name, kind=kind, role=SlotRole.WARMUP, candidate=candidate, problem=problem)


def lease(name: str, *, expires_at_ns: int, owner: str = "owner") -> LeaseRequest:
    """A lease request with id ``lease-<name>`` and owner token ``token-<owner>``: leases of
    one ``owner`` share a token, and distinct names give distinct lease ids."""
    return LeaseRequest(
        lease_id=f"lease-{name}", owner_token=f"token-{owner}", expires_at_ns=expires_at_ns
    )


def observation(
    slot: ObservationSlot,
    attempt_id: str,
    *,
    valid: bool = True,
    completion: Completion = Completion.REACHED,
    result: dict[str, JSON] | None = None,
) -> Observation:
    """An observation of attempt ``attempt_id`` for ``slot`` (``result`` defaults to ``{}``).
    The attempt must be one of the slot's owner (``OneShot.attempt_id`` gives such ids);
    the writer refuses any other with ``observation_slot_mismatch``."""
    return Observation(
        slot_id=slot.id,
        attempt_id=attempt_id,
        valid=valid,
        completion=completion,
        result={} if result is None else result,
    )


def artifact(kind: ArtifactKind, seed: str, *, verified_at_ns: int) -> ArtifactRegistration:
    """A registration of a ``kind`` artifact whose content digest is ``digest(seed)`` and
    manifest digest ``digest("manifest:" + seed)``, at ``artifacts/<kind>-<content digest>``
    (so its id is ``run-store-v1:<kind>-<content digest>``). Distinct seeds give distinct
    artifacts; it describes a directory, it does not create one."""
    content = digest(seed)
    return ArtifactRegistration(
        kind=kind,
        path=f"artifacts/{kind.value}-{content}",
        content_sha256=content,
        manifest_sha256=digest(f"manifest:{seed}"),
        verified_at_ns=verified_at_ns,
    )
