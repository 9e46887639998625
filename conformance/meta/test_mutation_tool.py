"""tools/mutate (generated mutation testing with cosmic-ray, issue 34): its committed
configuration stays current with impl/, and its parts do what tools/mutation/'s docstrings
say: the per-line test selection, --changed-since's lines, the nightly rotation, scoring
with equivalents, and a whole run that never touches the working tree and resumes."""

from __future__ import annotations

import datetime
import importlib.util
import sqlite3
import types
from pathlib import Path

import pytest
from mutation import changes
from mutation import report
from mutation import results
from mutation import run_mutant
from mutation import scratch
from mutation import selection
from mutation import session as sessions
from mutation import settings
from mutation import shards

from conformance.needs import missing

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings.load_settings()


def _cosmic_ray() -> None:
    if importlib.util.find_spec("cosmic_ray") is None:
        missing("cosmic-ray is not installed (pip install -e '.[dev,mutation]')")


def test_every_module_of_impl_has_candidate_tests_that_exist() -> None:
    for module in settings.impl_modules():
        tests = SETTINGS.tests_of(module)
        for path in tests:
            assert (ROOT / path).exists(), f"{module}: candidate {path} does not exist"


def test_every_candidate_entry_is_first_for_some_module() -> None:
    used = {SETTINGS.tests_of(module) for module in settings.impl_modules()}
    for entry in SETTINGS.candidates:
        assert entry.tests in used, f"[[tests]] {entry.glob} is first for no module"


def test_the_core_modules_exist_and_the_baseline_lists_every_one() -> None:
    """Issue 34: every core module is mutated whole at least weekly and its score is kept;
    the baseline file names every one of them (or the configuration says its first
    measurement is pending, and only until it is recorded) and no module that is gone."""
    modules = set(settings.impl_modules())
    assert set(SETTINGS.core) <= modules
    baseline = settings.load_baseline()
    pending = set(SETTINGS.baseline_pending)
    assert pending <= set(SETTINGS.core)
    assert not pending & set(baseline), sorted(pending & set(baseline))
    assert set(SETTINGS.core) <= set(baseline) | pending, sorted(
        set(SETTINGS.core) - set(baseline) - pending
    )
    assert set(baseline) <= modules, sorted(set(baseline) - modules)
    for module, entry in baseline.items():
        assert 0 <= entry.killed <= entry.scored and entry.score == pytest.approx(
            entry.killed / entry.scored if entry.scored else 0.0, abs=1e-4
        ), module
        datetime.date.fromisoformat(entry.measured)


def test_a_recorded_module_leaves_the_pending_list_and_nothing_else_changes(
    tmp_path: Path,
) -> None:
    """``--update-baseline`` takes a module it records out of ``baseline_pending`` (the
    meta test above refuses a module in both), editing only that list."""
    config = tmp_path / "mutation.toml"
    text = (
        '# head\ncore = ["a.py"]\nbaseline_pending = [\n    "impl/a.py",\n'
        '    "impl/b.py",\n]\n# tail\n'
    )
    config.write_text(text)
    assert settings.drop_pending("impl/c.py", config) is False
    assert config.read_text() == text
    assert settings.drop_pending("impl/a.py", config) is True
    assert config.read_text() == text.replace('    "impl/a.py",\n', "")
    assert settings.drop_pending("impl/b.py", config) is True
    assert config.read_text() == '# head\ncore = ["a.py"]\nbaseline_pending = []\n# tail\n'
    assert settings.drop_pending("impl/b.py", config) is False


def test_a_session_holds_for_its_tree_but_not_for_the_scores_and_equivalents(
    tmp_path: Path,
) -> None:
    """A resumed session's results hold for the tree they were measured on: any tracked
    file's bytes or mode change the digest, but recording a score or arguing an
    equivalent (neither changes a mutant's fate) does not void a session."""
    names = ["impl/a.py", *scratch.BOOKKEEPING]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    before = scratch.tree_digest(names, tmp_path)
    for name in scratch.BOOKKEEPING:
        (tmp_path / name).write_text("# recorded\n")
    assert scratch.tree_digest(names, tmp_path) == before
    (tmp_path / "impl/a.py").chmod(0o755)
    moded = scratch.tree_digest(names, tmp_path)
    assert moded != before
    (tmp_path / "impl/a.py").write_text("x = 2\n")
    assert scratch.tree_digest(names, tmp_path) not in (before, moded)


