"""The HTML report's layout and edge cases, from reports built here (SPEC.md section 16.4).

Each case builds a :class:`StatusReport` from :class:`SlotSummary` values and the pairs'
statistics from :class:`Group` values through the real
:func:`runstore.inspection.results.pair_result`, so every statistic the page shows is the
one ``status`` would print. Cases: 50 problems x 20 candidates (every name in full, no
squeezed header, charts as wide as the page whatever the candidates), stream checkpoint
curves, the log-axis rule at its boundary and with values at or below zero, no results,
equal medians, non-numeric values, warm-ups, several campaigns, hostile names and
deterministic bytes whatever the input order.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable
from collections.abc import Mapping
from decimal import Decimal
from itertools import pairwise

import pytest
from runstore.analysis.numbers import with_unit
from runstore.inspection.comparison import against_candidate
from runstore.inspection.measurements import CheckpointValue
from runstore.inspection.measurements import Group
from runstore.inspection.measurements import MetricInfo
from runstore.inspection.measurements import Value
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import StatusReport
from runstore.inspection.reader import campaign_of
from runstore.inspection.report import render_report
from runstore.inspection.report_style import STYLE
from runstore.inspection.results import PairResult
from runstore.inspection.results import pair_result

from conformance.inspection.test_report import Node
from conformance.inspection.test_report import chart_pairs
from conformance.inspection.test_report import interval_chart
from conformance.inspection.test_report import metric_sections
from conformance.inspection.test_report import metric_table
from conformance.inspection.test_report import parse
from conformance.inspection.test_report import table_cells

HOSTILE = ("<script>alert(1)</script>", "\"&amp;'<b>", "</td></tr></table><svg onload=x>")
SHORTEST_HEADER = 20
"""A header cell shows at least this many characters of a longer name."""

Texts = Mapping[tuple[str, str], list[dict[str, str]]]
"""(candidate id, problem id) -> one dict of stored metric texts per repetition."""


# --- reports built here -----------------------------------------------------------------------


def slot(
    candidate: str,
    problem: str,
    state: SlotState = SlotState.ACCEPTED,
    metrics: Mapping[str, str] | None = None,
    *,
    role: str = "measurement",
    repetition: int = 0,
) -> SlotSummary:
    accepted = state is SlotState.ACCEPTED
    return SlotSummary(
        slot_id=f"slot:{candidate}:{problem}:{role}:{repetition}",
        run_id=f"run:{candidate}:{problem}",
        candidate_id=candidate,
        problem_id=problem,
        logical_spec_id=f"{candidate}/{problem}",
        logical_slot=f"{role}-{repetition}",
        execution_kind="one_shot",
        role=role,
        state=state,
        attempts=0 if state is SlotState.PENDING else 1,
        accepted_attempt_id="attempt" if accepted else None,
        latest_attempt_id=None if state is SlotState.PENDING else "attempt",
        latest_state=None if state is SlotState.PENDING else state.value,
        latest_failure_code=None,
        metrics=tuple(sorted((metrics or {}).items())) if accepted else (),
    )


def build(*slots: SlotSummary, excluded: tuple[tuple[str, str], ...] = ()) -> StatusReport:
    def counts(key: str) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for s in slots:
            name = s.candidate_id if key == "candidate" else s.problem_id
            table.setdefault(name, {state.value: 0 for state in SlotState})[s.state.value] += 1
        return table

    totals = Counter(s.state.value for s in slots)
    return StatusReport(
        slots=tuple(sorted(slots, key=lambda s: (s.candidate_id, s.problem_id, s.logical_slot))),
        by_candidate=counts("candidate"),
        by_problem=counts("problem"),
        totals={state.value: totals[state.value] for state in SlotState},
        attempts_by_state={},
        excluded=excluded,
    )


def number(text: str) -> float | None:
    """A stored text as the reader takes it (SPEC.md 17.5): a finite float, else left out."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def group(
    candidate: str,
    problem: str,
    repetitions: list[dict[str, str]],
    declared: Mapping[str, MetricInfo],
    checkpoints: Mapping[str, tuple[CheckpointValue, ...]],
) -> Group:
    values: dict[str, list[Value]] = {}
    for r, metrics in enumerate(repetitions):
        for name, text in metrics.items():
            if (value := number(text)) is not None:
                values.setdefault(name, []).append(
                    Value(repetition=r, text=text, number=value, slot_id=f"{r}", attempt_id="a")
                )
    return Group(
        campaign=campaign_of(candidate),
        candidate=candidate.partition("/")[2] or candidate,
        problem=problem.partition("/")[2] or problem,
        candidate_id=candidate,
        problem_id=problem,
        run_id=f"run:{candidate}:{problem}",
        parameters={},
        candidate_parameters={},
        declared=declared,
        slots=len(repetitions),
        values={name: tuple(found) for name, found in sorted(values.items())},
        checkpoints=checkpoints,
    )


