"""How a file's bytes are read (SPEC.md 12.4, "Completion" step 2 and "Each byte is read
once"; the rules of :mod:`runstore.store.publication.file_pass`):

- each ``read`` asks for exactly what remains of the scanned size, one 1 MiB chunk at
  most, and a file is read up to that size and no further (an empty file is not read at
  all);
- a read that returns fewer bytes than asked (POSIX allows it) is continued with another
  read for the rest, never taken for the end of the file;
- a file sorting after ``manifest.json`` is read once when it fits the 64 MiB budget,
  whatever its own size, larger than one chunk included.

The reads are observed by wrapping ``os.read`` around :func:`file_pass.read_file`; the 1 MiB
here is SPEC's figure, not the module's constant.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore.store.publication import file_pass
from runstore.store.publication import objects
from runstore.store.publication.inventory import InventoryFile

from conformance.publication.test_objects import RESERVED
from conformance.publication.test_objects import populate

ONE_MIB = 1 << 20
"""SPEC.md 12.4: files are read in 1 MiB chunks."""
SIZES = [0, 1, 1000, ONE_MIB - 1, ONE_MIB, ONE_MIB + 1, 2 * ONE_MIB + 5]
SHORT = 4096
"""The most bytes a read returns in the short-read cases."""


def _content(size: int) -> bytes:
    return bytes(index % 251 for index in range(size))


def _expected_requests(size: int, short: int | None) -> list[int]:
    """The reads SPEC's rule makes: each asks for what remains, at most 1 MiB, and gets
    all of it, or at most ``short`` bytes."""
    requests, remaining = [], size
    while remaining:
        asked = min(ONE_MIB, remaining)
        requests.append(asked)
        remaining -= asked if short is None else min(asked, short)
    return requests


@pytest.fixture
def recorded_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[int], list[int]]]:
    """``(requests, cap)``: every ``os.read`` count asked while the test runs, and a
    one-item list the test may fill with the most bytes a read returns."""
    requests: list[int] = []
    cap: list[int] = []
    real_read = os.read

    def read(fd: int, count: int) -> bytes:
        requests.append(count)
        return real_read(fd, min([count, *cap]))

    monkeypatch.setattr(os, "read", read)
    yield requests, cap


@pytest.mark.parametrize("short", [None, SHORT], ids=["full-reads", "short-reads"])
@pytest.mark.parametrize("size", SIZES)
def test_each_read_asks_for_what_remains_up_to_one_mib_and_short_reads_continue(
    tmp_path: Path,
    recorded_reads: tuple[list[int], list[int]],
    size: int,
    short: int | None,
) -> None:
    """SPEC.md 12.4 step 2: exactly the scanned size is read, in 1 MiB chunks; a short
    read is followed by a read for the rest, and the file's digest and kept bytes are its
    whole content."""
    requests, cap = recorded_reads
    data = _content(size)
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    if short is not None:
        cap.append(short)
    digest, stamp, kept = file_pass.read_file(
        str(path),
        InventoryFile(path="file.bin", size=size, executable=False),
        sync=False,
        keep=True,
    )
    assert requests == _expected_requests(size, short)
    assert digest == hashlib.sha256(data).hexdigest()
    assert kept == data
    assert stamp[1] == size


def test_a_late_file_larger_than_one_chunk_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.4, "Each byte is read once": a file sorting after ``manifest.json`` keeps
    its bytes from its one read while the late files fit 64 MiB; only a file beyond that
    budget is read a second time. A late file of a few MiB is read once, and the object
    it completes verifies."""
    reads = _count_reads(monkeypatch)
    populate(
        tmp_path,
        {"alpha": b"a", "zeta/big": _content(2 * ONE_MIB + 5), "zeta/one": _content(ONE_MIB)},
    )
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    completed = objects.complete(str(tmp_path), inventory, {})
    assert reads == ["alpha", "zeta/big", "zeta/one"]
    monkeypatch.undo()
    assert objects.verify(str(tmp_path), sync=False) == completed


def test_late_files_are_kept_up_to_exactly_64_mib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC.md 12.4, "Each byte is read once": late files are kept from their one read up
    to 64 MiB for all of them; a late file that exactly fills the budget is kept, and only
    the one beyond it is read a second time."""
    reads = _count_reads(monkeypatch)
    populate(tmp_path, {"zeta/a": b"a" * (64 * ONE_MIB), "zeta/b": b"b"})
    inventory = objects.scan(str(tmp_path), reserved=RESERVED)
    objects.complete(str(tmp_path), inventory, {})
    assert reads == ["zeta/a", "zeta/b", "zeta/b"]


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``objects.read_file`` is asked to read from now on, in order."""
    reads: list[str] = []
    real = objects.read_file

    def counting(absolute: str, file: InventoryFile, **options: object) -> object:
        reads.append(file.path)
        return real(absolute, file, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(objects, "read_file", counting)
    return reads
