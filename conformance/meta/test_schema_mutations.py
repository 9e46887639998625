"""The schema mutation table (tools/schema_mutations.toml) is current and complete.

Fast checks of the table only: no mutant is run here (``python tools/schema_mutations.py``,
the driver, does that). The table file parses and holds only the known keys; the driver
refuses a malformed one. Each mutation must still apply to exactly one place in v1.sql,
change it, and leave a schema that builds; names are unique; and every constraint family
the schema promises to guard has at least one mutation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schema_mutations as TOOL

ROOT = Path(__file__).resolve().parents[2]
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
    assert {"test_structure.py", "test_attempts.py"} <= set(chosen)
    assert {path.parent.name for path in TOOL.schema_tests(ROOT)} == {"schema"}
