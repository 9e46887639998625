"""``runstore.inspection.reader``: slot states and the ``status`` report (SPEC.md 15.6).

A store is built in-process with one slot in each derived state (and a retried slot whose
latest attempt decides), closed, and then read through a snapshot. The expected states are
computed by this file's own query on a fresh read-only connection to the closed database,
never by the reader's code; a few are also pinned by name.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import attrs
import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import ArtifactRegistration
from runstore import AttemptState
from runstore import Censored
from runstore import ExecutionKind
from runstore import Failed
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Next
from runstore import OwnedAttempt
from runstore import Reference
from runstore import RunStore
from runstore import SlotRole
from runstore import Superseded
from runstore import TerminalOutcome
from runstore import canonical
from runstore.enums import ObservationSlotKind
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import slot_summaries
from runstore.inspection.reader import status
from runstore.inspection.snapshot import Snapshot
from runstore.records import ApplicabilityDecision
from runstore.records import AttemptSlot
from runstore.records import ObservationSlot
from runstore.records import ResolvedRun
from runstore.testing import factories
from runstore.testing.factories import OneShot

from conformance.closed_store import rows

CAMPAIGN = "camp"
EXPIRES = 10_000
FAR = 2**62
RECOVERED_AT = 20_000
OWNER_TOKEN = "owner-secret-token-7f3a"
EXCLUDED = ("camp/cx", "camp/p1")
EXECUTION = (
    AttemptState.MATERIALIZING,
    AttemptState.STARTING,
    AttemptState.PREPARING,
    AttemptState.EXECUTING,
)


def bundle(candidate: str, problem: str, campaign: str = CAMPAIGN) -> OneShot:
    """The runner's naming: ``<campaign>/<candidate>`` and a ``.../<problem>`` spec id."""
    decision = factories.decision(f"{campaign}/{candidate}", f"{campaign}/{problem}")
    run = ResolvedRun(
        decision_id=decision.id,
        candidate_id=decision.candidate_id,
        logical_spec_id=f"{campaign}/{candidate}/{problem}",
        specification={"candidate": candidate},
    )
    slot = AttemptSlot(
        run_id=run.id,
        logical_slot="measurement",
        execution_kind=ExecutionKind.ONE_SHOT,
        role=SlotRole.MEASUREMENT,
        specification={},
    )
    result = ObservationSlot(
        run_id=run.id,
        logical_slot="result",
        kind=ObservationSlotKind.RESULT,
        checkpoint_index=None,
        attempt_slot_id=slot.id,
    )
    return OneShot(decision=decision, run=run, attempt_slot=slot, observation_slot=result)


@attrs.frozen
class Built:
    """Ids of the store :func:`build_store` made, by the state its slot should show."""

    slots: dict[str, str]
    attempts: dict[str, str]
    bundles: dict[str, OneShot]


def _lease(name: str, expires: int) -> LeaseRequest:
    return LeaseRequest(lease_id=f"lease-{name}", owner_token=OWNER_TOKEN, expires_at_ns=expires)


def _artifact(kind: ArtifactKind, seed: str, at: int) -> ArtifactRegistration:
    return factories.artifact(kind, seed, verified_at_ns=at)


