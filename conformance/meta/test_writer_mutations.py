"""The writer mutant table (tools/writer_mutations.toml) is current and complete.

Fast checks of the table only: no mutant's suite is run here (``python
tools/writer_mutations.py``, the driver, does that). The table file parses and holds only the
known keys; the driver refuses a malformed one. Each mutant must still apply to exactly one
place in its file under impl/, change it, and leave a module that compiles; names are
unique; every family is used; and at least 40 mutants are expected to be killed (not marked
equivalent). No row is one cosmic-ray's default operator set generates (``tools/mutate`` runs
those; ``tools/generated_mutants.py`` decides it, and is itself checked here on sources whose
answer is known). The driver's import override is checked too: a subprocess run as the
mutants' are imports the package from the copy, and a broken copy fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import generated_mutants
import pytest
import writer_mutations as TOOL

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize("mutant", MUTANTS, ids=NAMES)
def test_no_row_is_a_mutant_cosmic_ray_generates(mutant: Any) -> None:
    """The table keeps only what cosmic-ray cannot make (its header says why): a row equal
    to one of its default operators' mutants of the file is run by tools/mutate already."""
    assert generated_mutants.generated_by(mutant, ROOT) is None


@pytest.mark.parametrize(
    ("source", "mutated", "operator"),
    [
        pytest.param(
            "a = b < c\n", "a = b <= c\n", "core/ReplaceComparisonOperator_Lt_LtE", id="lt"
        ),
        pytest.param("a = b or c\n", "a = b and c\n", "core/ReplaceOrWithAnd", id="or"),
        pytest.param("f(x=True)\n", "f(x=False)\n", "core/ReplaceTrueWithFalse", id="keyword"),
        pytest.param("if a:\n    b()\n", "if not a:\n    b()\n", "core/AddNot", id="not"),
        pytest.param("x = (a,1)\n", "x = (a,2)\n", "core/NumberReplacer", id="respaced"),
        pytest.param("x = a + b\n", "x = a - b\n", "core/ReplaceBinaryOperator_Add_Sub", id="add"),
        pytest.param(
            "for a in b:\n    break\n",
            "for a in b:\n    continue\n",
            "core/ReplaceBreakWithContinue",
            id="break",
        ),
        pytest.param(
            "try:\n    f()\nexcept OSError:\n    pass\n",
            "try:\n    f()\nexcept CosmicRayTestingException:\n    pass\n",
            "core/ExceptionReplacer",
            id="except",
        ),
        pytest.param("if a < b:\n    c()\n", "if False:\n    c()\n", None, id="constant"),
        pytest.param("a()\nb()\n", "a()\n", None, id="deleted"),
        pytest.param("a()\nb()\n", "b()\na()\n", None, id="swapped"),
        pytest.param("f(a, b)\n", "f(a, c)\n", None, id="argument"),
        pytest.param("x = 'a < b'\n", "x = 'a <= b'\n", None, id="sql_text"),
        pytest.param("a = b < c\n", "a = b < c + 1\n", None, id="offset"),
    ],
)
def test_the_decision_knows_what_cosmic_ray_generates(
    source: str, mutated: str, operator: str | None
) -> None:
    found = generated_mutants.generating_mutant(source, mutated)
    assert (found and found.operator) == operator


def test_the_tool_names_a_generated_row_of_a_real_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row that makes a comparison of impl/rules.py's code (not of a contract in a
    docstring) exclusive is cosmic-ray's: the tool says so and exits 1."""
    text = (ROOT / "impl" / "rules.py").read_text(encoding="utf-8")
    line = next(
        line.strip()
        for line in text.splitlines()
        if line.strip().startswith(("return ", "if "))
        and " <= " in line
        and text.count(line.strip()) == 1
    )
    table = TABLE_PATH.read_text(encoding="utf-8").split("\n[[mutant]]\n", 1)[0] + "\n"
    table += '[[mutant]]\nname = "made_exclusive"\nfamily = "events"\n'
    table += f"file = \"impl/rules.py\"\nold = '{line}'\nnew = '{line.replace(' <= ', ' < ', 1)}'\n"
    (tmp_path / "table.toml").write_text(table, encoding="utf-8")
    assert generated_mutants.main(["--table", str(tmp_path / "table.toml")]) == 1
    out = capsys.readouterr().out
    assert "GENERATED made_exclusive <- core/ReplaceComparisonOperator_LtE_Lt #" in out
    assert out.endswith("rows=1 generated=1\n")


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


def test_the_suite_runs_writer_tests_first_and_never_this_file() -> None:
    base = ROOT / "conformance"
    chosen = [path.relative_to(base).as_posix() for path in TOOL.judged_tests(ROOT)]
    assert "meta/test_writer_mutations.py" not in chosen
    assert chosen[0] == "values/test_rules.py"
    assert chosen.index("writer/test_guards.py") < chosen.index("writer/test_stateful.py")
    assert chosen.index("writer/test_stateful.py") < chosen.index("schema/test_attempts.py")
    everything = {p.relative_to(base).as_posix() for p in base.glob("*/test_*.py")}
    assert set(chosen) == everything - {"meta/test_writer_mutations.py"}
    only = TOOL.judged_tests(ROOT, ["writer/test_stateful.py", "test_rules.py"])
    assert [p.relative_to(base).as_posix() for p in only] == [
        "values/test_rules.py",
        "writer/test_stateful.py",
    ]


def test_the_snapshot_holds_what_the_suite_reads(tmp_path: Path) -> None:
    tree = TOOL.snapshot(ROOT, tmp_path / "tree")
    names = {path.name for path in tree.iterdir()}
    assert {"impl", "model", "crashsim", "conformance", "vectors", "tools"} <= names
    assert {"SPEC.md", "pyproject.toml", "examples", ".ci", ".github"} <= names
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
        pytest.param(
            1, "FAILED conformance/values/test_rules.py::t - x", None, "killed", id="killed"
        ),
        pytest.param(-1, "timed out after 900 s", None, "killed", id="timeout"),
        pytest.param(4, "usage error", None, "ERROR", id="error"),
    ],
)
def test_the_verdicts(returncode: int, output: str, equivalent: str | None, status: str) -> None:
    mutant = TOOL.Mutant("m", "events", "impl/store/events.py", "a", "b", equivalent)
    outcome = TOOL.judge(mutant, returncode, output)
    assert outcome.status == status
    if status == "killed":
        assert outcome.detail in ("values/test_rules.py::t", "timed out after 900 s")


def test_a_killed_equivalent_mutant_is_mismarked() -> None:
    mutant = TOOL.Mutant("m", "events", "impl/store/events.py", "a", "b", "claimed equivalent")
    outcome = TOOL.judge(mutant, 1, "FAILED conformance/values/test_rules.py::t - x")
    assert outcome.mismarked and "drop the mark" in outcome.detail
