"""``runstore.inspection.export``: a snapshot as ``attempts.csv``, ``observations.csv``,
``index.jsonl``, ``metrics.csv`` and ``summary.csv`` (SPEC.md section 16).

One store is built in-process by the coordinator with a scripted executor (module-scoped):
campaign ``alpha`` has accepted one-shot slots, a slot accepted on its retry, a slot that
fails twice, and metric names that need CSV quoting; campaign ``beta`` is a two-checkpoint
stream with a warm-up, whose first attempt fails after selecting checkpoint 0, so its
accepted retry owns only checkpoint 1. Every file is read back with ``csv`` and ``json``
and checked against what the inspection reader (``status``, ``explain``) says about the
same snapshot, never against hard-coded values. Tests that corrupt or move things work
on a copy of the store. ``summary.csv``, parameter columns and repetitions are tested on a
campaign with repetitions and grids in ``test_export_tidy.py``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import FirstAttempt
from runstore import LeaseRequest
from runstore import Reference
from runstore import RunStore
from runstore import durable
from runstore.errors import ArtifactCorruptError
from runstore.errors import DurabilityError
from runstore.errors import InvalidRecordError
from runstore.errors import RunStoreError
from runstore.errors import UnsafePathError
from runstore.inspection import export_rows
from runstore.inspection.explain import AttemptInfo
from runstore.inspection.explain import explain
from runstore.inspection.export import FILE_NAMES
from runstore.inspection.export import ExportSummary
from runstore.inspection.export import export
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import status
from runstore.inspection.snapshot import Snapshot
from runstore.runner.campaign import SlotKind
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.testing import factories

from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import succeeded

ODD_METRICS: dict[str, object] = {"a,b": 1, 'say "hi"': 0.1, "tiny": 1e-07, "big": 2**53 - 1}


def _alpha(order: WorkOrder, nth: int) -> WorkResult:
    env = dict(order.env)
    pair = (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"])
    if pair == ("b", "p") or (pair == ("a", "q") and nth == 0):
        return result(WorkStatus.EXITED, 1)
    if pair[0] == "c":
        return succeeded(ODD_METRICS)
    return succeeded({"ratio": 2.5 + nth, "bytes": 7}, extra=b"payload")


def _checkpoint(index: int) -> tuple[tuple[str, bytes], ...]:
    document = json.dumps({"metrics": {"step": index, "loss": 1 / (index + 3)}})
    return ((f"checkpoints/{index}/result.json", document.encode()),)


def _beta(order: WorkOrder, nth: int) -> WorkResult:
    env = dict(order.env)
    if env["RUNSTORE_ROLE"] == "warmup":
        return result(WorkStatus.EXITED, 0)
    index = 0 if nth == 1 else 1  # the warm-up is order 0 of the pair
    return result(WorkStatus.EXITED, 0, outputs=_checkpoint(index))


def _run(root: Path, script: object, **campaign_options: object) -> None:
    clock = Clock()
    with RunStore.open(str(root)) as store:
        run_campaign(
            store,
            campaign(**campaign_options),  # type: ignore[arg-type]
            ScriptedExecutor(script, clock),  # type: ignore[arg-type]
            RunOptions(jobs=1, retry_failed=1),
            Events(),
            clock=clock,
        )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "store"
    path.mkdir()
    _run(path, _alpha, name="alpha", candidates=("a", "b", "c"), problems=("p", "q"))
    _run(
        path,
        _beta,
        name="beta",
        candidates=("s",),
        problems=("p",),
        slot_kind=SlotKind.STREAM,
        checkpoints=2,
        warmup=True,
    )
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    data = path.read_bytes()
    assert data.endswith(b"\n") and not data.endswith(b"\r\n")
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def json_numbers(metrics: dict[str, str]) -> dict[str, object]:
    """The metrics whose text a strict JSON parser reads as a finite number, as it reads
    them (an independent statement of ``index.jsonl``'s ``metric_numbers`` rule)."""

    def refuse(constant: str) -> object:
        raise ValueError(constant)

    found: dict[str, object] = {}
    for name, text in metrics.items():
        try:
            number = json.loads(text, parse_constant=refuse)
        except ValueError:
            continue
        plain = text.strip() == text and type(number) in (int, float)
        if plain and math.isfinite(float(number)):
            found[name] = number
    return found


def stored_specifications(snapshot: Snapshot, table: str) -> dict[str, dict[str, object]]:
    """Every run's (``resolved_runs``) or attempt slot's (``attempt_slots``) stored
    ``specification``, by id, read with plain SQL and ``json``."""
    rows = snapshot.connection.execute(f"SELECT id, record_json FROM {table}").fetchall()
    return {row[0]: json.loads(row[1])["specification"] for row in rows}


def read_index(path: Path) -> list[dict[str, object]]:
    """The lines of ``index.jsonl`` (split at LF only: canonical JSON escapes CR and LF but
    writes U+2028 raw, which ``str.splitlines`` would split at)."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def field(value: object) -> str:
    """How a CSV cell holds a stored value: NULL empty, booleans 0/1, ints in decimal."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def attempts_by_id(snapshot: Snapshot) -> dict[str, tuple[str, AttemptInfo]]:
    """Every attempt the reader explains, with its slot id."""
    found: dict[str, tuple[str, AttemptInfo]] = {}
    for summary in status(snapshot).slots:
        for attempt in explain(snapshot, summary.slot_id).attempts:
            found[attempt.id] = (summary.slot_id, attempt)
    return found


# --- content -----------------------------------------------------------------------------------


def test_the_store_has_what_the_export_must_show(snapshot: Snapshot) -> None:
    report = status(snapshot)
    states = {(s.candidate_id, s.problem_id, s.logical_slot): s.state for s in report.slots}
    assert states[("alpha/b", "alpha/p", "measurement")] is SlotState.FAILED
    assert states[("beta/s", "beta/p", "warmup")] is SlotState.ACCEPTED
    assert report.attempts_by_state == {"accepted": 7, "failed": 4}


def test_attempts_csv_has_every_attempt_as_the_reader_explains_it(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, summary = exported
    rows = read_csv(out / "attempts.csv")
    expected = attempts_by_id(snapshot)
    assert summary.files["attempts.csv"] == len(rows) == len(expected)
    summaries = {s.slot_id: s for s in status(snapshot).slots}
    for row in rows:
        slot_id, attempt = expected[row["attempt_id"]]
        slot = summaries[slot_id]
        assert row == {
            "campaign": slot.candidate_id.split("/")[0],
            "attempt_id": attempt.id,
            "slot_id": slot_id,
            "candidate_id": slot.candidate_id,
            "problem_id": slot.problem_id,
            "logical_slot": slot.logical_slot,
            "role": slot.role,
            "retry_index": field(attempt.retry_index),
            "state": attempt.state,
            "failure_code": field(attempt.failure_code),
            "censor_reason": field(attempt.reason),
            "started_at_ns": field(attempt.started_at_ns),
            "finished_at_ns": field(attempt.finished_at_ns),
            "final_artifact_id": attempt.final_artifact.id if attempt.final_artifact else "",
        }
    keys = [(row["slot_id"], int(row["retry_index"])) for row in rows]
    assert keys == sorted(keys)
    assert {row["failure_code"] for row in rows} == {"", "worker_failed", "result_missing"}


def test_observations_csv_has_every_observation_with_its_selection(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, summary = exported
    rows = read_csv(out / "observations.csv")
    expected = {
        observation.id: (slot_id, attempt.id, observation)
        for slot_id, attempt in attempts_by_id(snapshot).values()
        for observation in attempt.observations
    }
    assert summary.files["observations.csv"] == len(rows) == len(expected)
    for row in rows:
        slot_id, attempt_id, observation = expected[row["observation_id"]]
        assert row == {
            "observation_id": observation.id,
            "observation_slot_id": observation.slot_id,
            "observation_logical_slot": observation.logical_slot,
            "attempt_id": attempt_id,
            "attempt_slot_id": slot_id,
            "valid": field(observation.valid),
            "completion": observation.completion,
            "artifact_id": observation.artifact.id,
            "registered_at_ns": field(observation.registered_at_ns),
            "selected": field(observation.selected),
        }
    assert [row["observation_id"] for row in rows] == sorted(expected)
    # The stream's checkpoint 0 was selected by the attempt that then failed.
    failed = {a.id for _, a in attempts_by_id(snapshot).values() if a.state == "failed"}
    assert any(row["attempt_id"] in failed and row["selected"] == "1" for row in rows)


def test_index_jsonl_has_one_canonical_line_per_accepted_slot(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, summary = exported
    raw = (out / "index.jsonl").read_bytes()
    lines = read_index(out / "index.jsonl")
    accepted = [s for s in status(snapshot).slots if s.state is SlotState.ACCEPTED]
    assert summary.files["index.jsonl"] == len(lines) == len(accepted)
    assert [line["slot_id"] for line in lines] == sorted(s.slot_id for s in accepted)
    by_slot = {s.slot_id: s for s in accepted}
    for line, text in zip(lines, raw.split(b"\n")[:-1], strict=True):
        assert json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False) == (
            text.decode("utf-8")
        )
        slot = by_slot[str(line["slot_id"])]
        explanation = explain(snapshot, slot.slot_id)
        (attempt,) = [a for a in explanation.attempts if a.id == slot.accepted_attempt_id]
        assert attempt.final_artifact is not None and attempt.finished_at_ns is not None
        final = attempt.final_artifact
        selected = {
            info.selected_observation_id: info
            for info in explanation.observation_slots
            if info.selected_observation_id is not None
        }
        observations = {
            o.id: o for a in explanation.attempts for o in a.observations if o.id in selected
        }
        assert line == {
            "campaign": slot.candidate_id.split("/")[0],
            "slot_id": slot.slot_id,
            "run_id": slot.run_id,
            "candidate_id": slot.candidate_id,
            "problem_id": slot.problem_id,
            "logical_spec_id": slot.logical_spec_id,
            "logical_slot": slot.logical_slot,
            "execution_kind": slot.execution_kind,
            "role": slot.role,
            "attempt_id": attempt.id,
            "retry_index": attempt.retry_index,
            "finished_at_ns": str(attempt.finished_at_ns),
            "final_artifact": {
                "id": final.id,
                "path": final.path,
                "content_sha256": final.content_sha256,
                "manifest_sha256": final.manifest_sha256,
            },
            "observations": [
                {
                    "observation_slot_id": o.slot_id,
                    "logical_slot": o.logical_slot,
                    "observation_id": o.id,
                    "attempt_id": next(a.id for a in explanation.attempts if o in a.observations),
                    "artifact": {
                        "id": o.artifact.id,
                        "path": o.artifact.path,
                        "content_sha256": o.artifact.content_sha256,
                        "manifest_sha256": o.artifact.manifest_sha256,
                    },
                    "metrics": o.result["metrics"],
                    "metric_numbers": json_numbers(o.result["metrics"]),
                }
                for o in sorted(observations.values(), key=lambda o: o.slot_id)
            ],
            "metrics": dict(slot.metrics),
            "metric_numbers": json_numbers(dict(slot.metrics)),
        }
    roles = {line["role"]: line for line in lines}
    assert roles["warmup"]["observations"] == [] and roles["warmup"]["metrics"] == {}


def test_metrics_csv_is_long_form_over_the_selected_observations(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary]
) -> None:
    out, summary = exported
    rows = read_csv(out / "metrics.csv")
    runs = stored_specifications(snapshot, "resolved_runs")
    slots = stored_specifications(snapshot, "attempt_slots")
    expected: list[dict[str, str]] = []
    for line in read_index(out / "index.jsonl"):
        parameters = runs[str(line["run_id"])]["parameters"]
        assert isinstance(parameters, dict) and "candidate_parameters" not in runs[line["run_id"]]
        for observation in line["observations"]:  # type: ignore[attr-defined]
            for name, value in sorted(observation["metrics"].items()):
                expected.append(
                    {
                        "campaign": str(line["campaign"]),
                        "slot_id": str(line["slot_id"]),
                        "candidate_id": str(line["candidate_id"]),
                        "problem_id": str(line["problem_id"]),
                        "logical_slot": str(line["logical_slot"]),
                        "observation_slot_id": observation["observation_slot_id"],
                        "observation_logical_slot": observation["logical_slot"],
                        "observation_id": observation["observation_id"],
                        "metric": name,
                        "value": value,
                        "repetition": str(slots[str(line["slot_id"])].get("repetition", 0)),
                        **{f"param.{key}": str(item) for key, item in parameters.items()},
                    }
                )
    assert rows == expected and summary.files["metrics.csv"] == len(rows)
    assert list(rows[0])[-3:] == ["repetition", "param.problem", "param.size"]
    # The values are the stored decimal strings, quoting and all, as status reports them.
    reported = {s.slot_id: dict(s.metrics) for s in status(snapshot, campaign="alpha").slots}
    for row in rows:
        if row["campaign"] == "alpha":
            assert reported[row["slot_id"]][row["metric"]] == row["value"]
    assert {row["metric"] for row in rows} >= {"a,b", 'say "hi"'}
    assert {row["value"] for row in rows} >= {"0.1", "1e-07", str(2**53 - 1)}


def test_every_named_artifact_is_verified_once(exported: tuple[Path, ExportSummary]) -> None:
    out, summary = exported
    named = {row["final_artifact_id"] for row in read_csv(out / "attempts.csv")} - {""}
    named |= {row["artifact_id"] for row in read_csv(out / "observations.csv")}
    assert summary.verified_artifacts == len(named)
    assert sorted(os.listdir(out)) == sorted(FILE_NAMES)
    assert summary.to_json() == {
        "out_dir": str(out),
        "files": {name: summary.files[name] for name in sorted(FILE_NAMES)},
        "verified_artifacts": len(named),
    }


# --- rebuilding, replacing, filtering ----------------------------------------------------------


def test_exporting_again_gives_the_same_bytes_and_replaces_an_older_export(
    root: Path, exported: tuple[Path, ExportSummary], tmp_path: Path
) -> None:
    first, _ = exported
    out = tmp_path / "again"
    out.mkdir()
    for name in FILE_NAMES:
        (out / name).write_bytes(b"an older export\n")
    (out / "notes.txt").write_bytes(b"mine")
    with Snapshot.take(root) as taken:
        export(taken, str(out))
    for name in FILE_NAMES:
        data = (out / name).read_bytes()
        assert data == (first / name).read_bytes() and b"\r" not in data, name
    assert (out / "notes.txt").read_bytes() == b"mine"
    assert sorted(os.listdir(out)) == sorted([*FILE_NAMES, "notes.txt"])


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_paging_never_changes_the_bytes(
    snapshot: Snapshot,
    exported: tuple[Path, ExportSummary],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slots: int,
) -> None:
    """Pages of accepted slots far smaller than the store: every page boundary is crossed,
    and the files are byte for byte the same."""
    monkeypatch.setattr(export_rows, "PAGE_SLOTS", slots)
    first, summary = exported
    again = export(snapshot, str(tmp_path / "paged"))
    assert again.files == summary.files
    for name in FILE_NAMES:
        assert (tmp_path / "paged" / name).read_bytes() == (first / name).read_bytes(), name


def test_a_campaign_filter_exports_only_that_campaign(
    snapshot: Snapshot, exported: tuple[Path, ExportSummary], tmp_path: Path
) -> None:
    full, _ = exported
    summary = export(snapshot, str(tmp_path / "beta"), campaign="beta")
    out = tmp_path / "beta"
    beta = status(snapshot, campaign="beta")
    assert summary.files["attempts.csv"] == sum(beta.attempts_by_state.values())
    for name in ("attempts.csv", "metrics.csv"):
        filtered = read_csv(out / name)
        assert filtered == [row for row in read_csv(full / name) if row["campaign"] == "beta"]
    slots = {s.slot_id for s in beta.slots}
    observations = read_csv(out / "observations.csv")
    assert observations and {row["attempt_slot_id"] for row in observations} <= slots
    lines = read_index(out / "index.jsonl")
    assert [line["slot_id"] for line in lines] == sorted(slots)
    none = export(snapshot, str(tmp_path / "none"), campaign="gamma")
    assert set(none.files.values()) == {0} and none.verified_artifacts == 0
    assert (tmp_path / "none" / "index.jsonl").read_bytes() == b""
    header = (tmp_path / "none" / "metrics.csv").read_text(encoding="utf-8")
    assert header == (
        "campaign,slot_id,candidate_id,problem_id,logical_slot,observation_slot_id,"
        "observation_logical_slot,observation_id,metric,value,repetition\n"
    )


HOSTILE_METRICS = {
    "line\r\nbreak": "a\rb",
    "comma,name": 'say "hi"',
    "plain": "",
    "para\u2028graph": "caf\u00e9",
}
"""Metrics a runner never writes (its metric names are plain strings, its values numbers)
but a hand-registered observation may: each field needs CSV quoting, or is empty."""


TO_VALIDATING = (
    AttemptState.MATERIALIZING,
    AttemptState.STARTING,
    AttemptState.PREPARING,
    AttemptState.EXECUTING,
    AttemptState.VALIDATING,
)


def hand_made_store(root: Path, metrics: dict[str, str] = HOSTILE_METRICS) -> None:
    """One slot accepted through the store's API with ``metrics``."""
    item = factories.one_shot("odd", candidate="hand/odd", problem="hand/p")
    clock = Clock()
    lease = LeaseRequest(lease_id="lease-0", owner_token="owner", expires_at_ns=2**62)
    claim = LeaseRequest(lease_id="claim-0", owner_token="owner", expires_at_ns=2**62)

    def payload(name: str) -> object:
        return lambda path: Path(path, name).write_bytes(b"bytes of " + name.encode())

    with RunStore.open(str(root)) as store:
        store.register_one_shot(*item.arguments())
        guard = store.reserve(item.slot_id, FirstAttempt(), lease, clock())
        for phase in TO_VALIDATING:
            guard = store.advance(guard, phase, clock())
        guard = store.begin_finalization(guard, claim, clock()).attempt
        published = store.publish_artifact(
            guard, ArtifactKind.OBSERVATION, payload("result.json"), clock
        )
        observation = factories.observation(
            item.observation_slot, guard.attempt_id, result={"metrics": metrics}
        )
        receipt = store.register_observation(
            guard, observation, published.artifact, [], select=True, now_ns=clock()
        )
        references = [Reference("observation", published.artifact.id)]
        store.publish_finalization(
            receipt.attempt, Accepted(), references, payload("stdout.log"), clock
        )


def test_fields_that_need_quoting_round_trip(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    hand_made_store(store)
    with Snapshot.take(store) as taken:
        summary = export(taken, str(tmp_path / "out"))
        (slot,) = status(taken).slots
    assert summary.files == {
        "attempts.csv": 1,
        "index.jsonl": 1,
        "metrics.csv": len(HOSTILE_METRICS),
        "observations.csv": 1,
        "summary.csv": 0,  # no value reads as a number
    }
    rows = read_csv(tmp_path / "out" / "metrics.csv")
    assert {row["metric"]: row["value"] for row in rows} == HOSTILE_METRICS == dict(slot.metrics)
    assert [row["metric"] for row in rows] == sorted(HOSTILE_METRICS)
    data = (tmp_path / "out" / "metrics.csv").read_bytes()
    assert b'"line\r\nbreak","a\rb"' in data and b'"comma,name","say ""hi"""' in data
    assert data.count(b"\n") == len(HOSTILE_METRICS) + 2  # rows, header, the quoted LF
    (line,) = read_index(tmp_path / "out" / "index.jsonl")
    assert line["metrics"] == HOSTILE_METRICS and line["metric_numbers"] == {}


# --- refusals ----------------------------------------------------------------------------------


def _copy(root: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store-copy"
    shutil.copytree(root, copy, symlinks=True)
    return copy


def _flip_byte(path: Path) -> None:
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_corrupt_observation_artifact_refuses_the_export_and_writes_nothing(
    root: Path, exported: tuple[Path, ExportSummary], tmp_path: Path
) -> None:
    store = _copy(root, tmp_path)
    row = read_csv(exported[0] / "observations.csv")[-1]
    (artifact_path,) = [
        o.artifact.path
        for _, a in attempts_by_id_of(store).values()
        for o in a.observations
        if o.id == row["observation_id"]
    ]
    _flip_byte(store / artifact_path / "result.json")
    older = tmp_path / "older"
    older.mkdir()
    (older / "index.jsonl").write_bytes(b"an older export\n")
    missing = tmp_path / "missing"
    with Snapshot.take(store) as taken:
        for target in (older, missing):
            with pytest.raises(ArtifactCorruptError) as caught:
                export(taken, str(target))
            assert caught.value.code == "artifact_corrupt"
            assert row["artifact_id"] in caught.value.message
    assert os.listdir(older) == ["index.jsonl"]
    assert (older / "index.jsonl").read_bytes() == b"an older export\n"
    assert not missing.exists()


def attempts_by_id_of(store: Path) -> dict[str, tuple[str, AttemptInfo]]:
    with Snapshot.take(store) as taken:
        return attempts_by_id(taken)


def test_a_missing_artifact_refuses_the_export(
    root: Path, exported: tuple[Path, ExportSummary], tmp_path: Path
) -> None:
    store = _copy(root, tmp_path)
    row = read_csv(exported[0] / "attempts.csv")[0]
    artifact = row["final_artifact_id"].removeprefix("run-store-v1:")
    shutil.rmtree(store / "artifacts" / artifact)
    out = tmp_path / "out"
    out.mkdir()
    with Snapshot.take(store) as taken, pytest.raises(ArtifactCorruptError, match=artifact):
        export(taken, str(out))
    assert os.listdir(out) == []


def test_a_failed_fsync_removes_every_temporary(snapshot: Snapshot, tmp_path: Path) -> None:
    def fail_on_temporaries(phase: str, operation: str, target: str) -> None:
        if phase == "before" and operation == "fsync_file" and target.endswith(".tmp"):
            raise OSError(5, "injected", target)

    out = tmp_path / "out"
    out.mkdir()
    (out / "attempts.csv").write_bytes(b"an older export\n")
    previous = durable.install_observer(fail_on_temporaries)
    try:
        with pytest.raises(DurabilityError) as caught:
            export(snapshot, str(out))
    finally:
        durable.install_observer(previous)
    assert caught.value.code == "durability_failed"
    assert os.listdir(out) == ["attempts.csv"]
    assert (out / "attempts.csv").read_bytes() == b"an older export\n"


@pytest.mark.parametrize(
    ("out_dir", "campaign"),
    [
        (None, None),
        (3, None),
        (b"/tmp/x", None),
        (Path("/tmp/x"), None),
        ("", None),
        ("/tmp/x\x00y", None),
        ("OUT", 3),
        ("OUT", b"alpha"),
        ("OUT", ["alpha"]),
    ],
)
def test_ill_typed_arguments_are_refused_before_anything_is_written(
    snapshot: Snapshot, tmp_path: Path, out_dir: object, campaign: object
) -> None:
    if out_dir == "OUT":
        out_dir = str(tmp_path / "out")
    with pytest.raises(InvalidRecordError) as caught:
        export(snapshot, out_dir, campaign=campaign)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_record"
    assert os.listdir(tmp_path) == []


def test_a_snapshot_argument_must_be_a_snapshot(tmp_path: Path) -> None:
    with pytest.raises(InvalidRecordError):
        export(str(tmp_path), str(tmp_path / "out"))  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


def test_unsafe_output_directories_are_refused(
    root: Path, snapshot: Snapshot, tmp_path: Path
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"keep")
    link = tmp_path / "link-into-store"
    link.symlink_to(root)
    targets = [
        root,
        root / "artifacts",
        root / "exports",
        link,
        link / "sub",
        a_file,
        tmp_path / "no-parent" / "out",
    ]
    before = sorted(os.listdir(root))
    for target in targets:
        with pytest.raises(UnsafePathError) as caught:
            export(snapshot, str(target))
        assert caught.value.code == "unsafe_path", target
    assert sorted(os.listdir(root)) == before
    assert a_file.read_bytes() == b"keep"
    assert sorted(os.listdir(tmp_path)) == ["a-file", "link-into-store"]


def test_a_relative_output_directory_is_created_under_the_working_directory(
    snapshot: Snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    summary = export(snapshot, "relative", campaign="beta")
    assert summary.out_dir == str(tmp_path / "relative")
    assert sorted(os.listdir(tmp_path / "relative")) == sorted(FILE_NAMES)


def test_a_closed_snapshot_is_refused(root: Path, tmp_path: Path) -> None:
    taken = Snapshot.take(root)
    taken.close()
    with pytest.raises(RunStoreError) as caught:
        export(taken, str(tmp_path / "out"))
    assert caught.value.code == "store_closed"
    assert os.listdir(tmp_path) == []


# --- analysis tools ----------------------------------------------------------------------------


def _first_metric(out: Path) -> dict[str, str]:
    return next(row for row in read_csv(out / "metrics.csv") if row["metric"] == "tiny")


def test_pandas_reads_every_file(exported: tuple[Path, ExportSummary]) -> None:
    pandas = pytest.importorskip("pandas", reason="pandas is not installed")
    out, summary = exported
    for name in ("attempts.csv", "observations.csv", "metrics.csv"):
        frame = pandas.read_csv(out / name, dtype=str, keep_default_na=False)
        assert len(frame) == summary.files[name]
    index = pandas.read_json(out / "index.jsonl", lines=True, dtype=False)
    assert len(index) == summary.files["index.jsonl"]
    metrics = pandas.read_csv(out / "metrics.csv", dtype=str, keep_default_na=False)
    row = _first_metric(out)
    found = metrics[(metrics["slot_id"] == row["slot_id"]) & (metrics["metric"] == "tiny")]
    assert list(found["value"]) == [row["value"]] == ["1e-07"]
    line = index[index["slot_id"] == row["slot_id"]].iloc[0]
    assert line["metrics"]["tiny"] == "1e-07" and line["metrics"]["a,b"] == "1"
    attempts = pandas.read_csv(out / "attempts.csv")
    assert str(attempts["started_at_ns"].dtype) == "int64"


def test_duckdb_reads_every_file(exported: tuple[Path, ExportSummary]) -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    out, summary = exported
    connection = duckdb.connect()
    for name in ("attempts.csv", "observations.csv", "metrics.csv"):
        relation = connection.read_csv(str(out / name), header=True, all_varchar=True)
        assert len(relation.fetchall()) == summary.files[name]
    index = connection.read_json(str(out / "index.jsonl"), format="newline_delimited")
    assert len(index.fetchall()) == summary.files["index.jsonl"]
    row = _first_metric(out)
    values = connection.execute(
        "SELECT value FROM read_csv(?, header = true, all_varchar = true) "
        "WHERE slot_id = ? AND metric = 'tiny'",
        [str(out / "metrics.csv"), row["slot_id"]],
    ).fetchall()
    assert values == [("1e-07",)]
    (quoted,) = connection.execute(
        "SELECT count(*) FROM read_csv(?, header = true, all_varchar = true) "
        "WHERE metric = 'say \"hi\"' AND value = '0.1'",
        [str(out / "metrics.csv")],
    ).fetchall()
    assert quoted[0] == 2
