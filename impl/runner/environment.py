"""Environment provenance: where and with what an attempt's worker ran (SPEC.md section 15.4,
"Environment provenance").

Rules of this file: two halves, neither touching a store. :func:`collect` runs on the
worker's side (the coordinator's machine for the local executor, the Dask worker process
under Dask) and returns the environment document as canonical JSON bytes, reading only
the standard library's views of that machine and interpreter; everything it reads is
bounded (files read up to a cap, every string cut, the package list capped) and every
failure to read becomes ``null``, so a hostile ``/proc`` or package name cannot fail an
attempt. The document holds nothing that changes between two orders on one worker (no
time, pid or load), so identical environments give identical bytes and one
content-addressed artifact. :class:`Environments` is the coordinator's side: it remembers,
for one run, which document bytes were already published as which artifact, so each
distinct environment is published once and later attempts only reference it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import re
import socket
import sys
import threading
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final
from typing import TypeVar

from runstore.canonical import JSON
from runstore.canonical import encode
from runstore.requests import Reference

T = TypeVar("T")

ENVIRONMENT_FILE: Final = "environment.json"
"""The one file of an environment artifact: the document's canonical JSON bytes."""

ENVIRONMENT_ROLE: Final = "environment"
"""The role an attempt references its environment artifact with."""

FORMAT: Final = "runstore-environment-1"
"""The document's ``format``: a reader knows the fields by it."""

CPUINFO_PATH: Final = "/proc/cpuinfo"
OS_RELEASE_PATHS: Final = ("/etc/os-release", "/usr/lib/os-release")

MAX_TEXT: Final = 1024
"""The most characters of any string the document holds (longer ones are cut)."""
MAX_PACKAGES: Final = 256
"""The most package names whose versions are looked up; the rest are counted only."""
MAX_PACKAGE_NAME: Final = 256
"""Longer package names are no distribution names: recorded, cut to this length, with a
null version."""
MAX_READ_BYTES: Final = 1024 * 1024
"""The most bytes read of ``/proc/cpuinfo`` or ``os-release``."""

_DISTRIBUTION_NAME: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
"""A distribution name (PEP 508): only such names are looked up."""


@functools.cache
def runstore_version() -> str:
    """This machine's installed runstore distribution version ("unknown" when runstore
    runs from a source tree that was never installed), read once per process."""
    try:
        return importlib.metadata.version("runstore")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def collect(packages: Sequence[str], *, executor: str, worker: str | None) -> bytes:
    """The environment document of this process (:func:`document`) as canonical JSON, or
    ``b""`` when none could be made (the attempt then references no environment)."""
    try:
        return encode(document(packages, executor=executor, worker=worker))
    except Exception:  # provenance must never fail the attempt it describes
        return b""


def document(
    packages: Sequence[str],
    *,
    executor: str,
    worker: str | None,
    cpuinfo: str = CPUINFO_PATH,
    os_release: Sequence[str] = OS_RELEASE_PATHS,
) -> dict[str, JSON]:
    """This machine and interpreter as the document's fields (SPEC.md section 15.4); the
    paths are parameters so that tests can point them at hostile files."""
    uname = _guarded(platform.uname)
    affinity = _guarded(lambda: len(os.sched_getaffinity(0)))
    listed = list(packages)[:MAX_PACKAGES]
    return {
        "cpu": {
            "affinity": affinity,
            "count": _guarded(os.cpu_count),
            "model": _cpu_model(cpuinfo),
        },
        "executor": _text(executor),
        "format": FORMAT,
        "host": _text(_guarded(socket.gethostname)),
        "os": {
            "machine": None if uname is None else _text(uname.machine),
            "name": _os_name(os_release),
            "release": None if uname is None else _text(uname.release),
            "system": None if uname is None else _text(uname.system),
            "version": None if uname is None else _text(uname.version),
        },
        "packages": _versions(listed),
        "packages_omitted": max(0, len(packages) - MAX_PACKAGES),
        "python": {
            "executable": _text(sys.executable),
            "implementation": _text(_implementation()),
            "version": _text(sys.version),
        },
        "runstore": _text(runstore_version()),
        "worker": _text(worker),
    }


def _guarded(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except Exception:  # a view this system does not give is null, never an error
        return None


def _text(value: object) -> str | None:
    """A string made safe for canonical JSON (no lone surrogates) and cut to
    :data:`MAX_TEXT` characters; anything but a nonempty string is None."""
    if not isinstance(value, str) or not value:
        return None
    return value.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_TEXT]


def _implementation() -> str:
    """``cpython 3.11.7`` (the release level appended when it is not ``final``)."""
    name, version = sys.implementation.name, sys.implementation.version
    level = "" if version.releaselevel == "final" else f" {version.releaselevel}"
    return f"{name} {version.major}.{version.minor}.{version.micro}{level}"


def _read_head(path: str) -> str | None:
    """The first :data:`MAX_READ_BYTES` of ``path`` as text, opened without blocking (a
    FIFO there reads as empty), or None when it cannot be read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks, left = [], MAX_READ_BYTES
        while left > 0:
            chunk = os.read(descriptor, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    return b"".join(chunks).decode("utf-8", "replace")


def _cpu_model(cpuinfo: str) -> str | None:
    """The first ``model name`` of ``cpuinfo``, else ``platform.processor()``, else None."""
    for line in (_read_head(cpuinfo) or "").splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() == "model name" and value.strip():
            return _text(value.strip())
    return _text(_guarded(platform.processor))


def _os_name(paths: Sequence[str]) -> str | None:
    """``PRETTY_NAME`` of the first readable ``os-release`` file (its quotes removed)."""
    for path in paths:
        content = _read_head(path)
        if content is None:
            continue
        for line in content.splitlines():
            key, equals, value = line.partition("=")
            if equals and key.strip() == "PRETTY_NAME":
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]
                return _text(value)
        return None
    return None


def _versions(names: Sequence[str]) -> dict[str, JSON]:
    """Each name's installed version, None when it is not installed, is no distribution
    name (or is longer than :data:`MAX_PACKAGE_NAME`), or its metadata cannot be read.
    A name that cuts to one already listed keeps the first entry."""
    versions: dict[str, JSON] = {}
    for name in names:
        key = _text(name[:MAX_PACKAGE_NAME]) if isinstance(name, str) else None
        if key is None or key in versions:
            continue
        version = None
        if len(name) <= MAX_PACKAGE_NAME and _DISTRIBUTION_NAME.fullmatch(name):
            version = _text(_guarded(functools.partial(importlib.metadata.version, name)))
        versions[key] = version
    return versions


class Environments:
    """The environment artifacts one run has published, by the SHA-256 of the document's
    bytes (the coordinator owns one for the length of a run)."""

    def __init__(self) -> None:
        self._published: dict[str, str] = {}
        self._lock = threading.Lock()
        """Held while a document is looked up and published: finisher threads share the
        run's environments, and each distinct one is published once."""

    @property
    def published(self) -> int:
        """How many distinct documents this run has published (or found published)."""
        return len(self._published)

    def references(self, document: bytes, publish: Callable[[bytes], str]) -> list[Reference]:
        """The ``environment`` reference of ``document``: none for ``b""``; the artifact
        remembered for these bytes; else ``publish(document)``'s artifact id, remembered
        once it returned (a publication that raised is tried again by the next attempt)."""
        if not document:
            return []
        digest = hashlib.sha256(document).hexdigest()
        with self._lock:
            artifact_id = self._published.get(digest)
            if artifact_id is None:
                artifact_id = publish(document)
                self._published[digest] = artifact_id
        return [Reference(ENVIRONMENT_ROLE, artifact_id)]