def build_store(root: Path) -> Built:
    """A closed store on ``root`` with slots that derive to every state."""
    names = {
        "pending": ("c1", "p1"),
        "running": ("c1", "p2"),
        "accepted": ("c2", "p1"),
        "failed": ("c2", "p2"),
        "interrupted": ("c3", "p1"),
        "censored": ("c3", "p2"),
        "superseded": ("c4", "p1"),
        "retried": ("c4", "p2"),
    }
    bundles = {key: bundle(*pair) for key, pair in names.items()}
    attempts: dict[str, str] = {}
    store = RunStore.open(root)
    try:
        for item in bundles.values():
            store.register_one_shot(*item.arguments())

        def start(
            key: str, index: int = 0, expires: int = EXPIRES, retry: bool = False
        ) -> OwnedAttempt:
            authorization = Next(retry=True) if retry else FirstAttempt()
            guard = store.reserve(
                bundles[key].slot_id, authorization, _lease(f"{key}-{index}", expires), 1_000
            )
            for offset, phase in enumerate(EXECUTION):
                guard = store.advance(guard, phase, 1_100 + offset)
            attempts[f"{key}-{index}"] = guard.attempt_id
            return guard

        start("running", expires=FAR)

        guard = start("accepted")
        guard = store.advance(guard, AttemptState.VALIDATING, 1_200)
        disposition = store.begin_finalization(guard, _lease("accepted-claim", EXPIRES), 1_300)
        assert disposition.claimed
        guard = disposition.attempt
        observation = factories.observation(
            bundles["accepted"].observation_slot,
            guard.attempt_id,
            result={"metrics": {"ratio": "0.5", "bytes": "123"}},
        )
        observed = _artifact(ArtifactKind.OBSERVATION, "accepted-observation", 1_400)
        store.register_observation(guard, observation, observed, [], select=True, now_ns=1_400)
        store.commit_finalization(
            guard,
            Accepted(),
            _artifact(ArtifactKind.ATTEMPT, "accepted-attempt", 1_500),
            [Reference("observation", observed.id)],
            1_500,
            1_500,
        )

        def fail(key: str, outcome: TerminalOutcome, index: int = 0, retry: bool = False) -> None:
            guard = start(key, index, retry=retry)
            guard = store.advance(guard, AttemptState.FINALIZING, 1_200)
            artifact = _artifact(ArtifactKind.ATTEMPT, f"{key}-{index}", 1_300)
            store.commit_finalization(guard, outcome, artifact, [], 1_300, 1_300)

        fail("failed", Failed(code="worker_failed", details={"exit_code": 1}))
        fail("censored", Censored(reason="budget"))
        fail("retried", Censored(reason="first try"))
        fail("retried", Failed(code="time_limit", details={}), index=1, retry=True)

        start("interrupted")

        # Retry 0 holds the claim, retry 1 is a superseded contender; retry 0 then fails,
        # so the latest attempt (retry 1) decides: superseded.
        first = start("superseded")
        second = start("superseded", 1, retry=True)
        first = store.begin_finalization(first, _lease("sup-claim-0", EXPIRES), 1_200).attempt
        lost = store.begin_finalization(second, _lease("sup-claim-1", EXPIRES), 1_200)
        assert not lost.claimed
        store.commit_finalization(
            lost.attempt,
            Superseded(),
            _artifact(ArtifactKind.ATTEMPT, "superseded-1", 1_300),
            [],
            1_300,
            1_300,
        )
        store.commit_finalization(
            first,
            Failed(code="worker_failed", details={"signal": 9}),
            _artifact(ArtifactKind.ATTEMPT, "superseded-0", 1_400),
            [],
            1_400,
            1_400,
        )

        report = store.recover(lambda: RECOVERED_AT)
        assert [t.attempt_id for t in report.terminals] == [attempts["interrupted-0"]]
    finally:
        store.close()
    _insert_excluded(root)
    return Built(
        slots={key: item.slot_id for key, item in bundles.items()},
        attempts=attempts,
        bundles=bundles,
    )


def _insert_excluded(root: Path) -> None:
    """An excluded decision (the writer registers decisions only with their runs)."""
    decision = ApplicabilityDecision(
        candidate_id=EXCLUDED[0], problem_id=EXCLUDED[1], applicable=False, evidence={"x": "y"}
    )
    connection = sqlite3.connect(root / "run.sqlite3", isolation_level=None)
    try:
        connection.execute(
            "INSERT INTO applicability_decisions VALUES (?, ?, ?, 0, ?)",
            (
                decision.id,
                decision.candidate_id,
                decision.problem_id,
                canonical.encode(decision.to_json()).decode(),
            ),
        )
    finally:
        connection.close()


EXPECTED_QUERY = """
SELECT s.id,
       (SELECT count(*) FROM attempts a WHERE a.slot_id = s.id),
       (SELECT count(*) FROM attempts a WHERE a.slot_id = s.id AND a.state = 'accepted'),
       (SELECT count(*) FROM attempts a WHERE a.slot_id = s.id
            AND a.finished_at_ns IS NULL),
       (SELECT a.state || ':' || coalesce(a.failure_code, '') FROM attempts a
            WHERE a.slot_id = s.id ORDER BY a.retry_index DESC LIMIT 1)
FROM attempt_slots s
"""


def independent_states(database: Path) -> dict[str, str]:
    """Each slot's state by this file's own reading of SPEC.md 15.6."""
    states: dict[str, str] = {}
    for slot_id, count, accepted, open_, latest in rows(database, EXPECTED_QUERY):
        if accepted:
            states[slot_id] = "accepted"
        elif open_:
            states[slot_id] = "running"
        elif count == 0:
            states[slot_id] = "pending"
        elif latest == "failed:interrupted_attempt":
            states[slot_id] = "interrupted"
        else:
            states[slot_id] = latest.split(":")[0]
    return states


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    root = tmp_path_factory.mktemp("status-store")
    return root, build_store(root)