def test_each_operator_filter_names_cosmic_ray_operators_and_says_why() -> None:
    _cosmic_ray()
    import cosmic_ray.plugins

    names = list(cosmic_ray.plugins.operator_names())
    for rule in SETTINGS.filters:
        assert any(rule.matches(name) for name in names), rule.pattern
        assert len(rule.reason.split()) >= 8, rule.pattern


def _entries() -> list[settings.Equivalent]:
    return [entry for listed in settings.load_equivalents().values() for entry in listed]


def test_each_equivalent_names_a_line_its_module_still_has() -> None:
    """A survivor argued equivalent is matched by its source text: an entry whose line is
    gone would hide nothing and only mislead."""
    for entry in _entries():
        source = (ROOT / entry.module).read_text(encoding="utf-8")
        stripped = {line.strip() for line in source.splitlines()}
        for line in entry.original.splitlines():
            assert line in stripped, (entry.module, line)
        assert entry.reason.rstrip().endswith("."), entry.reason


def test_an_equivalent_whose_text_recurs_says_which_place_it_covers() -> None:
    """An entry is matched by text, so one whose first changed line occurs more than once
    in its module would also excuse a later survivor elsewhere: it must name the function
    or class it covers (``where``, which must enclose that text) or say that its reason
    covers ``every`` place."""
    for entry in _entries():
        source = (ROOT / entry.module).read_text(encoding="utf-8")
        first = entry.original.splitlines()[0]
        lines = [n for n, text in enumerate(source.splitlines(), 1) if text.strip() == first]
        if entry.where:
            places = results.enclosing_names(source)
            assert any(entry.where in places.get(n, ()) for n in lines), (entry.module, entry.where)
        else:
            assert len(lines) == 1 or entry.every, (entry.module, entry.operator, first, lines)


def test_an_equivalent_that_names_its_place_excuses_no_other(tmp_path: Path) -> None:
    """``where`` limits an entry to the mutants inside that function or class: the same
    change elsewhere in the module stays a survivor."""
    source = "def a():\n    return True\n\n\ndef b():\n    return True\n"
    diff = "--- a\n+++ b\n@@ -1 +1 @@\n-    return True\n+    return False\n"
    entry = settings.Equivalent(
        "impl/x.py", "core/Op", "return True", "return False", "b is never called.", where="b"
    )
    database = _session(
        tmp_path / "s.sqlite",
        [("core/Op", "NORMAL", "SURVIVED", diff, ""), ("core/Op", "NORMAL", "SURVIVED", diff, "")],
        lines=[2, 6],
    )
    result = results.read_result("impl/x.py", database, 1.0, {entry.key(): [entry]}, source)
    assert [(m.line, m.fate) for m in result.mutants] == [(2, "survived"), (6, "equivalent")]


# --- the parts ----------------------------------------------------------------------------


def test_changed_lines_are_the_replaced_and_deleted_lines_of_the_original() -> None:
    original = "a\nb\nc\nd\n"
    assert selection.changed_lines(original, "a\nB\nc\nd\n") == [2]
    assert selection.changed_lines(original, "a\nc\nd\n") == [2]
    assert selection.changed_lines(original, "a\nb\nx\ny\nd\n") == [3]
    assert selection.changed_lines(original, original) == []


def test_a_mutant_runs_the_tests_of_its_lines_quickest_first() -> None:
    """A mutant runs the tests that executed its lines, quickest first; a line executed by
    no test, or only at import (a constant), runs every candidate test, those that never
    executed a line of the module included: a test may only read a constant (``t::k``
    here, like the kernel-constant tests reading ``durable._AT_FDCWD``)."""
    line_map = selection.LineMap(
        candidates=("conformance/a", "conformance/b"),
        seconds=1.0,
        lines={1: ("t::x", "t::y"), 2: ("t::y",), 3: (), 4: ("t::z",)},
        durations={"t::x": 2.0, "t::y": 0.5, "t::z": 1.0, "t::k": 0.1},
    )
    assert line_map.ranked() == ("t::y", "t::z", "t::x")
    assert line_map.tests_for([2]) == ("t::y",)
    assert line_map.tests_for([1, 4]) == ("t::y", "t::z", "t::x")
    assert line_map.tests_for([3]) == ("t::k", "t::y", "t::z", "t::x")
    assert line_map.tests_for([9]) == ("t::k", "t::y", "t::z", "t::x")
    assert line_map.tests_for([2, 9]) == ("t::k", "t::y", "t::z", "t::x")
    report = "0.50s call     t.py::a[x y]\n0.25s setup    t.py::a[x y]\n1.00s call t.py::b\n"
    assert selection.durations(report) == {"t.py::a[x y]": 0.75, "t.py::b": 1.0}
    empty = selection.LineMap(("conformance/a",), 1.0, {})
    assert empty.tests_for([1]) == ("conformance/a",)
    assert selection.LineMap.from_json(line_map.to_json()) == line_map


