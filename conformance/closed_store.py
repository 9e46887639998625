"""Reading a store as every test must: through a fresh read-only connection on its
database file, never through the connection that wrote it (CONVENTIONS 8)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATABASE = "run.sqlite3"


def database(path: str | os.PathLike[str]) -> Path:
    """The database file of ``path``: a store root (a directory), or the file itself."""
    given = Path(path)
    return given / DATABASE if given.is_dir() else given


@contextlib.contextmanager
def reading(path: str | os.PathLike[str]) -> Iterator[sqlite3.Connection]:
    """A new read-only connection on ``path``'s database (:func:`database`), closed after."""
    connection = sqlite3.connect(f"file:{database(path)}?mode=ro", uri=True)
    try:
        yield connection
    finally:
        connection.close()


def rows(
    path: str | os.PathLike[str], query: str, params: Sequence[Any] = ()
) -> list[tuple[Any, ...]]:
    """The rows of ``query`` on ``path``'s database, as tuples, read through
    :func:`reading`."""
    with reading(path) as connection:
        return [tuple(row) for row in connection.execute(query, params)]
