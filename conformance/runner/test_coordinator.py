"""The coordinator in process, with a scripted executor and a controlled clock: which slots
run, with which authorization, what each verdict commits, renewal, lost leases, stopping,
and resuming (SPEC.md section 15.4, 15.5)."""

from __future__ import annotations

import threading

import attrs
import pytest
from runstore import AttemptState
from runstore import RunStore
from runstore.errors import RegistrationConflictError
from runstore.errors import RunStoreError
from runstore.requests import FirstAttempt
from runstore.runner import attempt
from runstore.runner.campaign import SlotKind
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import register
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.plan import plan

from conformance.closed_store import rows
from conformance.runner.world import SECOND
from conformance.runner.world import START
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import always
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import resumed
from conformance.runner.world import run
from conformance.runner.world import succeeded


def test_a_campaign_runs_every_slot_to_one_accepted_attempt(root: str) -> None:
    summary, events, executor = run(root, always(succeeded({"ratio": 2.5, "bytes": 7})))
    assert (summary.slots, summary.satisfied, summary.accepted, summary.failed) == (4, 4, 4, 0)
    assert summary.unsatisfied == ()
    finished = events.named("attempt_finished")
    assert {f["state"] for f in finished} == {"accepted"}
    assert finished[0]["metrics"] == {"bytes": "7", "ratio": "2.5"}
    assert rows(root, "SELECT count(*), min(state), max(retry_index) FROM attempts") == [
        (4, "accepted", 0)
    ]
    # The observation is selected, holds the metrics as decimal strings, and the attempt
    # references its artifact; the worker got its parameters and names.
    assert rows(root, "SELECT count(*) FROM selected_observations") == [(4,)]
    results = rows(root, "SELECT json_extract(record_json, '$.result') FROM observations")
    assert results == [('{"metrics":{"bytes":"7","ratio":"2.5"}}',)] * 4
    assert rows(root, "SELECT DISTINCT role FROM attempt_artifacts") == [("observation",)]
    env = dict(executor.orders[0].env)
    assert env["RUNSTORE_PARAMETERS"] == '{"problem":"p","size":10}'
    assert (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"], env["SEED"]) == ("a", "p", "1")


def test_a_second_run_of_a_finished_campaign_runs_and_registers_nothing(root: str) -> None:
    run(root, always(succeeded()))
    before = rows(root, "SELECT count(*) FROM events")
    summary, events, executor = run(root, always(succeeded()))
    assert executor.orders == []
    assert events.named("campaign")[0]["registered"] == 0
    planned = events.named("planned")[0]
    stamp, stamped = planned.pop("time_ns"), planned.pop("time")  # the run's clock (START...)
    assert isinstance(stamp, int) and stamp > START and str(stamped).startswith("2023-11-14T22:13")
    assert planned == {
        "blocked": 0,
        "jobs": 2,
        "left": 0,
        "ready": 0,
        "resumed": 0,
        "satisfied": 4,
        "waiting": 0,
        "seed": 0,
    }
    assert (summary.satisfied, summary.accepted) == (4, 0)
    assert rows(root, "SELECT count(*) FROM events") == before


FAILURES = [
    (result(WorkStatus.EXITED, 3), "worker_failed", {"exit_code": 3}),
    (result(WorkStatus.EXITED, -9), "worker_failed", {"signal": 9}),
    (result(WorkStatus.TIMED_OUT, -15), "time_limit", {"timeout_ns": str(60 * SECOND)}),
    (result(WorkStatus.START_FAILED, None, detail="no such file"), "start_failed", None),
    (result(WorkStatus.EXITED, 0), "result_missing", None),
    (result(WorkStatus.EXITED, 0, outputs=(("result.json", b"{nope"),)), "result_invalid", None),
    (
        result(WorkStatus.EXITED, 0, outputs=(("result.json", b'{"metrics":{"x":NaN}}'),)),
        "result_invalid",
        None,
    ),
    (
        result(WorkStatus.EXITED, 0, outputs=(("result.json", b'{"metrics":{"x":true}}'),)),
        "result_invalid",
        None,
    ),
    (
        result(WorkStatus.EXITED, 0, outputs=(("manifest.json", b"{}"),)),
        "unsafe_output",
        None,
    ),
    (result(WorkStatus.OUTPUT_TOO_LARGE, 0, detail="70 MiB"), "output_too_large", None),
    (result(WorkStatus.UNSAFE_OUTPUT, 0, detail="a symlink"), "unsafe_output", None),
]


@pytest.mark.parametrize(("work", "code", "details"), FAILURES)
def test_each_verdict_commits_its_failure_code(
    root: str, work: WorkResult, code: str, details: dict[str, object] | None
) -> None:
    summary, events, _ = run(root, always(work), candidates=("a",), problems=("p",))
    assert (summary.failed, summary.satisfied, summary.unsatisfied) == (1, 0, ("a x p",))
    (finished,) = events.named("attempt_finished")
    assert (finished["state"], finished["failure_code"]) == ("failed", code)
    if details is not None:
        assert finished["details"] == details
    assert rows(root, "SELECT state, failure_code FROM attempts") == [("failed", code)]
    # The failure still released every lease and holds the worker's logs.
    assert rows(root, "SELECT count(*) FROM leases WHERE released_at_ns IS NULL") == [(0,)]


def test_failed_slots_are_retried_only_with_an_explicit_bound(root: str) -> None:
    def flaky(order: WorkOrder, nth: int) -> WorkResult:
        return succeeded() if nth >= 2 else result(WorkStatus.EXITED, 1)

    summary, events, _ = run(root, flaky, candidates=("a",), problems=("p",))
    assert summary.unsatisfied == ("a x p",)
    summary, events, _ = run(root, flaky, candidates=("a",), problems=("p",))
    assert events.named("planned")[0]["left"] == 1  # failed, not retried without a bound
    summary, events, _ = run(
        root,
        lambda order, nth: flaky(order, nth + 1),
        options=RunOptions(jobs=1, retry_failed=2),
        candidates=("a",),
        problems=("p",),
    )
    assert summary.unsatisfied == ()
    states = rows(root, "SELECT retry_index, state FROM attempts ORDER BY retry_index")
    assert states == [(0, "failed"), (1, "failed"), (2, "accepted")]


def test_the_retry_bound_stops_a_slot_that_keeps_failing(root: str) -> None:
    summary, events, executor = run(
        root,
        always(result(WorkStatus.EXITED, 1)),
        options=RunOptions(jobs=1, retry_failed=1),
        candidates=("a",),
        problems=("p",),
    )
    assert len(executor.orders) == 2
    assert summary.unsatisfied == ("a x p",)
    _, events, executor = run(
        root,
        always(succeeded()),
        options=RunOptions(jobs=1, retry_failed=1),
        candidates=("a",),
        problems=("p",),
    )
    assert executor.orders == []
    assert events.named("planned")[0]["left"] == 1


def test_a_changed_campaign_is_refused_before_anything_is_registered(root: str) -> None:
    run(root, always(succeeded()), candidates=("a",), problems=("p",))
    before = rows(root, "SELECT count(*) FROM resolved_runs")
    with pytest.raises(RegistrationConflictError) as caught:
        run(
            root,
            always(succeeded()),
            candidates=("a", "b"),
            problems=("p",),
            command=("{python}", "other.py"),
        )
    assert "a x p" in caught.value.message and "command" in caught.value.message
    assert rows(root, "SELECT count(*) FROM resolved_runs") == before
    # Changing what is not identity (time limits, leases) is no conflict.
    summary, _, _ = run(
        root, always(succeeded()), candidates=("a",), problems=("p",), lease_ns=9 * SECOND
    )
    assert summary.satisfied == 1


def test_a_changed_slot_kind_is_refused_before_anything_is_registered(root: str) -> None:
    run(root, always(succeeded()), candidates=("a",), problems=("p",))
    changed = attrs.evolve(
        campaign(candidates=("b", "a"), problems=("p",)), slot_kind=SlotKind.FRESH_OBSERVATION
    )
    with RunStore.open(root) as store:
        with pytest.raises(RegistrationConflictError) as caught:
            register(store, changed)
        assert "a x p: attempt slot differs: execution_kind" in caught.value.message
        assert len(store.registered_for(["demo/b"]).decisions) == 0


def test_excluded_pairs_register_nothing(root: str) -> None:
    summary, _, _ = run(root, always(succeeded()), applies_to={"a": ("q",)})
    assert (summary.slots, summary.excluded) == (3, 1)
    assert rows(root, "SELECT count(*) FROM applicability_decisions") == [(3,)]
    assert len(plan(campaign(applies_to={"a": ("q",)}))) == 4


def test_at_most_jobs_workers_run_at_once_and_leases_are_renewed(root: str) -> None:
    clock = Clock()
    began: dict[int, int] = {}

    class Finishing(ScriptedExecutor):
        """Workers that finish 40 s of (fake) time after they were submitted."""

        def submit(self, order):  # type: ignore[no-untyped-def]
            handle = super().submit(order)
            began[id(handle)] = self.clock.now
            return handle

        def wait(self, handles, timeout_s):  # type: ignore[no-untyped-def]
            done = super().wait(handles, timeout_s)
            for handle in handles:
                if handle.outcome is None and self.clock.now - began[id(handle)] > 40 * SECOND:
                    handle.outcome = succeeded()
                    done.add(handle)
            return done

    executor = Finishing(lambda order, nth: None, clock)
    events = Events()
    with RunStore.open(root) as store:
        summary = run_campaign(
            store,
            campaign(lease_ns=9 * SECOND),
            executor,
            RunOptions(jobs=2),
            events,  # type: ignore[arg-type]
            clock=clock,
        )
    assert summary.satisfied == 4, " ".join(
        f"{name}:{fields.get('state') or fields.get('reason') or ''}"
        for name, fields in events.events
    )
    assert executor.max_running == 2
    # 40 s of work under a 9 s lease renewed every 3 s: no lease was lost, and the
    # reservation leases were extended well past their first expiry.
    assert events.named("lease_lost") == []
    extended = rows(
        root,
        "SELECT count(*) FROM leases WHERE purpose = 'reservation' "
        "AND expires_at_ns - acquired_at_ns > 30000000000",
    )
    assert extended == [(4,)]


def test_a_lost_lease_cancels_the_worker_and_resume_recovers_it(root: str) -> None:
    clock = Clock()

    def hang_then_jump(order: WorkOrder, nth: int) -> WorkResult | None:
        clock.advance(60 * SECOND)  # the coordinator stalls past its 9 s lease
        return None

    summary, events, executor = run(
        root,
        hang_then_jump,
        clock=clock,
        candidates=("a",),
        problems=("p",),
        lease_ns=9 * SECOND,
    )
    (lost,) = events.named("lease_lost")
    assert lost["reason"] == "lease_expired"
    assert executor.handles[0].cancelled
    assert rows(root, "SELECT state FROM attempts") == [("executing",)]
    # Without --resume the slot is left alone; with it, recovery settles the attempt and
    # the explicit bound retries it.
    summary, events, executor = run(
        root, always(succeeded()), clock=clock, candidates=("a",), problems=("p",)
    )
    assert events.named("planned")[0]["left"] == 1 and executor.orders == []
    summary, events, _ = resumed(root, clock)
    assert events.named("recovered")[0]["terminals"] == 1
    assert summary.unsatisfied == ()
    assert rows(root, "SELECT retry_index, state, failure_code FROM attempts") == [
        (0, "failed", "interrupted_attempt"),
        (1, "accepted", None),
    ]


def test_resume_waits_for_a_live_lease_then_recovers(root: str) -> None:
    clock = Clock()
    # A coordinator that died: an attempt in progress under a 30 s lease.
    with RunStore.open(root) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",)))
        started = attempt.start(store, plans[0], FirstAttempt(), 30 * SECOND, clock)
        assert isinstance(started, attempt.Started)
    summary, events, _ = resumed(root, clock)
    recovered = events.named("recovered")
    assert [r["terminals"] for r in recovered] == [0, 1]
    assert clock.now >= started.started_at_ns + 30 * SECOND
    assert summary.unsatisfied == ()


def test_stopping_cancels_workers_and_commits_their_failures(root: str) -> None:
    stop = threading.Event()

    def hang(order: WorkOrder, nth: int) -> WorkResult | None:
        stop.set()
        return None

    summary, events, executor = run(root, hang, stop=stop)
    assert summary.stopped
    assert all(handle.cancelled for handle in executor.handles)
    codes = {f["failure_code"] for f in events.named("attempt_finished")}
    assert codes == {"cancelled"}
    assert rows(root, "SELECT count(*) FROM leases WHERE released_at_ns IS NULL") == [(0,)]
    assert len(executor.orders) == 2  # nothing new started once stopping
    states = rows(root, "SELECT state FROM attempts")
    assert sorted(states) == [("failed",), ("failed",)]
    assert AttemptState.FAILED.value == "failed"


@pytest.mark.parametrize(
    "ids", ["slot", b"slot", None, 3, {"slot"}, ["ok", 3], [None], iter(["a"])]
)
def test_the_coordinator_reads_refuse_ill_typed_ids(root: str, ids: object) -> None:
    with RunStore.open(root) as store:
        for read in (store.registered_for, store.slot_progress):
            with pytest.raises(RunStoreError) as caught:
                read(ids)  # type: ignore[arg-type]
            assert caught.value.code == "invalid_record"
        assert store.slot_progress(["attempt-slot:v1:" + "0" * 64, "x"])["x"].states == ()
        assert store.registered_for(["nobody"]).decisions == ()


@pytest.mark.parametrize(
    "options",
    [
        {"jobs": 0},
        {"jobs": 257},
        {"jobs": True},
        {"jobs": 2.0},
        {"jobs": 1, "resume": 1},
        {"jobs": 1, "retry_failed": -1},
        {"jobs": 1, "retry_failed": True},
        {"jobs": 1, "retry_failed": 2**53},
    ],
)
def test_run_options_refuse_what_would_never_run_or_never_stop(options: dict[str, object]) -> None:
    with pytest.raises(RunStoreError) as caught:
        RunOptions(**options)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_record"


def test_resume_judges_waiting_slots_at_the_instant_recovery_did(root: str) -> None:
    """Several leases of a dead coordinator expire close together: the waiting decision and
    the recovery pass must judge the same instant, or a slot whose lease expired between
    the two clock samples is left ``attempt_in_progress`` although its owner is dead."""

    class Coarse(Clock):
        def __call__(self) -> int:  # every sample is 0.5 s later than the one before
            self.now += SECOND // 2
            return self.now

    clock = Coarse()
    problems = tuple(f"p{i:02}" for i in range(12))
    with RunStore.open(root) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=problems))
        expiry = clock.now + 60 * SECOND
        for i, slot in enumerate(plans):  # leases expiring 0.2 s apart, samples 0.5 s apart
            lease_ns = expiry + i * SECOND // 5 - clock.now - SECOND // 2
            started = attempt.start(store, slot, FirstAttempt(), lease_ns, clock)
            assert isinstance(started, attempt.Started)
            assert started.started_at_ns + lease_ns == expiry + i * SECOND // 5
    summary, events, _ = resumed(root, clock, problems)
    assert summary.left == ()
    assert summary.unsatisfied == ()
    assert sum(r["terminals"] for r in events.named("recovered")) == len(problems)
