"""How ``validate``'s checks read the raw copy: streamed rows and lenient text.

Rules of this file: reads only. Every query is set-based and streamed from a cursor
(:func:`stream`), so time grows linearly with the store and memory stays bounded; grouping
and neighbour comparisons happen in SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any
from typing import Final

from runstore import sql
from runstore.enums import TERMINAL_STATES

Row = tuple[Any, ...]

TERMINAL_VALUES: Final = frozenset(state.value for state in TERMINAL_STATES)
TERMINAL_SQL: Final = "('accepted', 'censored', 'superseded', 'failed')"


def stream(
    connection: sqlite3.Connection, query: str, params: Sequence[object] = ()
) -> Iterator[Row]:
    """The rows of ``query`` one at a time from a cursor. :func:`runstore.sql.execute`
    materializes a whole result, which a 100,000-attempt store must not; the private copy
    read here needs no tracing or fault injection."""
    try:
        cursor = connection.execute(query, params)
    except UnicodeDecodeError as error:
        raise sql.undecodable(error) from None
    try:
        yield from cursor
    except UnicodeDecodeError as error:
        raise sql.undecodable(error) from None
    finally:
        cursor.close()


def lenient_text(data: bytes) -> str:
    """Column text that is not UTF-8 still reads (and then fails its checks)."""
    return data.decode("utf-8", "surrogateescape")