def world(
    texts: Texts,
    *,
    declared: Mapping[str, MetricInfo] | None = None,
    checkpoints: Mapping[tuple[str, str], Mapping[str, tuple[CheckpointValue, ...]]] | None = None,
    extra: tuple[SlotSummary, ...] = (),
    excluded: tuple[tuple[str, str], ...] = (),
) -> tuple[StatusReport, tuple[PairResult, ...]]:
    """A report with one accepted measurement slot per repetition of ``texts`` (plus
    ``extra`` slots), and the statistics of each pair."""
    slots = [
        slot(c, p, metrics=metrics, repetition=r)
        for (c, p), repetitions in texts.items()
        for r, metrics in enumerate(repetitions)
    ]
    results = tuple(
        pair_result(group(c, p, reps, declared or {}, (checkpoints or {}).get((c, p), {})))
        for (c, p), reps in sorted(texts.items())
    )
    return build(*slots, *extra, excluded=excluded), results


def page_of(texts: Texts, **options: object) -> str:
    report, results = world(texts, **options)  # type: ignore[arg-type]
    return render_report(report, results, title="t")


# --- 50 problems x 20 candidates ---------------------------------------------------------------

CANDIDATE_NAMES = tuple(
    f"c/{algo}-{threads}"
    for algo in ("quicksort", "mergesort", "heapsort", "timsort", "radix-sort-with-a-long-name")
    for threads in (1, 2, 4, 8)
)
PROBLEM_NAMES = tuple(
    f"c/input-{size}-{kind}"
    for size in (1000, 3000, 10000, 30000, 100000, 300000, 1000000, 3000000, 10000000, 30000000)
    for kind in ("uniform", "sorted", "reversed", "zipf", "duplicates")
)


def wide_texts() -> Texts:
    texts = {}
    for i, c in enumerate(CANDIDATE_NAMES):
        for j, p in enumerate(PROBLEM_NAMES):
            texts[(c, p)] = [
                {
                    "time_s": repr(1e-4 * 10 ** (j / 10) * (1 + i / 10) * (1 + 0.01 * r)),
                    "memory": repr(100 + i + j + r),
                }
                for r in range(3)
            ]
    return texts


WIDE_DECLARED = {"time_s": MetricInfo(name="time_s", direction="lower", unit="s")}


@pytest.fixture(scope="module")
def wide() -> tuple[StatusReport, tuple[PairResult, ...]]:
    return world(wide_texts(), declared=WIDE_DECLARED)


@pytest.fixture(scope="module")
def wide_page(wide: tuple[StatusReport, tuple[PairResult, ...]]) -> str:
    return render_report(*wide, title="fifty by twenty")


def content_width() -> int:
    """The page's content width from its style sheet (``main { max-width: ...px }``)."""
    found = re.search(r"main \{[^}]*max-width: (\d+)px", STYLE)
    assert found is not None
    return int(found.group(1))


