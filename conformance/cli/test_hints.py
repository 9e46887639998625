"""The hint under a refusal names the argument that failed (SPEC.md 15.7).

A path refusal (``unsafe_path``) about ``report``'s ``--html`` or ``export``'s ``--out``
says "check --html" / "check --out"; one about the store, the default hint, says "check
--store", including a store refusal raised while the export is written (its ``artifacts``
a symbolic link), which only the error's own ``argument`` tells apart from an ``--out``
refusal. Each refused output is left unwritten. Run through the console script in
``demo_workdir`` (a private copy of the demo store as ``.demo-store``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conformance.cli.world import runstore

OUTPUT_REFUSALS = [
    ("report", "--html", "missing-directory/codecs.html"),
    ("report", "--html", ".demo-store/codecs.html"),
    ("report", "--html", "a-directory"),
    ("export", "--out", "missing-directory/export"),
    ("export", "--out", ".demo-store/export"),
    ("export", "--out", "a-file"),
]
"""(command, option, a path it refuses: its parent missing, inside the store, a directory
where the page goes, a file where the export directory goes)."""


def refusal(done: subprocess.CompletedProcess[str]) -> tuple[int, list[str]]:
    """The exit status and the stderr lines of a finished console script."""
    return done.returncode, done.stderr.splitlines()


@pytest.mark.parametrize(("command", "option", "path"), OUTPUT_REFUSALS)
def test_an_output_path_refusal_names_its_option(
    demo_workdir: Path, command: str, option: str, path: str
) -> None:
    (demo_workdir / "a-directory").mkdir()
    (demo_workdir / "a-file").write_text("kept\n", encoding="utf-8")
    before = os.path.lexists(demo_workdir / path)
    done = runstore(command, "--store", ".demo-store", option, path, cwd=demo_workdir)
    status, lines = refusal(done)
    assert status == 3, done.stderr
    assert lines[0].startswith("error: unsafe_path: "), lines
    assert lines[1:] == [f"hint: check {option}"]
    assert os.path.lexists(demo_workdir / path) == before
    assert (demo_workdir / "a-file").read_text(encoding="utf-8") == "kept\n"
    assert list((demo_workdir / "a-directory").iterdir()) == []


@pytest.mark.parametrize(
    "arguments",
    [
        ("status",),
        ("report", "--html", "codecs.html"),
        ("export", "--out", "codecs-export"),
    ],
)
def test_a_missing_store_is_still_a_store_refusal(
    demo_workdir: Path, arguments: tuple[str, ...]
) -> None:
    command, *rest = arguments
    done = runstore(command, "--store", "no-store", *rest, cwd=demo_workdir)
    status, lines = refusal(done)
    assert status == 3, done.stderr
    assert lines[0].startswith("error: unsafe_path: the store root does not exist"), lines
    assert lines[1].startswith("hint: check --store"), lines
    assert not (demo_workdir / "codecs.html").exists()
    assert not (demo_workdir / "codecs-export").exists()


def test_a_store_refusal_while_exporting_names_the_store_not_out(demo_workdir: Path) -> None:
    store = demo_workdir / ".demo-store"
    shutil.move(store / "artifacts", demo_workdir / "moved-artifacts")
    (store / "artifacts").symlink_to(demo_workdir / "moved-artifacts")
    done = runstore("export", "--store", ".demo-store", "--out", "codecs-export", cwd=demo_workdir)
    status, lines = refusal(done)
    assert status == 3, done.stderr
    assert lines[0].startswith("error: unsafe_path: "), lines
    assert "artifacts" in lines[0]
    assert lines[1].startswith("hint: check --store"), lines
    assert not (demo_workdir / "codecs-export").exists()


def test_with_json_the_refusal_is_the_same_document_without_a_hint(demo_workdir: Path) -> None:
    done = runstore(
        "report", "--store", ".demo-store", "--html", "missing/x.html", "--json", cwd=demo_workdir
    )
    assert done.returncode == 3
    document = json.loads(done.stdout)
    assert set(document) == {"error", "message"} and document["error"] == "unsafe_path"
    assert done.stderr == ""
