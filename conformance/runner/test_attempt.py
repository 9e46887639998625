"""One attempt's store calls (runstore.runner.attempt) and the verdict on a worker's bytes
(runstore.runner.worker_result), from SPEC.md section 15.3 and 15.4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runstore import RunStore
from runstore.metrics import parse_result_document
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.runner import attempt
from runstore.runner.coordinator import register
from runstore.runner.executor import WorkStatus
from runstore.runner.worker_result import Failure
from runstore.runner.worker_result import Success
from runstore.runner.worker_result import judge

from conformance.closed_store import rows
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import campaign
from conformance.runner.world import input_file
from conformance.runner.world import result
from conformance.runner.world import succeeded


def test_a_losing_contender_publishes_superseded_and_keeps_its_observation(
    tmp_path: Path,
) -> None:
    clock = Clock()
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",)))
        first = attempt.start(store, plans[0], FirstAttempt(), 30 * SECOND, clock)
        second = attempt.start(store, plans[0], Next(retry=True), 30 * SECOND, clock)
        assert isinstance(first, attempt.Started) and isinstance(second, attempt.Started)
        won = attempt.finish(store, first, succeeded({"x": 1}), 30 * SECOND, clock)
        lost = attempt.finish(store, second, succeeded({"x": 2}), 30 * SECOND, clock)
    assert (won.terminal.state.value, lost.terminal.state.value) == ("accepted", "superseded")
    assert lost.metrics == {}
    observations = rows(
        tmp_path,
        "SELECT o.attempt_id, s.observation_id IS NOT NULL FROM observations AS o "
        "LEFT JOIN selected_observations AS s ON s.observation_id = o.id "
        "ORDER BY o.attempt_id = ?",
        (first.guard.attempt_id,),
    )
    assert observations == [(second.guard.attempt_id, 0), (first.guard.attempt_id, 1)]


def test_an_input_file_that_changed_fails_the_attempt_before_it_runs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    file = input_file(data, "input.bin", b"registered bytes")
    clock = Clock()
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",), files=(file,)))
        (data / "input.bin").write_bytes(b"changed bytes")
        finished = attempt.start(store, plans[0], FirstAttempt(), 30 * SECOND, clock)
    assert isinstance(finished, attempt.Finished)
    assert finished.failure is not None and finished.failure.code == "input_changed"
    assert finished.failure.details["file"] == "input.bin"


def test_the_worker_gets_the_input_bytes_it_was_registered_with(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    file = input_file(data, "input.bin", b"registered bytes")
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",), files=(file,)))
        started = attempt.start(store, plans[0], FirstAttempt(), 30 * SECOND, Clock())
    assert isinstance(started, attempt.Started)
    assert started.order.inputs == (("input.bin", b"registered bytes"),)
    assert started.guard.state.value == "executing"


@pytest.mark.parametrize(
    "document",
    [
        b"\xff",
        b"[]",
        b"{}",
        b'{"metrics": []}',
        b'{"metrics": {"a": 1, "a": 2}}',
        b'{"metrics": {"a": Infinity}}',
        b'{"metrics": {"": 1}}',
        b'{"metrics": {"a\\u0001": 1}}',
        b'{"metrics": {"a": 1e400}}',
    ],
)
def test_result_documents_that_are_not_acceptable_are_refused(document: bytes) -> None:
    with pytest.raises(ValueError):
        parse_result_document(document)
    verdict = judge(result(WorkStatus.EXITED, 0, outputs=(("result.json", document),)), 1)
    assert isinstance(verdict, Failure) and verdict.code == "result_invalid"


@given(
    st.dictionaries(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), min_size=1),
        st.one_of(
            st.integers(-(2**53) + 1, 2**53 - 1), st.floats(allow_nan=False, allow_infinity=False)
        ),
    )
)
def test_metrics_read_back_as_the_numbers_the_worker_wrote(metrics: dict[str, object]) -> None:
    verdict = judge(succeeded(metrics), 1)
    assert isinstance(verdict, Success)
    kept = verdict.produced[0].result["metrics"]
    assert isinstance(kept, dict) and kept.keys() == metrics.keys()
    for name, value in metrics.items():
        text = kept[name]
        assert isinstance(text, str)
        assert (int(text) if type(value) is int else float(text)) == value


def test_a_hostile_output_name_is_a_failure_not_an_error() -> None:
    outputs = (("result.json", json.dumps({"metrics": {}}).encode()), ("a/../b", b""))
    verdict = judge(result(WorkStatus.EXITED, 0, outputs=outputs), 1)
    assert isinstance(verdict, Failure) and verdict.code == "unsafe_output"
    surrogate = (("bad\udcff", b""),)
    verdict = judge(result(WorkStatus.EXITED, 0, outputs=surrogate), 1)
    assert isinstance(verdict, Failure) and verdict.code == "unsafe_output"
    files = attempt.attempt_files(
        result(WorkStatus.EXITED, 1, outputs=surrogate), include_outputs=True
    )
    assert [name for name, _ in files] == ["stderr.log", "stdout.log", "worker.json"]
    assert b"outputs_omitted" in files[2][1]


def test_a_slot_lost_while_failing_its_inputs_leaves_the_others_of_its_batch_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md section 15.4: slots started together share one write batch, and a refusal
    that says the coordinator lost one of them is that slot's alone. Here the first slot's
    inputs changed and publishing its failure is refused lease_expired: it comes back as
    that refusal (its leases no longer renewed), and the second slot is started."""
    from runstore.errors import LeaseExpiredError
    from runstore.runner.lease_keeper import LeaseKeeper

    clock = Clock()
    changed = Failure(code="input_changed", details={"file": "input.bin"})
    first_inputs = [True]

    def inputs(files: object) -> object:
        return changed if first_inputs and first_inputs.pop() else ()

    def lost(*_: object, **__: object) -> attempt.Finished:
        raise LeaseExpiredError("the lease expired while the failure was published")

    monkeypatch.setattr(attempt, "read_inputs", inputs)
    monkeypatch.setattr(attempt, "fail", lost)
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p", "q")))
        keeper = LeaseKeeper(30 * SECOND, clock)
        begun = attempt.start_many(
            store,
            [(plans[0], FirstAttempt()), (plans[1], FirstAttempt())],
            30 * SECOND,
            clock,
            keeper,
        )
    assert isinstance(begun[0], LeaseExpiredError)
    assert isinstance(begun[1], attempt.Started)
    assert begun[1].guard.state.value == "executing"
    assert keeper.next_due_ns() == begun[1].started_at_ns + 30 * SECOND // 3  # only it held
