"""``runstore.inspection.report``: the self-contained HTML page of a benchmark campaign.

A store is built by running a campaign in-process (the real coordinator and writer, a
scripted executor): three candidates x four problems with five repetitions each, a metric
declared ``higher`` (``speed``, within a hundredfold: a linear axis), one declared
``lower`` with a threshold (``time``, spanning more than a hundredfold: a log axis, one
candidate noisy enough to be unstable), one undeclared with negative values (``delta``), a
failed pair and a pair its candidate does not apply to. The page is parsed with the
standard library's :mod:`html.parser` into a small tree, and every expectation is derived
from what the store holds, read through :func:`runstore.inspection.results.pair_results`
and formatted with :mod:`runstore.analysis.numbers` (the numbers ``status`` prints), or
compared with :func:`runstore.analysis.compare.compare` directly, never from numbers pinned
here. The layout at 50 x 20, stream curves and the edge cases live in
``test_report_layout.py``; a real browser's rendering in ``test_report_render.py``.
"""

from __future__ import annotations

import json
import math
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
from runstore.analysis.compare import compare
from runstore.analysis.compare import describe
from runstore.analysis.numbers import bracketed
from runstore.analysis.numbers import plus_minus
from runstore.errors import ComparisonInvalidError
from runstore.inspection.comparison import against_candidate
from runstore.inspection.reader import SlotState
from runstore.inspection.reader import StatusReport
from runstore.inspection.reader import status
from runstore.inspection.report import render_report
from runstore.inspection.report_file import write_report
from runstore.inspection.results import MetricResult
from runstore.inspection.results import PairResult
from runstore.inspection.results import pair_results
from runstore.inspection.snapshot import Snapshot
from runstore.runner.campaign import MetricDeclaration
from runstore.runner.coordinator import RunOptions
from runstore.runner.coordinator import run_campaign
from runstore.runner.executor import WorkOrder
from runstore.runner.executor import WorkResult
from runstore.runner.executor import WorkStatus

from conformance.cli.world import runstore
from conformance.runner.world import Clock
from conformance.runner.world import Events
from conformance.runner.world import ScriptedExecutor
from conformance.runner.world import campaign
from conformance.runner.world import result
from conformance.runner.world import succeeded

CANDIDATES = ("zeta", "alpha", "mid")
PROBLEMS = ("p1", "p2", "p3", "p4")
REPETITIONS = 5
FAILING = ("zeta", "p4")
NOISY = "zeta"
DECLARED = (
    MetricDeclaration(name="speed", direction="higher", unit="MB/s"),
    MetricDeclaration(name="time", direction="lower", unit="s", threshold="0.05"),
)
VOID = frozenset({"meta", "link", "br", "hr", "img", "input", "wbr", "source"})


# --- a small DOM over html.parser --------------------------------------------------------------


@attrs.define
class Node:
    tag: str
    attrs: dict[str, str]
    content: list[Node | str] = attrs.field(factory=list)
    """Child elements and text, in document order."""

    @property
    def children(self) -> list[Node]:
        return [item for item in self.content if isinstance(item, Node)]

    def text(self) -> str:
        return "".join(item if isinstance(item, str) else item.text() for item in self.content)

    def own_text(self) -> str:
        """Text without the ``<title>`` tooltips of children."""
        return "".join(
            item if isinstance(item, str) else item.own_text()
            for item in self.content
            if isinstance(item, str) or item.tag != "title"
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

    def having(self, tag: str, css: str) -> list[Node]:
        """The ``tag`` elements below whose classes include ``css``."""
        return [node for node in self.find(tag) if css in node.classes()]

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
        self.stack[-1].content.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self.stack[-1].content.append(Node(tag, {key: value or "" for key, value in attributes}))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].content.append(data)


def parse(page: str) -> Node:
    builder = TreeBuilder()
    builder.feed(page)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    assert builder.declarations == ["DOCTYPE html"]
    return builder.root