def test_a_mutant_that_ends_the_test_process_early_is_killed(tmp_path: Path) -> None:
    """A mutant can make pytest's own process exit with status 0 mid-run (a probe's child
    branch taken by the parent calls ``os._exit(0)``): a pass counts only when the session
    finished, so that run is a kill, while a finished passing run is a survivor and a
    failing one a kill."""
    (tmp_path / "test_exits.py").write_text(
        "import os\n\ndef test_a():\n    os._exit(0)\n\ndef test_b():\n    assert False\n"
    )
    (tmp_path / "test_passes.py").write_text("def test_c():\n    pass\n")
    (tmp_path / "test_fails.py").write_text("def test_d():\n    assert False\n")
    assert run_mutant.run_tests(["test_exits.py"], tmp_path) == 1
    assert run_mutant.run_tests(["test_passes.py"], tmp_path) == 0
    assert run_mutant.run_tests(["test_fails.py"], tmp_path) == 1
    assert run_mutant.verdict(0, finished=False) == 1
    assert run_mutant.verdict(0, finished=True) == 0
    assert run_mutant.verdict(5, finished=False) == 5


def test_a_changed_line_of_a_statement_runs_the_tests_of_the_whole_statement() -> None:
    """A changed operator can send a test that stopped at an earlier line of a condition
    on to a later one (``a and`` / ``b`` over two lines, ``and`` made ``or``): a mutant of
    a line inside a statement runs the tests of every line of that statement (a compound
    statement's header only, never its body), while a line alone runs its own."""
    source = (
        "def f(a, b):\n"  # 1
        "    if (a and\n"  # 2
        "            b):\n"  # 3
        "        return 1\n"  # 4
        "    return 2\n"  # 5
    )
    spans = selection.statement_spans(source)
    assert range(2, 4) in spans and range(4, 5) in spans and range(1, 2) in spans
    line_map = selection.LineMap(
        candidates=("conformance/a",),
        seconds=1.0,
        lines={1: ("t::import",), 2: ("t::short", "t::long"), 3: ("t::long",), 4: ("t::long",)},
        durations={"t::short": 0.1, "t::long": 0.2, "t::import": 0.05},
    )
    assert line_map.tests_for([3]) == ("t::long",)
    assert line_map.tests_for([3], spans) == ("t::short", "t::long")
    assert line_map.tests_for([4], spans) == ("t::long",)


def test_changed_since_takes_the_new_side_of_each_hunk() -> None:
    diff = (
        "diff --git a/impl/x.py b/impl/x.py\n"
        "@@ -3 +3 @@ def f():\n-a\n+b\n"
        "@@ -10,0 +11,2 @@\n+c\n+d\n"
        "@@ -20,3 +21,0 @@\n-e\n-f\n-g\n"
    )
    assert changes.lines_of_diff(diff) == {3, 11, 12, 21, 22}


def test_a_revision_git_does_not_know_is_refused() -> None:
    with pytest.raises(changes.ChangeError):
        changes.changed_lines("no-such-revision-34")


def test_the_rotation_runs_every_core_module_weekly_and_the_rest_monthly() -> None:
    modules = settings.impl_modules()
    core = list(SETTINGS.core)
    rest = [m for m in modules if m not in core]
    cost = {m: float(len(m)) for m in modules}
    start = datetime.date(2026, 12, 6)
    week = [shards.tonight(start + datetime.timedelta(d), core, rest, cost) for d in range(7)]
    assert set(core) <= {m for night in week for m in night}
    month = [shards.tonight(start + datetime.timedelta(d), core, rest, cost) for d in range(28)]
    runs = [m for night in month for m in night]
    assert sorted(m for m in runs if m in rest) == sorted(rest)  # each exactly once
    assert shards.tonight(start, core, rest, cost) == week[0]  # the same night, the same
    groups = shards.split(core, cost, shards.CORE_SHARDS)
    loads = sorted(sum(cost[m] for m in g) for g in groups)
    assert loads[-1] - loads[0] <= max(cost.values())


