"""The examples (``examples/*/``) and the READMEs that show them.

- Every committed campaign file loads with the campaign reader
  (``runstore.runner.campaign_file``) and says what the READMEs promise (repetitions, a
  seed, every metric its worker writes declared in ``[metrics]``).
- ``examples/hashing`` runs end to end through the installed ``runstore`` from a copy of
  its directory with fewer repetitions and a shorter measurement (the committed file's
  settings aside, the same campaign), and what its worker wrote is checked against
  hashlib.
- Every ``runstore`` command line in a shell block of README.md and of each example's
  README is an accepted command: a registered command whose arguments and options parse
  (typer's own parser, as the console script would). The examples' reading commands
  (``status``, ``compare``, ``explain``, ``validate``, ``audit``) are also run, on a store
  of their campaign; an output pasted under one of them (a ``text`` block right after its
  ``sh`` block) must start with the live output's first line (the first table's title)
  and, for ``compare``, end with its footnote, so a paste cannot drift far from the
  command.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import typer
from runstore.cli.app import app
from runstore.runner.campaign_file import load_campaign
from typer.core import TyperCommand
from typer.core import TyperGroup

from conformance.cli.world import runstore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
READMES = ("README.md", "examples/codecs/README.md", "examples/hashing/README.md")
READING = frozenset({"status", "compare", "explain", "validate", "audit"})
SHELL_FENCES = ("```sh", "```bash", "```shell")
# What each example's worker writes into result.json's metrics.
WRITTEN_METRICS = {
    "codecs": {"ratio", "compressed_bytes", "compress_mb_s", "decompress_mb_s"},
    "hashing": {"throughput_mb_s", "ns_per_byte", "ns_per_call"},
}
HASHING_ALGORITHMS = ("md5", "sha1", "sha256", "blake2b", "sha3_256")
HASHING_SIZES = (64, 4096, 1048576)


def registered() -> dict[str, TyperCommand]:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    return {n: c for n, c in group.commands.items() if isinstance(c, TyperCommand)}


COMMANDS = registered()


@attrs.frozen(kw_only=True)
class Shown:
    """One ``runstore`` command of a README: its arguments after ``runstore``, where it
    is, and the output pasted right under its block (None when there is none)."""

    arguments: tuple[str, ...]
    line: int
    pasted: str | None

    @property
    def command(self) -> str:
        return self.arguments[0] if self.arguments else ""

    def option(self, name: str) -> str | None:
        arguments = list(self.arguments)
        return arguments[arguments.index(name) + 1] if name in arguments else None


def blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """``(fence, first line number, lines)`` of each fenced block, in order."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].startswith("```") and lines[index].strip() != "```":
            fence, start = lines[index].strip(), index + 1
            end = start
            while not lines[end].startswith("```"):
                end += 1
            yield fence, start + 1, lines[start:end]
            index = end
        index += 1


def commands_in(path: Path) -> list[Shown]:
    """Every ``runstore`` command in ``path``'s shell blocks: lines joined at a trailing
    backslash, split by the shell's rules (comments dropped) and at ``&&``, ``||``, ``;``,
    ``|`` and ``&``, leading ``NAME=value`` assignments skipped."""
    found: list[Shown] = []
    listed = list(blocks(path.read_text(encoding="utf-8")))
    for position, (fence, first, lines) in enumerate(listed):
        if fence not in SHELL_FENCES:
            continue
        following = listed[position + 1] if position + 1 < len(listed) else None
        pasted = None
        # pasted output: a text block right under this one (one blank line between)
        if following and following[0] == "```text" and following[1] - first - len(lines) <= 3:
            pasted = "\n".join(following[2])
        joined = "\n".join(lines).replace("\\\n", " ")
        for offset, line in enumerate(joined.splitlines()):
            tokens = shlex.split(line, comments=True)
            segment: list[str] = []
            for token in [*tokens, "&&"]:
                if token in ("&&", "||", ";", "|", "&"):
                    while segment and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", segment[0]):
                        segment.pop(0)
                    if segment and segment[0] == "runstore":
                        found.append(
                            Shown(arguments=tuple(segment[1:]), line=first + offset, pasted=pasted)
                        )
                    segment = []
                else:
                    segment.append(token)
    return found