def metric_sections(tree: Node) -> dict[str, Node]:
    sections = [node for node in tree.find("section") if node.attrs["id"].startswith("metric-")]
    return {section.find("h3")[0].text(): section for section in sections}


def table_cells(table: Node) -> dict[tuple[str, str], Node]:
    """(candidate id, problem id) -> the cell, from a problems x candidates table whose
    header cells carry the full ids in ``title``."""
    header = table.find("thead")[0].find("th")[1:]
    columns = [th.attrs["title"] for th in header]
    cells: dict[tuple[str, str], Node] = {}
    for row in table.find("tbody")[0].find("tr"):
        problem = row.find("th")[0].attrs["title"]
        for candidate, cell in zip(columns, row.find("td"), strict=True):
            cells[(candidate, problem)] = cell
    return cells


def metric_table(section: Node) -> Node:
    (table,) = section.having("table", "metric")
    return table


def interval_chart(section: Node) -> Node:
    (chart,) = section.having("svg", "intervals")
    return chart


def chart_pairs(chart: Node) -> dict[tuple[str, str], Node]:
    return {
        (g.attrs["data-candidate"], g.attrs["data-problem"]): g for g in chart.having("g", "pair")
    }


def statistics(results: tuple[PairResult, ...]) -> dict[str, dict[tuple[str, str], MetricResult]]:
    """metric -> (candidate id, problem id) -> its statistics, from the results."""
    found: dict[str, dict[tuple[str, str], MetricResult]] = {}
    for pair in results:
        for metric in pair.metrics:
            found.setdefault(metric.name, {})[(pair.group.candidate_id, pair.group.problem_id)] = (
                metric
            )
    return found


def drawn_values(metric: MetricResult) -> list[float]:
    summary = metric.summary
    return [summary.median, summary.ci_low, summary.ci_high, *(v.number for v in metric.values)]


def expected_log(values: list[float]) -> bool:
    """The page's rule, written from SPEC.md 16.4: the largest positive value over the
    smallest is more than 100."""
    positive = [value for value in values if value > 0]
    return bool(positive) and max(positive) / min(positive) > 100


# --- the store ---------------------------------------------------------------------------------


def metrics_of(candidate: str, problem: str, repetition: int) -> dict[str, object]:
    i, j, r = CANDIDATES.index(candidate), PROBLEMS.index(problem), repetition
    noise = 0.2 if candidate == NOISY else 0.02
    return {
        "speed": 100 + 40 * i + 10 * j + 0.7 * r * (i + 1),
        "time": 0.001 * 10**j * (1 + i) * (1 + noise * r),
        "delta": (i - 1) * 0.5 - j + 0.25 * r,
    }


def script(order: WorkOrder, nth: int) -> WorkResult:
    env = dict(order.env)
    pair = (env["RUNSTORE_CANDIDATE"], env["RUNSTORE_PROBLEM"])
    if pair == FAILING:
        return result(WorkStatus.EXITED, 3)
    return succeeded(metrics_of(*pair, int(env["RUNSTORE_REPETITION"])))


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report") / "store"
    root.mkdir()
    clock = Clock()
    planned = attrs.evolve(
        campaign(CANDIDATES, PROBLEMS, applies_to={"mid": ("p1", "p2", "p3")}),
        repetitions=REPETITIONS,
        metrics=DECLARED,
    )
    with RunStore.open(str(root)) as store:
        run_campaign(
            store,
            planned,
            ScriptedExecutor(script, clock),
            RunOptions(jobs=2),
            Events(),
            clock=clock,
        )
    return root


@pytest.fixture(scope="module")
def read(store_root: Path) -> tuple[StatusReport, tuple[PairResult, ...]]:
    with Snapshot.take(store_root) as snapshot:
        return status(snapshot, campaign="demo"), pair_results(snapshot.connection)


@pytest.fixture(scope="module")
def report(read: tuple[StatusReport, tuple[PairResult, ...]]) -> StatusReport:
    return read[0]


@pytest.fixture(scope="module")
def results(read: tuple[StatusReport, tuple[PairResult, ...]]) -> tuple[PairResult, ...]:
    return read[1]