def _session(
    path: Path,
    rows: list[tuple[str, str | None, str | None, str, str]],
    lines: list[int] | None = None,
) -> Path:
    """A session database in cosmic-ray's layout: (operator, worker, test, diff, output),
    the mutants on ``lines`` (default: one line each, from 1)."""
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE work_items (job_id TEXT PRIMARY KEY);
        CREATE TABLE mutation_specs (module_path TEXT, operator_name TEXT, operator_args TEXT,
            occurrence INTEGER, start_pos_row INTEGER, start_pos_col INTEGER,
            end_pos_row INTEGER, end_pos_col INTEGER, definition_name TEXT, job_id TEXT);
        CREATE TABLE work_results (worker_outcome TEXT, output TEXT, test_outcome TEXT,
            diff TEXT, job_id TEXT);
        """
    )
    for index, (operator, worker, test, diff, output) in enumerate(rows):
        job = f"job{index}"
        connection.execute("INSERT INTO work_items VALUES (?)", (job,))
        connection.execute(
            "INSERT INTO mutation_specs VALUES ('impl/x.py', ?, '{}', 0, ?, 0, ?, 1, '', ?)",
            (operator, *([lines[index]] * 2 if lines else [index + 1] * 2), job),
        )
        if worker is not None:
            connection.execute(
                "INSERT INTO work_results VALUES (?, ?, ?, ?, ?)",
                (worker, output, test, diff, job),
            )
    connection.commit()
    connection.close()
    return path


def test_the_score_leaves_out_equivalents_and_skipped_and_never_counts_errors(
    tmp_path: Path,
) -> None:
    diff = "--- a\n+++ b\n@@ -1 +1 @@\n-    if a < b:\n+    if a <= b:\n"
    equivalent = settings.Equivalent(
        "impl/x.py", "core/Op", "if a < b:", "if a <= b:", "a equals b never reaches here."
    )
    database = _session(
        tmp_path / "s.sqlite",
        [
            ("core/Op", "NORMAL", "KILLED", "", "failed"),
            ("core/Op", "NORMAL", "KILLED", "", "timeout"),
            ("core/Op", "NORMAL", "SURVIVED", diff, ""),
            ("core/Other", "NORMAL", "SURVIVED", diff, ""),
            ("core/Op", "SKIPPED", None, "", "filtered operator: why"),
            ("core/Op", "EXCEPTION", "INCOMPETENT", "", "Traceback"),
            ("core/Op", None, None, "", ""),
        ],
    )
    result = results.read_result("impl/x.py", database, 5.0, {equivalent.key(): [equivalent]})
    assert dict(result.fates) == {
        "killed": 2,
        "equivalent": 1,
        "survived": 1,
        "skipped": 1,
        "error": 1,
    }
    assert result.timeouts == 1
    assert result.score == pytest.approx(2 / 3)
    assert [m.operator for m in result.survivors()] == ["core/Other"]


def test_the_html_report_indexes_each_survivor_and_error_with_its_change(
    tmp_path: Path,
) -> None:
    """Issue 34 asks for a report a person can triage from: each module with survivors
    or errors gets an index (line, operator, fate, the change in one line) linked from
    the summary table, then each diff; an error shows the worker's note, and a module
    with neither gets no section."""
    diff = "--- a\n+++ b\n@@ -1 +1 @@\n-    if a < b:\n+    if a <= b:\n"
    noisy = results.read_result(
        "impl/x.py",
        _session(
            tmp_path / "x.sqlite",
            [
                ("core/Op", "NORMAL", "SURVIVED", diff, ""),
                ("core/Bad", "EXCEPTION", "INCOMPETENT", diff, "Traceback: <boom>"),
            ],
        ),
        5.0,
        {},
    )
    quiet = results.read_result(
        "impl/y.py",
        _session(tmp_path / "y.sqlite", [("core/Op", "NORMAL", "KILLED", "", "failed")]),
        1.0,
        {},
    )
    _, html_path = report.write_reports(tmp_path / "out", [noisy, quiet], "t", "whole", {})
    page = html_path.read_text()
    assert "<a href='#m0'>impl/x.py</a>" in page and "id='m0'" in page
    assert "id='m1'" not in page and "<td>impl/y.py</td>" in page
    assert "<code>if a &lt; b:</code> &rarr; <code>if a &lt;= b:</code>" in page
    assert "<td class='survived'>survived</td>" in page
    assert "<td class='error'>error</td>" in page
    assert "error: Traceback: &lt;boom&gt;" in page
    assert page.count("<pre>") == 2


def test_a_mutant_argued_equivalent_is_not_run_again_while_its_entry_holds(
    tmp_path: Path,
) -> None:
    """A session marks the mutants an entry of the equivalents file matches when it is made
    (skipped, with the diff, never run: an equivalent costs a whole candidate run when it
    survives); reading the session counts each as equivalent while its entry still
    matches, and as an error, failing the run, once the entry is gone (the session must
    be made again)."""
    _cosmic_ray()
    source = "def a():\n    return True\n"
    mutation = types.SimpleNamespace(
        operator_name="core/ReplaceTrueWithFalse", occurrence=0, operator_args={}
    )
    code, why = sessions.made(source, mutation)
    assert why is None and code == "def a():\n    return False\n"
    diff = sessions.unified_diff(source, code, "impl/x.py")
    assert results.changed_text(diff) == ("return True", "return False")
    entry = settings.Equivalent(
        "impl/x.py", "core/ReplaceTrueWithFalse", "return True", "return False", "Never read."
    )
    database = _session(
        tmp_path / "s.sqlite",
        [("core/ReplaceTrueWithFalse", "SKIPPED", None, diff, results.ARGUED + "Never read.")],
        lines=[2],
    )
    held = results.read_result("impl/x.py", database, 1.0, {entry.key(): [entry]}, source)
    assert [(m.fate, m.note) for m in held.mutants] == [("equivalent", "Never read.")]
    assert held.score is None
    gone = results.read_result("impl/x.py", database, 1.0, {}, source)
    assert [(m.fate, m.note) for m in gone.mutants] == [("error", results.STALE)]


def test_mutants_inside_annotations_are_found_where_cosmic_ray_counts_them() -> None:
    source = (
        "from __future__ import annotations\n"
        "def f(a: int | None, *rest: str, b: list[int] = []) -> dict[str, int]:\n"
        "    x: int | None = a\n"
        "    return {}\n"
    )
    spans = sessions.annotation_spans(source)
    assert ((2, 9), (2, 19)) in spans  # a: int | None
    assert ((2, 28), (2, 31)) in spans  # *rest: str
    assert ((2, 55), (2, 69)) in spans  # -> dict[str, int]
    assert ((3, 7), (3, 17)) in spans  # x: int | None
    assert not any(start <= (3, 20) < end for start, end in spans)  # the value `a`
    assert SETTINGS.skips_annotations("impl/store/leases.py")
    assert not SETTINGS.skips_annotations("impl/cli/app.py")  # typer evaluates them


def test_a_mutant_cosmic_ray_cannot_make_is_skipped_with_its_reason() -> None:
    """A mutant whose operator raises on the code (cosmic-ray 8.7's ExceptionReplacer on a
    dotted name inside an exception tuple) fails on the worker before any test runs, every
    time: it is skipped with the exception as the reason, never counted as an error that
    would fail every run; a mutant cosmic-ray can make is not."""
    _cosmic_ray()
    source = (
        "import sqlite3\n"
        "try:\n    pass\nexcept (sqlite3.Error, OSError):\n    pass\n"
        "try:\n    pass\nexcept (ValueError, OSError):\n    pass\n"
    )

    def mutation(occurrence: int) -> object:
        return types.SimpleNamespace(
            operator_name="core/ExceptionReplacer", occurrence=occurrence, operator_args={}
        )

    reason = sessions.unmakeable(source, mutation(0))
    assert reason is not None and reason.startswith("cosmic-ray cannot make this mutant: ")
    assert sessions.unmakeable(source, mutation(1)) is None  # OSError in the first tuple
    assert sessions.unmakeable(source, mutation(2)) is None  # ValueError in the second


def test_a_keyword_only_marker_is_found_and_nothing_else_is() -> None:
    source = "def f(a, *, b):\n    return a * b\nf(*x, **y)\nz = [*a, *b]\ng = lambda *, k: k\n"
    assert sessions.keyword_markers(source) == {(1, 9), (5, 11)}
