"""Schema v1 is frozen (SPEC.md section 1): its statements and what a store holds are pinned
by digest, a store made with it and committed as a fixture still opens and checks, and a
store from before the freeze is refused.

Stores exist that were made with schema v1; opening compares a database's catalogue with
the embedded schema (section 8), so any change to ``schema/v1.sql`` that reaches the
catalogue (an index, a trigger, a column, even a reformatted statement, since SQLite keeps
each statement's text) makes every existing store ``schema_mismatch``. That happened once
(commit 6534e75 changed v1 in place; stores made at a5e921a are refused), and these tests
keep it from happening again: a change must be a new ``user_version`` with a migration.

The fixture ``conformance/fixtures/store-v1.tar.gz`` is a real two-slot store made by
``runstore run`` (``tools/make_v1_fixture.py`` says how; the tests use the committed file
and never rebuild it). ``conformance/fixtures/schema-v1-a5e921a.sql`` is schema v1 as it
was at commit a5e921a, before the freeze.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tarfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from runstore import RunStore
from runstore.errors import RunStoreError
from runstore.inspection.validate import validate_store
from runstore.store.schema_sql import RUN_STORE_SCHEMA_VERSION
from runstore.store.schema_sql import schema_statements

from conformance.cli.world import runstore
from conformance.closed_store import reading

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORE_FIXTURE = FIXTURES / "store-v1.tar.gz"
PRE_FREEZE_SCHEMA = FIXTURES / "schema-v1-a5e921a.sql"

STATEMENTS_SHA256 = "2953f83ef28d67a40e4ab9b071cc89bacfec590aaecbab26db2fbf5b9b5241af"
"""sha256 of ``"\\n;\\n".join(schema_statements())``: the embedded script's 61 statements
with their comment lines stripped (the text the initializer executes)."""
STATEMENT_COUNT = 61
CATALOGUE_SHA256 = "5f907038567a3a5f5d495b43954c953dc2447e8f19ad827f68f981a61e04dde4"
"""sha256 of a store's catalogue, :func:`catalogue_rows` joined the same way: the 93 rows
of ``sqlite_schema`` (type, name, tbl_name, sql) of a store schema v1 made."""
CATALOGUE_ROWS = 93

FROZEN = (
    "schema v1 is frozen (SPEC.md section 1): stores made with it exist, and opening refuses "
    "any database whose catalogue differs from the embedded schema (schema_mismatch). Do not "
    "edit schema/v1.sql or change this digest. A change needs a new user_version "
    f"(RUN_STORE_SCHEMA_VERSION {RUN_STORE_SCHEMA_VERSION + 1}), a transactional migration "
    "from v1 (one BEGIN IMMEDIATE: rewrite, then set user_version), and a test of that "
    "migration on the committed v1 fixture conformance/fixtures/store-v1.tar.gz."
)


def digest(parts: Sequence[str]) -> str:
    """The fingerprint both pins use: sha256 of the parts joined by a line holding ``;``."""
    return hashlib.sha256("\n;\n".join(parts).encode("utf-8")).hexdigest()


def catalogue_rows(connection: sqlite3.Connection) -> list[str]:
    """The catalogue normalized: every ``sqlite_schema`` row's (type, name, tbl_name, sql)
    as a JSON array (``sql`` is null for automatic indexes), in (type, name) order. The
    root pages are left out: they say where a table lives in the file, not what it is."""
    rows = connection.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name"
    ).fetchall()
    return [json.dumps(list(row), ensure_ascii=False) for row in rows]


def extracted(tmp_path: Path) -> Path:
    """The committed v1 fixture unpacked under ``tmp_path``; returns its store root."""
    with tarfile.open(STORE_FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "store"


# --- the pins ---------------------------------------------------------------------------


def test_the_embedded_schema_v1_statements_are_frozen() -> None:
    statements = schema_statements()
    assert RUN_STORE_SCHEMA_VERSION == 1, FROZEN
    assert len(statements) == STATEMENT_COUNT, FROZEN
    assert digest(statements) == STATEMENTS_SHA256, FROZEN


def test_a_new_store_holds_the_frozen_catalogue(tmp_path: Path) -> None:
    RunStore.open(str(tmp_path)).close()
    with reading(tmp_path) as connection:
        rows = catalogue_rows(connection)
        (version,) = connection.execute("PRAGMA user_version").fetchone()
    assert version == 1, FROZEN
    assert len(rows) == CATALOGUE_ROWS, FROZEN
    assert digest(rows) == CATALOGUE_SHA256, FROZEN


# --- the committed v1 store -------------------------------------------------------------


def test_the_committed_v1_store_holds_the_frozen_catalogue(tmp_path: Path) -> None:
    root = extracted(tmp_path)
    assert not (root / "run.sqlite3-wal").exists()
    with reading(root) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
        assert digest(catalogue_rows(connection)) == CATALOGUE_SHA256, FROZEN


def test_the_committed_v1_store_opens_validates_audits_and_shows_its_results(
    tmp_path: Path,
) -> None:
    root = extracted(tmp_path)
    validated = runstore("validate", "--store", str(root), "--json")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert json.loads(validated.stdout)["ok"] is True
    audited = runstore("audit", "--store", str(root), "--json")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert json.loads(audited.stdout)["ok"] is True
    shown = runstore("status", "--store", str(root), "--json", "--slots")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    slots = json.loads(shown.stdout)["slots"]
    assert sorted((s["logical_spec_id"], s["state"], s["metrics"]) for s in slots) == [
        ("frozen/writer/large", "accepted", {"size": "2"}),
        ("frozen/writer/small", "accepted", {"size": "1"}),
    ]
    # Last, since opening sets the journal mode and may leave a WAL: the current code
    # opens the store (its catalogue verifies against the embedded schema).
    with RunStore.open(str(root)):
        pass


# --- a store from before the freeze -----------------------------------------------------


def test_a_store_from_before_the_freeze_is_refused_not_migrated(tmp_path: Path) -> None:
    """A database holding schema v1 as commit a5e921a created it (before a new index, an
    event kind, NOT NULL columns and 9 triggers were added in place) is refused with
    ``schema_mismatch``, and ``validate`` reports the same; nothing migrates it."""
    statements = schema_statements(PRE_FREEZE_SCHEMA.read_text(encoding="utf-8"))
    assert digest(statements) != STATEMENTS_SHA256
    connection = sqlite3.connect(tmp_path / "run.sqlite3", isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("BEGIN IMMEDIATE")
        for statement in statements:
            connection.execute(statement)
        connection.execute("COMMIT")
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
        assert digest(catalogue_rows(connection)) != CATALOGUE_SHA256
    finally:
        connection.close()
    before = (tmp_path / "run.sqlite3").read_bytes()
    with pytest.raises(RunStoreError) as refused:
        RunStore.open(str(tmp_path))
    assert refused.value.code == "schema_mismatch"
    assert (tmp_path / "run.sqlite3").read_bytes() == before
    report = validate_store(str(tmp_path))
    assert [f.code for f in report.findings][:1] == ["schema_mismatch"], report.findings
