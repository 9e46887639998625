"""cosmic-ray's HTTP workers, one per scratch copy, each mutating only its own copy.

A worker is cosmic-ray's HTTP worker (:mod:`mutation.worker`, on the loopback interface
only) started in its copy's root with the copy's
package first on the path; cosmic-ray's ``http`` distributor sends it one mutant at a time
(a module path relative to the copy, an operator and an occurrence). Rules of this file:
workers run in their own process group and are always stopped (:meth:`Workers.stop`, also
on SIGTERM through the caller's ``finally``), and a worker that does not listen within
:data:`START_SECONDS` is an error, never a smaller pool.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from mutation.scratch import copy_environment

START_SECONDS = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Workers:
    copies: list[Path]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)

    def start(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        ports = []
        for index, copy in enumerate(self.copies):
            port = _free_port()
            with (log_dir / f"worker-{index}.log").open("wb") as log:
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, "tools/mutation/worker.py", "--port", str(port)],
                        cwd=copy,
                        env=copy_environment(copy),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            ports.append(port)
        deadline = time.monotonic() + START_SECONDS
        for process, port in zip(self.processes, ports, strict=True):
            while not _listening(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"a cosmic-ray worker did not start (see {log_dir})")
                time.sleep(0.2)
            self.urls.append(f"http://127.0.0.1:{port}")

    def stop(self) -> None:
        """Kill the workers, then every process still working in a copy: cosmic-ray starts
        each test command in a session of its own, so killing a worker's group leaves the
        mutant's tests running (and a copy about to be rebuilt in use)."""
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes.clear()
        self.urls.clear()
        for _ in range(50):
            left = [pid for copy in self.copies for pid in working_in(copy)]
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        raise RuntimeError(f"processes still run in the copies: {left}")


def working_in(directory: Path) -> list[int]:
    """The processes (other than this one) whose working directory is under ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if Path(os.readlink(entry / "cwd")).is_relative_to(directory):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
