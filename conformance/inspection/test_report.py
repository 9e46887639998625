"""``runstore.inspection.report``: the self-contained HTML page of a status report.

A store is built by running a campaign in-process (the real coordinator and writer, a
scripted executor: several candidates and problems, three metrics, a negative one, a failed
pair and a pair its candidate does not apply to), read through a snapshot, and rendered.
The page is parsed with the standard library's :mod:`html.parser` into a small tree, and
every expectation is derived from the :class:`StatusReport` itself (values compared as
:class:`Decimal`), never from numbers pinned here. The edge cases (no results, one
candidate, all-equal values, negative values, many problems, long, hostile and non-numeric
names and values, warm-ups, several campaigns) use reports built from :class:`SlotSummary`
values.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from html.parser import HTMLParser
from itertools import pairwise
from pathlib import Path

import attrs
import pytest
from runstore import RunStore
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import SlotSummary
from runstore.inspection.reader import StatusReport
from runstore.inspection.reader import status
from runstore.inspection.report import render_report
from runstore.inspection.snapshot import Snapshot
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import succeeded

CANDIDATES = ("zeta", "alpha", "mid")
PROBLEMS = ("p1", "p2", "p3", "p4")
FAILING = ("zeta", "p4")
VOID = frozenset({"meta", "link", "br", "hr", "img", "input", "wbr", "source"})
HOSTILE = ("<script>alert(1)</script>", "\"&amp;'<b>", "</td></tr></table><svg onload=x>")


# --- a small DOM over html.parser --------------------------------------------------------------


@attrs.define
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = attrs.field(factory=list)
    texts: list[str] = attrs.field(factory=list)

    def text(self) -> str:
        return "".join(self.texts) + "".join(child.text() for child in self.children)

    def own_text(self) -> str:
        """Text without the ``<title>`` tooltips of children."""
        return "".join(self.texts) + "".join(
            child.own_text() for child in self.children if child.tag != "title"
        )

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, tag: str, **attributes: str) -> list[Node]:
        return [
            node
            for node in self.walk()
            if node.tag == tag and all(node.attrs.get(k) == v for k, v in attributes.items())
        ]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class TreeBuilder(HTMLParser):
    """Builds a :class:`Node` tree and insists that every element is closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.declarations: list[str] = []

    def handle_decl(self, decl: str) -> None:
        self.declarations.append(decl)

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {key: value or "" for key, value in attributes})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {key: value or "" for key, value in attributes}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].texts.append(data)


def parse(page: str) -> Node:
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    assert builder.declarations == ["DOCTYPE html"]
    return builder.root


# --- the store ---------------------------------------------------------------------------------


def metrics_of(candidate: str, problem: str) -> dict[str, object]:
    i, j = CANDIDATES.index(candidate), PROBLEMS.index(problem)
    return {
        "ratio": 1.5 + 0.75 * i + 0.1 * j,
        "bytes": 1000 - 37 * i * (j + 1),
        "delta": (i - 1) * 0.5 - j,
    }


