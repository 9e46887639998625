"""The schema mutation table (tools/schema_mutations.toml) is current and complete.

Fast checks of the table only: no mutant is run here (``python tools/schema_mutations.py``,
the driver, does that). The table file parses and holds only the known keys; the driver
refuses a malformed one. Each mutation must still apply to exactly one place in v1.sql,
change it, and leave a schema that builds; names are unique; and every constraint family
the schema promises to guard has at least one mutation.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_TEXT = (ROOT / "impl" / "store" / "schema" / "v1.sql").read_text(encoding="utf-8")
TABLE_PATH = ROOT / "tools" / "schema_mutations.toml"
# The table file's layout, listed here independently of the driver.
MUTATION_KEYS = {"name", "family", "old", "new"}

# Listed here independently of the tool, so dropping a family from the table fails a test.
PROMISED_FAMILIES = {
    "strict_tables",
    "schema_version",
    "applicability",
    "resolved_membership",
    "distinct_retries",
    "transaction_rollback",
    "transition_history",
    "event_linkage",
    "terminal_outcomes",
    "claim_ownership",
    "recovery_ordering",
    "immutable_selections",
    "retained_checkpoints",
    "artifact_kinds",
    "normalized_paths",
    "leases",
    "one_accepted_attempt_per_slot",
}


def load_tool() -> ModuleType:
    path = ROOT / "tools" / "schema_mutations.py"
    spec = importlib.util.spec_from_file_location("schema_mutations", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


TOOL = load_tool()
MUTATIONS = TOOL.MUTATIONS
NAMES = [mutation.name for mutation in MUTATIONS]


@pytest.mark.parametrize("mutation", MUTATIONS, ids=NAMES)
def test_old_text_occurs_exactly_once(mutation: Any) -> None:
    assert SCHEMA_TEXT.count(mutation.old) == 1


@pytest.mark.parametrize("mutation", MUTATIONS, ids=NAMES)
def test_mutation_changes_the_schema(mutation: Any) -> None:
    mutated = mutation.apply(SCHEMA_TEXT)
    assert mutation.old != mutation.new
    assert mutated != SCHEMA_TEXT


def test_every_mutant_still_builds() -> None:
    """A mutant that no longer parses (or names a foreign key's parent columns that are no
    key) would be killed for the wrong reason."""
    broken = {
        mutation.name: error
        for mutation in MUTATIONS
        if (error := TOOL.builds(mutation.apply(SCHEMA_TEXT))) is not None
    }
    assert broken == {}
    assert TOOL.builds(SCHEMA_TEXT) is None


def test_names_are_unique() -> None:
    assert len(NAMES) == len(set(NAMES))


def test_every_promised_family_is_covered() -> None:
    families = {mutation.family for mutation in MUTATIONS}
    assert set(TOOL.REQUIRED_FAMILIES) == PROMISED_FAMILIES
    assert families >= PROMISED_FAMILIES
    assert families <= set(TOOL.FAMILIES)
    assert len(MUTATIONS) >= 50


def test_the_tool_judges_by_the_schema_tests_only() -> None:
    chosen = [path.name for path in TOOL.schema_tests(ROOT)]
    assert "test_schema_mutations.py" not in chosen
    assert chosen == sorted(chosen)
    assert {"test_schema_structure.py", "test_schema_attempts.py"} <= set(chosen)


def test_the_table_file_parses_and_holds_only_the_known_keys() -> None:
    data = tomllib.loads(TABLE_PATH.read_text(encoding="utf-8"))
    assert set(data) == {"families", "mutation"}
    assert set(data["families"]) == {"required", "extra"}
    assert tuple(data["families"]["required"]) == TOOL.REQUIRED_FAMILIES
    assert (*data["families"]["required"], *data["families"]["extra"]) == TOOL.FAMILIES
    entries = data["mutation"]
    assert isinstance(entries, list)
    for entry in entries:
        assert set(entry) == MUTATION_KEYS, entry.get("name")
        assert all(isinstance(entry[key], str) for key in MUTATION_KEYS), entry["name"]
    # The driver's table is the file's, entry by entry and in the file's order.
    assert [(e["name"], e["family"], e["old"], e["new"]) for e in entries] == [
        (m.name, m.family, m.old, m.new) for m in MUTATIONS
    ]
    assert TOOL.TABLE == TABLE_PATH


VALID_TABLE = """\
[families]
required = ["leases"]
extra = ["ranges"]

[[mutation]]
name = "lease_purpose_open"
family = "leases"
old = '''CHECK (purpose IN ('reservation', 'finalization', 'staging'))'''
new = ""
"""
OLD_LINE = "old = '''CHECK (purpose IN ('reservation', 'finalization', 'staging'))'''\n"


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        pytest.param("", "", None, id="valid"),
        pytest.param(
            'new = ""\n', "", "#1 ('lease_purpose_open'): missing key(s) new", id="missing"
        ),
        pytest.param('new = ""\n', 'new = ""\nnwe = ""\n', "unknown key(s) nwe", id="unknown"),
        pytest.param('"leases"\nold', '"lease"\nold', "unknown family 'lease'", id="family"),
        pytest.param('new = ""', "new = 0", "new must be string(s)", id="not_a_string"),
        pytest.param('"lease_purpose_open"', "lease_purpose_open", "not a valid TOML", id="toml"),
        pytest.param(OLD_LINE, "old = ''''''\n", "old is empty", id="empty_old"),
        pytest.param('extra = ["ranges"]', 'extra = ["leases"]', "lists leases more", id="twice"),
        pytest.param('"lease_purpose_open"', '"Lease purpose"', "snake_case", id="name"),
        pytest.param("extra", "other = []\nextra", "unknown key(s) other", id="families_key"),
        pytest.param('["leases"]', "[]", "required is empty", id="no_required"),
        pytest.param("[[mutation]]", "[x]\n[[mutation]]", "unknown key(s) x", id="top_key"),
        pytest.param("[[mutation]]", "[mutation]", "non-empty array of tables", id="no_array"),
    ],
)
def test_a_malformed_table_file_is_a_clear_error(
    tmp_path: Path, old: str, new: str, complaint: str | None
) -> None:
    assert old in VALID_TABLE
    path = tmp_path / "table.toml"
    path.write_text(VALID_TABLE.replace(old, new, 1), encoding="utf-8")
    if complaint is None:
        table = TOOL.load_table(path)
        assert [m.name for m in table.mutations] == ["lease_purpose_open"]
        assert table.required_families == ("leases",)
        assert table.families == ("leases", "ranges")
        return
    with pytest.raises(TOOL.TableError, match=re.escape(complaint)) as raised:
        TOOL.load_table(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_a_name_is_taken_once() -> None:
    entry = {"name": "a", "family": "leases", "old": "x", "new": ""}
    data = {"families": {"required": ["leases"], "extra": []}, "mutation": [entry, entry]}
    with pytest.raises(TOOL.TableError, match=re.escape("'a'): the name is taken by #1")):
        TOOL.parse_table(data)
