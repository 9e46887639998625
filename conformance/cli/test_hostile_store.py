"""Every command on a store damaged behind the writer's back: a typed one-line refusal or a
validate finding, never a traceback (issue 28's hostile stores)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conformance.cli.world import runstore
from conformance.cli.world import write_campaign

UNDECODABLE = b"extra_\xff"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished one-slot campaign and its store."""
    directory = tmp_path_factory.mktemp("hostile")
    campaign = write_campaign(directory / "campaign", [("a", "ok")], ["p"])
    store = directory / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init")
    assert done.returncode == 0, done.stderr
    return campaign, store


def undecodable_schema_name(store: Path) -> None:
    """An index whose name in ``sqlite_schema`` is not UTF-8: SQLite then names it in the
    message of every statement's error."""
    connection = sqlite3.connect(store / "run.sqlite3")
    connection.execute("CREATE INDEX extra_idx ON events(kind)")
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute(
        "UPDATE sqlite_schema SET name = CAST(? AS TEXT) WHERE name = 'extra_idx'",
        (UNDECODABLE,),
    )
    connection.commit()
    connection.close()


def damaged_copy(original: Path, store: Path) -> Path:
    """A copy of ``original``'s database (and WAL) in ``store``, its schema given an
    undecodable name."""
    store.mkdir()
    for name in ("run.sqlite3", "run.sqlite3-wal"):
        if (original / name).exists():
            (store / name).write_bytes((original / name).read_bytes())
    undecodable_schema_name(store)
    return store


COMMANDS = {
    "status": ("status",),
    "explain": ("explain", "e2e/a/p"),
    "audit": ("audit",),
    "export": ("export", "--out", "{out}/export"),
    "report": ("report", "--html", "{out}/report.html"),
    "recover": ("recover",),
    "run": ("run", "{campaign}", "--resume"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_undecodable_schema_name_is_a_typed_refusal(
    built: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    campaign, original = built
    store = damaged_copy(original, tmp_path / "store")
    arguments = [part.format(out=tmp_path, campaign=campaign) for part in COMMANDS[command]]
    done = runstore(*arguments, "--store", str(store))
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "UnicodeDecodeError" not in done.stderr
    (line, *_) = done.stderr.splitlines()
    assert line.startswith("error: ") and "extra_\\xff" in line, done.stderr


def test_validate_reports_an_undecodable_schema_name_as_a_finding(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    _, original = built
    store = damaged_copy(original, tmp_path / "store")
    done = runstore("validate", "--store", str(store), "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert '"database_unreadable"' in done.stdout and "extra_\\\\xff" in done.stdout


def test_run_makes_no_store_among_other_files(built: tuple[Path, Path], tmp_path: Path) -> None:
    """``run --init`` (or ``run``) on an existing directory of the user's files that holds
    no store is refused before anything is created there."""
    campaign, _ = built
    target = tmp_path / "papers"
    target.mkdir()
    (target / "thesis.tex").write_text("mine")
    for extra in (("--init",), ()):
        done = runstore("run", str(campaign), "--store", str(target), *extra)
        assert done.returncode == 3, done.stderr
        assert done.stderr.startswith("error: unsafe_path: ") and "thesis.tex" in done.stderr
        assert sorted(p.name for p in target.iterdir()) == ["thesis.tex"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runstore("run", str(campaign), "--store", str(empty)).returncode == 0


def test_run_init_makes_no_store_inside_another(built: tuple[Path, Path]) -> None:
    campaign, store = built
    inner = store / "artifacts" / ".staging-inner"
    done = runstore("run", str(campaign), "--store", str(inner), "--init")
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("error: unsafe_path: ") and "inside the run store" in done.stderr
    assert not inner.exists()
