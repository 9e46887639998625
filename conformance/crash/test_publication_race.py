"""Two synchronized publisher processes publish identical content (SPEC.md section 11,
"Identical content"), and the variant that kills the winner right after its rename and
before the parent syncs: the survivor finishes, and re-running the killed publication
afterwards adds its root, so both lease roots exist.

Each race (see :mod:`runstore.crashsim.race`) prepares its store in a child, forks two
publishers that each open their own store handle, meets them at a barrier inside
``populate`` so both stages are registered before either renames, and compares the store
with the model afterwards. The killing variant runs a few times so that either publisher
may be the winner.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from runstore.crashsim.race import KILLED
from runstore.crashsim.race import TOKENS
from runstore.crashsim.race import RaceResult
from runstore.crashsim.race import run_race
from runstore.crashsim.scenarios import DATASET_ID
from runstore.crashsim.scenarios import A
from runstore.crashsim.scenarios import B

RESERVATIONS = {A: "reservation-a", B: "reservation-b"}


def _roots(projection: dict[str, list[tuple[object, ...]]]) -> set[tuple[object, ...]]:
    return set(projection["leased_artifacts"])


def _released(result: RaceResult, token: int) -> object:
    """The release time of the staging lease of stage ``token``."""
    (released,) = [row[7] for row in result.final["leases"] if row[0] == f"staging-{token:032x}"]
    return released


def _common(result: RaceResult) -> None:
    assert result.problems == ()
    assert result.objects == (DATASET_ID.removeprefix("run-store-v1:"),)
    assert [row[0] for row in result.final["artifacts"]] == [DATASET_ID]
    assert _roots(result.final) == {(RESERVATIONS[A], DATASET_ID), (RESERVATIONS[B], DATASET_ID)}
    assert set(result.artifacts.values()) == {DATASET_ID}
    assert result.final in result.models


def test_two_processes_publishing_identical_content_converge(tmp_path: Path) -> None:
    result = run_race(str(tmp_path), kill_winner=False)
    assert result.statuses == {A: 0, B: 0}, result.problems
    _common(result)
    # One rename placed the object; the other publisher found it taken and verified it.
    assert sorted(result.renamed.values()) == [False, True]
    assert result.stages == ()
    assert all(_released(result, TOKENS[handle]) is not None for handle in (A, B))
    assert result.after_race == result.final


@pytest.mark.parametrize("round_", range(3))
def test_the_survivor_of_a_winner_killed_after_its_rename_finishes(
    tmp_path: Path, round_: int
) -> None:
    result = run_race(str(tmp_path), kill_winner=True)
    killed = result.killed
    assert killed is not None, result.statuses
    survivor = B if killed == A else A
    assert result.statuses == {killed: KILLED, survivor: 0}
    # The survivor verified the winner's object (its own rename found the address taken),
    # registered it and rooted it under its reservation; the killed publisher has no root.
    assert result.renamed[survivor] is False
    assert _roots(result.after_race) == {(RESERVATIONS[survivor], DATASET_ID)}
    # Re-running the killed publication succeeds (the identical object verifies again) and
    # adds its root: both lease roots exist over the one object.
    assert result.renamed[f"{killed}.rerun"] is False
    _common(result)
    # The killed publisher's stage stays, registered and unreleased: recovery's to
    # quarantine (the later issue); its re-run's stage is gone and released.
    assert result.stages == (f".staging-{TOKENS[killed]:032x}",)
    assert _released(result, TOKENS[killed]) is None
    assert _released(result, TOKENS[killed] + 1) is not None
    assert _released(result, TOKENS[survivor]) is not None
