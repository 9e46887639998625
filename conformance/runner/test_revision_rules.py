"""The revision rules on their own (SPEC.md section 15.9): the runner's reading of a
decision's revision and the inspection reader's SQL agree on every evidence value; a
revision stamps the decision and so every identity below it, and revision 0 keeps the
identities a campaign always had."""

from __future__ import annotations

import sqlite3

import pytest
from runstore.canonical import JSON
from runstore.inspection.reader import DECISION_REVISION
from runstore.records import ApplicabilityDecision
from runstore.runner.plan import plan
from runstore.runner.revisions import revision_of

from conformance.runner.world import campaign as campaign_of_pairs

MISSING = object()


@pytest.mark.parametrize(
    "value", [MISSING, None, 0, 1, 7, 2**53 - 1, -1, "3", True, False, [2], {"k": 2}]
)
def test_the_runner_and_the_reader_read_the_same_revision(value: object) -> None:
    evidence: dict[str, JSON] = {"rule": "every_problem"}
    if value is not MISSING:
        evidence["revision"] = value  # type: ignore[assignment]
    decision = ApplicabilityDecision(
        candidate_id="c/a", problem_id="c/p", applicable=True, evidence=evidence
    )
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE applicability_decisions (record_json TEXT)")
    connection.execute(
        "INSERT INTO applicability_decisions VALUES (?)",
        (decision.to_bytes().decode("utf-8"),),
    )
    ((from_sql,),) = connection.execute(f"SELECT {DECISION_REVISION} FROM applicability_decisions")
    expected = value if type(value) is int and value >= 0 else 0
    assert revision_of(decision) == from_sql == expected


def test_a_revision_gives_a_pair_new_identities_and_revision_zero_keeps_them() -> None:
    campaign = campaign_of_pairs()
    plain = plan(campaign)
    same = plan(campaign, {})
    assert [s.attempt_slot.id for s in plain if s.attempt_slot] == [
        s.attempt_slot.id for s in same if s.attempt_slot
    ]
    first = plain[0]
    pair = (first.candidate.name, first.problem.name)
    revised = plan(campaign, {pair: 2})
    for before, after in zip(plain, revised, strict=True):
        moved = (after.candidate.name, after.problem.name) == pair
        assert (before.decision.id != after.decision.id) is moved
        assert (before.attempt_slot != after.attempt_slot) is moved
        if moved:
            assert after.decision.evidence["revision"] == 2
            assert before.run is not None and after.run is not None
            assert after.run.logical_spec_id == before.run.logical_spec_id
            assert after.run.specification == before.run.specification
        else:
            assert "revision" not in after.decision.evidence