def test_states_match_an_independent_reading(built: tuple[Path, Built]) -> None:
    root, ids = built
    expected = independent_states(root / "run.sqlite3")
    with Snapshot.take(root) as snapshot:
        summaries = slot_summaries(snapshot)
    assert {s.slot_id: s.state.value for s in summaries} == expected
    # Pinned by name: each slot reaches the state it was built for.
    by_key = {key: expected[slot_id] for key, slot_id in ids.slots.items()}
    assert by_key == {
        "pending": "pending",
        "running": "running",
        "accepted": "accepted",
        "failed": "failed",
        "interrupted": "interrupted",
        "censored": "censored",
        "superseded": "superseded",
        "retried": "failed",
    }


def test_status_counts(built: tuple[Path, Built]) -> None:
    root, ids = built
    expected = independent_states(root / "run.sqlite3")
    with Snapshot.take(root) as snapshot:
        report = status(snapshot)
    totals = Counter(expected.values())
    assert report.totals == {state.value: totals.get(state.value, 0) for state in SlotState}
    assert set(report.by_candidate) == {f"{CAMPAIGN}/c{i}" for i in range(1, 5)}
    assert report.by_candidate["camp/c1"] == {
        **{state.value: 0 for state in SlotState},
        "pending": 1,
        "running": 1,
    }
    per_problem: dict[str, Counter[str]] = {}
    for key, slot_id in ids.slots.items():
        problem = ids.bundles[key].decision.problem_id
        per_problem.setdefault(problem, Counter())[expected[slot_id]] += 1
    assert report.by_problem == {
        problem: {state.value: counts.get(state.value, 0) for state in SlotState}
        for problem, counts in per_problem.items()
    }
    by_state = dict(rows(root, "SELECT state, count(*) FROM attempts GROUP BY state"))
    assert report.attempts_by_state == by_state
    assert report.excluded == (EXCLUDED,)
    document = report.to_json()
    assert document["excluded"] == [{"candidate_id": EXCLUDED[0], "problem_id": EXCLUDED[1]}]
    assert document["totals"] == report.totals


def test_accepted_metrics_and_latest_attempt(built: tuple[Path, Built]) -> None:
    root, ids = built
    with Snapshot.take(root) as snapshot:
        summaries = {s.slot_id: s for s in slot_summaries(snapshot)}
    accepted = summaries[ids.slots["accepted"]]
    assert accepted.metrics == (("bytes", "123"), ("ratio", "0.5"))
    assert accepted.to_json()["metrics"] == {"bytes": "123", "ratio": "0.5"}
    assert accepted.accepted_attempt_id == ids.attempts["accepted-0"]
    assert accepted.logical_spec_id == "camp/c2/p1"
    retried = summaries[ids.slots["retried"]]
    assert (retried.attempts, retried.latest_attempt_id) == (2, ids.attempts["retried-1"])
    assert (retried.latest_state, retried.latest_failure_code) == ("failed", "time_limit")
    interrupted = summaries[ids.slots["interrupted"]]
    assert interrupted.latest_failure_code == "interrupted_attempt"
    assert all(s.metrics == () for key, s in summaries.items() if key != accepted.slot_id)
    order = [(s.candidate_id, s.problem_id, s.logical_slot) for s in summaries.values()]
    assert order == sorted(order)


def test_campaign_filter(tmp_path: Path) -> None:
    store = RunStore.open(tmp_path)
    try:
        for campaign, candidate in (("one", "a"), ("one", "b"), ("two", "a")):
            store.register_one_shot(*bundle(candidate, "p", campaign).arguments())
        plain = factories.one_shot("plain", candidate="nocampaign", problem="p")
        store.register_one_shot(*plain.arguments())
    finally:
        store.close()
    with Snapshot.take(tmp_path) as snapshot:
        assert {s.candidate_id for s in slot_summaries(snapshot, campaign="one")} == {
            "one/a",
            "one/b",
        }
        assert [s.candidate_id for s in slot_summaries(snapshot, campaign="tw")] == []
        everything = status(snapshot)
    assert everything.totals["pending"] == 4
    assert "nocampaign" in everything.by_candidate


def test_reading_leaves_the_root_unchanged(built: tuple[Path, Built]) -> None:
    root, _ = built
    files = sorted(path for path in root.rglob("*") if path.is_file())
    before = {path: path.read_bytes() for path in files}
    with Snapshot.take(root) as snapshot:
        status(snapshot)
    assert sorted(path for path in root.rglob("*") if path.is_file()) == files
    assert {path: path.read_bytes() for path in files} == before
