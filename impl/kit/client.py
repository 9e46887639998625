"""The kit's end of the driver protocol (SPEC.md section 18.1): one driver process, its
requests and responses, and the transcript of both.

Rules of this file: the only place the kit starts, talks to or kills a driver. A driver
that breaks the protocol (a line that is not a response, a wrong id, an exit or a
timeout) raises :class:`ProtocolFailure` and is killed; one that cannot be started, or
that does not speak version 1, raises ``implementation_unavailable``. The driver runs in
the kit's working directory (so a relative command path works). Standard error goes
to a temporary file whose tail is kept for the report; nothing here parses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import tempfile
import time
from typing import Any

import attrs
from runstore.errors import ImplementationUnavailableError

from .wire import PROTOCOL

STDERR_TAIL = 4096


@attrs.frozen
class Reply:
    """One response: ``kind`` is ``result``, ``refused`` or ``unsupported``; ``value`` the
    result (or the refusal's code)."""

    kind: str
    value: Any

    def outcome(self) -> tuple[str, Any]:
        """What a comparison looks at: the result, the refusal's code, or unsupported."""
        return (self.kind, self.value)


class ProtocolFailure(Exception):
    """The driver broke the protocol; the message says how (SPEC.md section 18.1)."""


class Transcript:
    """Every request and response line of a run, in order: ``> `` a request, ``< `` its
    response (the form ``runstore conformance --replay`` reads)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def split_command(command: str) -> list[str]:
    words = shlex.split(command)
    if not words:
        raise ImplementationUnavailableError("the driver command is empty")
    return words


class Driver:
    """One running driver. ``start()`` launches it and says ``hello``."""

    def __init__(
        self, command: list[str], *, timeout: float = 30.0, transcript: Transcript | None = None
    ) -> None:
        self.command = command
        self.timeout = timeout
        self.transcript = transcript if transcript is not None else Transcript()
        self.implementation = ""
        self._next_id = 1
        self._buffer = b""
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()

    def start(self) -> Driver:
        try:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError as error:
            self.close()
            raise ImplementationUnavailableError(
                f"cannot start {shlex.join(self.command)}: {error.strerror or error}"
            ) from None
        try:
            reply = self.request("hello", {"protocol": PROTOCOL})
        except ProtocolFailure as failure:
            self.close()
            raise ImplementationUnavailableError(f"no answer to hello: {failure}") from None
        if reply.kind != "result" or not isinstance(reply.value, dict):
            self.close()
            raise ImplementationUnavailableError(f"hello was answered {reply.kind}")
        if reply.value.get("protocol") != PROTOCOL:
            self.close()
            raise ImplementationUnavailableError(
                f"the driver speaks protocol {reply.value.get('protocol')!r}, not {PROTOCOL}"
            )
        self.implementation = str(reply.value.get("implementation", "unnamed"))
        return self

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def send(self, op: str, args: dict[str, Any]) -> int:
        """Write one request and return its id (the answer is :meth:`receive`'s)."""
        request_id = self._next_id
        self._next_id += 1
        self._write(json.dumps({"id": request_id, "op": op, "args": args}, ensure_ascii=True), op)
        return request_id

    def send_line(self, line: str, label: str, expected_id: object) -> Reply:
        """Write ``line`` as it is (a malformed request, to see it refused) and read its
        answer, which must carry ``expected_id`` (``None`` when the line has no id the
        driver can read)."""
        self._write(line, label)
        return self.receive(expected_id, label)

    def _write(self, line: str, label: str) -> None:
        process = self._require()
        self.transcript.lines.append("> " + line)
        try:
            assert process.stdin is not None
            process.stdin.write(line.encode("ascii") + b"\n")
            process.stdin.flush()
        except OSError:
            raise self._fail(f"{label}: the driver closed its input") from None

    def receive(self, request_id: object, op: str) -> Reply:
        line = self._line(op)
        self.transcript.lines.append("< " + line)
        try:
            response = json.loads(line)
        except ValueError:
            raise self._fail(f"{op}: the response is not JSON: {line[:80]}") from None
        if not isinstance(response, dict) or response.get("id") != request_id:
            raise self._fail(f"{op}: the response does not carry id {request_id}: {line[:80]}")
        kinds = [key for key in ("result", "refused", "unsupported") if key in response]
        if len(kinds) != 1 or len(response) != 2:
            raise self._fail(f"{op}: a response has exactly one of result, refused, unsupported")
        kind = kinds[0]
        if kind == "refused":
            refused = response["refused"]
            if not isinstance(refused, dict) or not isinstance(refused.get("code"), str):
                raise self._fail(f"{op}: a refusal needs a string code")
            return Reply("refused", refused["code"])
        return Reply(kind, response[kind])

    def request(self, op: str, args: dict[str, Any]) -> Reply:
        return self.receive(self.send(op, args), op)

    def kill(self) -> None:
        """SIGKILL the driver's whole process group and reap it."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()

    def close(self) -> None:
        """End the driver (closing its input, then killing it if it lingers)."""
        if self._process is not None:
            if self._process.stdin is not None:
                with contextlib.suppress(OSError):
                    self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
            if self._process.stdout is not None:
                self._process.stdout.close()
        self._stderr.close()

    def stderr_tail(self) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - STDERR_TAIL))
        return self._stderr.read().decode("utf-8", errors="replace")

    def __enter__(self) -> Driver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.close()

    # --- internals ------------------------------------------------------------------------

    def _require(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise ProtocolFailure("the driver was not started")
        return self._process

    def _fail(self, message: str) -> ProtocolFailure:
        self.kill()
        tail = self.stderr_tail().strip().splitlines()[-3:]
        return ProtocolFailure(message + (f" (stderr: {' | '.join(tail)})" if tail else ""))

    def _line(self, op: str) -> str:
        process = self._require()
        assert process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"{op}: no answer within {self.timeout:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                status = process.wait()
                raise self._fail(f"{op}: the driver exited (status {status}) before answering")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(f"{op}: the response is not UTF-8") from None