@pytest.fixture(scope="module")
def page(report: StatusReport, results: tuple[PairResult, ...]) -> str:
    return render_report(report, results, title="demo campaign")


@pytest.fixture(scope="module")
def baseline_page(report: StatusReport, results: tuple[PairResult, ...]) -> str:
    comparison = against_candidate(results, campaign="demo", baseline="alpha")
    return render_report(report, results, title="demo campaign", comparison=comparison)


def short(identifier: str) -> str:
    return identifier.split("/", 1)[1]


# --- the campaign's page -----------------------------------------------------------------------


def test_the_store_holds_what_the_page_is_checked_against(
    report: StatusReport, results: tuple[PairResult, ...]
) -> None:
    """Guards the other tests against a vacuous store: repetitions, declared and undeclared
    metrics, a log and a linear axis, unstable statistics, negative values, a failed pair and
    a pair without a slot."""
    found = statistics(results)
    assert set(found) == {"delta", "speed", "time"}
    assert len(found["speed"]) == len(CANDIDATES) * len(PROBLEMS) - 2
    assert {metric.summary.n for metric in found["speed"].values()} == {REPETITIONS}
    assert {metric.info.direction for metric in found["speed"].values()} == {"higher"}
    assert expected_log([v for m in found["time"].values() for v in drawn_values(m)])
    assert not expected_log([v for m in found["speed"].values() for v in drawn_values(m)])
    assert any(metric.summary.unstable for metric in found["time"].values())
    assert any(metric.summary.median < 0 for metric in found["delta"].values())
    assert report.totals["failed"] == REPETITIONS
    assert ("demo/mid", "demo/p4") not in {(s.candidate_id, s.problem_id) for s in report.slots}


def test_the_page_parses_and_is_self_contained(page: str, baseline_page: str) -> None:
    for text in (page, baseline_page):
        tree = parse(text)
        assert tree.find("html")[0].attrs["lang"] == "en"
        assert [node.text() for node in tree.find("title")[:1]] == ["demo campaign"]
        assert tree.find("script") == []
        assert not re.search(r"https?:|//[a-z]|url\(|@import|javascript:", text, re.IGNORECASE)
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
    pairs = table_cells(tables["Slot states per problem and candidate"])
    for (candidate, problem), cell in pairs.items():
        slots = [s for s in report.slots if (s.candidate_id, s.problem_id) == (candidate, problem)]
        counts = Counter(s.state.value for s in slots)
        if not slots:
            assert cell.text() == "not registered"
        else:
            assert cell.text() == ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def test_every_pairs_cell_shows_its_median_and_mad_as_status_does(
    report: StatusReport, results: tuple[PairResult, ...], page: str
) -> None:
    sections = metric_sections(parse(page))
    found = statistics(results)
    assert set(sections) == set(found)
    states = Counter((s.candidate_id, s.problem_id, s.state.value) for s in report.slots)
    checked = unstable = 0
    for metric, section in sections.items():
        cells = table_cells(metric_table(section))
        assert set(cells) == {(c, p) for c in report.by_candidate for p in report.by_problem}
        for pair, cell in cells.items():
            stats = found[metric].get(pair)
            if stats is None:
                expected = [f"{n} {state}" for (c, p, state), n in states.items() if (c, p) == pair]
                assert cell.text() == (", ".join(expected) or "not registered")
                continue
            summary = stats.summary
            (value,) = cell.having("span", "value")
            assert value.text() == plus_minus(summary.median, summary.mad, stats.info.unit)
            (n,) = cell.having("span", "n")
            assert n.text() == f"n={summary.n}"
            marks = cell.having("span", "unstable")
            assert bool(marks) == summary.unstable == ("unstable" in cell.classes())
            if marks:
                assert marks[0].attrs["title"] == "unstable: " + "; ".join(summary.reasons)
                unstable += 1
            checked += 1
    assert checked == sum(len(by_pair) for by_pair in found.values()) and unstable > 0


