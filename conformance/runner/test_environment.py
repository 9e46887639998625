"""Environment provenance (runstore.runner.environment; SPEC.md section 15.4, "Environment
provenance"): the document's fields against independent reads of this machine, its
stability, its bounds against hostile sources and package names, the run's cache, and
what attempts commit: one ``environment`` reference each, one publication per distinct
document, with the local executor and on Dask."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from runstore import RunStore
from runstore.canonical import decode_object
from runstore.canonical import encode
from runstore.enums import ArtifactKind
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.requests import Reference
from runstore.runner import attempt
from runstore.runner import environment
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import register
from runstore.runner.coordinator import run_campaign
from runstore.runner.environment import MAX_PACKAGE_NAME
from runstore.runner.environment import MAX_PACKAGES
from runstore.runner.environment import MAX_TEXT
from runstore.runner.environment import Environments
from runstore.runner.environment import collect
from runstore.runner.environment import document
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus
from runstore.runner.local import LocalExecutor

from conformance.closed_store import rows
from conformance.runner.executor_world import order
from conformance.runner.executor_world import run
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import succeeded

KEYS = {
    "cpu",
    "executor",
    "format",
    "host",
    "os",
    "packages",
    "packages_omitted",
    "python",
    "runstore",
    "worker",
}

WORKER = (
    "import json, os, sys\n"
    "if sys.argv[-1] == 'b': sys.exit(3)\n"
    "path = os.path.join(os.environ['RUNSTORE_OUTPUT_DIR'], 'result.json')\n"
    "open(path, 'w').write(json.dumps({'metrics': {'x': 1}}))\n"
)
"""A real worker: candidate ``b`` exits 3, any other writes a result."""

COMMAND = ("{python}", "-c", WORKER.replace("{", "{{").replace("}", "}}"))


def first_model_name() -> str | None:
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return None
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else None


def pretty_name() -> str | None:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
        return None
    return None


# --- the document -------------------------------------------------------------------------


def test_the_document_describes_this_machine_as_the_standard_library_sees_it() -> None:
    doc = document(("attrs", "no-such-distribution-xyz"), executor="local", worker=None)
    assert set(doc) == KEYS
    assert doc["format"] == "runstore-environment-1"
    assert doc["host"] == socket.gethostname()
    assert doc["cpu"] == {
        "affinity": len(os.sched_getaffinity(0)),
        "count": os.cpu_count(),
        "model": first_model_name() or platform.processor() or None,
    }
    uname = platform.uname()
    assert doc["os"] == {
        "machine": uname.machine,
        "name": pretty_name(),
        "release": uname.release,
        "system": uname.system,
        "version": uname.version,
    }
    version = sys.implementation.version
    assert doc["python"] == {
        "executable": sys.executable,
        "implementation": f"{sys.implementation.name} {version.major}.{version.minor}."
        f"{version.micro}",
        "version": sys.version,
    }
    assert doc["runstore"] == importlib.metadata.version("runstore")
    assert doc["packages"] == {
        "attrs": importlib.metadata.version("attrs"),
        "no-such-distribution-xyz": None,
    }
    assert doc["packages_omitted"] == 0
    assert (doc["executor"], doc["worker"]) == ("local", None)
    named = document((), executor="dask", worker="tcp://10.0.0.1:4321")
    assert (named["executor"], named["worker"], named["packages"]) == (
        "dask",
        "tcp://10.0.0.1:4321",
        {},
    )


def test_two_collections_are_the_same_canonical_bytes() -> None:
    first = collect(("attrs", "pytest"), executor="local", worker=None)
    second = collect(("attrs", "pytest"), executor="local", worker=None)
    assert first and first == second
    assert encode(decode_object(first)) == first
    assert decode_object(first) == document(("attrs", "pytest"), executor="local", worker=None)


def test_a_missing_unreadable_or_endless_cpuinfo_falls_back(tmp_path: Path) -> None:
    fallback = platform.processor() or None
    missing = document((), executor="local", worker=None, cpuinfo=str(tmp_path / "none"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened without blocking: reads as empty, never waits for a writer
    from_fifo = document((), executor="local", worker=None, cpuinfo=str(fifo))
    endless = document((), executor="local", worker=None, cpuinfo="/dev/zero")
    late = tmp_path / "late"
    late.write_bytes(b"x" * (2 * 1024 * 1024) + b"\nmodel name : Too Late\n")
    beyond = document((), executor="local", worker=None, cpuinfo=str(late))
    cpu: Any
    for cpu in (missing["cpu"], from_fifo["cpu"], endless["cpu"], beyond["cpu"]):
        assert cpu["model"] == fallback
    long_name = tmp_path / "long"
    long_name.write_bytes(b"model name\t: " + b"\xff" * 10 + b"A" * 100_000 + b"\n")
    cut: Any = document((), executor="local", worker=None, cpuinfo=str(long_name))["cpu"]
    assert len(cut["model"]) == MAX_TEXT and cut["model"].startswith("\ufffd" * 10 + "A")


def test_os_release_is_read_bounded_and_unquoted(tmp_path: Path) -> None:
    quoted = tmp_path / "quoted"
    quoted.write_text('NAME=x\nPRETTY_NAME="Plan 9 (4th)"\n')
    single = tmp_path / "single"
    single.write_text("PRETTY_NAME='Single'\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x00\xff\xfePRETTY_NAME=\n\x80")
    missing = str(tmp_path / "missing")

    def name(*paths: str) -> object:
        os_fields: Any = document((), executor="local", worker=None, os_release=paths)["os"]
        return os_fields["name"]

    assert name(missing, str(quoted)) == "Plan 9 (4th)"
    assert name(str(single)) == "Single"
    assert name(str(binary)) is None
    assert name(missing) is None
    assert name(str(quoted), str(single)) == "Plan 9 (4th)"  # the first readable one


def test_hostile_package_names_are_bounded_and_never_looked_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked_up: list[str] = []
    real = importlib.metadata.version

    def spy(name: str) -> str:
        looked_up.append(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", spy)
    hostile = ("../../etc/passwd", "a" * 10_000, "", "x\udcff", "*", "attrs", "attrs", "-x")
    names = (*hostile, *(f"pkg{i}" for i in range(MAX_PACKAGES)))
    doc = document(names, executor="local", worker=None)
    packages: Any = doc["packages"]
    assert doc["packages_omitted"] == len(names) - MAX_PACKAGES
    assert packages["attrs"] == real("attrs")
    for key in ("../../etc/passwd", "a" * MAX_PACKAGE_NAME, "x\\udcff", "*", "-x"):
        assert packages[key] is None
    assert "" not in packages and all(len(key) <= MAX_PACKAGE_NAME for key in packages)
    assert set(looked_up) <= {"attrs", *(f"pkg{i}" for i in range(MAX_PACKAGES))}
    assert "pkg0" in looked_up and f"pkg{MAX_PACKAGES - 1}" not in looked_up  # capped
    assert encode(doc)  # no lone surrogate survives


def test_metadata_that_cannot_be_read_is_null_and_a_failed_document_is_no_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(name: str) -> str:
        raise RuntimeError(f"hostile metadata for {name}")

    monkeypatch.setattr(importlib.metadata, "version", broken)
    assert document(("attrs",), executor="local", worker=None)["packages"] == {"attrs": None}

    def failing(*_: object, **__: object) -> dict[str, object]:
        raise RuntimeError("no document")

    monkeypatch.setattr(environment, "document", failing)
    assert collect(("attrs",), executor="local", worker=None) == b""


def test_the_cache_publishes_each_distinct_document_once() -> None:
    published: list[bytes] = []

    def publish(document: bytes) -> str:
        published.append(document)
        return f"artifact-{len(published)}"

    cache = Environments()
    assert cache.references(b"", publish) == [] and published == []
    assert cache.references(b'{"a":1}', publish) == [Reference("environment", "artifact-1")]
    assert cache.references(b'{"a":1}', publish) == [Reference("environment", "artifact-1")]
    assert cache.references(b'{"a":2}', publish) == [Reference("environment", "artifact-2")]
    assert published == [b'{"a":1}', b'{"a":2}'] and cache.published == 2

    def refused(document: bytes) -> str:
        raise RuntimeError("busy")

    with pytest.raises(RuntimeError):
        cache.references(b'{"a":3}', refused)
    assert cache.references(b'{"a":3}', publish) == [Reference("environment", "artifact-3")]


# --- what attempts commit ---------------------------------------------------------------------


def environment_rows(root: str | Path) -> list[tuple[Any, ...]]:
    """(attempt id, state, environment artifact id or None) per attempt."""
    return rows(
        root,
        "SELECT a.id, a.state, (SELECT group_concat(r.artifact_id) FROM attempt_artifacts AS r "
        "WHERE r.attempt_id = a.id AND r.role = 'environment') FROM attempts AS a ORDER BY a.id",
    )


def environment_artifacts(root: str | Path) -> list[tuple[Any, ...]]:
    return rows(root, "SELECT id, path FROM artifacts WHERE kind = 'environment' ORDER BY id")


@pytest.fixture
def publications(monkeypatch: pytest.MonkeyPatch) -> list[ArtifactKind]:
    """The kind of every ``publish_artifact`` the store is asked for."""
    kinds: list[ArtifactKind] = []
    real = RunStore.publish_artifact

    def counted(self: RunStore, guard: Any, kind: ArtifactKind, *args: Any) -> Any:
        kinds.append(kind)
        return real(self, guard, kind, *args)

    monkeypatch.setattr(RunStore, "publish_artifact", counted)
    return kinds


def with_environment(work: WorkResult, doc: bytes) -> WorkResult:
    return attrs.evolve(work, environment=doc)


def test_accepted_superseded_and_failed_outcomes_reference_the_environment(
    tmp_path: Path, publications: list[ArtifactKind]
) -> None:
    doc = collect((), executor="local", worker=None)
    clock, cache = Clock(), Environments()
    lease = 30 * SECOND
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p", "q")))
        first = attempt.start(store, plans[0], FirstAttempt(), lease, clock)
        second = attempt.start(store, plans[0], Next(retry=True), lease, clock)
        failing = attempt.start(store, plans[1], FirstAttempt(), lease, clock)
        assert isinstance(first, attempt.Started) and isinstance(second, attempt.Started)
        assert isinstance(failing, attempt.Started)
        work = with_environment(succeeded(), doc)
        won = attempt.finish(store, first, work, lease, clock, environments=cache)
        lost = attempt.finish(store, second, work, lease, clock, environments=cache)
        failure = with_environment(result(WorkStatus.EXITED, 3), doc)
        failed = attempt.finish(store, failing, failure, lease, clock, environments=cache)
    states = [f.terminal.state.value for f in (won, lost, failed)]
    assert states == ["accepted", "superseded", "failed"]
    ((artifact_id, path),) = environment_artifacts(tmp_path)
    assert {row[2] for row in environment_rows(tmp_path)} == {artifact_id}
    assert publications.count(ArtifactKind.ENVIRONMENT) == 1
    assert (tmp_path / path / "environment.json").read_bytes() == doc


def test_a_result_without_an_environment_references_none(tmp_path: Path) -> None:
    clock = Clock()
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",)))
        started = attempt.start(store, plans[0], FirstAttempt(), 30 * SECOND, clock)
        assert isinstance(started, attempt.Started)
        finished = attempt.finish(store, started, succeeded(), 30 * SECOND, clock)
    assert finished.terminal.state.value == "accepted"
    assert [row[2] for row in environment_rows(tmp_path)] == [None]
    assert environment_artifacts(tmp_path) == []


def test_a_run_publishes_each_distinct_environment_once_and_every_attempt_references_one(
    tmp_path: Path, publications: list[ArtifactKind]
) -> None:
    here = collect((), executor="local", worker=None)
    elsewhere = collect((), executor="dask", worker="tcp://elsewhere:1")
    seen_packages: list[tuple[str, ...]] = []

    def script(order: WorkOrder, nth: int) -> WorkResult:
        seen_packages.append(order.packages)
        env = dict(order.env)
        doc = elsewhere if env["RUNSTORE_PROBLEM"] == "r" else here
        if env["RUNSTORE_CANDIDATE"] == "b":
            return with_environment(result(WorkStatus.EXITED, 3), doc)
        return with_environment(succeeded(), doc)

    clock = Clock()
    demo = attrs.evolve(
        campaign(candidates=("a", "b"), problems=("p", "q", "r")), packages=("attrs",)
    )
    with RunStore.open(str(tmp_path)) as store:
        summary = run_campaign(
            store,
            demo,
            ScriptedExecutor(script, clock),  # type: ignore[arg-type]
            RunOptions(jobs=2),
            Events(),  # type: ignore[arg-type]
            clock=clock,
        )
    assert (summary.accepted, summary.failed) == (3, 3)
    assert seen_packages == [("attrs",)] * 6  # the order carries the campaign's packages
    artifacts = dict(environment_artifacts(tmp_path))
    assert len(artifacts) == 2
    by_document = {
        (tmp_path / path / "environment.json").read_bytes(): artifact_id
        for artifact_id, path in artifacts.items()
    }
    assert set(by_document) == {here, elsewhere}
    references = environment_rows(tmp_path)
    assert len(references) == 6 and all(row[2] in artifacts for row in references)
    assert publications.count(ArtifactKind.ENVIRONMENT) == 2


# --- the executors collect it on the worker's side ----------------------------------------------


def test_the_local_executor_returns_this_machines_environment(tmp_path: Path) -> None:
    packages = ("attrs", "no-such-distribution-xyz")
    with LocalExecutor(1, scratch_root=str(tmp_path)) as executor:
        work = run(executor, attrs.evolve(order("pass"), packages=packages))
    doc: Any = decode_object(work.environment)
    assert doc == document(packages, executor="local", worker=None)


def test_an_order_cancelled_before_it_started_has_no_environment(tmp_path: Path) -> None:
    with LocalExecutor(1, scratch_root=str(tmp_path)) as executor:
        blocker = executor.submit(order("import time; time.sleep(30)"))
        queued = executor.submit(order("pass"))
        queued.cancel()
        blocker.cancel()
        assert executor.wait([queued], 10) == {queued}
    assert queued.result().status.value == "cancelled" and queued.result().environment == b""


@pytest.fixture(scope="module")
def dask_workers(dask_scheduler: str) -> Iterator[tuple[str, set[str]]]:
    distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")
    with distributed.Client(dask_scheduler, timeout=10) as client:
        workers = set(client.scheduler_info()["workers"])
    yield dask_scheduler, workers


def test_on_dask_each_attempt_references_its_dask_workers_environment(
    tmp_path: Path, dask_workers: tuple[str, set[str]]
) -> None:
    from runstore.runner.dask_executor import open_dask

    scheduler, workers = dask_workers
    demo = attrs.evolve(
        campaign(candidates=("a", "b"), problems=("p",), command=COMMAND), packages=("attrs",)
    )
    executor = open_dask(scheduler, None, orphan_after_s=30.0)
    try:
        with RunStore.open(str(tmp_path)) as store:
            summary = run_campaign(
                store,
                demo,
                executor,
                RunOptions(jobs=2),
                Events(),  # type: ignore[arg-type]
                stop=threading.Event(),
            )
    finally:
        executor.close()
    assert (summary.accepted, summary.failed) == (1, 1)
    references = environment_rows(tmp_path)
    assert sorted(row[1] for row in references) == ["accepted", "failed"]
    paths = dict(environment_artifacts(tmp_path))
    assert all(row[2] in paths for row in references)
    for path in paths.values():
        doc: Any = decode_object((tmp_path / path / "environment.json").read_bytes())
        assert doc["executor"] == "dask" and doc["worker"] in workers
        assert doc["packages"] == {"attrs": importlib.metadata.version("attrs")}
        assert doc["host"] == socket.gethostname()  # the local cluster runs on this machine
