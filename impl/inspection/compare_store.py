"""``compare`` on a snapshot: which pairs (campaign, revision) are compared with which
baseline (a candidate, another campaign, or another revision), SPEC.md sections 15.9 and
17.5.

Rules of this file: choosing what is compared; the statistics and words are
:mod:`runstore.inspection.comparison`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from runstore.errors import ComparisonInvalidError
from runstore.inspection import comparison
from runstore.inspection.campaigns import check_view
from runstore.inspection.campaigns import revisions
from runstore.inspection.comparison import ComparisonReport
from runstore.inspection.results import pair_results


def check_baselines(*given: object) -> None:
    """Refuse anything but exactly one baseline (``comparison_invalid``)."""
    if sum(value is not None for value in given) != 1:
        raise ComparisonInvalidError(
            "give exactly one of --baseline, --baseline-campaign or --baseline-revision"
        )


def compare_store(
    connection: sqlite3.Connection,
    *,
    campaign: str | None,
    revision: int | None,
    baseline: str | None = None,
    baseline_campaign: str | None = None,
    baseline_revision: int | None = None,
    metrics: Sequence[str] | None = None,
) -> ComparisonReport:
    """Exactly one of ``baseline`` (a candidate of the campaign), ``baseline_campaign``
    or ``baseline_revision`` (a revision of the campaign) is the baseline; ``revision``
    is the revision compared (None: each pair's latest)."""
    check_baselines(baseline, baseline_campaign, baseline_revision)
    held = revisions(connection)
    check_view(connection, campaign, revision, held)
    results = pair_results(connection, revision=revision)
    if baseline is not None:
        return comparison.against_candidate(
            results, campaign=campaign, baseline=baseline, metrics=metrics
        )
    if baseline_campaign is not None:
        return comparison.against_campaign(
            results, campaign=campaign, baseline_campaign=baseline_campaign, metrics=metrics
        )
    assert baseline_revision is not None
    name = comparison.choose_campaign(results, campaign)
    check_view(connection, name, baseline_revision, held)
    current = revision if revision is not None else max(held[name])
    return comparison.against_revision(
        results,
        pair_results(connection, campaign=name, revision=baseline_revision),
        campaign=name,
        revision=current,
        baseline_revision=baseline_revision,
        metrics=metrics,
    )
