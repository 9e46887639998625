"""Stream and warm-up slots through the coordinator (SPEC.md section 15.2-15.5): a stream's
checkpoints become selected checkpoint observations, checkpoints selected by a failed
attempt are kept and count for a retry, and a measurement starts only after its warm-up
is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.runner.campaign import SlotKind
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import RunSummary
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

from conformance.closed_store import rows
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import result


def run(
    root: Path, script: object, options: RunOptions | None = None, **campaign_options: object
) -> tuple[RunSummary, Events, ScriptedExecutor]:
    clock = Clock()
    executor = ScriptedExecutor(script, clock)  # type: ignore[arg-type]
    events = Events()
    with RunStore.open(str(root)) as store:
        summary = run_campaign(
            store,
            campaign(candidates=("a",), problems=("p",), **campaign_options),  # type: ignore[arg-type]
            executor,
            options or RunOptions(jobs=2),
            events,  # type: ignore[arg-type]
            clock=clock,
        )
    return summary, events, executor


def checkpoint_outputs(*indices: int) -> tuple[tuple[str, bytes], ...]:
    files = [("log.txt", b"beside the checkpoints")]
    for index in indices:
        document = json.dumps({"metrics": {"step": index, "loss": 1 / (index + 1)}})
        files += [
            (f"checkpoints/{index}/result.json", document.encode()),
            (f"checkpoints/{index}/weights.bin", bytes([index]) * 10),
        ]
    return tuple(sorted(files))


def exited(outputs: tuple[tuple[str, bytes], ...], code: int = 0) -> WorkResult:
    return result(WorkStatus.EXITED, code, outputs=outputs)


STREAM = {"slot_kind": SlotKind.STREAM, "checkpoints": 3}


def test_a_stream_selects_each_checkpoint_and_is_accepted(tmp_path: Path) -> None:
    summary, events, executor = run(
        tmp_path, lambda order, nth: exited(checkpoint_outputs(0, 1, 2)), **STREAM
    )
    assert summary.unsatisfied == ()
    env = dict(executor.orders[0].env)
    assert (env["RUNSTORE_CHECKPOINTS"], env["RUNSTORE_ROLE"]) == ("3", "measurement")
    (finished,) = events.named("attempt_finished")
    assert finished["metrics"] == {"loss": "0.3333333333333333", "step": "2"}
    selected = rows(
        tmp_path,
        "SELECT s.checkpoint_index, json_extract(o.record_json, '$.result.metrics.step') "
        "FROM selected_observations AS x JOIN observation_slots AS s ON s.id = x.slot_id "
        "JOIN observations AS o ON o.id = x.observation_id ORDER BY s.checkpoint_index",
    )
    assert selected == [(0, "0"), (1, "1"), (2, "2")]
    # Each checkpoint's artifact holds its own files; the attempt artifact the rest.
    (attempt_path,) = rows(
        tmp_path,
        "SELECT r.path FROM attempts AS a JOIN artifacts AS r ON r.id = a.final_artifact_id",
    )
    attempt_dir = tmp_path / str(attempt_path[0])
    assert (attempt_dir / "outputs" / "log.txt").read_bytes() == b"beside the checkpoints"
    assert not (attempt_dir / "outputs" / "checkpoints").exists()
    paths = rows(tmp_path, "SELECT path FROM artifacts WHERE kind = 'observation'")
    assert sorted((tmp_path / str(p) / "weights.bin").read_bytes() for (p,) in paths) == [
        bytes([i]) * 10 for i in range(3)
    ]


def test_checkpoints_of_a_failed_attempt_are_kept_and_count_for_its_retry(
    tmp_path: Path,
) -> None:
    outputs = {0: checkpoint_outputs(0, 1), 1: checkpoint_outputs(2)}
    summary, events, _ = run(
        tmp_path,
        lambda order, nth: exited(outputs[nth]),
        options=RunOptions(jobs=1, retry_failed=1),
        **STREAM,
    )
    assert summary.unsatisfied == ()
    first, second = events.named("attempt_finished")
    assert (first["state"], first["failure_code"]) == ("failed", "result_missing")
    assert first["details"]["checkpoints"] == [0, 1]  # type: ignore[index]
    assert second["state"] == "accepted"
    producers = rows(
        tmp_path,
        "SELECT s.checkpoint_index, a.retry_index FROM selected_observations AS x "
        "JOIN observation_slots AS s ON s.id = x.slot_id "
        "JOIN observations AS o ON o.id = x.observation_id "
        "JOIN attempts AS a ON a.id = o.attempt_id ORDER BY s.checkpoint_index",
    )
    assert producers == [(0, 0), (1, 0), (2, 1)]


@pytest.mark.parametrize(
    ("outputs", "detail"),
    [
        (checkpoint_outputs(3), "checkpoint 3 is beyond the stream's 3 checkpoints"),
        ((("checkpoints/1/weights.bin", b"x"),), "checkpoint 1 has no result.json"),
        ((("checkpoints/0/result.json", b"{}"),), "checkpoint 0: result.json needs"),
        ((("checkpoints/01/result.json", b"{}"),), None),  # not a checkpoint directory
    ],
)
def test_a_stream_refuses_checkpoints_it_cannot_use(
    tmp_path: Path, outputs: tuple[tuple[str, bytes], ...], detail: str | None
) -> None:
    _, events, _ = run(tmp_path, lambda order, nth: exited(outputs), **STREAM)
    (finished,) = events.named("attempt_finished")
    if detail is None:  # nothing reached: no checkpoint slot is selected
        assert finished["failure_code"] == "result_missing"
        assert rows(tmp_path, "SELECT count(*) FROM observations") == [(0,)]
        return
    assert finished["failure_code"] == "result_invalid"
    assert str(finished["details"]["detail"]).startswith(detail)  # type: ignore[index]


def test_a_measurement_starts_only_after_its_warmup_is_accepted(tmp_path: Path) -> None:
    def script(order: WorkOrder, nth: int) -> WorkResult:
        if dict(order.env)["RUNSTORE_ROLE"] == "warmup":
            return exited(())  # a warm-up needs no result document
        return exited((("result.json", b'{"metrics": {"x": 1}}'),))

    clock = Clock()
    executor = ScriptedExecutor(script, clock)
    events = Events()
    with RunStore.open(str(tmp_path)) as store:
        summary = run_campaign(
            store,
            campaign(candidates=("a", "b"), problems=("p", "q"), warmup=True),
            executor,
            RunOptions(jobs=4),
            events,  # type: ignore[arg-type]
            clock=clock,
        )
    assert (summary.slots, summary.satisfied) == (8, 8)
    assert events.named("planned")[0]["blocked"] == 4
    order = [
        (
            dict(o.env)["RUNSTORE_CANDIDATE"],
            dict(o.env)["RUNSTORE_PROBLEM"],
            dict(o.env)["RUNSTORE_ROLE"],
        )
        for o in executor.orders
    ]
    for pair in {(c, p) for c, p, _ in order}:
        assert [r for c, p, r in order if (c, p) == pair] == ["warmup", "measurement"]
    # In the event stream, each measurement starts after its pair's warm-up was accepted.
    roles = dict(rows(tmp_path, "SELECT id, role FROM attempt_slots"))
    warmed: set[tuple[object, object]] = set()
    for name, fields in events.events:
        pair = (fields.get("candidate_name"), fields.get("problem_name"))
        if name == "attempt_finished" and roles[fields["slot"]] == "warmup":
            assert fields["state"] == "accepted"
            warmed.add(pair)
        if name == "attempt_started" and roles[fields["slot"]] == "measurement":
            assert pair in warmed
    assert warmed == {(c, p) for c in ("a", "b") for p in ("p", "q")}
    assert (
        rows(
            tmp_path,
            "SELECT s.role, a.state, count(o.id) FROM attempts AS a "
            "JOIN attempt_slots AS s ON s.id = a.slot_id LEFT JOIN observations AS o "
            "ON o.attempt_id = a.id GROUP BY a.id ORDER BY s.role, a.id",
        )
        == [("measurement", "accepted", 1)] * 4 + [("warmup", "accepted", 0)] * 4
    )


def test_a_failed_warmup_keeps_its_measurement_from_running(tmp_path: Path) -> None:
    def script(order: WorkOrder, nth: int) -> WorkResult:
        return exited((), code=1 if nth == 0 else 0)

    summary, _, executor = run(tmp_path, script, warmup=True)
    assert len(executor.orders) == 1
    assert dict(summary.left) == {
        "a x p": "warmup_unsatisfied",
        "a x p (warmup)": "failed_not_retried",
    }
    # Retrying the warm-up lets the measurement run.
    summary, _, executor = run(
        tmp_path,
        lambda order, nth: exited((("result.json", b'{"metrics": {}}'),)),
        options=RunOptions(jobs=2, retry_failed=1),
        warmup=True,
    )
    assert [dict(o.env)["RUNSTORE_ROLE"] for o in executor.orders] == ["warmup", "measurement"]
    assert summary.unsatisfied == ()
