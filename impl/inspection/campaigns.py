"""A store's campaigns and their revisions, and the checks that a named campaign or
revision exists (SPEC.md section 15.9).

Rules of this file: reads only, on a snapshot's private copy, in set-based queries. A
campaign is the part of a candidate id before its first ``/`` (``""`` without one, as
:func:`runstore.inspection.reader.campaign_of` says); a decision's revision is the rule
:data:`runstore.inspection.reader.DECISION_REVISION` states.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

import attrs
from runstore import sql
from runstore.canonical import JSON
from runstore.errors import UnknownCampaignError
from runstore.errors import UnknownRevisionError
from runstore.inspection.reader import ALL_REVISIONS
from runstore.inspection.reader import DECISION_REVISION
from runstore.inspection.reader import Revision
from runstore.inspection.reader import campaign_of
from runstore.inspection.reader import scope
from runstore.inspection.status_summary import status_counts

SHOWN_NAMES = 20

_DECISIONS = f"SELECT candidate_id, applicable, {DECISION_REVISION} FROM applicability_decisions"


@attrs.frozen(kw_only=True)
class RevisionSummary:
    """One revision of a campaign: how many pairs it registered (changed or new ones)."""

    revision: int
    pairs: int

    def to_json(self) -> dict[str, JSON]:
        return {"pairs": self.pairs, "revision": self.revision}


@attrs.frozen(kw_only=True)
class CampaignSummary:
    """One campaign: its revisions, and in its latest revision the pairs (applicable and
    excluded) and the slots by state."""

    name: str
    revisions: tuple[RevisionSummary, ...]
    pairs: int
    excluded: int
    slots: dict[str, int]

    @property
    def revision(self) -> int:
        return self.revisions[-1].revision

    def to_json(self) -> dict[str, JSON]:
        return {
            "excluded": self.excluded,
            "name": self.name,
            "pairs": self.pairs,
            "revision": self.revision,
            "revisions": [revision.to_json() for revision in self.revisions],
            "slots": dict(self.slots),
        }


@attrs.frozen(kw_only=True)
class CampaignList:
    campaigns: tuple[CampaignSummary, ...]

    def to_json(self) -> dict[str, JSON]:
        return {"campaigns": [campaign.to_json() for campaign in self.campaigns]}


def revisions(connection: sqlite3.Connection) -> dict[str, dict[int, int]]:
    """Each campaign's revisions, with how many decisions each registered."""
    counted: Counter[tuple[str, int]] = Counter()
    for candidate_id, _applicable, revision in sql.execute(connection, _DECISIONS):
        counted[campaign_of(str(candidate_id)), int(revision)] += 1
    found: dict[str, dict[int, int]] = {}
    for (name, revision), count in sorted(counted.items()):
        found.setdefault(name, {})[revision] = count
    return found


def list_campaigns(connection: sqlite3.Connection) -> CampaignList:
    """Every campaign, sorted by name, with its revisions and, in each pair's latest
    revision, its pairs and slots by state. The slot states are
    :func:`~runstore.inspection.status_summary.status_counts`' (folded as rows stream, per
    candidate), the pairs one grouped count of the runs in view."""
    held = revisions(connection)
    counts = status_counts(connection)
    states: dict[str, Counter[str]] = {name: Counter() for name in held}
    for candidate_id, by_state in counts.by_candidate.items():
        tally = states.setdefault(campaign_of(candidate_id), Counter())
        tally.update({state: count for state, count in by_state.items() if count})
    pairs: Counter[str] = Counter()
    runs, params = scope(
        "SELECT r.candidate_id, count(*) FROM resolved_runs AS r", None, None, "", None
    )
    for candidate_id, count in sql.execute(connection, runs + " GROUP BY r.candidate_id", params):
        pairs[campaign_of(str(candidate_id))] += int(count)
    excluded: Counter[str] = Counter()
    for candidate_id, _problem_id in counts.excluded:
        excluded[campaign_of(candidate_id)] += 1
    return CampaignList(
        campaigns=tuple(
            CampaignSummary(
                name=name,
                revisions=tuple(
                    RevisionSummary(revision=revision, pairs=count)
                    for revision, count in sorted(by_revision.items())
                ),
                pairs=pairs[name],
                excluded=excluded[name],
                slots=dict(sorted(states.get(name, Counter()).items())),
            )
            for name, by_revision in sorted(held.items())
        )
    )


def check_view(
    connection: sqlite3.Connection,
    campaign: str | None,
    revision: Revision = None,
    held: dict[str, dict[int, int]] | None = None,
) -> None:
    """Refuse a ``campaign`` the store does not hold (``unknown_campaign``) and an int
    ``revision`` that campaign (or, without one, every campaign) lacks
    (``unknown_revision``); the messages list what exists. ``held``: :func:`revisions`,
    when the caller has read it already."""
    held = revisions(connection) if held is None else held
    if campaign is not None and campaign not in held:
        raise UnknownCampaignError(f"no campaign {campaign!r} in the store; {_listed(held)}")
    if revision is None or revision == ALL_REVISIONS:
        return
    names = [campaign] if campaign is not None else sorted(held)
    known = sorted({number for name in names for number in held[name]})
    if revision not in known:
        whose = f"campaign {campaign}" if campaign is not None else "the store's campaigns"
        raise UnknownRevisionError(
            f"no revision {revision} in {whose}; revisions: {_numbers(known)}"
        )


def _listed(held: dict[str, dict[int, int]]) -> str:
    names = sorted(held)
    if not names:
        return "it holds no campaign"
    shown = ", ".join(names[:SHOWN_NAMES])
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    return f"campaigns: {shown}{more} (runstore campaigns lists them)"


def _numbers(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values) or "none"
