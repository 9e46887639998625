"""``campaigns`` for people: one row per campaign with its revisions and slot counts.

Rules of this file: rendering only, from the ``campaigns`` document (what ``--json``
prints).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from runstore.cli.output import table
from runstore.cli.render_status import STATES


def campaign_tables(document: Mapping[str, Any]) -> tuple[list[Table], list[str]]:
    """The campaigns table and a line when the store holds none."""
    campaigns = document["campaigns"]
    if not campaigns:
        return [], ["the store holds no campaign (runstore run CAMPAIGN --store S registers one)"]
    shown = [
        state for state in STATES if any(campaign["slots"].get(state, 0) for campaign in campaigns)
    ]
    rows = [
        [
            campaign["name"] or "(none)",
            campaign["revision"],
            _revisions(campaign["revisions"]),
            campaign["pairs"],
            sum(campaign["slots"].values()),
            *(campaign["slots"].get(state, 0) for state in shown),
        ]
        for campaign in campaigns
    ]
    columns = ["campaign", "revision", "pairs registered by revision", "pairs", "slots", *shown]
    lines = [
        "counts are of each pair's latest revision; status --campaign NAME --revision N shows"
        " an earlier one"
    ]
    return [table("campaigns", columns, rows)], lines


def _revisions(revisions: list[Mapping[str, int]]) -> str:
    return ", ".join(f"{item['revision']}: {item['pairs']}" for item in revisions)
