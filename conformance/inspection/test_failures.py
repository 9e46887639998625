"""``runstore.inspection.failures`` (SPEC.md section 15.6, "When a slot fails"): the
unsatisfied slots of :func:`test_status.build_store`'s store, one slot per derived state,
grouped by cause. The expected groups are pinned from how ``build_store`` ends each slot
(its docstring and code), not computed by the reader: failed ``worker_failed`` (c2/p2),
failed ``time_limit`` (c4/p2's retry), interrupted (c3/p1, recovered), censored
``budget`` (c3/p2) and superseded (c4/p1); pending (c1/p1), running (c1/p2) and accepted
(c2/p1) slots are no failures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore.inspection.failures import failures
from runstore.inspection.snapshot import Snapshot

from conformance.inspection.test_status import Built
from conformance.inspection.test_status import build_store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    root = tmp_path_factory.mktemp("failures-store")
    return root, build_store(root)


def test_unsatisfied_slots_are_grouped_by_cause(built: tuple[Path, Built]) -> None:
    root, ids = built
    with Snapshot.take(root) as snapshot:
        report = failures(snapshot)
    document = report.to_json()
    groups = {(g["state"], g["code"], g["reason"]): g["slots"] for g in document["groups"]}
    assert groups == {
        ("failed", "worker_failed", None): ["camp/c2/p2/measurement"],
        ("failed", "time_limit", None): ["camp/c4/p2/measurement"],
        ("interrupted", "interrupted_attempt", None): ["camp/c3/p1/measurement"],
        ("censored", None, "budget"): ["camp/c3/p2/measurement"],
        ("superseded", None, None): ["camp/c4/p1/measurement"],
    }
    assert document["slots"] == 8 and document["unsatisfied"] == 5
    by_slot = {g["excerpt"]["slot"]: g["excerpt"] for g in document["groups"]}
    retried = by_slot["camp/c4/p2/measurement"]
    assert retried["attempt"] == 1 and retried["attempt_id"] == ids.attempts["retried-1"]
    assert by_slot["camp/c2/p2/measurement"]["details"] == {"exit_code": 1}
    assert by_slot["camp/c3/p2/measurement"]["reason"] == "budget"
    interrupted = by_slot["camp/c3/p1/measurement"]["details"]
    assert interrupted == {"cause": "reservation_expired", "interrupted_state": "executing"}
    # This store's attempt artifacts are registered without directories: the excerpt
    # says why it shows no tail instead of failing the report.
    failed_logs = by_slot["camp/c2/p2/measurement"]["logs"]
    assert failed_logs["stderr_tail"] is None
    assert failed_logs["problem"].startswith("artifact_corrupt: ")


def test_a_campaign_without_slots_has_no_failures(built: tuple[Path, Built]) -> None:
    root, _ = built
    with Snapshot.take(root) as snapshot:
        report = failures(snapshot, campaign="nothing")
    assert report.to_json()["groups"] == [] and report.slots == 0