def test_a_50_by_20_page_names_everything_in_full_and_squeezes_no_header(wide_page: str) -> None:
    tree = parse(wide_page)
    tables = [t for t in tree.find("table") if {"metric", "pairs"} & t.classes()]
    assert len(tables) == 3  # two metrics and the slot states
    for table in tables:
        headers = table.find("th")
        ids = {th.attrs.get("title") for th in headers}
        assert ids >= {*CANDIDATE_NAMES, *PROBLEM_NAMES}
        for th in headers:
            full = th.attrs.get("title")
            if full is None:
                continue
            name, shown = full[2:], th.text()
            assert shown == name or (
                shown.endswith("\u2026") and name.startswith(shown[:-1]) and len(shown) > 1
            )
            assert len(shown) >= min(len(name), SHORTEST_HEADER), (name, shown)
    assert any(th.text().endswith("\u2026") for th in tree.find("th"))  # the long names
    rule = re.search(r"th, td \{[^}]*\}", STYLE)
    assert rule is not None and "white-space: nowrap" in rule.group(0)
    for table in tables:
        assert "scroll" in tree_parent_classes(tree, table)


def tree_parent_classes(tree: Node, target: Node) -> set[str]:
    for node in tree.walk():
        if target in node.children:
            return node.classes()
    raise AssertionError("no parent")


def test_a_50_by_20_chart_fits_the_page_and_holds_every_pair(
    wide: tuple[StatusReport, tuple[PairResult, ...]], wide_page: str
) -> None:
    sections = metric_sections(parse(wide_page))
    width = content_width()
    for metric in ("time_s", "memory"):
        chart = interval_chart(sections[metric])
        assert int(chart.attrs["width"]) <= width
        assert chart.attrs["viewbox"] == f"0 0 {chart.attrs['width']} {chart.attrs['height']}"
        assert len(chart_pairs(chart)) == len(CANDIDATE_NAMES) * len(PROBLEM_NAMES)
        rows = [t.text() for t in chart.having("text", "row")]
        shown = {
            t.find("title")[0].text() if t.find("title") else t.text()
            for t in chart.having("text", "row")
        }
        assert shown == {p[2:] for p in PROBLEM_NAMES} and len(rows) == len(PROBLEM_NAMES)
        legend = sections[metric].having("ul", "legend")[0]
        assert {li.attrs["title"] for li in legend.find("li")} == set(CANDIDATE_NAMES)
    assert interval_chart(sections["time_s"]).attrs["data-scale"] == "log"
    assert interval_chart(sections["memory"]).attrs["data-scale"] == "linear"
    # The chart grows downwards with the problems, never sideways with the candidates.
    few = {key: value for key, value in wide_texts().items() if key[1] in PROBLEM_NAMES[:5]}
    small = interval_chart(metric_sections(parse(page_of(few)))["memory"])
    assert small.attrs["width"] == interval_chart(sections["memory"]).attrs["width"]
    assert int(small.attrs["height"]) < int(interval_chart(sections["memory"]).attrs["height"])


def test_problems_and_candidates_are_in_natural_order(wide_page: str) -> None:
    table = metric_table(metric_sections(parse(wide_page))["memory"])
    problems = [row.find("th")[0].attrs["title"] for row in table.find("tbody")[0].find("tr")]
    sizes = [int(p.split("-")[1]) for p in problems]
    assert sizes == sorted(sizes) and set(problems) == set(PROBLEM_NAMES)


def test_the_50_by_20_page_is_the_same_bytes_whatever_the_input_order(
    wide: tuple[StatusReport, tuple[PairResult, ...]], wide_page: str
) -> None:
    report, results = wide
    shuffled = list(results)
    random.Random(7).shuffle(shuffled)
    slots = list(report.slots)
    random.Random(8).shuffle(slots)
    again = render_report(
        StatusReport(
            slots=tuple(slots),
            by_candidate=dict(reversed(report.by_candidate.items())),
            by_problem=report.by_problem,
            totals=report.totals,
            attempts_by_state={},
            excluded=(),
        ),
        tuple(shuffled),
        title="fifty by twenty",
    )
    assert again == wide_page


