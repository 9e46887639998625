"""The synthetic store's slots and the records, documents and worker bytes of each: what
``runstore.runner.plan`` and the worker would make for slot ``i`` (candidate ``c<i // 100>``
on problem ``p<i % 100>``; every :data:`RETRY_EVERY`-th slot first has a failed attempt).

Rules of this file: pure; records and documents come from the value layer the writer calls
(:mod:`runstore.records`, :mod:`runstore.canonical`). ``tools/synth.py`` writes them.
"""

from __future__ import annotations

import json
from typing import Final

import attrs
from runstore import canonical
from runstore import enums
from runstore import records
from runstore.canonical import JSON

CAMPAIGN: Final = "synth"
PROBLEMS: Final = 100
RETRY_EVERY: Final = 10

Document = dict[str, JSON]


@attrs.frozen
class SlotPlan:
    """Slot ``index``: its candidate and problem, and whether its first attempt fails."""

    index: int
    candidate: str
    problem: str
    failed_first: bool


def slot_plans(attempts: int) -> list[SlotPlan]:
    """The slots holding exactly ``attempts`` attempts (ValueError unless a positive int):
    every :data:`RETRY_EVERY`-th slot has two while two remain, every other slot one."""
    if type(attempts) is not int or attempts < 1:
        raise ValueError(f"attempts must be a positive int, not {attempts!r}")
    flags: list[bool] = []
    while attempts > 0:
        flags.append(len(flags) % RETRY_EVERY == 0 and attempts >= 2)
        attempts -= 1 + flags[-1]
    width = min(len(flags), PROBLEMS)
    names = [(f"c{i // width:05d}", f"p{i % width:03d}") for i in range(len(flags))]
    return [SlotPlan(i, *names[i], failed) for i, failed in enumerate(flags)]


def worker_result(index: int) -> tuple[bytes, Document]:
    """The ``result.json`` slot ``index``'s worker writes (distinct per slot), and the result
    the runner reads from it (each metric a decimal string: int digits, a float's repr)."""
    seconds = 0.5 + index / 1000
    document = json.dumps({"metrics": {"score": index, "seconds": seconds}}).encode()
    return document, {"metrics": {"score": str(index), "seconds": repr(seconds)}}


def attempt_files(exit_code: int) -> dict[str, bytes]:
    """The attempt artifact's files (``outcome.json`` aside) of a worker that printed
    ``out``/``err``, took 5 ms and exited with ``exit_code``."""
    worker: Document = {"detail": "", "duration_ns": "5000000", "exit_code": exit_code}
    worker |= {"status": "exited", "stderr_truncated": False, "stdout_truncated": False}
    return {"stderr.log": b"err\n", "stdout.log": b"out\n", "worker.json": canonical.encode(worker)}


def slot_documents(plan: SlotPlan) -> tuple[Document, Document, Document, Document]:
    """The ``record_json`` documents of the records ``runstore.runner.plan`` makes for the
    slot's pair (no input files): decision, run, measurement slot, result slot."""
    candidate, problem = f"{CAMPAIGN}/{plan.candidate}", f"{CAMPAIGN}/{plan.problem}"
    evidence: Document = {"rule": "every_problem"}
    decision = records.ApplicabilityDecision(
        candidate_id=candidate, problem_id=problem, applicable=True, evidence=evidence
    ).to_json()
    spec: Document = {"candidate": plan.candidate, "env": {"SEED": "1"}, "files": {}}
    spec["command"] = ["{python}", "worker.py", plan.candidate]
    spec["parameters"] = {"problem": plan.problem, "size": 10}
    spec["problem"], spec_id = plan.problem, f"{candidate}/{plan.problem}"
    decision_id = str(decision["id"])
    run = records.ResolvedRun(
        decision_id=decision_id, candidate_id=candidate, logical_spec_id=spec_id, specification=spec
    ).to_json()
    kind, role, run_id = enums.ExecutionKind.ONE_SHOT, enums.SlotRole.MEASUREMENT, str(run["id"])
    slot = records.AttemptSlot(
        run_id=run_id, logical_slot="measurement", specification={}, execution_kind=kind, role=role
    ).to_json()
    result, slot_id = enums.ObservationSlotKind.RESULT, str(slot["id"])
    observed = records.ObservationSlot(
        run_id=run_id,
        logical_slot="result",
        checkpoint_index=None,
        kind=result,
        attempt_slot_id=slot_id,
    ).to_json()
    return decision, run, slot, observed
