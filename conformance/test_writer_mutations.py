"""The writer mutant table (tools/writer_mutations.toml) is current and complete.

Fast checks of the table only: no mutant's suite is run here (``python
tools/writer_mutations.py``, the driver, does that). The table file parses and holds only the
known keys; the driver refuses a malformed one. Each mutant must still apply to exactly one
place in its file under impl/, change it, and leave a module that compiles; names are
unique; every family is used; and at least 40 mutants are expected to be killed (not marked
equivalent). The driver's import override is checked too: a subprocess run as the mutants'
are imports the package from the copy, and a broken copy fails.
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
TABLE_PATH = ROOT / "tools" / "writer_mutations.toml"
# The table file's layout, listed here independently of the driver.
MUTANT_KEYS = {"name", "family", "file", "old", "new"}
OPTIONAL_KEYS = {"equivalent"}

# Listed here independently of the tool, so dropping a family from the table fails a test.
PROMISED_FAMILIES = {
    "guard_checks",
    "check_order",
    "clock_clamping",
    "optimistic_concurrency",
    "lease_arithmetic",
    "retry_authorization",
    "registration",
    "artifacts",
    "events",
}
# The writer and the model share these modules, so lockstep cannot see a mutant in them.
SHARED_MODULES = {"impl/rules.py", "impl/edges.py", "impl/payloads.py", "impl/shapes.py"}


def load_tool() -> ModuleType:
    path = ROOT / "tools" / "writer_mutations.py"
    spec = importlib.util.spec_from_file_location("writer_mutations", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


TOOL = load_tool()
MUTANTS = TOOL.MUTANTS
NAMES = [mutant.name for mutant in MUTANTS]


def source(mutant: Any) -> str:
    return (ROOT / mutant.file).read_text(encoding="utf-8")


@pytest.mark.parametrize("mutant", MUTANTS, ids=NAMES)
def test_old_text_occurs_exactly_once(mutant: Any) -> None:
    assert source(mutant).count(mutant.old) == 1


@pytest.mark.parametrize("mutant", MUTANTS, ids=NAMES)
def test_the_mutant_changes_its_file_and_still_compiles(mutant: Any) -> None:
    mutated = mutant.apply(source(mutant))
    assert mutant.old != mutant.new
    assert mutated != source(mutant)
    compile(mutated, mutant.file, "exec")
    assert TOOL.stale_reason(mutant, ROOT) is None


def test_names_are_unique() -> None:
    assert len(NAMES) == len(set(NAMES))


def test_every_family_is_used_and_enough_mutants_must_die() -> None:
    families = {mutant.family for mutant in MUTANTS}
    assert set(TOOL.REQUIRED_FAMILIES) == PROMISED_FAMILIES
    assert families == set(TOOL.FAMILIES)
    assert len(MUTANTS) >= 45
    assert sum(mutant.equivalent is None for mutant in MUTANTS) >= 40
    assert {mutant.file for mutant in MUTANTS} >= SHARED_MODULES


def test_equivalent_mutants_say_why() -> None:
    reasons = {m.name: m.equivalent for m in MUTANTS if m.equivalent is not None}
    assert all(len(reason.split()) >= 5 for reason in reasons.values()), reasons


def test_the_table_file_parses_and_holds_only_the_known_keys() -> None:
    data = tomllib.loads(TABLE_PATH.read_text(encoding="utf-8"))
    assert set(data) == {"families", "mutant"}
    assert set(data["families"]) == {"required", "extra"}
    assert tuple(data["families"]["required"]) == TOOL.REQUIRED_FAMILIES
    assert (*data["families"]["required"], *data["families"]["extra"]) == TOOL.FAMILIES
    entries = data["mutant"]
    assert isinstance(entries, list)
    for entry in entries:
        assert MUTANT_KEYS <= set(entry) <= MUTANT_KEYS | OPTIONAL_KEYS, entry.get("name")
        assert all(isinstance(value, str) for value in entry.values()), entry["name"]
    # The driver's table is the file's, entry by entry and in the file's order.
    keys = ("name", "family", "file", "old", "new")
    assert [(*(e[k] for k in keys), e.get("equivalent")) for e in entries] == [
        (m.name, m.family, m.file, m.old, m.new, m.equivalent) for m in MUTANTS
    ]
    assert TOOL.TABLE == TABLE_PATH


def test_the_suite_runs_writer_tests_first_and_never_this_file() -> None:
    chosen = [path.name for path in TOOL.judged_tests(ROOT)]
    assert "test_writer_mutations.py" not in chosen
    assert chosen[0] == "test_rules.py"
    assert chosen.index("test_writer_guards.py") < chosen.index("test_stateful.py")
    assert chosen.index("test_stateful.py") < chosen.index("test_schema_attempts.py")
    everything = {p.name for p in (ROOT / "conformance").glob("test_*.py")}
    assert set(chosen) == everything - {"test_writer_mutations.py"}


def test_the_snapshot_holds_what_the_suite_reads(tmp_path: Path) -> None:
    tree = TOOL.snapshot(ROOT, tmp_path / "tree")
    names = {path.name for path in tree.iterdir()}
    assert {"impl", "model", "crashsim", "conformance", "vectors", "tools"} <= names
    assert {"SPEC.md", "pyproject.toml"} <= names
    assert not {".git", ".venv"} & names
    assert not list(tree.rglob("__pycache__"))
    assert (tree / "impl" / "rules.py").read_bytes() == (ROOT / "impl" / "rules.py").read_bytes()


def test_a_subprocess_imports_the_copy_and_a_broken_copy_fails(tmp_path: Path) -> None:
    tree = TOOL.snapshot(ROOT, tmp_path / "tree")
    assert TOOL.isolation_problem(tree, tmp_path / "probe") is None
    shim = tmp_path / "probe" / "shim"
    assert (shim / "runstore" / "rules.py").resolve() == (tree / "impl" / "rules.py").resolve()
    assert (shim / "runstore" / "model").resolve() == (tree / "model").resolve()


def test_the_isolation_check_notices_an_override_that_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = TOOL.snapshot(ROOT, tmp_path / "tree")

    def no_shim(_: Path, shim: Path) -> Path:  # the editable install's finder wins
        shim.mkdir(parents=True)
        return shim

    monkeypatch.setattr(TOOL, "build_shim", no_shim)
    problem = TOOL.isolation_problem(tree, tmp_path / "probe")
    assert problem is not None and problem.startswith("imported from outside the copy")
    assert str(ROOT / "impl") in problem


@pytest.mark.parametrize(
    ("returncode", "output", "equivalent", "status"),
    [
        pytest.param(0, "", None, "SURVIVED", id="survived"),
        pytest.param(0, "", "same behaviour", "EQUIVALENT", id="equivalent"),
        pytest.param(1, "FAILED conformance/test_rules.py::t - x", None, "killed", id="killed"),
        pytest.param(-1, "timed out after 900 s", None, "killed", id="timeout"),
        pytest.param(4, "usage error", None, "ERROR", id="error"),
    ],
)
def test_the_verdicts(returncode: int, output: str, equivalent: str | None, status: str) -> None:
    mutant = TOOL.Mutant("m", "events", "impl/store/events.py", "a", "b", equivalent)
    outcome = TOOL.judge(mutant, returncode, output)
    assert outcome.status == status
    if status == "killed":
        assert outcome.detail in ("test_rules.py::t", "timed out after 900 s")


def test_a_killed_equivalent_mutant_is_mismarked() -> None:
    mutant = TOOL.Mutant("m", "events", "impl/store/events.py", "a", "b", "claimed equivalent")
    outcome = TOOL.judge(mutant, 1, "FAILED conformance/test_rules.py::t - x")
    assert outcome.mismarked and "drop the mark" in outcome.detail


VALID_TABLE = """\
[families]
required = ["events"]
extra = ["edges"]

