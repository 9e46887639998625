"""Repetitions, grids, floats and declared metrics in a campaign file (SPEC.md sections 15.1
and 15.2), written from the text: what they expand into, the order a run takes, the
refusals, and that a file without them keeps the identities it always had."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from runstore.errors import CampaignInvalidError
from runstore.runner.campaign import Campaign
from runstore.runner.campaign_file import load_campaign
from runstore.runner.plan import SlotPlan
from runstore.runner.plan import plan

PINNED_TOML = """\
[campaign]
name = "pinned"
slot_kind = "stream"
checkpoints = 2
warmup = true

[[candidates]]
name = "a"
command = ["{python}", "worker.py", "a"]
env = { MODE = "fast" }
files = ["worker.py"]

[[candidates]]
name = "b"
command = ["{python}", "worker.py", "b"]
applies_to = ["big"]

[[problems]]
name = "small"
parameters = { size = 10, kinds = ["x", "y"], nested = { on = true } }

[[problems]]
name = "large"
parameters = { size = 1000 }
tags = ["big"]
"""

# The ids the planner gave PINNED_TOML (with worker.py holding ``print("work")``) before
# repetitions, grids, floats and metrics existed, computed by that code (commit d391613).
PINNED = [
    (
        "decision:v1:ec29319620d4fa7a290cd1752397837c7f8662aff78d444d7409f1f1153eb61a",
        "run:v1:450a92d360dadba958af42036bfd87ac9eb6575a0053973da0c0e2797fa447cf",
        "attempt-slot:v1:62f6c5bbe90654400ce8a6bfddb92e2fc2173d6172be4d0b41351aa27b1d4e04",
        (),
    ),
    (
        "decision:v1:ec29319620d4fa7a290cd1752397837c7f8662aff78d444d7409f1f1153eb61a",
        "run:v1:450a92d360dadba958af42036bfd87ac9eb6575a0053973da0c0e2797fa447cf",
        "attempt-slot:v1:666bc900933b6cabadc9ee21d906b6e37f6dff05dfe150cf135ce4ab7e6e9191",
        (
            "observation-slot:v1:e1cf672a8fda89102b1fef61f61a0ba7f88852e1a70d470517fe56aa2f946f3c",
            "observation-slot:v1:0823d18c08651bcbe79183b5b6c0009bc01215063b57a7f1ef1fedda5bd8582b",
        ),
    ),
    (
        "decision:v1:69666fced38040cf9a3e57a0f721756abb1e704970b04daad3d2d7b33785231c",
        "run:v1:827d718c86db7d7cc9f7b4b7d305ae5d0b916f941fea045b48af25cc2589dcd8",
        "attempt-slot:v1:ff8d49ffd9b02a5f5e8a715606ed084e4d282f5a4c8dedd2c47cfc78d98bcc46",
        (),
    ),
    (
        "decision:v1:69666fced38040cf9a3e57a0f721756abb1e704970b04daad3d2d7b33785231c",
        "run:v1:827d718c86db7d7cc9f7b4b7d305ae5d0b916f941fea045b48af25cc2589dcd8",
        "attempt-slot:v1:5b8ed46e8deebc02605ee455920411430aa7feabd1cfd859985a79c520ddbe34",
        (
            "observation-slot:v1:03d1790c6a5234d0a2f5e36de0c0c48ebdf35f714f96c845dc3ed028cdb658dd",
            "observation-slot:v1:bd0b7da692acd2b72200f0c8ed39d6dfa087a7e08ed7ae02abc7b8f755deda6a",
        ),
    ),
    (
        "decision:v1:8df5a8d739787f91c371be0f53450341f4599286132ed97f68619d4b36caf8cd",
        None,
        None,
        (),
    ),
    (
        "decision:v1:d0d0d45347b01b6446cf51f0368373a2b26f4bf8c6264fc577194ab3c87fd20f",
        "run:v1:632873d87dc8a7dd802da1e35c58e88e69ed89922453b263d3f60712a56e4474",
        "attempt-slot:v1:432751e82fc5ec0e4661a37565f895050c7374553d21a26cd2f07e459d810194",
        (),
    ),
    (
        "decision:v1:d0d0d45347b01b6446cf51f0368373a2b26f4bf8c6264fc577194ab3c87fd20f",
        "run:v1:632873d87dc8a7dd802da1e35c58e88e69ed89922453b263d3f60712a56e4474",
        "attempt-slot:v1:fb785ad07acd336c5d004ed411ec6e0812cf33f8a0d6bc4bdb8520d0bf4f0af6",
        (
            "observation-slot:v1:d519710849c3e61c90761f8c4b2fc2ff60578c14c176452bea7389d82915cc0e",
            "observation-slot:v1:eefae25c2e787323ecfbdab162dbe24039238fbdaa5f81d3eb97dfaca170e5df",
        ),
    ),
]


HEAD = """\
[campaign]
name = "bench"
{campaign}