def check_accepted(shown: Shown, where: str) -> None:
    """``shown`` names a registered command and typer's parser takes its arguments."""
    if shown.command not in COMMANDS:
        pytest.fail(f"{where}: no command {shown.command!r}")
    try:
        COMMANDS[shown.command].make_context(shown.command, list(shown.arguments[1:]))
    except typer.TyperException as error:
        pytest.fail(f"{where}: runstore {' '.join(shown.arguments)}: {error}")


def test_the_command_line_reader_finds_and_refuses_what_it_should(tmp_path: Path) -> None:
    """The checks below can fail: a misspelt option, an unknown command, a missing
    argument are refused, and commands inside a chain are found."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "```sh\nA=1 runstore status --store s && echo x | runstore audit --store s  # c\n```\n"
        "```text\npasted\n```\n```sh\nrunstore run \\\n  c.toml --store s -j 2\n```\n",
        encoding="utf-8",
    )
    found = commands_in(readme)
    assert [shown.arguments for shown in found] == [
        ("status", "--store", "s"),
        ("audit", "--store", "s"),
        ("run", "c.toml", "--store", "s", "-j", "2"),
    ]
    assert [shown.pasted for shown in found] == ["pasted", "pasted", None]
    for shown in found:
        check_accepted(shown, "sample")
    for wrong in (("status", "--stor", "s"), ("stats", "--store", "s"), ("run", "--store", "s")):
        with pytest.raises(pytest.fail.Exception):
            check_accepted(Shown(arguments=wrong, line=1, pasted=None), "sample")


@pytest.mark.parametrize("readme", READMES)
def test_every_runstore_line_of_a_readme_is_an_accepted_command(readme: str) -> None:
    found = commands_in(ROOT / readme)
    assert found, f"{readme} shows no runstore command"
    for shown in found:
        where = f"{readme}:{shown.line}"
        check_accepted(shown, where)
        if shown.command == "run" and shown.arguments[1].startswith("examples/"):
            assert (ROOT / shown.arguments[1]).is_file(), where


@pytest.mark.parametrize("example", sorted(WRITTEN_METRICS))
def test_each_committed_campaign_loads_and_declares_what_its_worker_writes(example: str) -> None:
    campaign = load_campaign(EXAMPLES / example / "campaign.toml")
    assert campaign.name == example
    assert campaign.repetitions >= 5  # fewer: the rank test can never reach p < 0.05
    assert {metric.name for metric in campaign.metrics} == WRITTEN_METRICS[example]
    assert all(metric.unit or metric.name == "ratio" for metric in campaign.metrics)
    worker = (EXAMPLES / example / "worker.py").read_text(encoding="utf-8")
    for metric in WRITTEN_METRICS[example]:
        assert f'"{metric}":' in worker, f"{example}/worker.py does not write {metric}"


def test_the_hashing_campaign_expands_its_grids() -> None:
    campaign = load_campaign(EXAMPLES / "hashing" / "campaign.toml")
    assert [c.name for c in campaign.candidates] == [f"hashlib-{a}" for a in HASHING_ALGORITHMS]
    assert [p.name for p in campaign.problems] == [f"buffer-{s}" for s in HASHING_SIZES]
    assert campaign.candidates[2].parameters == {"algorithm": "sha256"}
    # a float parameter is kept as its decimal text (SPEC 15.1)
    assert campaign.problems[0].parameters == {"min_seconds": "0.1", "seed": 1, "size": 64}


def quick_copy(example: str, directory: Path, replacements: dict[str, str]) -> Path:
    """A copy of ``example``'s directory whose campaign file has ``replacements`` made
    (each must be found, so a changed example fails here rather than running long)."""
    copy = Path(shutil.copytree(EXAMPLES / example, directory / example))
    campaign = copy / "campaign.toml"
    text = campaign.read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text, f"{example}/campaign.toml no longer has {old!r}"
        text = text.replace(old, new)
    campaign.write_text(text, encoding="utf-8")
    return campaign


@pytest.fixture(scope="module")
def hashing_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/hashing run by the installed ``runstore`` with 2 repetitions of 10 ms
    measurements (30 slots) instead of 5 of 100 ms."""
    root = tmp_path_factory.mktemp("hashing")
    campaign = quick_copy(
        "hashing",
        root,
        {"repetitions = 5": "repetitions = 2", "min_seconds = 0.1": "min_seconds = 0.01"},
    )
    store = root / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "-j", "2", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "30/30 slots satisfied (30 accepted and 0 failed in this run)" in done.stderr
    return store


