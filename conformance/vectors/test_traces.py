"""The committed model transcripts (vectors/traces/*.md) and SPEC.md's generated blocks are
current.

Regenerate both (with the vector files) with ``tools/regen``; ``tools/regen --check`` is
tested in conformance/vectors/test_vectors.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from runstore.testing.scenarios import SCENARIOS
from runstore.testing.trace import main, render_scenario

TRACES = Path(__file__).resolve().parents[2] / "vectors" / "traces"
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
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_spec", root / "tools" / "gen_spec.py")
    assert spec is not None and spec.loader is not None
    gen_spec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_spec)
    text = (root / "SPEC.md").read_text(encoding="utf-8")
    assert gen_spec.regenerate(text) == text, "run: tools/regen"
    assert "| `finalizing` | `accepted`, `censored`, `superseded`, `failed` |" in text