# --- stream curves --------------------------------------------------------------------------------


def test_stream_slots_get_one_curve_per_candidate_per_problem() -> None:
    candidates, problems, checkpoints = ("s/a", "s/b", "s/c"), ("s/p", "s/q"), 4
    texts: dict[tuple[str, str], list[dict[str, str]]] = {}
    curves: dict[tuple[str, str], dict[str, tuple[CheckpointValue, ...]]] = {}
    for i, c in enumerate(candidates):
        for j, p in enumerate(problems):
            points = tuple(
                CheckpointValue(repetition=r, checkpoint=k, text=t, number=float(t))
                for r in range(3)
                for k in range(checkpoints)
                if (t := repr((i + 1) * (j + 2) / (k + 1) + 0.01 * r))
            )
            curves[(c, p)] = {"loss": points}
            last = [point for point in points if point.checkpoint == checkpoints - 1]
            texts[(c, p)] = [{"loss": point.text} for point in last]
    declared = {"loss": MetricInfo(name="loss", direction="lower", unit="nats")}
    page = page_of(texts, declared=declared, checkpoints=curves)
    section = metric_sections(parse(page))["loss"]
    panels = section.having("svg", "curves")
    assert [panel.having("text", "panel")[0].text() for panel in panels] == ["p", "q"]
    for panel, p in zip(panels, problems, strict=True):
        groups = {g.attrs["data-candidate"]: g for g in panel.having("g", "curve-group")}
        assert set(groups) == set(candidates)
        heights: dict[tuple[str, int], Decimal] = {}
        for c, g in groups.items():
            medians = {
                k: statistics.median(v.number for v in curves[(c, p)]["loss"] if v.checkpoint == k)
                for k in range(checkpoints)
            }
            dots = g.having("circle", "point")
            assert len(dots) == checkpoints
            assert len(g.having("polyline", "curve")[0].attrs["points"].split()) == checkpoints
            for k, dot in enumerate(dots):
                assert (
                    dot.find("title")[0]
                    .text()
                    .endswith(f"checkpoint {k}: {with_unit(medians[k], 'nats')}")
                )
                heights[(c, k)] = Decimal(dot.attrs["cy"])
        for k in range(checkpoints):
            ranked = sorted(
                candidates,
                key=lambda c: statistics.median(
                    v.number for v in curves[(c, p)]["loss"] if v.checkpoint == k
                ),
            )
            for low, high in pairwise(ranked):
                assert heights[(low, k)] > heights[(high, k)]  # higher values sit higher
    one_shot = page_of({("s/a", "s/p"): [{"loss": "1"}]})
    assert metric_sections(parse(one_shot))["loss"].having("svg", "curves") == []


# --- the log-axis rule -------------------------------------------------------------------------


@pytest.mark.parametrize(("high", "log"), [("100", False), ("100.5", True), ("99", False)])
def test_the_axis_turns_logarithmic_just_past_a_hundredfold(high: str, log: bool) -> None:
    page = page_of({("c/a", "c/p"): [{"m": "1"}], ("c/b", "c/p"): [{"m": high}]})
    chart = interval_chart(metric_sections(parse(page))["m"])
    assert chart.attrs["data-scale"] == ("log" if log else "linear")


