"""Explicit campaign revisions through the console script (SPEC.md section 15.9): a changed
pair is refused without ``--revise``; with it, only the changed pairs get new identities
and run; status, compare, export and report show the latest revision by default and any
earlier one on request; ``campaigns`` lists the revisions; unknown names are usage errors.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from conformance.cli.world import json_lines
from conformance.cli.world import runstore
from conformance.cli.world import write_campaign
from conformance.closed_store import rows as query

CANDIDATES = [("a", "ok"), ("b", "ok")]
PROBLEMS = ["p", "q"]
REPETITIONS = "repetitions = 2"


def _campaign(tmp_path: Path) -> tuple[Path, Path]:
    campaign = write_campaign(tmp_path / "c", CANDIDATES, PROBLEMS, settings=REPETITIONS)
    store = tmp_path / "store"
    first = runstore("run", str(campaign), "--store", str(store), "--init", "--json")
    assert first.returncode == 0, first.stderr
    return campaign, store


def _edit_candidate(campaign: Path, name: str, line: str) -> None:
    """Add ``line`` to candidate ``name``'s table of the campaign file."""
    text = campaign.read_text()
    marker = f'name = "{name}"\n'
    assert text.count(marker) == 1
    campaign.write_text(text.replace(marker, marker + line + "\n"))


def _slots(store: Path) -> dict[str, int]:
    """Attempt slots by candidate id, every revision."""
    return dict(
        query(
            store,
            "SELECT r.candidate_id, count(*) FROM attempt_slots AS s "
            "JOIN resolved_runs AS r ON r.id = s.run_id GROUP BY 1",
        )
    )


def _status(store: Path, *options: str) -> dict[str, object]:
    shown = runstore("status", "--store", str(store), "--json", *options)
    assert shown.returncode == 0, shown.stderr
    document = json_lines(shown.stdout)[0]
    assert isinstance(document, dict)
    return document


def test_a_changed_pair_is_refused_naming_revise_and_nothing_is_written(tmp_path: Path) -> None:
    campaign, store = _campaign(tmp_path)
    before = query(store, "SELECT count(*) FROM events")
    _edit_candidate(campaign, "b", 'env.LEVEL = "9"')
    refused = runstore("run", str(campaign), "--store", str(store))
    assert refused.returncode == 4
    assert "b x p: run specification differs: env registered {}" in refused.stderr
    assert "run --revise registers the changed pairs as revision 1" in refused.stderr
    assert "--revise" in refused.stderr.split("hint:", 1)[1]
    assert "a x p" not in refused.stderr
    assert query(store, "SELECT count(*) FROM events") == before


def test_revise_runs_only_the_changed_pairs_and_keeps_every_earlier_result(
    tmp_path: Path,
) -> None:
    campaign, store = _campaign(tmp_path)
    accepted_before = set(query(store, "SELECT id FROM attempts WHERE state = 'accepted'"))
    assert len(accepted_before) == 8
    _edit_candidate(campaign, "b", 'env.LEVEL = "9"')
    revised = runstore("run", str(campaign), "--store", str(store), "--revise", "--json")
    assert revised.returncode == 0, revised.stderr
    events = json_lines(revised.stdout)
    (announced,) = [event for event in events if event["event"] == "campaign"]
    assert announced["revision"] == 1
    assert announced["revised"] == ["b x p", "b x q"]
    assert announced["registered"] == 4
    started = [event for event in events if event["event"] == "attempt_started"]
    assert len(started) == 4
    assert {str(event["candidate"]).rsplit("/", 1)[-1] for event in started} == {"b"}
    accepted_after = set(query(store, "SELECT id FROM attempts WHERE state = 'accepted'"))
    assert accepted_before < accepted_after and len(accepted_after) == 12
    # The new pairs have identities of their own: their decisions carry the revision.
    assert _slots(store) == {"e2e/a": 4, "e2e/b": 8}
    revisions = query(
        store,
        "SELECT json_extract(record_json, '$.evidence.revision'), count(*) "
        "FROM applicability_decisions GROUP BY 1 ORDER BY 1",
    )
    assert revisions == [(None, 4), (1, 2)]
    # An unchanged file with --revise registers nothing and keeps the revision.
    again = runstore("run", str(campaign), "--store", str(store), "--revise", "--json")
    assert again.returncode == 0, again.stderr
    (announced,) = [e for e in json_lines(again.stdout) if e["event"] == "campaign"]
    assert (announced["revision"], announced["registered"], announced["revised"]) == (1, 0, [])
    for check in ("validate", "audit"):
        result = runstore(check, "--store", str(store))
        assert result.returncode == 0, result.stdout + result.stderr


