"""Which revision each pair of a campaign is registered in, and what ``run --revise`` adds.

Rules of this file: pure (no store): from the records a store holds for a campaign's
candidates (:class:`~runstore.store.coordinator_reads.Registered`) and the campaign file,
decide each pair's revision (SPEC.md section 15.9). A pair is compared with its latest
registered revision only; a pair that differs from it is refused unless the run revises,
and then it alone gets the campaign's next revision, with new identities. Nothing
registered is ever rewritten: an earlier revision stays in the store, with its results.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from runstore.errors import RegistrationConflictError
from runstore.records import ApplicabilityDecision
from runstore.runner.campaign import Campaign
from runstore.runner.plan import REVISION_KEY
from runstore.runner.plan import Pair
from runstore.runner.plan import SlotPlan
from runstore.runner.plan import conflicts
from runstore.runner.plan import plan
from runstore.store.coordinator_reads import Registered

MAX_REVISION = 2**53 - 1
SHOWN_CONFLICTS = 3


def revision_of(decision: ApplicabilityDecision) -> int:
    """A decision's revision: its evidence's integer ``revision``, else 0 (the rule the
    inspection reader's SQL applies too)."""
    value = decision.evidence.get(REVISION_KEY)
    return value if type(value) is int and value >= 0 else 0


def latest(registered: Registered) -> dict[tuple[str, str], int]:
    """Each registered (candidate id, problem id)'s highest revision."""
    found: dict[tuple[str, str], int] = {}
    for decision in registered.decisions:
        key = (decision.candidate_id, decision.problem_id)
        found[key] = max(found.get(key, 0), revision_of(decision))
    return found


def at_latest(registered: Registered) -> Registered:
    """``registered`` cut to each pair's latest revision: its decisions of that revision,
    their runs, and those runs' slots."""
    newest = latest(registered)
    decisions = tuple(
        decision
        for decision in registered.decisions
        if revision_of(decision) == newest[decision.candidate_id, decision.problem_id]
    )
    kept = {decision.id for decision in decisions}
    runs = tuple(run for run in registered.runs if run.decision_id in kept)
    run_ids = {run.id for run in runs}
    return Registered(
        decisions=decisions,
        runs=runs,
        attempt_slots=tuple(s for s in registered.attempt_slots if s.run_id in run_ids),
        observation_slots=tuple(s for s in registered.observation_slots if s.run_id in run_ids),
    )


@attrs.frozen(kw_only=True)
class Revised:
    """The plans a run registers and runs, each pair at its revision; ``revision`` is the
    campaign's revision after this run (the highest of its pairs'), and ``revised`` the
    pairs this run moved to it (empty unless ``--revise`` found changes)."""

    plans: tuple[SlotPlan, ...]
    revision: int
    revised: tuple[Pair, ...]
    changes: tuple[str, ...]


def resolve(campaign: Campaign, registered: Registered, *, revise: bool) -> Revised:
    """Each pair of ``campaign`` at its latest registered revision (a new pair at the
    campaign's current revision); the pairs that differ from it refuse the whole campaign
    with ``registration_conflict`` (naming what differs and ``--revise``), or with
    ``revise`` move to the next revision."""
    newest = latest(registered)
    current = max(newest.values(), default=0)
    names = _names(campaign)
    revisions = {pair: newest.get(ids, current) for pair, ids in names.items()}
    plans = plan(campaign, revisions)
    found = conflicts(plans, at_latest(registered))
    if not found:
        return Revised(plans=plans, revision=current, revised=(), changes=())
    lines = list(dict.fromkeys(line for _pair, line in found))
    if not revise:
        raise RegistrationConflictError(_refusal(campaign.name, lines, current))
    if current >= MAX_REVISION:
        raise RegistrationConflictError(
            f"campaign {campaign.name} has reached the last revision, {current}"
        )
    changed = tuple(dict.fromkeys(pair for pair, _line in found))
    revisions.update(dict.fromkeys(changed, current + 1))
    return Revised(
        plans=plan(campaign, revisions),
        revision=current + 1,
        revised=changed,
        changes=tuple(lines),
    )


def _names(campaign: Campaign) -> dict[Pair, tuple[str, str]]:
    """Each pair by its names, with its (candidate id, problem id)."""
    return {
        (candidate.name, problem.name): (
            f"{campaign.name}/{candidate.name}",
            f"{campaign.name}/{problem.name}",
        )
        for candidate in campaign.candidates
        for problem in campaign.problems
    }


def _refusal(name: str, lines: Sequence[str], current: int) -> str:
    shown = " | ".join(lines[:SHOWN_CONFLICTS])
    more = f" (and {len(lines) - SHOWN_CONFLICTS} more)" if len(lines) > SHOWN_CONFLICTS else ""
    return (
        f"campaign {name} differs from what the store holds: {shown}{more}; "
        f"run --revise registers the changed pairs as revision {current + 1} "
        "(the others keep their results)"
    )
