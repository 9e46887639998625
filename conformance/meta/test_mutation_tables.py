"""The mutation tables' one loader (``tools/mutation_table.py``), through both drivers
(``tools/writer_mutations.py``, ``tools/schema_mutations.py``): every refusal of a
malformed table file, the verdict on one pytest run of a mutant, and that it is the only
loader (both drivers build theirs from it; no other tool under tools/ parses a table; this
test's own raw parse is the independent check of what the loader builds)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from types import ModuleType

import mutation_table
import pytest
import schema_mutations
import writer_mutations

# The same small table in each driver's layout (the writer's entries also name a file).
TABLE = """\
[families]
required = ["first"]
extra = ["second"]

[[ENTRY]]
name = "entry_one"
family = "first"
FILEold = '''x = 1'''
new = "pass"
"""
DRIVERS = {
    "writer": (writer_mutations, "mutant", 'file = "impl/payloads.py"\n'),
    "schema": (schema_mutations, "mutation", ""),
}
TOOLS = Path(__file__).resolve().parents[2] / "tools"
# Each committed table's entry keys (required, optional), listed here independently of the
# drivers.
KEYS = {
    "writer": ({"name", "family", "file", "old", "new"}, {"equivalent"}),
    "schema": ({"name", "family", "old", "new"}, set()),
}


def table_text(driver: str) -> str:
    _, entry, file = DRIVERS[driver]
    return TABLE.replace("ENTRY", entry).replace("FILE", file)


CASES = [
    pytest.param('new = "pass"\n', "", "#1 ('entry_one'): missing key(s) new", id="missing"),
    pytest.param('new = "pass"\n', 'new = "pass"\nnwe = ""\n', "unknown key(s) nwe", id="unknown"),
    pytest.param('family = "first"', 'family = "firsts"', "unknown family 'firsts'", id="family"),
    pytest.param('new = "pass"', "new = 0", "new must be string(s)", id="not_a_string"),
    pytest.param('"entry_one"', "entry_one", "not a valid TOML", id="toml"),
    pytest.param("old = '''x = 1'''", "old = ''''''", "old is empty", id="empty_old"),
    pytest.param('extra = ["second"]', 'extra = ["first"]', "lists first more", id="twice"),
    pytest.param('"entry_one"', '"Entry one"', "snake_case", id="name"),
    pytest.param("extra", "other = []\nextra", "unknown key(s) other", id="families_key"),
    pytest.param('required = ["first"]', "required = []", "required is empty", id="no_required"),
    pytest.param("[[ENTRY]]", "[x]\n[[ENTRY]]", "unknown key(s) x", id="top_key"),
    pytest.param("[[ENTRY]]", "[ENTRY]", "non-empty array of tables", id="no_array"),
]


def tool(driver: str) -> ModuleType:
    return DRIVERS[driver][0]


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_a_valid_table_file_loads_in_each_layout(tmp_path: Path, driver: str) -> None:
    path = tmp_path / "table.toml"
    path.write_text(table_text(driver), encoding="utf-8")
    table = tool(driver).load_table(path)
    assert [entry.name for entry in table.entries] == ["entry_one"]
    assert [(entry.old, entry.new) for entry in table.entries] == [("x = 1", "pass")]
    assert table.required_families == ("first",)
    assert table.families == ("first", "second")


@pytest.mark.parametrize("driver", sorted(DRIVERS))
@pytest.mark.parametrize(("old", "new", "complaint"), CASES)
def test_a_malformed_table_file_is_a_clear_error(
    tmp_path: Path, driver: str, old: str, new: str, complaint: str
) -> None:
    text, entry = table_text(driver), DRIVERS[driver][1]
    old, new = old.replace("ENTRY", entry), new.replace("ENTRY", entry)
    assert old in text
    path = tmp_path / "table.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(mutation_table.TableError, match=re.escape(complaint)) as raised:
        tool(driver).load_table(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert tool(driver).TableError is mutation_table.TableError


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_a_name_is_taken_once(driver: str) -> None:
    _, entry_key, file = DRIVERS[driver]
    entry = {"name": "a", "family": "first", "old": "x", "new": ""}
    if file:
        entry["file"] = "impl/store/events.py"
    data = {"families": {"required": ["first"], "extra": []}, entry_key: [entry, entry]}
    with pytest.raises(mutation_table.TableError, match=re.escape("'a'): the name is taken by #1")):
        tool(driver).parse_table(data)


@pytest.mark.parametrize(
    ("returncode", "output", "verdict"),
    [
        pytest.param(0, "", ("survived", ""), id="survived"),
        pytest.param(
            1,
            "x\nFAILED conformance/values/test_rules.py::t - x\n",
            ("killed", "values/test_rules.py::t"),
            id="failed",
        ),
        pytest.param(
            2,
            "ERROR conformance/schema/test_open.py - boom",
            ("killed", "schema/test_open.py"),
            id="collection",
        ),
        pytest.param(-1, "timed out after 9 s", ("killed", "timed out after 9 s"), id="timeout"),
        pytest.param(1, "no summary", ("error", "pytest exit status 1: no summary"), id="none"),
        pytest.param(4, "usage error", ("error", "pytest exit status 4: usage error"), id="usage"),
    ],
)
def test_the_verdict_on_a_run(returncode: int, output: str, verdict: tuple[str, str]) -> None:
    assert mutation_table.verdict(returncode, output) == verdict


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_select_keeps_the_order_named_and_refuses_an_unknown_name(driver: str) -> None:
    entries = tool(driver).MUTANTS if driver == "writer" else tool(driver).MUTATIONS
    first, second = entries[0], entries[1]
    assert tool(driver).select([]) == list(entries)
    assert tool(driver).select([second.name, first.name]) == [second, first]
    with pytest.raises(SystemExit, match=r"unknown .*: nope"):
        tool(driver).select(["nope"])


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_the_committed_table_holds_only_the_known_keys_and_is_the_drivers(driver: str) -> None:
    _, entry_key, _ = DRIVERS[driver]
    path = TOOLS / f"{driver}_mutations.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert set(data) == {"families", entry_key}
    assert set(data["families"]) == {"required", "extra"}
    assert tuple(data["families"]["required"]) == tool(driver).REQUIRED_FAMILIES
    assert (*data["families"]["required"], *data["families"]["extra"]) == tool(driver).FAMILIES
    required, optional = KEYS[driver]
    entries = data[entry_key]
    assert isinstance(entries, list)
    for entry in entries:
        assert required <= set(entry) <= required | optional, entry.get("name")
        assert all(isinstance(value, str) for value in entry.values()), entry["name"]
    # The driver's table is the file's, entry by entry and in the file's order.
    built = tool(driver).LOADER.load().entries
    keys = sorted(required | optional)
    assert [tuple(e.get(k) for k in keys) for e in entries] == [
        tuple(getattr(m, k) for k in keys) for m in built
    ]
    assert path == tool(driver).TABLE


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        pytest.param('"impl/payloads.py"', '"model/state.py"', "under impl/", id="file"),
        pytest.param('new = "pass"', 'new = "pass"\nequivalent = " "', "the reason", id="why"),
    ],
)
def test_a_mutant_names_a_file_under_impl_and_an_equivalent_one_says_why(
    tmp_path: Path, old: str, new: str, complaint: str
) -> None:
    """The writer driver's own checks, beyond the shared ones."""
    path = tmp_path / "table.toml"
    path.write_text(table_text("writer"), encoding="utf-8")
    (entry,) = writer_mutations.load_table(path).entries
    assert (entry.file, entry.equivalent) == ("impl/payloads.py", None)
    path.write_text(table_text("writer").replace(old, new, 1), encoding="utf-8")
    with pytest.raises(mutation_table.TableError, match=re.escape(complaint)):
        writer_mutations.load_table(path)


def test_one_loader_reads_the_tables() -> None:
    """Both drivers load through :class:`mutation_table.Loader`, and no other tool that
    names a table file imports a TOML parser (the cosmic-ray helper reads the writer table
    through its driver)."""
    for driver in DRIVERS.values():
        module = driver[0]
        assert isinstance(module.LOADER, mutation_table.Loader)
        assert module.load_table == module.LOADER.load
        assert module.LOADER.path == module.TABLE
    tables = [f"{driver}_mutations.toml" for driver in DRIVERS]
    readers = []
    for path in sorted(TOOLS.iterdir()):
        if not path.is_file() or path.name == "mutation_table.py":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        parser = re.search(r"^\s*(import|from)\s+(tomllib|tomli|toml)\b", text, re.MULTILINE)
        if any(table in text for table in tables) and parser:
            readers.append(path.name)
    assert readers == []