def script(order: WorkOrder, nth: int) -> WorkResult:
    env = dict(order.env)
    pair = (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"])
    if pair == FAILING:
        return result(WorkStatus.EXITED, 3)
    return succeeded(metrics_of(*pair))


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report") / "store"
    root.mkdir()
    clock = Clock()
    with RunStore.open(str(root)) as store:
        run_campaign(
            store,
            campaign(CANDIDATES, PROBLEMS, applies_to={"mid": ("p1", "p2", "p3")}),
            ScriptedExecutor(script, clock),
            RunOptions(jobs=2),
            Events(),
            clock=clock,
        )
    return root


@pytest.fixture(scope="module")
def report(store_root: Path) -> StatusReport:
    with Snapshot.take(store_root) as snapshot:
        return status(snapshot, campaign="demo")


@pytest.fixture(scope="module")
def page(report: StatusReport) -> str:
    return render_report(report, title="demo campaign")


def short(identifier: str) -> str:
    return identifier.split("/", 1)[1]


def accepted_values(report: StatusReport) -> dict[str, dict[tuple[str, str], str]]:
    """metric -> (candidate id, problem id) -> stored value, from the report."""
    found: dict[str, dict[tuple[str, str], str]] = {}
    for slot in report.slots:
        if slot.state is SlotState.ACCEPTED and slot.role != "warmup":
            for name, value in slot.metrics:
                found.setdefault(name, {})[(slot.candidate_id, slot.problem_id)] = value
    return found


def metric_sections(tree: Node) -> dict[str, Node]:
    sections = [node for node in tree.find("section") if node.attrs["id"].startswith("metric-")]
    return {section.find("h3")[0].text(): section for section in sections}


def table_cells(table: Node) -> dict[tuple[str, str], Node]:
    """(row header title, column header title) -> the cell, from a candidate x problem
    table whose headers carry the full ids in ``title``."""
    header = table.find("thead")[0].find("th")[1:]
    columns = [th.attrs["title"] for th in header]
    cells: dict[tuple[str, str], Node] = {}
    for row in table.find("tbody")[0].find("tr"):
        name = row.find("th")[0].attrs["title"]
        for column, cell in zip(columns, row.find("td"), strict=True):
            cells[(name, column)] = cell
    return cells


def bar_end(rect: Node) -> Decimal:
    """The y coordinate of a bar's value end (its top, or its bottom below zero)."""
    y, height = Decimal(rect.attrs["y"]), Decimal(rect.attrs["height"])
    return y + height if "neg" in rect.classes() else y


# --- the campaign's page -----------------------------------------------------------------------


def test_the_store_holds_what_the_page_is_checked_against(report: StatusReport) -> None:
    """Guards the other tests against a vacuous store: several metrics and values, a
    negative value, a failed pair and a pair without a slot."""
    values = accepted_values(report)
    assert set(values) == {"bytes", "delta", "ratio"}
    assert len(values["ratio"]) == len(CANDIDATES) * len(PROBLEMS) - 2
    assert any(Decimal(v) < 0 for v in values["delta"].values())
    assert report.totals["failed"] == 1
    # An inapplicable pair registers nothing (SPEC.md 15.2): it has no slot at all.
    assert ("demo/mid", "demo/p4") not in {(s.candidate_id, s.problem_id) for s in report.slots}


def test_the_page_parses_and_is_self_contained(page: str) -> None:
    tree = parse(page)
    assert tree.find("html")[0].attrs["lang"] == "en"
    assert [node.text() for node in tree.find("title")[:1]] == ["demo campaign"]
    assert tree.find("script") == []
    assert not re.search(r"https?:|//[a-z]|url\(|@import|javascript:", page, re.IGNORECASE)
    for node in tree.walk():
        assert node.tag not in {"img", "link", "iframe", "object", "embed", "use", "image"}
        assert not any(name.startswith("on") for name in node.attrs), node
        assert "src" not in node.attrs
        assert node.attrs.get("href", "#").startswith("#")
    policy = tree.find("meta", **{"http-equiv": "Content-Security-Policy"})
    assert "default-src 'none'" in policy[0].attrs["content"]


def test_every_candidate_and_problem_appears_by_its_name_in_the_campaign(
    report: StatusReport, page: str
) -> None:
    tree = parse(page)
    headers = {(th.attrs.get("title"), th.text()) for th in tree.find("th")}
    names = {*report.by_candidate, *report.by_problem}
    assert names >= {f"demo/{c}" for c in CANDIDATES} | {f"demo/{p}" for p in PROBLEMS}
    for identifier in names:
        assert (identifier, short(identifier)) in headers


def test_the_status_counts_are_the_reports(report: StatusReport, page: str) -> None:
    tree = parse(page)
    tables = {table.find("caption")[0].text(): table for table in tree.find("table")}
    for caption, counts in (
        ("Slots by candidate", report.by_candidate),
        ("Slots by problem", report.by_problem),
    ):
        table = tables[caption]
        states = [th.text() for th in table.find("thead")[0].find("th")[1:]]
        assert set(states) == {state.value for state in SlotState}
        for row in table.find("tbody")[0].find("tr"):
            name = row.find("th")[0].attrs["title"]
            shown = [int(td.text()) for td in row.find("td")]
            assert shown == [counts[name][state] for state in states]
    total = tables["Slots by state"].find("tbody")[0].find("td")
    states = [th.text() for th in tables["Slots by state"].find("th")[1:8]]
    assert [int(td.text()) for td in total] == [report.totals[state] for state in states]


def test_every_accepted_value_is_in_its_cell_and_other_cells_show_the_state(
    report: StatusReport, page: str
) -> None:
    sections = metric_sections(parse(page))
    values = accepted_values(report)
    assert set(sections) == set(values)
    states = {(s.candidate_id, s.problem_id): s.state.value for s in report.slots}
    for metric, section in sections.items():
        cells = table_cells(section.find("table")[0])
        assert set(cells) == {(c, p) for c in report.by_candidate for p in report.by_problem}
        for pair, cell in cells.items():
            if pair in values[metric]:
                assert cell.text() == values[metric][pair]
            elif pair in report.excluded:
                assert cell.text() == "excluded"
            else:
                assert cell.text() == states.get(pair, "not registered") != "accepted"


def test_one_chart_per_numeric_metric_with_bars_ordered_like_the_values(
    report: StatusReport, page: str
) -> None:
    sections = metric_sections(parse(page))
    for metric, stored in accepted_values(report).items():
        charts = sections[metric].find("svg")
        assert len(charts) == 1
        bars = [rect for rect in charts[0].find("rect") if "bar" in rect.classes()]
        shown = {
            (f"demo/{b.attrs['data-series']}", f"demo/{b.attrs['data-group']}"): b for b in bars
        }
        assert len(shown) == len(bars) == len(stored)
        assert {pair: bar.attrs["data-value"] for pair, bar in shown.items()} == stored
        for pair, bar in shown.items():
            assert stored[pair] in bar.find("title")[0].text()
            assert ("neg" in bar.classes()) == (Decimal(stored[pair]) < 0)
        ordered = sorted(shown, key=lambda pair: Decimal(stored[pair]))
        for low, high in pairwise(ordered):
            if Decimal(stored[low]) < Decimal(stored[high]):
                assert bar_end(shown[low]) > bar_end(shown[high]), (metric, low, high)


def test_each_chart_has_a_few_round_ticks_covering_its_values_and_bars_stand_on_zero(
    report: StatusReport, page: str
) -> None:
    sections = metric_sections(parse(page))
    for metric, stored in accepted_values(report).items():
        chart = sections[metric].find("svg")[0]
        ticks = [Decimal(text.text()) for text in chart.find("text") if "tick" in text.classes()]
        assert 3 <= len(ticks) <= 8 and Decimal(0) in ticks
        assert len({high - low for low, high in pairwise(ticks)}) == 1
        values = [Decimal(value) for value in stored.values()]
        assert ticks[0] <= min(values) and ticks[-1] >= max(values)
        (zero,) = [Decimal(line.attrs["y1"]) for line in chart.find("line", **{"class": "zero"})]
        for bar in chart.find("rect"):
            if "bar" in bar.classes():
                y, height = Decimal(bar.attrs["y"]), Decimal(bar.attrs["height"])
                assert (y if "neg" in bar.classes() else y + height) == zero


def test_each_problems_lowest_and_highest_values_are_marked(
    report: StatusReport, page: str
) -> None:
    sections = metric_sections(parse(page))
    marked_any = False
    for metric, stored in accepted_values(report).items():
        cells = table_cells(sections[metric].find("table")[0])
        for problem in report.by_problem:
            column = {c: Decimal(v) for (c, p), v in stored.items() if p == problem}
            distinct = len(set(column.values())) > 1
            for candidate in report.by_candidate:
                classes = cells[(candidate, problem)].classes()
                value = column.get(candidate)
                low = distinct and value == min(column.values())
                high = distinct and value == max(column.values())
                assert ("lowest" in classes, "highest" in classes) == (low, high)
                marked_any = marked_any or low
    assert marked_any


def test_the_same_report_renders_to_the_same_bytes(store_root: Path, page: str) -> None:
    with Snapshot.take(store_root) as snapshot:
        again = status(snapshot, campaign="demo")
    assert render_report(again, title="demo campaign") == page


# --- edge cases, from reports built here ------------------------------------------------------


def slot(
    candidate: str,
    problem: str,
    state: SlotState = SlotState.ACCEPTED,
    metrics: dict[str, str] | None = None,
    *,
    role: str = "measurement",
) -> SlotSummary:
    run = f"run:{candidate}:{problem}"
    accepted = state is SlotState.ACCEPTED
    return SlotSummary(
        slot_id=f"slot:{candidate}:{problem}:{role}",
        run_id=run,
        candidate_id=candidate,
        problem_id=problem,
        logical_spec_id=f"{candidate}/{problem}",
        logical_slot=role,
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


def bars(page: str) -> list[Node]:
    return [rect for rect in parse(page).find("rect") if "bar" in rect.classes()]


def test_no_accepted_results_gives_status_only() -> None:
    page = render_report(
        build(slot("c/a", "c/p", SlotState.FAILED), slot("c/b", "c/p", SlotState.PENDING)),
        title="t",
    )
    tree = parse(page)
    assert tree.find("svg") == [] and metric_sections(tree) == {}
    assert "No accepted results yet." in tree.text()
    pairs = next(t for t in tree.find("table") if "pairs" in t.classes())
    cells = table_cells(pairs)
    assert (cells[("c/a", "c/p")].text(), cells[("c/b", "c/p")].text()) == ("failed", "pending")
    assert render_report(build(), title="empty").count("<svg") == 0


def test_one_candidate_and_all_equal_values_mark_nothing() -> None:
    page = render_report(
        build(slot("c/a", "c/p", metrics={"m": "3"}), slot("c/a", "c/q", metrics={"m": "3"})),
        title="t",
    )
    assert len(bars(page)) == 2
    assert len({(b.attrs["y"], b.attrs["height"]) for b in bars(page)}) == 1
    assert all(not {"lowest", "highest"} & td.classes() for td in parse(page).find("td"))
    equal = build(*(slot(f"c/{c}", "c/p", metrics={"m": "2.50"}) for c in "xyz"))
    cells = table_cells(parse(render_report(equal, title="t")).find("section")[0].find("table")[0])
    assert all(not ({"lowest", "highest"} & cell.classes()) for cell in cells.values())
    assert {cell.text() for cell in cells.values()} == {"2.50"}


def test_negative_values_hang_below_the_zero_line() -> None:
    values = {"a": "-7", "b": "-0.5", "c": "12", "d": "0"}
    page = render_report(
        build(*(slot(f"c/{c}", "c/p", metrics={"m": v}) for c, v in values.items())), title="t"
    )
    shown = {b.attrs["data-series"]: b for b in bars(page)}
    zero = {Decimal(b.attrs["y"]) for b in shown.values() if "neg" in b.classes()}
    assert len(zero) == 1
    assert Decimal(shown["c"].attrs["y"]) + Decimal(shown["c"].attrs["height"]) in zero
    assert bar_end(shown["a"]) > bar_end(shown["b"]) > bar_end(shown["d"]) > bar_end(shown["c"])


def test_many_problems_widen_the_chart_and_long_names_are_cut_with_a_tooltip() -> None:
    def width(problems: int) -> int:
        report = build(*(slot("c/a", f"c/p{i:03}", metrics={"m": str(i)}) for i in range(problems)))
        return int(parse(render_report(report, title="t")).find("svg")[0].attrs["width"])

    assert width(200) > width(20) > 0
    assert width(200) >= 200 * 2 * 16
    long = "c/" + "candidate-with-a-very-long-name-" * 3
    page = render_report(build(slot(long, "c/" + "p" * 90, metrics={"m": "1"})), title="t")
    texts = parse(page).find("svg")[0].find("text")
    cut = [t for t in texts if t.find("title")]
    assert {t.find("title")[0].text() for t in cut} == {long[2:], "p" * 90}
    for text in cut:
        full, shown = text.find("title")[0].text(), text.own_text()
        assert shown.endswith("\u2026") and full.startswith(shown[:-1]) and shown != full


def test_non_numeric_values_are_tabled_but_not_charted() -> None:
    report = build(
        slot("c/a", "c/p", metrics={"m": "fast", "n": "1"}),
        slot("c/b", "c/p", metrics={"m": "12", "n": "NaN"}),
        slot("c/c", "c/p", metrics={"m": "1e-07", "n": "2"}),
    )
    sections = metric_sections(parse(render_report(report, title="t")))
    m_bars = [b for b in sections["m"].find("rect") if "bar" in b.classes()]
    assert sorted(b.attrs["data-value"] for b in m_bars) == ["12", "1e-07"]
    cells = table_cells(sections["m"].find("table")[0])
    assert cells[("c/a", "c/p")].text() == "fast"
    assert "lowest" in cells[("c/c", "c/p")].classes()
    assert "highest" in cells[("c/b", "c/p")].classes()
    assert not {"lowest", "highest"} & cells[("c/a", "c/p")].classes()
    n_cells = table_cells(sections["n"].find("table")[0])
    assert n_cells[("c/b", "c/p")].text() == "NaN"
    assert len([b for b in sections["n"].find("rect") if "bar" in b.classes()]) == 2


def test_a_warm_up_never_stands_for_its_measurement() -> None:
    report = build(
        slot("c/a", "c/p", SlotState.ACCEPTED, role="warmup"),
        slot("c/a", "c/p", SlotState.FAILED),
        slot("c/b", "c/p", metrics={"m": "1"}),
        slot("c/b", "c/p", SlotState.ACCEPTED, role="warmup"),
    )
    cells = table_cells(
        metric_sections(parse(render_report(report, title="t")))["m"].find("table")[0]
    )
    assert (cells[("c/a", "c/p")].text(), cells[("c/b", "c/p")].text()) == ("failed", "1")


def test_ids_of_several_campaigns_are_shown_in_full() -> None:
    page = render_report(
        build(slot("one/a", "one/p", metrics={"m": "1"}), slot("two/a", "two/p")), title="t"
    )
    headers = {th.text() for th in parse(page).find("th")}
    assert {"one/a", "two/a", "one/p", "two/p"} <= headers
    assert {b.attrs["data-series"] for b in bars(page)} == {"one/a"}


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_and_values_are_escaped(hostile: str) -> None:
    report = build(
        slot(f"c/{hostile}", f"c/{hostile}", metrics={hostile: "1", "m": hostile}),
        slot("c/b", f"c/{hostile}", metrics={hostile: "2", "m": "3"}),
        excluded=((f"c/{hostile}", "c/q"),),
    )
    page = render_report(report, title=hostile)
    tree = parse(page)
    assert tree.find("script") == [] and tree.find("b") == []
    assert len(tree.find("svg")) == 2  # the metric named ``hostile`` and ``m``
    assert all(not any(k.startswith("on") for k in node.attrs) for node in tree.walk())
    assert tree.find("title")[0].text() == hostile == tree.find("h1")[0].text()
    assert hostile in metric_sections(tree)
    assert {b.attrs["data-series"] for b in bars(page)} == {hostile, "b"}
    cells = table_cells(metric_sections(tree)["m"].find("table")[0])
    assert cells[(f"c/{hostile}", f"c/{hostile}")].text() == hostile
    assert render_report(report, title=hostile) == page