def test_the_hashing_example_runs_end_to_end(hashing_store: Path, tmp_path: Path) -> None:
    status = json.loads(runstore("status", "--store", str(hashing_store), "--json").stdout)
    results = status["results"]
    assert len(results) == len(HASHING_ALGORITHMS) * len(HASHING_SIZES)
    for result in results:
        algorithm = result["candidate"].removeprefix("hashlib-")
        assert result["candidate_parameters"] == {"algorithm": algorithm}
        assert result["parameters"]["min_seconds"] == "0.01"
        assert result["slots"] == result["accepted"] == 2
        assert set(result["metrics"]) == WRITTEN_METRICS["hashing"]
        units = {name: metric["unit"] for name, metric in result["metrics"].items()}
        assert units == {"throughput_mb_s": "MB/s", "ns_per_byte": "ns", "ns_per_call": "ns"}
    # What each worker wrote: its algorithm, the buffer's digest, consistent metrics.
    out = tmp_path / "export"
    assert runstore("export", "--store", str(hashing_store), "--out", str(out)).returncode == 0
    index = [json.loads(line) for line in (out / "index.jsonl").read_text().splitlines()]
    assert len(index) == 30
    for entry in index:
        (observation,) = entry["observations"]
        written = json.loads(
            (hashing_store / observation["artifact"]["path"] / "result.json").read_text()
        )
        algorithm = entry["candidate_id"].split("/")[1].removeprefix("hashlib-")
        size = int(entry["problem_id"].rsplit("-", 1)[1])
        buffer = random.Random(1).randbytes(size)
        assert (written["algorithm"], written["size"]) == (algorithm, size)
        assert written["digest"] == hashlib.new(algorithm, buffer).hexdigest()
        metrics = {name: float(value) for name, value in entry["metrics"].items()}
        assert metrics["throughput_mb_s"] * metrics["ns_per_byte"] == pytest.approx(1000)
        assert metrics["ns_per_call"] == pytest.approx(metrics["ns_per_byte"] * size)
        assert written["calls"] * metrics["ns_per_call"] == pytest.approx(written["elapsed_ns"])
        assert written["elapsed_ns"] >= 10_000_000  # at least min_seconds


def run_reading_commands(readme: str, store: Path) -> int:
    """Run ``readme``'s reading commands on ``store`` (its ``--store`` replaced); check
    each exits 0 and matches the output pasted under it. Returns how many ran."""
    ran = 0
    for shown in commands_in(ROOT / readme):
        if shown.command not in READING:
            continue
        arguments = list(shown.arguments)
        given = shown.option("--store")
        assert given is not None, f"{readme}:{shown.line} names no --store"
        arguments[arguments.index("--store") + 1] = str(store)
        done = runstore(*arguments)
        where = f"{readme}:{shown.line}: runstore {' '.join(shown.arguments)}"
        assert done.returncode == 0, f"{where}: {done.stdout}{done.stderr}"
        if shown.pasted is not None:
            live = [line.rstrip() for line in done.stdout.strip().splitlines()]
            pasted = [line.rstrip() for line in shown.pasted.strip().splitlines()]
            assert pasted[0] == live[0], where
            if shown.command == "compare":  # the footnote (status ends with what varies)
                assert pasted[-1] == live[-1], where
        ran += 1
    return ran


def test_the_hashing_readme_commands_run_on_its_store(hashing_store: Path) -> None:
    assert run_reading_commands("examples/hashing/README.md", hashing_store) >= 2


def test_the_codecs_readme_commands_run_on_the_demo_store(
    demo_store: tuple[Path, object],
) -> None:
    store, _ = demo_store
    assert run_reading_commands("examples/codecs/README.md", store) >= 2