def test_values_at_or_below_zero_on_a_log_axis_follow_the_stated_rule() -> None:
    texts = {
        ("c/a", "c/p"): [{"m": "0.01"}, {"m": "0.02"}, {"m": "0.03"}],
        ("c/b", "c/p"): [{"m": "50"}, {"m": "60"}, {"m": "70"}],
        ("c/c", "c/p"): [{"m": "-5"}, {"m": "-4"}, {"m": "-3"}],
        ("c/d", "c/p"): [{"m": "-1"}, {"m": "2"}, {"m": "3"}],
    }
    section = metric_sections(parse(page_of(texts)))["m"]
    chart = interval_chart(section)
    assert chart.attrs["data-scale"] == "log"
    pairs = chart_pairs(chart)
    assert pairs[("c/c", "c/p")].having("circle", "median") == []
    assert pairs[("c/c", "c/p")].having("circle", "rep") == []
    assert "clipped" in pairs[("c/d", "c/p")].classes()
    assert "clipped" not in pairs[("c/a", "c/p")].classes()
    assert len(pairs[("c/d", "c/p")].having("circle", "rep")) == 2
    note = next(p.text() for p in section.find("p") if "log axis" in p.text())
    hidden = sum(1 for reps in texts.values() for r in reps if float(r["m"]) <= 0)
    assert f"{hidden + 1} value(s)" in note  # the repetitions and c's median
    cells = table_cells(metric_table(section))
    assert cells[("c/c", "c/p")].having("span", "value")[0].text().startswith("-4")


# --- edge cases ---------------------------------------------------------------------------------


def test_no_accepted_results_gives_status_only() -> None:
    report, results = world(
        {}, extra=(slot("c/a", "c/p", SlotState.FAILED), slot("c/b", "c/p", SlotState.PENDING))
    )
    tree = parse(render_report(report, results, title="t"))
    assert tree.find("svg") == [] or all("swatch" in s.classes() for s in tree.find("svg"))
    assert metric_sections(tree) == {}
    assert "No accepted results yet." in tree.text()
    (pairs,) = tree.having("table", "pairs")
    cells = table_cells(pairs)
    assert (cells[("c/a", "c/p")].text(), cells[("c/b", "c/p")].text()) == ("failed", "pending")
    assert render_report(build(), (), title="empty").count("<svg") == 0


def test_one_candidate_and_all_equal_medians_mark_nothing() -> None:
    for texts in (
        {("c/a", "c/p"): [{"m": "3"}], ("c/a", "c/q"): [{"m": "4"}]},
        {(f"c/{c}", "c/p"): [{"m": "2.50"}, {"m": "2.5"}] for c in "xyz"},
    ):
        tree = parse(page_of(texts))
        assert not any({"best", "lowest", "highest"} & td.classes() for td in tree.find("td"))
    cells = table_cells(metric_table(metric_sections(tree)["m"]))
    assert {cell.having("span", "value")[0].text() for cell in cells.values()} == {"2.5 ± 0"}


def test_non_numeric_values_are_tabled_but_not_charted() -> None:
    texts = {
        ("c/a", "c/p"): [{"m": "fast", "n": "1"}],
        ("c/b", "c/p"): [{"m": "12", "n": "NaN"}],
        ("c/c", "c/p"): [{"m": "1e-07", "n": "2"}],
    }
    sections = metric_sections(parse(page_of(texts)))
    charted = chart_pairs(interval_chart(sections["m"]))
    assert set(charted) == {("c/b", "c/p"), ("c/c", "c/p")}
    assert sorted(
        c.attrs["data-value"] for g in charted.values() for c in g.having("circle", "rep")
    ) == ["12", "1e-07"]
    cells = table_cells(metric_table(sections["m"]))
    assert cells[("c/a", "c/p")].text() == "fast" and "text" in cells[("c/a", "c/p")].classes()
    assert "lowest" in cells[("c/c", "c/p")].classes()
    assert "highest" in cells[("c/b", "c/p")].classes()
    n_cells = table_cells(metric_table(sections["n"]))
    assert n_cells[("c/b", "c/p")].text() == "NaN"
    assert len(chart_pairs(interval_chart(sections["n"]))) == 2