def test_direction_is_stated_in_words_and_the_best_median_is_marked_by_it(
    results: tuple[PairResult, ...], page: str
) -> None:
    sections = metric_sections(parse(page))
    declared = {d.name: d.direction for d in DECLARED}
    found = statistics(results)
    marked = Counter[str]()
    for metric, section in sections.items():
        words = section.having("p", "direction")[0].text()
        if metric in declared:
            assert f"{declared[metric].capitalize()} is better" in words
        else:
            assert "No direction declared" in words and "lower is better" in words
        cells = table_cells(metric_table(section))
        for problem in {p for _, p in found[metric]}:
            medians = {c: m.summary.median for (c, p), m in found[metric].items() if p == problem}
            differ = len(set(medians.values())) > 1
            for candidate, median in medians.items():
                classes = cells[(candidate, problem)].classes()
                if metric in declared:
                    pick = min if declared[metric] == "lower" else max
                    assert ("best" in classes) == (differ and median == pick(medians.values()))
                    assert not {"lowest", "highest"} & classes
                else:
                    assert ("lowest" in classes) == (differ and median == min(medians.values()))
                    assert ("highest" in classes) == (differ and median == max(medians.values()))
                    assert "best" not in classes
                marked.update(classes & {"best", "lowest", "highest"})
    assert marked["best"] >= 2 and marked["lowest"] >= 1 and marked["highest"] >= 1


def test_each_chart_draws_every_pairs_median_interval_and_repetitions(
    results: tuple[PairResult, ...], page: str
) -> None:
    sections = metric_sections(parse(page))
    for metric, by_pair in statistics(results).items():
        chart = interval_chart(sections[metric])
        shown = chart_pairs(chart)
        assert set(shown) == set(by_pair)
        where: dict[tuple[str, str], Decimal] = {}
        for pair, group in shown.items():
            summary = by_pair[pair].summary
            log = chart.attrs["data-scale"] == "log"
            reps = sorted(c.attrs["data-value"] for c in group.having("circle", "rep"))
            placed = [v.text for v in by_pair[pair].values if v.number > 0 or not log]
            assert reps == sorted(placed)
            interval = bracketed(
                summary.median, summary.ci_low, summary.ci_high, by_pair[pair].info.unit
            )
            assert interval in group.find("title")[0].text()
            medians = group.having("circle", "median")
            if log and summary.median <= 0:
                assert medians == []
                continue
            (line,) = group.having("line", "ci")
            x = Decimal(medians[0].attrs["cx"])
            assert Decimal(line.attrs["x1"]) <= x <= Decimal(line.attrs["x2"])
            where[pair] = x
        ordered = sorted(where, key=lambda pair: by_pair[pair].summary.median)
        for low, high in pairwise(ordered):
            if by_pair[low].summary.median < by_pair[high].summary.median:
                assert where[low] < where[high], (metric, low, high)


def test_an_axis_is_logarithmic_exactly_when_its_positive_values_span_more_than_100x(
    results: tuple[PairResult, ...], page: str
) -> None:
    sections = metric_sections(parse(page))
    scales = set()
    for metric, by_pair in statistics(results).items():
        chart = interval_chart(sections[metric])
        log = expected_log([value for m in by_pair.values() for value in drawn_values(m)])
        assert chart.attrs["data-scale"] == ("log" if log else "linear")
        title = next(t for t in chart.having("text", "axis"))
        assert ("log scale" if log else "linear scale") in title.text()
        labels = [t.text() for t in chart.having("text", "tick")]
        ticks = sorted({Decimal(label) for label in labels})
        assert len(ticks) >= 2
        if log:
            assert all(math.log10(tick) == int(math.log10(tick)) for tick in ticks)
        else:
            assert len({high - low for low, high in pairwise(ticks)}) == 1
        values = [v for m in by_pair.values() for v in drawn_values(m) if v > 0 or not log]
        assert ticks[0] <= Decimal(min(values)) and ticks[-1] >= Decimal(max(values))
        scales.add(log)
    assert scales == {True, False}


