"""A worker's logs, read from its attempt artifact once it verifies (SPEC.md section 15.6,
"When a slot fails").

Rules of this file: reads only, in place under the store root, never writing, syncing or
following a link. A log's bytes are used only after the whole attempt artifact verified
(:func:`runstore.store.publication.objects.verify` with ``sync=False``: every byte of
every file against ``manifest.json``) and matched its registration (tree hash and
manifest digest), and only when the log's bytes, read again here without following a
link, still hash to the digest the manifest lists: a log changed after the verification
is refused too. What a log says is the worker's, so it is untrusted text: the tail is
bounded (:data:`TAIL_LINES` lines, :data:`TAIL_CHARS` characters) and every control
character is shown as an escape. The runner writes these names (``runstore.runner``,
which inspection may not import; a test checks that they agree).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from typing import Final
from typing import Protocol

import attrs
from runstore.errors import ArtifactCorruptError
from runstore.errors import LogUnavailableError
from runstore.errors import RunStoreError
from runstore.store.publication import objects

ATTEMPT_KIND: Final = "attempt"
STDOUT_LOG: Final = "stdout.log"
STDERR_LOG: Final = "stderr.log"
STREAMS: Final = {"stdout": STDOUT_LOG, "stderr": STDERR_LOG}
"""A stream's name -> its file in the attempt artifact."""
TAIL_LINES: Final = 10
TAIL_CHARS: Final = 2000
MAX_LOG_BYTES: Final = 64 << 20
"""The largest log handed over whole (the runner keeps at most 4 MiB of each)."""
_TAIL_WINDOW: Final = 16 << 10
"""Bytes kept from a log's end for its tail: more than :data:`TAIL_CHARS` characters
can take (4 bytes each at most), so a cut first character is always cut off again."""
_CHUNK: Final = 1 << 20
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_ARTIFACT_PATH: Final = re.compile(r"artifacts/attempt-[0-9a-f]{64}")
_ESCAPES: Final = {"\t": "\\t", "\r": "\\r"}
_HIDDEN: Final = frozenset({"Cc", "Cf", "Zl", "Zp"})


