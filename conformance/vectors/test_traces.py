"""The committed model transcripts (vectors/traces/*.md) and SPEC.md's generated blocks are
current.

Regenerate both (with the vector files) with ``tools/regen``; ``tools/regen --check`` is
tested in conformance/vectors/test_vectors.py, and here on each of SPEC's blocks. The
builders of the blocks are tested here too: the contents' GitHub anchors and the command
table read from a typer app's registered commands.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import gen_spec
import pytest
import typer
from runstore.testing.scenarios import SCENARIOS
from runstore.testing.trace import main
from runstore.testing.trace import render_scenario

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "vectors" / "traces"
SPEC = ROOT / "SPEC.md"
REQUIRED = {
    "happy_path_accepted",
    "failure_then_authorized_retry_accepted",
    "two_contenders_one_superseded",
    "expired_owner_recovered",
    "stale_revision_refused",
    "expired_lease_refused_at_exact_expiry",
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_committed_transcript_is_current(name: str) -> None:
    committed = (TRACES / f"{name}.md").read_text(encoding="utf-8")
    assert render_scenario(name) == committed, "run: tools/regen"


def test_every_required_scenario_exists_and_no_transcript_is_orphaned() -> None:
    assert set(SCENARIOS) >= REQUIRED
    assert {path.stem for path in TRACES.glob("*.md")} == set(SCENARIOS)


def test_check_mode_reports_a_stale_transcript(tmp_path: Path) -> None:
    assert main(["--all", "--dir", str(tmp_path)]) == 0
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    (tmp_path / "happy_path_accepted.md").write_text("stale\n", encoding="utf-8")
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    (tmp_path / "retired_scenario.md").write_text("old\n", encoding="utf-8")
    assert main(["--all", "--dir", str(tmp_path)]) == 0
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    assert not (tmp_path / "retired_scenario.md").exists()


def test_transcripts_show_refusals_and_state_changes() -> None:
    text = render_scenario("stale_revision_refused")
    assert "- **refused** `stale_revision`" in text
    assert "State unchanged." in text
    assert "State changes:" in text


def test_spec_generated_blocks_are_current() -> None:
    text = SPEC.read_text(encoding="utf-8")
    assert gen_spec.regenerate(text) == text, "run: tools/regen"
    assert "| `finalizing` | `accepted`, `censored`, `superseded`, `failed` |" in text
    assert "  - [14.2 Order of a pass](#142-order-of-a-pass)\n" in text
    assert (
        "| `explain` | One slot's attempts, transitions, events, artifacts and outcome. |" in text
    )


@pytest.mark.parametrize("name", sorted(gen_spec.BLOCKS))
def test_regen_check_reports_each_stale_spec_block(name: str, tmp_path: Path) -> None:
    text = SPEC.read_text(encoding="utf-8")
    current = gen_spec.block(text, name)
    stale = text.replace(current, current.replace("\n", "\nstale line\n", 1), 1)
    assert stale != text
    copy = tmp_path / "SPEC.md"
    copy.write_text(stale, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "regen"), "--check", "--spec", str(copy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and f"stale: {copy}" in done.stderr, done.stderr
    assert copy.read_text(encoding="utf-8") == stale
    assert gen_spec.regenerate(stale) == text


def test_contents_link_every_section_and_subsection_in_order() -> None:
    text = SPEC.read_text(encoding="utf-8")
    links = re.findall(r"^( *)- \[(.+)\]\(#([^)]+)\)$", gen_spec.block(text, "contents"), re.M)
    wanted = [h for h in gen_spec.headings(text) if h.level in (2, 3)]
    assert [(len(indent) // 2 + 2, label) for indent, label, _ in links] == [
        (h.level, h.text) for h in wanted
    ]
    assert [anchor for _, _, anchor in links] == [h.anchor for h in wanted]


def test_anchors_are_githubs() -> None:
    """GitHub's rules (github-slugger), one heading each: code spans render as their text,
    punctuation but ``-`` and ``_`` goes, a repeated anchor gets ``-1``, a fenced ``#`` line
    is no heading, closing ``#`` marks (after a space) are not text."""
    text = (
        "# Title\n\n## 12.2 A manifest (`m.json`, v 1)\n\n### 14.10 I/O faults\n"
        "### The store's builder_x -- y\n```\n# not a heading\n```\n## Example ##\n"
        "#### Example\n#not a heading\n### C#\n"
    )
    assert [(h.level, h.text, h.anchor) for h in gen_spec.headings(text)] == [
        (1, "Title", "title"),
        (2, "12.2 A manifest (`m.json`, v 1)", "122-a-manifest-mjson-v-1"),
        (3, "14.10 I/O faults", "1410-io-faults"),
        (3, "The store's builder_x -- y", "the-stores-builder_x----y"),
        (2, "Example", "example"),
        (4, "Example", "example-1"),
        (3, "C#", "c"),
    ]
    assert gen_spec.contents_block(text).splitlines()[2:] == [
        "- [12.2 A manifest (`m.json`, v 1)](#122-a-manifest-mjson-v-1)",
        "  - [14.10 I/O faults](#1410-io-faults)",
        "  - [The store's builder_x -- y](#the-stores-builder_x----y)",
        "- [Example](#example)",
        "  - [C#](#c)",
    ]


def test_the_command_table_is_read_from_the_apps_commands() -> None:
    """A two-command app of this test's own: an argument, a required option with an
    environment variable and a short name, a flag, a command without ``--json``, a help
    whose first sentence is its summary."""
    demo = typer.Typer()

    @demo.command()
    def fetch(
        target: Annotated[str, typer.Argument()],
        store: Annotated[str, typer.Option("--store", "-s", envvar="DEMO")],
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Fetch TARGET. Then more | text.

        A second paragraph."""

    @demo.command(name="tidy-up")
    def tidy(quick: Annotated[bool, typer.Option("--quick/--slow")] = False) -> None:
        """Tidy | up."""

    assert gen_spec.command_table(demo).splitlines() == [
        "| command | summary | arguments | options | `--json` |",
        "| --- | --- | --- | --- | --- |",
        "| `fetch` | Fetch TARGET. | `TARGET` | `--store`/`-s` (required, or `$DEMO`) | yes |",
        "| `tidy-up` | Tidy \\| up. | none | `--quick`/`--slow` | no |",
    ]