def test_a_warm_up_never_stands_for_its_measurement() -> None:
    report, results = world(
        {("c/b", "c/p"): [{"m": "1"}]},
        extra=(
            slot("c/a", "c/p", SlotState.ACCEPTED, {"m": "9"}, role="warmup"),
            slot("c/a", "c/p", SlotState.FAILED),
            slot("c/b", "c/p", SlotState.ACCEPTED, {"m": "9"}, role="warmup"),
        ),
    )
    section = metric_sections(parse(render_report(report, results, title="t")))["m"]
    cells = table_cells(metric_table(section))
    assert cells[("c/a", "c/p")].text() == "failed"
    assert cells[("c/b", "c/p")].having("span", "value")[0].text() == "1 ± 0"


def test_ids_of_several_campaigns_are_shown_in_full() -> None:
    page = page_of({("one/a", "one/p"): [{"m": "1"}], ("two/a", "two/p"): [{"m": "2"}]})
    headers = {th.text() for th in parse(page).find("th")}
    assert {"one/a", "two/a", "one/p", "two/p"} <= headers


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_units_and_values_are_escaped(hostile: str) -> None:
    texts = {
        (f"c/{hostile}", f"c/{hostile}"): [{hostile: "1", "m": hostile}, {hostile: "3", "m": "2"}],
        ("c/b", f"c/{hostile}"): [{hostile: "2", "m": "3"}],
    }
    declared = {"m": MetricInfo(name="m", direction="higher", unit=hostile[:32])}
    report, results = world(texts, declared=declared, excluded=((f"c/{hostile}", "c/q"),))
    page = render_report(report, results, title=hostile)
    tree = parse(page)
    assert tree.find("script") == [] and tree.find("b") == []
    assert all(not any(k.startswith("on") for k in node.attrs) for node in tree.walk())
    assert tree.find("title")[0].text() == hostile == tree.find("h1")[0].text()
    sections = metric_sections(tree)
    assert hostile in sections
    assert {
        g.attrs["data-candidate"] for g in interval_chart(sections[hostile]).having("g", "pair")
    } == {f"c/{hostile}", "c/b"}
    cells = table_cells(metric_table(sections["m"]))
    assert hostile in cells[(f"c/{hostile}", f"c/{hostile}")].find("span")[0].text()
    assert render_report(report, results, title=hostile) == page
    comparison = against_candidate(results, campaign="c", baseline=hostile)
    against = parse(render_report(report, results, title=hostile, comparison=comparison))
    assert against.find("script") == [] and against.find("b") == []
    assert hostile in against.find("h2", id="baseline")[0].text()
    assert against.having("td", "ratio")


def test_the_baseline_view_says_when_no_difference_can_be_significant() -> None:
    """With 3 values a side the smallest p of the rank test is 2 / C(6, 3) = 0.1."""
    for count, said in ((3, True), (5, False)):
        texts = {
            (f"c/{name}", "c/p"): [{"m": repr(base + r)} for r in range(count)]
            for name, base in (("a", 10), ("b", 100))
        }
        report, results = world(texts)
        comparison = against_candidate(results, campaign="c", baseline="a")
        tree = parse(render_report(report, results, title="t", comparison=comparison))
        notes = [p.text() for p in tree.having("p", "note") if "cannot reach" in p.text()]
        smallest = 2 / math.comb(2 * count, count)
        assert bool(notes) == said == (smallest >= 0.05)
        if said:
            assert f"smallest p is {smallest:g}" in notes[0]


def test_the_interval_chart_orders_pairs_by_their_median(
    wide: tuple[StatusReport, tuple[PairResult, ...]], wide_page: str
) -> None:
    _, results = wide
    medians = {
        (r.group.candidate_id, r.group.problem_id): r.metric("time_s").summary.median  # type: ignore[union-attr]
        for r in results
    }
    chart = interval_chart(metric_sections(parse(wide_page))["time_s"])
    where = {
        pair: Decimal(g.having("circle", "median")[0].attrs["cx"])
        for pair, g in chart_pairs(chart).items()
    }
    key: Callable[[tuple[str, str]], float] = medians.__getitem__
    ordered = sorted(where, key=key)
    for low, high in pairwise(ordered):
        if medians[low] < medians[high]:
            assert where[low] <= where[high]
