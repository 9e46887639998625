"""Writer spec tests: what the SQL seam (``runstore.sql``) refuses on its own.

- A parameter holding a lone surrogate has no UTF-8 form, so SQLite cannot bind it: the
  statement never runs and the refusal is ``invalid_record`` (SPEC.md section 9; section 4
  forbids lone surrogates), through ``iterate`` as through ``execute``
  (``test_lone_surrogates.py`` pins the public entry points).
- Every required connection setting is read back whenever the settings are verified
  (SPEC.md section 8, Opening step 4): a setting that no longer reads back as required is
  ``connection_settings``, whichever setting it is, not only the journal mode.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pytest
from runstore import RunStoreError
from runstore import sql

LONE = "\udc80"


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A store-style connection (settings applied and read back) in WAL mode."""
    connection = sql.connect(str(tmp_path / "run.sqlite3"))
    sql.enable_wal(connection)
    yield connection
    connection.close()


@pytest.mark.parametrize(
    "read",
    [sql.execute, lambda c, q, p: list(sql.iterate(c, q, p))],
    ids=["execute", "iterate"],
)
def test_a_parameter_with_a_lone_surrogate_is_an_invalid_record(
    connection: sqlite3.Connection, read: Callable[..., object]
) -> None:
    """SPEC.md sections 4 and 9: ``invalid_record`` before the statement runs, never a raw
    UnicodeEncodeError."""
    with pytest.raises(RunStoreError) as refused:
        read(connection, "SELECT ?", (LONE,))
    assert refused.value.code == "invalid_record"


# A value each required setting may be given that does not read back as required.
WRONG = [
    ("foreign_keys", "OFF"),
    ("recursive_triggers", "OFF"),
    ("synchronous", "NORMAL"),
    ("locking_mode", "EXCLUSIVE"),
    ("fullfsync", "OFF"),
    ("checkpoint_fullfsync", "OFF"),
    ("busy_timeout", "0"),
]


def test_the_table_covers_every_required_setting() -> None:
    assert [name for name, _ in WRONG] == [name for name, _, _ in sql._LOCAL_SETTINGS]


@pytest.mark.parametrize(("name", "value"), WRONG)
def test_a_setting_that_no_longer_reads_back_is_a_connection_settings_refusal(
    connection: sqlite3.Connection, name: str, value: str
) -> None:
    """SPEC.md section 8, step 4: the verification reads back every required setting, and
    one changed since the connection was opened is ``connection_settings``."""
    sql.verify_settings(connection)
    sql.execute(connection, f"PRAGMA {name} = {value}")
    with pytest.raises(RunStoreError) as refused:
        sql.verify_settings(connection)
    assert refused.value.code == "connection_settings"
    assert name in refused.value.message