[[candidates]]
name = "a"
command = ["{{python}}", "w.py"]
{candidate}

[[candidates]]
name = "b"
command = ["{{python}}", "w.py"]

[[problems]]
name = "p"
{problem}

[[problems]]
name = "q"
{tail}
"""


def load(tmp_path: Path, text: str) -> Campaign:
    path = tmp_path / "campaign.toml"
    path.write_text(text)
    return load_campaign(path)


def campaign(
    tmp_path: Path, *, campaign: str = "", candidate: str = "", problem: str = "", tail: str = ""
) -> Campaign:
    return load(
        tmp_path,
        HEAD.format(campaign=campaign, candidate=candidate, problem=problem, tail=tail),
    )


def refused(tmp_path: Path, expected: str, **parts: str) -> str:
    with pytest.raises(CampaignInvalidError) as caught:
        campaign(tmp_path, **parts)
    assert caught.value.code == "campaign_invalid"
    assert expected in caught.value.message, caught.value.message
    assert "\n" not in caught.value.message
    return caught.value.message


def ids(slots: tuple[SlotPlan, ...]) -> list[tuple[object, ...]]:
    return [
        (
            slot.decision.id,
            slot.run.id if slot.run else None,
            slot.attempt_slot.id if slot.attempt_slot else None,
            tuple(observation.id for observation in slot.observation_slots),
        )
        for slot in slots
    ]


def test_a_file_without_the_new_keys_keeps_its_identities(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text('print("work")\n')
    assert ids(plan(load(tmp_path, PINNED_TOML))) == PINNED


def test_floats_become_their_shortest_decimal_text(tmp_path: Path) -> None:
    loaded = campaign(
        tmp_path,
        problem="parameters = { a = 0.0001, b = 1e-7, c = 1_000.5, d = -0.0, e = [2.50, 3e2] }",
    )
    assert loaded.problems[0].parameters == {
        "a": "0.0001",
        "b": "1e-07",
        "c": "1000.5",
        "d": "-0.0",
        "e": ["2.5", "300.0"],
    }
    assert loaded.problems[0].parameters_json == (
        b'{"a":"0.0001","b":"1e-07","c":"1000.5","d":"-0.0","e":["2.5","300.0"]}'
    )


@pytest.mark.parametrize("literal", ["inf", "-inf", "nan", "+nan"])
def test_a_float_that_is_not_finite_is_refused(tmp_path: Path, literal: str) -> None:
    refused(
        tmp_path,
        f"problems[0].parameters.x: {literal} is not a finite number",
        problem=f"parameters = {{ x = {literal} }}",
    )


def test_repetitions_give_each_pair_that_many_measurement_slots(tmp_path: Path) -> None:
    loaded = campaign(tmp_path, campaign="repetitions = 3", candidate="repetitions = 2")
    slots = plan(loaded)
    by_pair: dict[tuple[str, str], list[SlotPlan]] = {}
    for slot in slots:
        by_pair.setdefault((slot.candidate.name, slot.problem.name), []).append(slot)
    assert {pair: len(found) for pair, found in by_pair.items()} == {
        ("a", "p"): 2,
        ("a", "q"): 2,
        ("b", "p"): 3,
        ("b", "q"): 3,
    }
    for found in by_pair.values():
        assert len({slot.run.id for slot in found if slot.run}) == 1  # one run per pair
        for repetition, slot in enumerate(sorted(found, key=lambda s: s.repetition)):
            assert slot.repetition == repetition
            assert slot.attempt_slot is not None
            suffix = "" if repetition == 0 else f"-{repetition}"
            assert slot.attempt_slot.logical_slot == "measurement" + suffix
            assert slot.attempt_slot.specification == (
                {} if repetition == 0 else {"repetition": repetition}
            )
            assert [o.logical_slot for o in slot.observation_slots] == ["result" + suffix]
            assert slot.observation_slots[0].attempt_slot_id == slot.attempt_slot.id
    every = [slot.attempt_slot.id for slot in slots if slot.attempt_slot]
    assert len(every) == len(set(every)) == 10


def test_more_repetitions_only_add_slots(tmp_path: Path) -> None:
    one = ids(plan(campaign(tmp_path)))
    three = ids(plan(campaign(tmp_path, campaign="repetitions = 3")))
    assert set(one) < set(three)
    assert len(three) == 3 * len(one)


def test_a_stream_repetition_suffixes_its_checkpoint_slots(tmp_path: Path) -> None:
    loaded = campaign(tmp_path, campaign='slot_kind = "stream"\ncheckpoints = 2\nrepetitions = 2')
    second = next(slot for slot in plan(loaded) if slot.repetition == 1)
    assert [(o.logical_slot, o.checkpoint_index) for o in second.observation_slots] == [
        ("checkpoint-0-1", 0),
        ("checkpoint-1-1", 1),
    ]


def expected_order(seed: int, round_index: int, problem: str, names: list[str]) -> list[str]:
    """The order SPEC 15.2 states, computed here independently of the planner."""
    return sorted(
        names,
        key=lambda name: hashlib.sha256(
            f"{seed}/{round_index}/{problem}/{name}".encode()
        ).hexdigest(),
    )


def test_repetitions_run_round_by_round_in_a_seeded_interleaved_order(tmp_path: Path) -> None:
    names = [f"c{i}" for i in range(6)]
    text = '[campaign]\nname = "x"\nrepetitions = 4\nseed = 7\nwarmup = true\n'
    for name in names:
        text += f'[[candidates]]\nname = "{name}"\ncommand = ["true"]\n'
    text += '[[problems]]\nname = "p"\n[[problems]]\nname = "q"\n'
    slots = plan(load(tmp_path, text))
    warmups = [s for s in slots if s.attempt_slot and s.attempt_slot.role.value == "warmup"]
    assert len(warmups) == 12
    seen = [
        (slot.repetition, slot.problem.name, slot.candidate.name)
        for slot in slots
        if slot not in warmups
    ]
    wanted = [
        (r, problem, name)
        for r in range(4)
        for problem in ("p", "q")
        for name in expected_order(7, r, problem, names)
    ]
    assert seen == wanted
    # each warm-up comes just before its pair's repetition 0
    for index, slot in enumerate(slots):
        if slot in warmups:
            after = slots[index + 1]
            assert (after.candidate, after.problem, after.repetition) == (
                slot.candidate,
                slot.problem,
                0,
            )
            assert after.requires == slot.attempt_slot.id if slot.attempt_slot else False
    orders = {tuple(expected_order(7, r, "p", names)) for r in range(4)}
    assert len(orders) > 1  # the order differs from round to round
    other = plan(load(tmp_path, text.replace("seed = 7", "seed = 8")))
    assert [s.candidate.name for s in other] != [s.candidate.name for s in slots]
    assert sorted(ids(other)) == sorted(ids(slots))  # the seed is not identity


def test_a_candidate_may_turn_its_warmup_on_or_off(tmp_path: Path) -> None:
    slots = plan(campaign(tmp_path, campaign="warmup = true", candidate="warmup = false"))
    roles = {(s.candidate.name, s.attempt_slot.role.value) for s in slots if s.attempt_slot}
    assert roles == {("a", "measurement"), ("b", "measurement"), ("b", "warmup")}
    slots = plan(campaign(tmp_path, candidate="warmup = true"))
    roles = {(s.candidate.name, s.attempt_slot.role.value) for s in slots if s.attempt_slot}
    assert roles == {("a", "measurement"), ("a", "warmup"), ("b", "measurement")}


def test_a_candidate_grid_expands_into_named_members(tmp_path: Path) -> None:
    loaded = campaign(
        tmp_path,
        candidate='parameters = { loss = "hinge" }\n'
        "grid = { alpha = [0.0001, 0.01], depth = [2, 3] }",
    )
    members = [(c.name, c.parameters) for c in loaded.candidates]
    assert members == [
        ("a-0.0001-2", {"alpha": "0.0001", "depth": 2, "loss": "hinge"}),
        ("a-0.0001-3", {"alpha": "0.0001", "depth": 3, "loss": "hinge"}),
        ("a-0.01-2", {"alpha": "0.01", "depth": 2, "loss": "hinge"}),
        ("a-0.01-3", {"alpha": "0.01", "depth": 3, "loss": "hinge"}),
        ("b", {}),
    ]
    slot = plan(loaded)[0]
    assert slot.run is not None
    assert slot.run.specification["candidate_parameters"] == {
        "alpha": "0.0001",
        "depth": 2,
        "loss": "hinge",
    }
    assert slot.run.logical_spec_id == "bench/a-0.0001-2/p"
    plain = next(s for s in plan(loaded) if s.candidate.name == "b")
    assert plain.run is not None
    assert "candidate_parameters" not in plain.run.specification


def test_a_problem_grid_expands_with_its_tags(tmp_path: Path) -> None:
    loaded = campaign(
        tmp_path, problem='tags = ["t"]\ngrid = { size = [10, 100], mode = ["x", true] }'
    )
    assert [(p.name, p.parameters, p.tags) for p in loaded.problems] == [
        ("p-10-x", {"mode": "x", "size": 10}, ("t",)),
        ("p-10-true", {"mode": True, "size": 10}, ("t",)),
        ("p-100-x", {"mode": "x", "size": 100}, ("t",)),
        ("p-100-true", {"mode": True, "size": 100}, ("t",)),
        ("q", {}, ()),
    ]


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ({"candidate": "grid = {}"}, "candidates[0].grid: must be a nonempty table"),
        ({"candidate": "grid = { x = [] }"}, "candidates[0].grid.x: must be a nonempty array"),
        ({"candidate": "grid = { x = 1 }"}, "candidates[0].grid.x: must be a nonempty array"),
        ({"candidate": "grid = { x = [[1]] }"}, "candidates[0].grid.x[0]: grid values are"),
        ({"candidate": "grid = { x = [{ y = 1 }] }"}, "candidates[0].grid.x[0]: grid values"),
        ({"candidate": "grid = { x = [1, 1] }"}, "candidates[0].grid.x[1]: '1' is listed twice"),
        ({"candidate": "grid = { x = [0.5, 0.50] }"}, "grid.x[1]: '0.5' is listed twice"),
        ({"candidate": "grid = { x = [inf] }"}, "candidates[0].grid.x[0]: inf is not a finite"),
        (
            {"candidate": "parameters = { x = 1 }\ngrid = { x = [2] }"},
            "candidates[0].grid.x: is also a fixed parameter",
        ),
        ({"candidate": 'grid = { x = ["a b"] }'}, "member name 'a-a b' breaks the name rule"),
        ({"candidate": f'grid = {{ x = ["{"v" * 63}"] }}'}, "breaks the name rule"),
        ({"problem": 'grid = { x = ["a/b"] }'}, "member name 'p-a/b' breaks the name rule"),
        ({"candidate": 'grid = { x = ["1", 1] }'}, "'1' is listed twice"),
        (
            {"tail": 'grid = { n = [1] }\n[[problems]]\nname = "q-1"'},
            "problems[2].name: duplicate 'q-1' (also problems[1].grid)",
        ),
        (
            {
                "candidate": "grid = { a = ["
                + ", ".join(map(str, range(101)))
                + "], b = ["
                + ", ".join(map(str, range(100)))
                + "] }"
            },
            "expands into more than 10000 members",
        ),
        (
            {"campaign": "repetitions = 0"},
            "campaign.repetitions: must be an integer from 1 to 1000",
        ),
        ({"campaign": "repetitions = 1001"}, "campaign.repetitions: must be an integer"),
        ({"campaign": "repetitions = 2.0"}, "campaign.repetitions: must be an integer"),
        ({"campaign": "repetitions = true"}, "campaign.repetitions: must be an integer"),
        ({"candidate": "repetitions = -1"}, "candidates[0].repetitions: must be an integer"),
        ({"candidate": 'warmup = "yes"'}, "candidates[0].warmup: must be true or false"),
        ({"campaign": "seed = -1"}, "campaign.seed: must be an integer from 0 to 2**53-1"),
        ({"campaign": "seed = 9007199254740992"}, "campaign.seed: must be an integer"),
        ({"campaign": "seed = 1.5"}, "campaign.seed: must be an integer"),
        ({"campaign": 'packages = "numpy"'}, "campaign.packages: must be a list of names"),
        ({"campaign": 'packages = ["a b"]'}, "campaign.packages[0]: must be 1 to 64"),
        ({"campaign": 'packages = ["x", "x"]'}, "campaign.packages[1]: 'x' is listed twice"),
    ],
)
def test_refusals_name_the_key(tmp_path: Path, parts: dict[str, str], expected: str) -> None:
    refused(tmp_path, expected, **parts)


def test_a_candidate_with_fewer_repetitions_counts_its_own(tmp_path: Path) -> None:
    grid = "grid = { n = [" + ", ".join(map(str, range(60))) + "] }"
    # 60 problems x (1 + 1000) repetitions is 60,060 slots: under the bound, although
    # 2 candidates x 1000 campaign repetitions x 60 problems would be over it
    loaded = campaign(
        tmp_path, campaign="repetitions = 1000", candidate="repetitions = 1", problem=grid
    )
    assert [c.repetitions for c in loaded.candidates[:1]] == [1]
    refused(
        tmp_path,
        "more than 100000 measurement slots",
        campaign="repetitions = 1000",
        candidate="repetitions = 700",
        problem=grid,
    )


def test_more_than_100000_measurement_slots_is_refused(tmp_path: Path) -> None:
    text = HEAD.format(
        campaign="repetitions = 1000",
        candidate="",
        problem="grid = { n = [" + ", ".join(map(str, range(60))) + "] }",
        tail="",
    )
    path = tmp_path / "campaign.toml"
    path.write_text(text)
    with pytest.raises(CampaignInvalidError, match="more than 100000 measurement slots"):
        load_campaign(path)


METRICS = """
[metrics]
time_s = { direction = "lower", unit = "s", threshold = 0.05 }
"throughput MB/s" = { direction = "higher", unit = "MB/s" }
ratio = { direction = "higher", threshold = 1 }
"""


def test_declared_metrics_are_part_of_each_run(tmp_path: Path) -> None:
    loaded = campaign(tmp_path, tail=METRICS)
    assert [(m.name, m.direction, m.unit, m.threshold) for m in loaded.metrics] == [
        ("ratio", "higher", "", "1"),
        ("throughput MB/s", "higher", "MB/s", None),
        ("time_s", "lower", "s", "0.05"),
    ]
    run = plan(loaded)[0].run
    assert run is not None
    assert run.specification["metrics"] == {
        "ratio": {"direction": "higher", "threshold": "1", "unit": ""},
        "throughput MB/s": {"direction": "higher", "unit": "MB/s"},
        "time_s": {"direction": "lower", "threshold": "0.05", "unit": "s"},
    }
    without = plan(campaign(tmp_path))[0].run
    assert without is not None and "metrics" not in without.specification
    assert json.dumps(run.specification)  # still plain JSON


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("t = 1", "metrics.t: must be a table"),
        ('t = { unit = "s" }', "metrics.t.direction: missing"),
        ('t = { direction = "down" }', 'metrics.t.direction: must be "lower" or "higher"'),
        ('t = { direction = "lower", unit = 1 }', "metrics.t.unit: must be a string"),
        ('t = { direction = "lower", unit = "' + "u" * 33 + '" }', "longer than 32"),
        ('t = { direction = "lower", unit = "\\u0007" }', "metrics.t.unit: contains a control"),
        (
            't = { direction = "lower", threshold = 0 }',
            "metrics.t.threshold: must be greater than 0",
        ),
        ('t = { direction = "lower", threshold = -0.1 }', "must be greater than 0, got -0.1"),
        ('t = { direction = "lower", threshold = nan }', "nan is not a finite number"),
        ('t = { direction = "lower", threshold = "5%" }', "must be a number greater than 0"),
        ('t = { direction = "lower", noise = 1 }', "metrics.t.noise: unknown key"),
        ('"" = { direction = "lower" }', 'metrics."": must be nonempty'),
    ],
)
def test_metric_declarations_are_checked(tmp_path: Path, table: str, expected: str) -> None:
    refused(tmp_path, expected, tail="[metrics]\n" + table)


def test_metrics_must_be_a_table(tmp_path: Path) -> None:
    path = tmp_path / "campaign.toml"
    path.write_text("metrics = 3\n" + HEAD.format(campaign="", candidate="", problem="", tail=""))
    with pytest.raises(CampaignInvalidError, match="metrics: must be a table of metric tables"):
        load_campaign(path)