[[mutant]]
name = "no_claim"
family = "events"
file = "impl/payloads.py"
old = '''payload["claim"] = claim'''
new = "pass"
"""
OLD_LINE = "old = '''payload[\"claim\"] = claim'''\n"


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        pytest.param("", "", None, id="valid"),
        pytest.param('new = "pass"\n', "", "#1 ('no_claim'): missing key(s) new", id="missing"),
        pytest.param('new = "pass"\n', 'new = ""\nnwe = ""\n', "unknown key(s) nwe", id="unknown"),
        pytest.param('"events"\nfile', '"event"\nfile', "unknown family 'event'", id="family"),
        pytest.param('new = "pass"', "new = 0", "new must be string(s)", id="not_a_string"),
        pytest.param('"no_claim"', "no_claim", "not a valid TOML", id="toml"),
        pytest.param(OLD_LINE, "old = ''''''\n", "old is empty", id="empty_old"),
        pytest.param('"impl/payloads.py"', '"model/state.py"', "under impl/", id="file"),
        pytest.param('new = "pass"', 'new = "pass"\nequivalent = " "', "the reason", id="why"),
        pytest.param('extra = ["edges"]', 'extra = ["events"]', "lists events more", id="twice"),
        pytest.param('"no_claim"', '"No claim"', "snake_case", id="name"),
        pytest.param('["events"]', "[]", "required is empty", id="no_required"),
        pytest.param("[[mutant]]", "[x]\n[[mutant]]", "unknown key(s) x", id="top_key"),
        pytest.param("[[mutant]]", "[mutant]", "non-empty array of tables", id="no_array"),
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
        assert [(m.name, m.file, m.equivalent) for m in table.mutants] == [
            ("no_claim", "impl/payloads.py", None)
        ]
        assert table.families == ("events", "edges")
        return
    with pytest.raises(TOOL.TableError, match=re.escape(complaint)) as raised:
        TOOL.load_table(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_a_name_is_taken_once() -> None:
    entry = {"name": "a", "family": "events", "file": "impl/store/events.py", "old": "x", "new": ""}
    data = {"families": {"required": ["events"], "extra": []}, "mutant": [entry, entry]}
    with pytest.raises(TOOL.TableError, match=re.escape("'a'): the name is taken by #1")):
        TOOL.parse_table(data)
