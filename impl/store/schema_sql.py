"""The embedded schema: the exact text of ``schema/v1.sql`` and its version number.

Rules of this file: reads package data only; knows nothing of connections or files on disk.
"""

from __future__ import annotations

import sqlite3
from importlib import resources
from typing import Final

RUN_STORE_SCHEMA_VERSION: Final = 1
RUN_STORE_SCHEMA_SQL: Final = (
    resources.files("runstore.store.schema").joinpath("v1.sql").read_text(encoding="utf-8")
)


def schema_statements(script: str = RUN_STORE_SCHEMA_SQL) -> list[str]:
    """Split a schema script into complete statements (trigger bodies stay whole), so the
    initializer can run each through the traced executor instead of ``executescript``."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = _strip_comment_lines(pending)
            if statement:
                statements.append(statement)
            pending = ""
    if _strip_comment_lines(pending):
        raise ValueError("the schema script ends inside an unterminated statement")
    return statements


def _strip_comment_lines(text: str) -> str:
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    return "\n".join(lines).strip()
