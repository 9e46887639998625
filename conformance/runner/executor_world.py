"""Shared pieces of the executors' tests (conformance/test_executor_*.py).

Work orders whose worker is ``{python} -c SCRIPT``, running one order to its result through
any :class:`Executor`, and waiting on what a worker leaves behind: a file it writes, the
death of a process it started. Nothing here knows which executor runs the order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from runstore.runner.executor import LOG_LIMIT_BYTES
from runstore.runner.executor import OUTPUT_LIMIT_BYTES
from runstore.runner.executor import Executor
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

SLACK_S = 2.0
"""How late a kill may come on a busy machine before a test calls it missing."""


def order(
    script: str,
    *args: str,
    inputs: tuple[tuple[str, bytes], ...] = (),
    env: tuple[tuple[str, str], ...] = (),
    timeout_s: float = 20.0,
    output_limit_bytes: int = OUTPUT_LIMIT_BYTES,
    log_limit_bytes: int = LOG_LIMIT_BYTES,
    command: tuple[str, ...] | None = None,
    key: str = "slot#0",
) -> WorkOrder:
    """``{python} -c SCRIPT ARGS...`` (the script's braces escaped, the arguments' kept)."""
    escaped = textwrap.dedent(script).replace("{", "{{").replace("}", "}}")
    return WorkOrder(
        key=key,
        command=command if command is not None else ("{python}", "-c", escaped, *args),
        env=env,
        inputs=inputs,
        timeout_ns=int(timeout_s * 1e9),
        output_limit_bytes=output_limit_bytes,
        log_limit_bytes=log_limit_bytes,
    )


def run(executor: Executor, work: WorkOrder) -> WorkResult:
    """Submit ``work`` and wait (at most 30 s) for its result."""
    handle = executor.submit(work)
    assert executor.wait([handle], 30) == {handle}
    return handle.result()


def wait_for(path: Path, within_s: float = 10.0) -> str:
    """The text of ``path`` once a worker has written it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()):
            return text
        time.sleep(0.01)
    raise AssertionError(f"{path} never written")


def gone(pid: int, within_s: float = SLACK_S) -> bool:
    """Whether process ``pid`` is dead within ``within_s``. A zombie counts as dead: an
    orphan is reparented to PID 1, which in a container may never reap it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except ProcessLookupError:  # reaped between opening its stat file and reading it
            return True
        except FileNotFoundError:
            if Path("/proc/self").exists():
                return True
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            state = "R"
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


@contextlib.contextmanager
def reaped(pid_file: Path) -> Iterator[None]:
    """Kill a process the test failed to see killed, so it does not outlive the test."""
    try:
        yield
    finally:
        if pid_file.exists() and pid_file.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


SEEING_SCRIPT = """
    import json, os, sys
    from pathlib import Path
    out = Path(os.environ["RUNSTORE_OUTPUT_DIR"])
    (out / "nested" / "deeper").mkdir(parents=True)
    (out / "nested" / "deeper" / "data.bin").write_bytes(bytes(range(256)))
    seen = {
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "executable": sys.executable,
        "parent": os.getppid(),
        "env": {k: os.environ.get(k) for k in ("RUNSTORE_WORK_DIR", "RUNSTORE_OUTPUT_DIR",
                                               "RUNSTORE_PARAMETERS", "EXTRA")},
        "inputs": {p: Path(p).read_bytes().hex() for p in ("params.json", "dir/sub/b.bin")},
        "entries": sorted(os.listdir(out / "..")),
    }
    (out / "result.json").write_text(json.dumps(seen))
    sys.stdout.buffer.write(b"to stdout\\n")
    sys.stderr.buffer.write(b"to stderr \\x00\\xff")
"""


def check_exited_worker(executor: Executor) -> dict[str, object]:
    """Run a worker that reports what it saw, check the contract every executor keeps
    (outputs, logs, inputs, environment, placeholders filled on the worker's side, the
    working directory, unnamed logs) and return what it saw (``work_dir`` included) for
    the executor's own checks."""
    inputs = (("params.json", b'{"n": 1}'), ("dir/sub/b.bin", b"\x00\x01\xfe\xff"))
    env = (("RUNSTORE_PARAMETERS", '{"n":1}'), ("EXTRA", "yes"))
    args = ("{work_dir}", "{output_dir}", "{{x}}", "a{{b}}c{python}", "}}{{")
    result = run(executor, order(SEEING_SCRIPT, *args, inputs=inputs, env=env))

    assert (result.status, result.exit_code, result.detail) == (WorkStatus.EXITED, 0, "")
    assert (result.stdout, result.stderr) == (b"to stdout\n", b"to stderr \x00\xff")
    assert not result.stdout_truncated and not result.stderr_truncated
    assert result.duration_ns > 0
    assert [path for path, _ in result.outputs] == ["nested/deeper/data.bin", "result.json"]
    assert result.outputs[0][1] == bytes(range(256))
    seen = json.loads(result.outputs[1][1])
    work_dir, output_dir = seen["env"]["RUNSTORE_WORK_DIR"], seen["env"]["RUNSTORE_OUTPUT_DIR"]
    assert seen["argv"] == [work_dir, output_dir, "{x}", "a{b}c" + seen["executable"], "}{"]
    assert Path(work_dir).is_absolute() and Path(work_dir).name == "work"
    assert Path(output_dir) == Path(work_dir).parent / "output"
    assert Path(work_dir).parent.name.startswith("runstore-work-")
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(work_dir)
    assert seen["env"]["RUNSTORE_PARAMETERS"] == '{"n":1}' and seen["env"]["EXTRA"] == "yes"
    assert seen["inputs"] == {path: data.hex() for path, data in inputs}
    assert seen["entries"] == ["output", "work"]  # the logs are unnamed
    return {**seen, "work_dir": work_dir}


def check_non_zero_exit(executor: Executor) -> None:
    """A worker that writes an output and exits 3: EXITED with its code, outputs kept."""
    script = """
        import os, sys
        open(os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "partial.txt"), "wb").write(b"p")
        sys.exit(3)
    """
    result = run(executor, order(script))
    assert (result.status, result.exit_code) == (WorkStatus.EXITED, 3)
    assert result.outputs == (("partial.txt", b"p"),)


def check_cancel_after_done(executor: Executor) -> None:
    """A cancel after the handle is done changes nothing: the result stays EXITED."""
    handle = executor.submit(order("print('hi')"))
    assert executor.wait([handle], 30) == {handle}
    handle.cancel()
    assert (handle.result().status, handle.result().stdout) == (WorkStatus.EXITED, b"hi\n")
