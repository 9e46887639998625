"""Hostile work the coordinator must turn into typed outcomes (issue 28, observations 1-4
and 6): result documents nested past the stack, output trees deeper or wider than the
bounds, output names the store's filesystem refuses, a store disk that fills while outputs
are written, and inputs swapped for a FIFO or a huge file after registration. From SPEC.md
section 15 ("The worker protocol", "Failure codes")."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.errors import DurabilityError
from runstore.requests import FirstAttempt
from runstore.runner import attempt
from runstore.runner import attempt_files
from runstore.runner import output_tree
from runstore.runner.campaign import InputFile
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import RunSummary
from runstore.runner.coordinator import register
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkStatus

from conformance.closed_store import rows
from conformance.runner.world import SECOND
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import input_file
from conformance.runner.world import result
from conformance.runner.world import succeeded

DEEP = 1_500


def nest(root: Path, depth: int, name: str = "d") -> Path:
    """``depth`` nested directories under ``root`` made relative to each other, so the
    whole path may exceed PATH_MAX; returns the first one."""
    descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=descriptor)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
        os.close(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=descriptor))
        os.fchmod(descriptor, 0o500)  # read-only at the bottom, as a hostile worker may
    finally:
        os.close(descriptor)
    return root / name


def test_an_output_tree_deeper_than_the_stack_is_unsafe_output_and_removed(
    tmp_path: Path,
) -> None:
    output = tmp_path / "scratch" / "output"
    output.mkdir(parents=True)
    try:
        nest(output, DEEP)
        status, outputs, detail = output_tree.collect(str(output), 10**6)
        assert (status, outputs) == (WorkStatus.UNSAFE_OUTPUT, ())
        assert f"deeper than {output_tree.MAX_OUTPUT_DEPTH} levels" in detail
        nest(output, DEEP, "directory-" + "x" * 60)  # about 100 KB of path: past PATH_MAX
    finally:  # pytest's own clean-up of old temporary directories recurses
        removed = output_tree.remove_tree(str(tmp_path / "scratch"))
    assert removed is True and not (tmp_path / "scratch").exists()


def test_output_bounds_on_path_length_and_entry_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path / "long"
    segment = "s" * 250
    (long / segment / segment / segment / segment / segment).mkdir(parents=True)
    (long / segment / segment / segment / segment / segment / "f").write_bytes(b"x")
    status, _, detail = output_tree.collect(str(long), 10**6)
    assert status is WorkStatus.UNSAFE_OUTPUT
    assert f"path longer than {output_tree.MAX_OUTPUT_PATH_BYTES} bytes" in detail

    wide = tmp_path / "wide"
    wide.mkdir()
    for index in range(6):
        (wide / f"f{index}").write_bytes(b"")
    monkeypatch.setattr(output_tree, "MAX_OUTPUT_ENTRIES", 5)
    status, _, detail = output_tree.collect(str(wide), 10**6)
    assert (status, detail) == (WorkStatus.UNSAFE_OUTPUT, "the outputs hold more than 5 entries")
    monkeypatch.setattr(output_tree, "MAX_OUTPUT_ENTRIES", 6)
    status, outputs, _ = output_tree.collect(str(wide), 10**6)
    assert status is WorkStatus.EXITED and [path for path, _ in outputs] == [
        f"f{index}" for index in range(6)
    ]


def test_remove_tree_removes_read_only_links_and_files_and_follows_no_link(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_bytes(b"kept")
    root = tmp_path / "scratch"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "file").write_bytes(b"x")
    (root / "a" / "link").symlink_to(outside)
    os.mkfifo(root / "a" / "fifo")
    (root / "a" / "b").chmod(0o500)
    (root / "a").chmod(0o500)
    assert output_tree.remove_tree(str(root)) is True
    assert not root.exists() and (outside / "kept").read_bytes() == b"kept"


def test_a_result_document_nested_past_the_stack_fails_result_invalid(tmp_path: Path) -> None:
    deep = b'{"metrics": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    work = result(WorkStatus.EXITED, 0, outputs=(("result.json", deep),))
    summary, events = run_once(tmp_path, work)
    finished = events.named("attempt_finished")
    assert [event["failure_code"] for event in finished] == ["result_invalid"]
    assert finished[0]["details"] == {"detail": "result.json nests too deeply"}
    assert summary.failed == 1


def test_an_output_name_the_store_cannot_hold_fails_unsafe_output(tmp_path: Path) -> None:
    """Twenty 250-byte segments pass every name rule but not the store's PATH_MAX: the
    observation's stage refuses it (ENAMETOOLONG), the attempt fails with unsafe_output and
    its artifact says the outputs were left out."""
    name = "/".join(["n" * 250] * 20) + "/result.json"
    work = result(WorkStatus.EXITED, 0, outputs=(("result.json", b'{"metrics": {}}'), (name, b"")))
    _, events = run_once(tmp_path, work)
    finished = events.named("attempt_finished")
    assert [event["failure_code"] for event in finished] == ["unsafe_output"]
    detail = finished[0]["details"]
    assert isinstance(detail, dict) and "File name too long" in str(detail["detail"])
    assert rows(tmp_path / "store", "SELECT state FROM attempts") == [("failed",)]


def test_a_full_disk_while_outputs_are_written_stops_the_run_with_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC while the stage is populated is the store refusing the write: the run stops
    with durability_failed (nothing is accepted or failed for it) and a later --resume
    --retry-failed completes the slot once there is room."""

    def full(*_: object, **__: object) -> object:
        raise OSError(errno.ENOSPC, "No space left on device")

    clock = Clock()
    monkeypatch.setattr(attempt_files, "open", full, raising=False)
    with pytest.raises(DurabilityError, match="No space left on device"):
        run_once(tmp_path, succeeded(), clock=clock)
    # observations are published while executing (validating commits with the claim)
    assert rows(tmp_path / "store", "SELECT state FROM attempts") == [("executing",)]
    monkeypatch.undo()
    clock.advance(31 * SECOND)
    summary, _ = run_once(tmp_path, succeeded(), clock=clock, resume=True)
    assert (summary.accepted, summary.unsatisfied) == (1, ())