def test_readers_show_the_latest_revision_and_any_earlier_one_on_request(tmp_path: Path) -> None:
    campaign, store = _campaign(tmp_path)
    _edit_candidate(campaign, "b", 'env.LEVEL = "9"')
    assert runstore("run", str(campaign), "--store", str(store), "--revise").returncode == 0
    latest = _status(store)
    assert latest["totals"] == _status(store, "--revision", "1")["totals"]
    assert latest["by_candidate"]["e2e/b"]["accepted"] == 4  # type: ignore[index]
    everything = _status(store, "--revision", "all")
    assert everything["by_candidate"]["e2e/b"]["accepted"] == 8  # type: ignore[index]
    earlier = _status(store, "--revision", "0")
    assert earlier["by_candidate"]["e2e/b"]["accepted"] == 4  # type: ignore[index]
    run_of = {
        (result["candidate"], result["problem"]): result["run_id"]
        for result in latest["results"]  # type: ignore[attr-defined]
    }
    earlier_run_of = {
        (result["candidate"], result["problem"]): result["run_id"]
        for result in earlier["results"]  # type: ignore[attr-defined]
    }
    assert run_of.keys() == earlier_run_of.keys()
    changed = {pair for pair in run_of if run_of[pair] != earlier_run_of[pair]}
    assert changed == {("b", "p"), ("b", "q")}

    # A name means the latest revision's slot; the earlier one stays reachable by id.
    named = runstore("explain", "e2e/b/p/measurement-1", "--store", str(store), "--json")
    assert named.returncode == 0, named.stderr
    slot = json_lines(named.stdout)[0]["slot"]
    assert isinstance(slot, dict) and slot["run_id"] == run_of["b", "p"]

    listed = runstore("campaigns", "--store", str(store), "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = json_lines(listed.stdout)[0]["campaigns"]  # type: ignore[misc]
    assert entry["name"] == "e2e" and entry["revision"] == 1
    assert entry["revisions"] == [{"pairs": 4, "revision": 0}, {"pairs": 2, "revision": 1}]
    assert entry["pairs"] == 4 and entry["slots"] == {"accepted": 8}
    human = runstore("campaigns", "--store", str(store))
    assert human.returncode == 0 and "0: 4, 1: 2" in human.stdout

    compared = runstore(
        "compare", "--store", str(store), "--baseline-revision", "0", "--metric", "value", "--json"
    )
    assert compared.returncode == 0, compared.stderr
    document = json_lines(compared.stdout)[0]
    assert (document["baseline_revision"], document["revision"]) == (0, 1)
    assert document["unchanged"] == ["a x p", "a x q"]
    assert {(row["candidate"], row["problem"]) for row in document["rows"]} == {  # type: ignore[attr-defined]
        ("b", "p"),
        ("b", "q"),
    }

    out = tmp_path / "export"
    exported = runstore("export", "--store", str(store), "--out", str(out), "--revision", "0")
    assert exported.returncode == 0, exported.stderr
    with (out / "summary.csv").open(newline="") as handle:
        runs = {row["run_id"] for row in csv.DictReader(handle)}
    assert runs == set(earlier_run_of.values())
    exported = runstore("export", "--store", str(store), "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    with (out / "summary.csv").open(newline="") as handle:
        runs = {row["run_id"] for row in csv.DictReader(handle)}
    assert runs == set(run_of.values())


def test_a_reverted_pair_is_a_new_revision_and_an_excluded_pair_leaves_the_view(
    tmp_path: Path,
) -> None:
    campaign, store = _campaign(tmp_path)
    original = campaign.read_text()
    _edit_candidate(campaign, "b", 'env.LEVEL = "9"')
    assert runstore("run", str(campaign), "--store", str(store), "--revise").returncode == 0
    campaign.write_text(original)
    assert runstore("run", str(campaign), "--store", str(store)).returncode == 4
    reverted = runstore("run", str(campaign), "--store", str(store), "--revise", "--json")
    assert reverted.returncode == 0, reverted.stderr
    (announced,) = [e for e in json_lines(reverted.stdout) if e["event"] == "campaign"]
    assert announced["revision"] == 2 and announced["registered"] == 4
    assert _slots(store)["e2e/b"] == 12  # three revisions of b's pairs, none rewritten

    _edit_candidate(campaign, "a", 'applies_to = ["q"]')
    excluded = runstore("run", str(campaign), "--store", str(store), "--revise", "--json")
    assert excluded.returncode == 0, excluded.stderr
    (announced,) = [e for e in json_lines(excluded.stdout) if e["event"] == "campaign"]
    assert announced["revision"] == 3
    assert announced["revised"] == ["a x p", "a x q"]
    latest = _status(store)
    assert latest["excluded"] == [{"candidate_id": "e2e/a", "problem_id": "e2e/p"}]
    assert latest["by_candidate"]["e2e/a"]["accepted"] == 2  # type: ignore[index]
    earlier = _status(store, "--revision", "2")
    assert earlier["excluded"] == []
    assert earlier["by_candidate"]["e2e/a"]["accepted"] == 4  # type: ignore[index]
    # The exclusion is a decision alone; the store still validates and audits clean.
    assert query(store, "SELECT count(*) FROM applicability_decisions WHERE applicable = 0") == [
        (1,)
    ]
    for check in ("validate", "audit"):
        result = runstore(check, "--store", str(store))
        assert result.returncode == 0, result.stdout + result.stderr
    again = runstore("run", str(campaign), "--store", str(store), "--json")
    assert again.returncode == 0, again.stderr
    (announced,) = [e for e in json_lines(again.stdout) if e["event"] == "campaign"]
    assert (announced["revision"], announced["registered"]) == (3, 0)


def test_unknown_campaigns_and_revisions_are_usage_errors_naming_what_exists(
    tmp_path: Path,
) -> None:
    _file, store = _campaign(tmp_path)
    out = tmp_path / "out"
    for command in (
        ["status"],
        ["export", "--out", str(out)],
        ["report", "--html", str(tmp_path / "r.html")],
        ["compare", "--baseline", "a"],
        ["failures"],
    ):
        refused = runstore(*command, "--store", str(store), "--campaign", "e2f")
        assert refused.returncode == 2, (command, refused.stderr)
        assert refused.stderr.startswith("error: unknown_campaign: no campaign 'e2f'")
        assert "campaigns: e2e" in refused.stderr
    assert not out.exists() and not (tmp_path / "r.html").exists()
    for revision, code in (("1", "unknown_revision"), ("x", "option_invalid"), ("-1", None)):
        refused = runstore("status", "--store", str(store), "--revision", revision, "--json")
        assert refused.returncode == 2, refused.stderr
        if code is not None:
            assert json.loads(refused.stdout)["error"] == code
    refused = runstore(
        "compare", "--store", str(store), "--baseline-revision", "all", "--campaign", "e2e"
    )
    assert refused.returncode == 2 and "option_invalid" in refused.stderr
    both = runstore("compare", "--store", str(store), "--baseline", "a", "--baseline-revision", "0")
    assert both.returncode == 2 and "comparison_invalid" in both.stderr
