"""The CI workflows: ci.yml runs .ci/run; nightly.yml runs exactly the steps of
``tools/nightly --list``, one workflow step each, in order, and uploads nightly-out/.

Nothing long runs here: ``tools/nightly`` is only asked for its list and to summarize
result files this test writes. The YAML is read with PyYAML, which the dask extra brings
(dask and distributed require it; PyYAML reads the key ``on`` as the boolean True); without
it those tests skip, but the step list is also compared on the text, which always runs.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
NIGHTLY = ROOT / "tools" / "nightly"


def _workflow(name: str) -> dict[Any, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML (from the dask extra) is not installed")
    document = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict), name
    return document


def _triggers(document: dict[Any, Any]) -> dict[str, Any]:
    triggers = document.get("on", document.get(True))
    assert isinstance(triggers, dict), triggers
    return triggers


def _steps(document: dict[Any, Any]) -> list[dict[str, Any]]:
    (job,) = document["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    setup = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python")]
    assert [s["with"]["python-version"] for s in setup] == ["3.11"]
    steps: list[dict[str, Any]] = job["steps"]
    return steps


def _nightly(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(NIGHTLY), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _listed() -> list[tuple[str, list[str]]]:
    """``tools/nightly --list``, run from outside the repository: (name, argv) per step."""
    listing = _nightly("--list", cwd=Path("/"))
    assert listing.returncode == 0, listing.stderr
    steps = []
    for line in listing.stdout.splitlines():
        name, command = line.split("\t")
        steps.append((name, shlex.split(command)))
    return steps


def test_ci_runs_the_ci_script_on_push_and_pull_request() -> None:
    document = _workflow("ci.yml")
    assert {"push", "pull_request"} <= set(_triggers(document))
    (job,) = document["jobs"].values()
    assert job["timeout-minutes"] == 90
    runs = [step["run"] for step in _steps(document) if "run" in step]
    assert runs == ["bash .ci/run"]
    (ci_step,) = [step for step in _steps(document) if "run" in step]
    assert str(ci_step["env"]["CI"]) == "true"
    assert (ROOT / ".ci" / "run").is_file()


def test_nightly_calls_the_steps_of_tools_nightly_in_order() -> None:
    """On the text, without a YAML parser: one call per step, in the list's order."""
    text = (WORKFLOWS / "nightly.yml").read_text(encoding="utf-8")
    called = re.findall(r"^ +run: tools/nightly --only (\S+) ", text, re.MULTILINE)
    assert called == [name for name, _ in _listed()]
    assert re.search(r"^ +uses: actions/upload-artifact@v4$", text, re.MULTILINE)
    assert re.search(r"^ +path: nightly-out/?$", text, re.MULTILINE)


def test_nightly_runs_on_a_schedule_and_by_hand() -> None:
    triggers = _triggers(_workflow("nightly.yml"))
    assert "workflow_dispatch" in triggers
    (schedule,) = triggers["schedule"]
    assert len(schedule["cron"].split()) == 5


def test_nightly_has_one_workflow_step_per_tools_nightly_step_in_order() -> None:
    steps = _steps(_workflow("nightly.yml"))
    names = [name for name, _ in _listed()]
    assert len(names) == len(set(names)) >= 10
    called = []
    for step in steps:
        words = shlex.split(str(step.get("run", "")))
        if words[:2] == ["tools/nightly", "--only"]:
            assert words == ["tools/nightly", "--only", words[2], "--out", "nightly-out", "--tee"]
            called.append(words[2])
            # A failing step must not stop the later ones; the verdict step fails the job.
            assert step["continue-on-error"] is True, step
            assert step["id"] == step["name"] == words[2]
            assert step["timeout-minutes"] > 0
    assert called == names


def test_nightly_fails_on_any_step_and_uploads_nightly_out_in_any_case() -> None:
    steps = _steps(_workflow("nightly.yml"))
    runs = [str(step.get("run", "")) for step in steps]
    last_step = max(i for i, run in enumerate(runs) if "--only" in run)
    (verdict,) = [i for i, run in enumerate(runs) if "tools/nightly --summarize" in run]
    assert verdict > last_step and steps[verdict]["if"] == "always()"
    (upload,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert upload["uses"] == "actions/upload-artifact@v4"
    assert upload["if"] == "always()"
    assert upload["with"]["path"].rstrip("/") == "nightly-out"
    assert steps.index(upload) > last_step
    # Installs what .ci/run installs.
    extras = ".[dev,analysis,dask,mutation]"
    assert any(extras in run for run in runs)
    assert extras in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_nightly_step_names_something_that_exists() -> None:
    for name, argv in _listed():
        while "=" in argv[0]:  # the step's environment (VAR=value ...) comes first
            argv = argv[1:]
        assert argv[0] == "python", (name, argv)
        if argv[1] == "-m":
            assert importlib.util.find_spec(argv[2]) is not None, (name, argv)
        else:
            assert (ROOT / argv[1]).is_file(), f"{name}: {argv[1]} does not exist"


def test_the_hypothesis_step_deselects_a_test_that_exists() -> None:
    """The exhaustive crash test runs as the crash-suite step; a renamed test would make
    the deselection a silent no-op and the hypothesis step run the suite again."""
    (argv,) = [argv for name, argv in _listed() if name == "hypothesis"]
    assert "HYPOTHESIS_PROFILE=nightly" in argv
    path, function = argv[argv.index("--deselect") + 1].split("::")
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    (test,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    assert "pytest.mark.exhaustive" in [ast.unparse(d) for d in test.decorator_list]
    (crash,) = [argv for name, argv in _listed() if name == "crash-suite"]
    assert crash[2:4] == ["runstore.crashsim", "--exhaustive"]


def test_summarize_fails_until_every_step_has_passed(tmp_path: Path) -> None:
    names = [name for name, _ in _listed()]
    empty = _nightly("--summarize", "--out", str(tmp_path))
    assert empty.returncode == 1
    assert all(f"{name} " in empty.stdout and "not run" in empty.stdout for name in names)
    for name in names:
        (tmp_path / f"{name}.result").write_text("exit=0 seconds=1\n", encoding="utf-8")
    passed = _nightly("--summarize", "--out", str(tmp_path))
    assert passed.returncode == 0, passed.stdout
    assert (tmp_path / "summary.txt").read_text(encoding="utf-8").count(" ok ") == len(names)
    (tmp_path / f"{names[-1]}.result").write_text("exit=1 seconds=1\n", encoding="utf-8")
    failed = _nightly("--summarize", "--out", str(tmp_path))
    assert failed.returncode == 1 and "FAILED" in failed.stdout


@pytest.mark.parametrize("argv", [["--only", "no-such-step"], ["--bogus"]])
def test_an_unknown_step_or_option_is_a_usage_error(argv: list[str], tmp_path: Path) -> None:
    assert _nightly(*argv, "--out", str(tmp_path)).returncode == 2
