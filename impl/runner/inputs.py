"""Reading an attempt's input files just before its worker starts (SPEC.md section 15.3).

Rules of this file: each file is opened without blocking and checked, in this order, to be
a regular file, to have its registered size (before a byte is read) and its registered
SHA-256 (hashed while read in :data:`INPUT_CHUNK_BYTES` pieces); the first that fails is
``input_changed``, a :class:`~runstore.runner.worker_result.Failure`, never an exception.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence

from runstore.canonical import JSON
from runstore.runner.campaign import InputFile
from runstore.runner.worker_result import INPUT_CHANGED
from runstore.runner.worker_result import Failure
from runstore.runner.worker_result import text

INPUT_CHUNK_BYTES = 1024 * 1024


def read_inputs(files: Sequence[InputFile]) -> tuple[tuple[str, bytes], ...] | Failure:
    """Each file's bytes, or ``input_changed`` naming the first that is missing, is no
    longer a regular file (opened without blocking, so a FIFO swapped in is refused, not
    waited on), no longer has its registered size (refused before anything is read) or
    differs from the digest the run was registered with (hashed while read)."""
    read: list[tuple[str, bytes]] = []
    for file in files:
        data = _read_input(file)
        if isinstance(data, Failure):
            return data
        read.append((file.name, data))
    return tuple(read)


def _read_input(file: InputFile) -> bytes | Failure:
    def changed(**details: JSON) -> Failure:
        return Failure(code=INPUT_CHANGED, details={"file": file.name, **details})

    try:
        descriptor = os.open(file.source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        return changed(error=text(str(error)))
    with open(descriptor, "rb", buffering=0) as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return changed(error="no longer a regular file")
        if info.st_size != file.size:
            return changed(size=info.st_size, registered_size=file.size)
        digest, data = hashlib.sha256(), bytearray()
        while len(data) <= file.size:
            chunk = handle.read(min(INPUT_CHUNK_BYTES, file.size + 1 - len(data)))
            if not chunk:
                break
            digest.update(chunk)
            data += chunk
    if len(data) != file.size or digest.hexdigest() != file.sha256:
        return changed(sha256=file.sha256)
    return bytes(data)