class Registered(Protocol):
    """An artifact row as the reader holds it (``explain.ArtifactInfo`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def content_sha256(self) -> str: ...
    @property
    def manifest_sha256(self) -> str: ...


@attrs.frozen(kw_only=True)
class AttemptLogs:
    """An attempt artifact's logs: the absolute path of each log it holds (None for one it
    lacks) and the tail of ``stderr.log``; ``problem`` says why the tail is not shown (the
    artifact does not verify, or holds no ``stderr.log``), and ``stderr_tail`` is then
    None."""

    artifact_id: str
    stdout: str | None
    stderr: str | None
    stderr_tail: tuple[str, ...] | None
    problem: str | None


def visible(text: str) -> str:
    """``text`` with every control or format character (Unicode categories Cc, Cf, Zl,
    Zp) written as an escape: ``\\t``, ``\\r``, else ``\\xNN``, ``\\uNNNN`` or
    ``\\UNNNNNNNN`` (as Python writes them)."""
    return "".join(
        _escape(char) if unicodedata.category(char) in _HIDDEN else char for char in text
    )


def _escape(char: str) -> str:
    code = ord(char)
    if char in _ESCAPES:
        return _ESCAPES[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def tail(data: bytes, *, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> tuple[str, ...]:
    """The last ``lines`` lines of ``data`` (UTF-8, an undecodable byte shown as
    ``\\xNN``; a line ends at ``\\n`` or ``\\r\\n``), each made :func:`visible`, together at
    most ``chars`` characters: when longer, the first lines kept are cut from their start
    and the first one shown begins with ``...``."""
    text = data.decode("utf-8", "backslashreplace")
    found = text.split("\n")
    if found and found[-1] == "":
        found.pop()
    kept = [visible(line.removesuffix("\r")) for line in found[-lines:]] if lines > 0 else []
    total = sum(len(line) for line in kept)
    if total <= chars:
        return tuple(kept)
    budget = chars - 3
    shown: list[str] = []
    for line in reversed(kept):
        if len(line) >= budget:
            shown.append("..." + line[len(line) - budget :] if budget > 0 else "...")
            break
        shown.append(line)
        budget -= len(line)
    return tuple(reversed(shown))


def read_log(root: str, artifact: Registered, name: str, *, last: int | None = None) -> bytes:
    """The bytes of the log ``name`` (``stdout.log`` or ``stderr.log``) of the attempt
    artifact ``artifact`` under ``root``: whole (at most :data:`MAX_LOG_BYTES`), or only
    its ``last`` bytes (the whole file is still hashed).

    Refusals: ``artifact_corrupt`` when the artifact does not verify, does not match its
    registration, or the log changed after it verified; ``log_unavailable`` when the
    artifact is not an attempt artifact at its address, holds no such log, or the log is
    too large to hand over whole.
    """
    if name not in STREAMS.values():
        raise LogUnavailableError(f"{name!r:.60} is not a worker log")
    if artifact.kind != ATTEMPT_KIND or not _ARTIFACT_PATH.fullmatch(artifact.path):
        raise LogUnavailableError(
            f"{artifact.id:.120} is a {artifact.kind:.40} artifact at {artifact.path!r:.120}, "
            "not an attempt artifact"
        )
    directory = os.path.join(root, artifact.path)
    try:
        completed = objects.verify(directory, sync=False)
    except ArtifactCorruptError as error:
        raise ArtifactCorruptError(f"{artifact.path}: {error.message}") from None
    except OSError as error:  # unreadable (EACCES, EIO): it cannot be shown as verified
        raise ArtifactCorruptError(
            f"{artifact.path} cannot be read: {error.strerror or error}"
        ) from None
    registered = (artifact.content_sha256, artifact.manifest_sha256)
    if (completed.tree_sha256, completed.manifest_sha256) != registered:
        raise ArtifactCorruptError(
            f"{artifact.path} verifies, but is not the artifact registered as {artifact.id}"
        )
    listed = next((file for file in completed.files if file.path == name), None)
    if listed is None:
        raise LogUnavailableError(f"{artifact.path} holds no {name}")
    if last is None and listed.size_bytes > MAX_LOG_BYTES:
        raise LogUnavailableError(
            f"{artifact.path}/{name} holds {listed.size_bytes} bytes, more than "
            f"{MAX_LOG_BYTES} handed over whole"
        )
    digest, kept, size = hashlib.sha256(), bytearray(), 0
    path = os.path.join(directory, name)
    try:
        with open(os.open(path, _READ_FLAGS), "rb", buffering=0) as handle:
            while size <= listed.size_bytes and (chunk := handle.read(_CHUNK)):
                digest.update(chunk)
                size += len(chunk)
                kept += chunk
                if last is not None and len(kept) > last:
                    del kept[: len(kept) - last]
    except OSError as error:
        raise ArtifactCorruptError(
            f"{artifact.path}/{name} cannot be read: {error.strerror}"
        ) from None
    if size != listed.size_bytes or digest.hexdigest() != listed.sha256:
        raise ArtifactCorruptError(f"{artifact.path}/{name} changed after it verified")
    return bytes(kept)


def attempt_logs(root: str, artifact: Registered) -> AttemptLogs:
    """What ``explain`` and ``failures`` show of an attempt artifact's logs: their paths
    and the tail of ``stderr.log`` once the artifact verified, else why not. A log's path
    is given when a regular file is there (at the artifact's attempt address), also when
    the artifact does not verify."""

    def held(name: str) -> str | None:
        if not _ARTIFACT_PATH.fullmatch(artifact.path):
            return None  # a row naming another place: nothing there is its log
        path = os.path.join(root, artifact.path, name)
        try:
            return path if stat.S_ISREG(os.lstat(path).st_mode) else None
        except (OSError, ValueError):
            return None

    stdout, stderr = held(STDOUT_LOG), held(STDERR_LOG)
    try:
        data = read_log(root, artifact, STDERR_LOG, last=_TAIL_WINDOW)
    except RunStoreError as error:
        problem = f"{error.code}: {error.message}"[:500]
        return AttemptLogs(
            artifact_id=artifact.id, stdout=stdout, stderr=stderr, stderr_tail=None, problem=problem
        )
    return AttemptLogs(
        artifact_id=artifact.id, stdout=stdout, stderr=stderr, stderr_tail=tail(data), problem=None
    )