def test_write_files_types_each_failure_by_what_it_is_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate = attempt.write_files([("a/" + "n" * 300, b"x")])
    with pytest.raises(attempt.OutputUnwritable, match="File name too long"):
        populate(str(tmp_path))
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS):

        def failing(*_: object, code: int = code, **__: object) -> object:
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(attempt_files, "open", failing, raising=False)
        with pytest.raises(DurabilityError, match=os.strerror(code)):
            attempt.write_files([("b", b"x")])(str(tmp_path))


def registered_input(tmp_path: Path) -> tuple[Path, InputFile]:
    """``data/input.bin`` holding the 16 bytes it is registered with."""
    data = tmp_path / "data"
    data.mkdir()
    return data, input_file(data, "input.bin", b"registered bytes")


def test_an_input_swapped_for_a_fifo_fails_input_changed_without_blocking(
    tmp_path: Path,
) -> None:
    data, file = registered_input(tmp_path)
    (data / "input.bin").unlink()
    os.mkfifo(data / "input.bin")
    outcome: list[object] = []
    reader = threading.Thread(target=lambda: outcome.append(attempt.read_inputs([file])))
    reader.start()
    reader.join(10)
    if reader.is_alive():  # free the reader before failing
        os.close(os.open(data / "input.bin", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading an input swapped for a FIFO blocked")
    (failure,) = outcome
    assert isinstance(failure, attempt.Failure) and failure.code == "input_changed"
    assert failure.details == {"file": "input.bin", "error": "no longer a regular file"}


def test_an_input_grown_to_a_gibibyte_is_refused_by_its_size_before_any_read(
    tmp_path: Path,
) -> None:
    data, file = registered_input(tmp_path)
    os.truncate(data / "input.bin", 2**30)  # sparse: a read would cost a GiB of memory
    failure = attempt.read_inputs([file])
    assert isinstance(failure, attempt.Failure) and failure.code == "input_changed"
    assert failure.details == {"file": "input.bin", "size": 2**30, "registered_size": 16}


def test_an_input_of_the_same_size_and_other_bytes_fails_its_digest(tmp_path: Path) -> None:
    data, file = registered_input(tmp_path)
    (data / "input.bin").write_bytes(b"Registered bytes")
    failure = attempt.read_inputs([file])
    assert isinstance(failure, attempt.Failure) and failure.code == "input_changed"
    assert failure.details == {"file": "input.bin", "sha256": file.sha256}
    with RunStore.open(str(tmp_path)) as store:
        plans, _, _ = register(store, campaign(candidates=("a",), problems=("p",), files=(file,)))
        finished = attempt.start(store, plans[0], FirstAttempt(), 30 * SECOND, Clock())
    assert isinstance(finished, attempt.Finished) and finished.terminal.state.value == "failed"


def run_once(
    tmp_path: Path, work: object, *, clock: Clock | None = None, resume: bool = False
) -> tuple[RunSummary, Events]:
    """``a x p`` with one worker returning ``work``, in ``tmp_path/store`` (resumed: with
    ``--retry-failed 1``, as recovery fails an interrupted attempt)."""
    root = tmp_path / "store"
    root.mkdir(exist_ok=True)
    clock = clock or Clock()
    events = Events()
    with RunStore.open(str(root)) as store:
        summary = run_campaign(
            store,
            campaign(candidates=("a",), problems=("p",)),
            ScriptedExecutor(lambda order, nth: work, clock),  # type: ignore[arg-type,return-value]
            RunOptions(jobs=1, resume=resume, retry_failed=1 if resume else None),
            events,  # type: ignore[arg-type]
            clock=clock,
        )
    return summary, events


def test_busy_past_the_timeout_is_waited_out_by_the_attempt_not_the_run(tmp_path: Path) -> None:
    """Another process (a recovery pass, say) holds the store's write lock for 6.5 s, past
    SQLite's 5 s busy timeout, just as the worker finishes: the attempt meets ``busy``,
    waits it out with backoff and is accepted; the run does not stop (issue 28,
    observation 11)."""
    root = tmp_path / "store"
    root.mkdir()
    held = threading.Event()

    def hold_lock() -> None:
        connection = sqlite3.connect(root / "run.sqlite3", isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(6.5)
        connection.execute("COMMIT")
        connection.close()

    def script(order: object, nth: int) -> object:
        holder = threading.Thread(target=hold_lock)
        holder.start()
        held.wait(10)
        return succeeded()

    clock = Clock()
    events = Events()
    with RunStore.open(str(root)) as store:
        summary = run_campaign(
            store,
            campaign(candidates=("a",), problems=("p",)),
            ScriptedExecutor(script, clock),  # type: ignore[arg-type]
            RunOptions(jobs=1),
            events,  # type: ignore[arg-type]
            clock=clock,
        )
    assert (summary.accepted, summary.unsatisfied) == (1, ())
    assert events.named("lease_lost") == []