def test_without_a_baseline_the_page_says_how_to_get_one(page: str, baseline_page: str) -> None:
    assert "--baseline CANDIDATE" in parse(page).text()
    assert parse(page).find("h2", id="baseline") == []
    assert "--baseline CANDIDATE" not in parse(baseline_page).text()


def test_the_baseline_view_holds_compares_ratios_and_words(
    results: tuple[PairResult, ...], baseline_page: str
) -> None:
    tree = parse(baseline_page)
    assert "alpha" in tree.find("h2", id="baseline")[0].text()
    tables = {
        table.find("caption")[0].text().split(" ")[0]: table
        for section in tree.having("section", "baseline")
        for table in section.find("table")
    }
    found = statistics(results)
    assert set(tables) == set(found)
    verdicts = Counter[str]()
    for metric, table in tables.items():
        cells = table_cells(table)
        assert {c for c, _ in cells} == {f"demo/{c}" for c in CANDIDATES} - {"demo/alpha"}
        for (candidate, problem), cell in cells.items():
            mine = found[metric].get((candidate, problem))
            base = found[metric].get(("demo/alpha", problem))
            if mine is None or base is None:
                assert cell.text() == "\u2013" and "ratio" not in cell.classes()
                continue
            info = base.info
            expected = compare(
                [v.number for v in base.values],
                [v.number for v in mine.values],
                direction=info.direction,
                threshold=info.threshold,
            )
            assert cell.text() == describe(expected, direction=info.direction, unit=info.unit)
            for field in ("ratio", "ratio_low", "ratio_high"):
                value = getattr(expected, field)
                shown = cell.attrs["data-" + field.replace("_", "-")]
                assert shown == ("" if value is None else repr(value))
            verdict = expected.verdict if expected.significant else "same"
            assert cell.attrs["data-verdict"] == verdict and verdict in cell.classes()
            verdicts[verdict] += 1
    assert verdicts["better"] and verdicts["worse"]


def test_the_same_report_renders_to_the_same_bytes(
    store_root: Path, page: str, baseline_page: str
) -> None:
    with Snapshot.take(store_root) as snapshot:
        again, results = status(snapshot, campaign="demo"), pair_results(snapshot.connection)
    assert render_report(again, results, title="demo campaign") == page
    comparison = against_candidate(results, campaign="demo", baseline="alpha")
    assert (
        render_report(again, results, title="demo campaign", comparison=comparison) == baseline_page
    )


# --- the file and the command ------------------------------------------------------------------


def test_write_report_with_a_baseline_and_its_refusals(store_root: Path, tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    target.write_text("older")
    with Snapshot.take(store_root) as snapshot:
        for bad in ({"baseline": "nobody"}, {"baseline": "alpha", "campaign": "other"}):
            with pytest.raises(ComparisonInvalidError):
                write_report(snapshot, str(target), **bad)  # type: ignore[arg-type]
            assert target.read_text() == "older"
        write_report(snapshot, str(target), baseline="alpha", campaign="demo")
    tree = parse(target.read_text(encoding="utf-8"))
    assert tree.find("h2", id="baseline") and tree.having("td", "ratio")


def test_the_report_command_takes_a_baseline_and_refuses_an_unknown_one(
    store_root: Path, tmp_path: Path
) -> None:
    target = tmp_path / "page.html"
    done = runstore(
        "report", "--store", str(store_root), "--html", str(target), "--baseline", "alpha"
    )
    assert done.returncode == 0, done.stderr
    assert parse(target.read_text(encoding="utf-8")).having("td", "ratio")
    target.unlink()
    refused = runstore(
        "report",
        "--store",
        str(store_root),
        "--html",
        str(target),
        "--baseline",
        "nobody",
        "--json",
    )
    assert refused.returncode == 2
    error = json.loads(refused.stdout)
    assert error["error"] == "comparison_invalid" and "alpha" in error["message"]
    assert not target.exists()
