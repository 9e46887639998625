"""Shared pieces of the end-to-end tests: campaign directories with a scripted worker, and
the installed ``runstore`` console script run as a subprocess.

The worker's behaviour is its first argument: ``ok`` (result.json with metrics),
``slow`` (ok after a seeded 0.2-0.6 s), ``fail`` (exit 3), ``hang`` (sleeps past its time
limit), ``invalid`` (a result.json that is not JSON), ``missing`` (no result.json),
``stream`` (every checkpoint's result.json), ``stall`` (the first time for its pair: writes
``<pid> <parent pid>`` to ``$STALL_MARKS/<candidate>-<problem>`` and sleeps 60 s; after that
like ``ok``). A warm-up exits 0 with no output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

RUNSTORE = str(Path(sys.executable).with_name("runstore"))

WORKER = textwrap.dedent(
    """\
    import hashlib, json, os, random, sys, time
    mode = sys.argv[1]
    key = os.environ["RUNSTORE_CANDIDATE"] + "/" + os.environ["RUNSTORE_PROBLEM"]
    out = os.environ["RUNSTORE_OUTPUT_DIR"]
    print("running", key)
    print("to stderr", file=sys.stderr)
    if mode == "slow":
        time.sleep(random.Random(key).uniform(0.2, 0.6))
    if mode == "fail":
        sys.exit(3)
    if mode == "hang":
        time.sleep(60)
    if mode == "stall":
        mark = os.path.join(os.environ["STALL_MARKS"], key.replace("/", "-"))
        if not os.path.exists(mark):
            with open(mark + ".tmp", "w") as handle:
                handle.write(f"{os.getpid()} {os.getppid()}")
            os.rename(mark + ".tmp", mark)
            time.sleep(60)
    if mode == "missing" or os.environ["RUNSTORE_ROLE"] == "warmup":
        sys.exit(0)
    if mode == "stream":
        for index in range(int(os.environ["RUNSTORE_CHECKPOINTS"])):
            os.makedirs(os.path.join(out, "checkpoints", str(index)))
            path = os.path.join(out, "checkpoints", str(index), "result.json")
            with open(path, "w") as handle:
                json.dump({"metrics": {"step": index}}, handle)
        sys.exit(0)
    with open(os.path.join(out, "result.json"), "w") as handle:
        if mode == "invalid":
            handle.write("not json")
        else:
            size = json.loads(os.environ["RUNSTORE_PARAMETERS"])["size"]
            value = int(hashlib.sha256(key.encode()).hexdigest()[:6], 16)
            json.dump({"metrics": {"size": size, "value": value, "half": size / 2}}, handle)
    """
)


def write_campaign(
    directory: Path,
    candidates: Sequence[tuple[str, str]],
    problems: Sequence[str],
    *,
    name: str = "e2e",
    lease_seconds: int = 30,
    timeout_seconds: int = 30,
    extra: str = "",
    settings: str = "",
    env: dict[str, str] | None = None,
) -> Path:
    """A campaign of ``candidates`` (name, worker mode) x ``problems``, each candidate with
    ``env`` added to its worker's environment."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "worker.py").write_text(WORKER, encoding="utf-8")
    lines = [
        "[campaign]",
        f'name = "{name}"',
        f"timeout_seconds = {timeout_seconds}",
        f"lease_seconds = {lease_seconds}",
        settings,
    ]
    for candidate, mode in candidates:
        lines += [
            "[[candidates]]",
            f'name = "{candidate}"',
            f'command = ["{{python}}", "worker.py", "{mode}"]',
            'files = ["worker.py"]',
            *[f"env.{name} = {json.dumps(value)}" for name, value in (env or {}).items()],
        ]
        if mode == "hang":
            lines.append("timeout_seconds = 1")
    for index, problem in enumerate(problems):
        lines += ["[[problems]]", f'name = "{problem}"', f"parameters = {{ size = {index + 1} }}"]
    path = directory / "campaign.toml"
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def runstore(
    *arguments: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The installed console script, with no terminal (so no progress bars), with ``env``
    added to this process's environment, in ``cwd`` (default: this process's)."""
    return subprocess.run(
        [RUNSTORE, *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        cwd=cwd,
    )


def start(*arguments: str) -> subprocess.Popen[str]:
    """The console script in the background, its JSON lines readable as they come."""
    return subprocess.Popen(
        [RUNSTORE, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def json_lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def kill_after_acceptances(process: subprocess.Popen[str], count: int) -> dict[str, str]:
    """SIGKILL a ``run --json`` right after its ``count``-th acknowledged acceptance and
    reap it; returns the acknowledged slots' attempts (slot id -> attempt id)."""
    acknowledged: dict[str, str] = {}
    assert process.stdout is not None and process.stderr is not None
    for line in process.stdout:
        event = json_lines(line)[0]
        if event["event"] == "attempt_finished" and event["state"] == "accepted":
            acknowledged[str(event["slot"])] = str(event["attempt"])
            if len(acknowledged) == count:
                process.send_signal(signal.SIGKILL)
                break
    process.wait()
    process.stdout.close()
    process.stderr.close()
    return acknowledged
