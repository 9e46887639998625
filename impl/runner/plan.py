"""From a campaign to the records the store registers, and what differs from what it holds.

Rules of this file: pure (no store, no files): a :class:`~runstore.runner.campaign.Campaign`
becomes one :class:`SlotPlan` per candidate x problem pair (SPEC.md section 15,
"Identities of a campaign"), and :func:`conflicts` compares plans with the records already
registered. Operational settings (time limits, lease duration) are not identity: changing
them never conflicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from collections.abc import Sequence

import attrs
from runstore.canonical import JSON
from runstore.enums import ExecutionKind
from runstore.enums import ObservationSlotKind
from runstore.enums import SlotRole
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.runner.campaign import Campaign
from runstore.runner.campaign import Candidate
from runstore.runner.campaign import InputFile
from runstore.runner.campaign import MetricDeclaration
from runstore.runner.campaign import Problem
from runstore.runner.campaign import SlotKind
from runstore.store.coordinator_reads import Registered

REVISION_KEY = "revision"
"""The key of a decision's evidence that holds its pair's revision (absent for 0)."""
ATTEMPT_SLOT_NAME = "measurement"
WARMUP_SLOT_NAME = "warmup"
RESULT_SLOT_NAME = "result"


@attrs.frozen(kw_only=True)
class SlotPlan:
    """One attempt slot of a candidate x problem pair (a pair has a measurement slot, and
    a warm-up slot before it when the campaign asks). ``run`` and the slots are None/empty
    when the candidate does not apply to the problem (nothing is registered for it).
    ``requires`` is the warm-up slot that must be accepted before this one starts."""

    candidate: Candidate
    problem: Problem
    decision: ApplicabilityDecision
    run: ResolvedRun | None
    attempt_slot: AttemptSlot | None
    observation_slots: tuple[ObservationSlot, ...]
    timeout_ns: int
    requires: str | None = None
    repetition: int = 0
    """Which repetition of its pair a measurement slot is (0 for a warm-up)."""
    packages: tuple[str, ...] = ()
    """The campaign's ``packages``: whose versions the attempt's environment records."""

    @property
    def label(self) -> str:
        """``candidate x problem``, with ``(warmup)`` for a warm-up and ``[measurement-r]``
        for a repetition after the first, so every slot of a campaign has its own label."""
        pair = f"{self.candidate.name} x {self.problem.name}"
        if self.attempt_slot is None:
            return pair
        if self.attempt_slot.role is SlotRole.WARMUP:
            return f"{pair} (warmup)"
        return f"{pair} [{self.attempt_slot.logical_slot}]" if self.repetition else pair


def candidate_id(campaign: Campaign, candidate: Candidate) -> str:
    return f"{campaign.name}/{candidate.name}"


Pair = tuple[str, str]
"""A candidate x problem pair by its names in the campaign file."""


def plan(campaign: Campaign, revisions: Mapping[Pair, int] | None = None) -> tuple[SlotPlan, ...]:
    """Every pair's slots in the order a run starts them (SPEC.md section 15.2, "Order").

    Without repetitions (every candidate has one): candidates in file order, each with
    the problems in file order, a pair's warm-up slot before its measurement slot. With
    repetitions: round by round (round ``r`` holds every pair's repetition ``r``), within
    a round the problems in file order and, for each, the candidates in the seeded order
    of :func:`interleaved`; a pair's warm-up slot comes just before its repetition 0.

    ``revisions`` gives a pair's revision (SPEC.md section 15.9; default 0): a pair of
    revision ``k > 0`` has ``"revision": k`` in its decision's evidence, so its decision,
    run and slots all have identities of their own."""
    chosen = revisions or {}
    parts = _Parts(campaign)
    pairs = {
        (candidate.name, problem.name): _plan_pair(
            parts, candidate, problem, chosen.get((candidate.name, problem.name), 0)
        )
        for candidate in campaign.candidates
        for problem in campaign.problems
    }
    if all(repetitions(campaign, candidate) == 1 for candidate in campaign.candidates):
        return tuple(slot for slots in pairs.values() for slot in slots)
    rounds = max(repetitions(campaign, candidate) for candidate in campaign.candidates)
    ordered: list[SlotPlan] = []
    for round_index in range(rounds):
        for problem in campaign.problems:
            for candidate in interleaved(campaign, round_index, problem):
                slots = pairs[candidate.name, problem.name]
                # a warm-up has repetition 0: it comes just before its pair's first measurement
                ordered.extend(slot for slot in slots if slot.repetition == round_index)
    return tuple(ordered)


def interleaved(campaign: Campaign, round_index: int, problem: Problem) -> list[Candidate]:
    """The candidates of one round on one problem, ordered by the SHA-256 of
    ``"<seed>/<round>/<problem>/<candidate>"`` (UTF-8, hex digests compared as text), so
    the order is seeded, recorded by the seed, and differs from round to round."""

    def key(candidate: Candidate) -> str:
        text = f"{campaign.seed}/{round_index}/{problem.name}/{candidate.name}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    return sorted(campaign.candidates, key=key)


def repetitions(campaign: Campaign, candidate: Candidate) -> int:
    """How many measurement slots each of ``candidate``'s pairs has."""
    return campaign.repetitions if candidate.repetitions is None else candidate.repetitions


def measurement_slot_name(repetition: int) -> str:
    """``measurement`` for repetition 0 (the slot a campaign without repetitions has),
    ``measurement-<r>`` for the others."""
    return ATTEMPT_SLOT_NAME if repetition == 0 else f"{ATTEMPT_SLOT_NAME}-{repetition}"


class _Parts:
    """What every pair of a candidate (or of a problem) shares, decoded once per plan:
    its parameters, command, environment and files as they enter a run's specification
    (the specification's dicts share these values; records encode them, never change
    them), and the campaign's metrics and settings."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.metrics: dict[str, JSON] | None = (
            {metric.name: metric.to_json() for metric in campaign.metrics}
            if campaign.metrics
            else None
        )
        self.execution_kind = _EXECUTION_KINDS[campaign.slot_kind]
        self.candidates: dict[str, dict[str, JSON]] = {}
        self.problems: dict[str, JSON] = {}

    def candidate(self, candidate: Candidate) -> dict[str, JSON]:
        found = self.candidates.get(candidate.name)
        if found is None:
            found = {
                "candidate": candidate.name,
                "command": list(candidate.command),
                "env": dict(candidate.env),
            }
            parameters = candidate.parameters
            if parameters:
                found["candidate_parameters"] = parameters
            self.candidates[candidate.name] = found
        return found

    def problem(self, problem: Problem) -> JSON:
        found = self.problems.get(problem.name)
        if found is None:
            found = self.problems[problem.name] = problem.parameters
        return found

    def specification(self, candidate: Candidate, problem: Problem) -> dict[str, JSON]:
        """:func:`run_specification` of the pair, from the shared parts."""
        specification = {
            **self.candidate(candidate),
            "files": _files(candidate.files + problem.files),
            "parameters": self.problem(problem),
            "problem": problem.name,
        }
        if self.metrics is not None:
            specification["metrics"] = self.metrics
        return specification


def _plan_pair(
    parts: _Parts, candidate: Candidate, problem: Problem, revision: int
) -> tuple[SlotPlan, ...]:
    campaign = parts.campaign
    applicable, evidence = _applicability(candidate, problem)
    if revision:
        evidence[REVISION_KEY] = revision
    decision = ApplicabilityDecision(
        candidate_id=candidate_id(campaign, candidate),
        problem_id=f"{campaign.name}/{problem.name}",
        applicable=applicable,
        evidence=evidence,
    )
    timeout_ns = candidate.timeout_ns if candidate.timeout_ns is not None else campaign.timeout_ns
    if not applicable:
        return (
            SlotPlan(
                candidate=candidate,
                problem=problem,
                decision=decision,
                run=None,
                attempt_slot=None,
                observation_slots=(),
                timeout_ns=timeout_ns,
                packages=campaign.packages,
            ),
        )
    run = ResolvedRun(
        decision_id=decision.id,
        candidate_id=decision.candidate_id,
        logical_spec_id=f"{campaign.name}/{candidate.name}/{problem.name}",
        specification=parts.specification(candidate, problem),
    )
    plans = []
    requires = None
    if campaign.warmup if candidate.warmup is None else candidate.warmup:
        warmup = AttemptSlot(
            run_id=run.id,
            logical_slot=WARMUP_SLOT_NAME,
            execution_kind=ExecutionKind.ONE_SHOT,
            role=SlotRole.WARMUP,
            specification={},
        )
        requires = warmup.id
        plans.append(
            SlotPlan(
                candidate=candidate,
                problem=problem,
                decision=decision,
                run=run,
                attempt_slot=warmup,
                observation_slots=(),
                timeout_ns=timeout_ns,
                packages=campaign.packages,
            )
        )
    for repetition in range(repetitions(campaign, candidate)):
        measurement = AttemptSlot(
            run_id=run.id,
            logical_slot=measurement_slot_name(repetition),
            execution_kind=parts.execution_kind,
            role=SlotRole.MEASUREMENT,
            specification={} if repetition == 0 else {"repetition": repetition},
        )
        plans.append(
            SlotPlan(
                candidate=candidate,
                problem=problem,
                decision=decision,
                run=run,
                attempt_slot=measurement,
                observation_slots=_observation_slots(campaign, run, measurement, repetition),
                timeout_ns=timeout_ns,
                requires=requires,
                repetition=repetition,
                packages=campaign.packages,
            )
        )
    return tuple(plans)


_EXECUTION_KINDS = {
    SlotKind.ONE_SHOT: ExecutionKind.ONE_SHOT,
    SlotKind.FRESH_OBSERVATION: ExecutionKind.FRESH_OBSERVATION,
    SlotKind.STREAM: ExecutionKind.STREAM,
}


def _observation_slots(
    campaign: Campaign, run: ResolvedRun, measurement: AttemptSlot, repetition: int
) -> tuple[ObservationSlot, ...]:
    """One result slot, or a stream's checkpoint slots ``checkpoint-<i>``; a repetition
    ``r`` other than 0 suffixes each name with ``-<r>``."""
    suffix = "" if repetition == 0 else f"-{repetition}"
    if campaign.slot_kind is not SlotKind.STREAM:
        return (
            ObservationSlot(
                run_id=run.id,
                logical_slot=RESULT_SLOT_NAME + suffix,
                kind=ObservationSlotKind.RESULT,
                checkpoint_index=None,
                attempt_slot_id=measurement.id,
            ),
        )
    assert campaign.checkpoints is not None
    return tuple(
        ObservationSlot(
            run_id=run.id,
            logical_slot=f"checkpoint-{index}{suffix}",
            kind=ObservationSlotKind.CHECKPOINT,
            checkpoint_index=index,
            attempt_slot_id=measurement.id,
        )
        for index in range(campaign.checkpoints)
    )


def _applicability(candidate: Candidate, problem: Problem) -> tuple[bool, dict[str, JSON]]:
    if candidate.applies_to is None:
        return True, {"rule": "every_problem"}
    names = {problem.name, *problem.tags}
    return bool(names & set(candidate.applies_to)), {
        "applies_to": list(candidate.applies_to),
        "problem_tags": list(problem.tags),
        "rule": "applies_to",
    }


def run_specification(
    candidate: Candidate, problem: Problem, metrics: Sequence[MetricDeclaration] = ()
) -> dict[str, JSON]:
    """What the run computes: the command, environment, files (by digest) and parameters;
    ``candidate_parameters`` only when the candidate has any, and ``metrics`` (the declared
    metrics) only when the campaign declares some, so a campaign file without them keeps
    the identities it always had."""
    specification: dict[str, JSON] = {
        "candidate": candidate.name,
        "command": list(candidate.command),
        "env": dict(candidate.env),
        "files": _files(candidate.files + problem.files),
        "parameters": problem.parameters,
        "problem": problem.name,
    }
    if candidate.parameters:
        specification["candidate_parameters"] = candidate.parameters
    if metrics:
        specification["metrics"] = {metric.name: metric.to_json() for metric in metrics}
    return specification


def _files(files: Sequence[InputFile]) -> dict[str, JSON]:
    return {file.name: {"sha256": file.sha256, "size": file.size} for file in files}


def conflicts(plans: Sequence[SlotPlan], registered: Registered) -> list[tuple[Pair, str]]:
    """Each pair whose decision or run differs from a registered one with the same
    candidate and problem (or logical spec), with a line saying what differs; empty when
    none. ``registered`` holds one revision of each pair (the one the plans were made
    for)."""
    decisions = {(d.candidate_id, d.problem_id): d for d in registered.decisions}
    attempt_slots = {(a.run_id, a.logical_slot): a for a in registered.attempt_slots}
    runs: dict[str, list[ResolvedRun]] = {}
    for run in registered.runs:
        runs.setdefault(run.logical_spec_id, []).append(run)
    found: list[tuple[Pair, str]] = []
    for slot in plans:
        pair = (slot.candidate.name, slot.problem.name)
        held = decisions.get((slot.decision.candidate_id, slot.decision.problem_id))
        if held is not None and held.id != slot.decision.id:
            found.append(
                (
                    pair,
                    f"{pair[0]} x {pair[1]}: applicability differs: "
                    + _differences(_decision_fields(held), _decision_fields(slot.decision)),
                )
            )
            continue
        if slot.run is None:
            continue
        for other in runs.get(slot.run.logical_spec_id, ()):
            if other.id != slot.run.id:
                found.append(
                    (
                        pair,
                        f"{pair[0]} x {pair[1]}: run specification differs: "
                        + _differences(other.specification, slot.run.specification),
                    )
                )
        assert slot.attempt_slot is not None
        held_slot = attempt_slots.get((slot.run.id, slot.attempt_slot.logical_slot))
        if held_slot not in (None, slot.attempt_slot):
            assert held_slot is not None
            found.append(
                (
                    pair,
                    f"{slot.label}: attempt slot differs: "
                    + _differences(_slot_fields(held_slot), _slot_fields(slot.attempt_slot)),
                )
            )
    return list(dict.fromkeys(found))  # a pair's warm-up and measurement share a run


def _slot_fields(slot: AttemptSlot) -> dict[str, JSON]:
    return {
        "execution_kind": slot.execution_kind.value,
        "role": slot.role.value,
        "specification": slot.specification,
    }


def _decision_fields(decision: ApplicabilityDecision) -> dict[str, JSON]:
    return {"applicable": decision.applicable, "evidence": decision.evidence}


def _differences(registered: dict[str, JSON], planned: dict[str, JSON]) -> str:
    keys = sorted(
        k for k in registered.keys() | planned.keys() if registered.get(k) != planned.get(k)
    )
    return "; ".join(
        f"{key} registered {_short(registered.get(key))}, file {_short(planned.get(key))}"
        for key in keys
    )


def _short(value: JSON | None) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
