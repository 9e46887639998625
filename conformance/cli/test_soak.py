"""The kill -9 soak (issue 28, item 8): ``runstore run`` SIGKILLed at seeded random
moments, each kill followed by one ``runstore run --resume`` that must finish every slot
(SPEC 15.5: one resume after a kill leaves no slot in progress whose owner is dead).

Each round of a lane grows the lane's campaign by a few problems (so every kill lands in
real work: startup, registration, an attempt starting, running or publishing), starts
``run --json`` and kills it after a seeded number of JSON lines plus a seeded delay (or
after a delay alone, before its first line); some rounds kill the first ``--resume`` too,
during its wait for the dead owner's leases or after it. Then one ``--resume`` must exit 0
with every slot satisfied, and the store, read through a fresh read-only connection, must
hold nothing in progress, exactly one accepted result per slot, and every result accepted
before (in the store after an earlier round, or acknowledged by an ``attempt_finished``
line of a killed run) with the same attempt and selected observation; ``validate`` and
``audit`` must pass. Lanes (one store each) run side by side so that their lease waits
overlap. A finding names the seed, lane, round and trigger that reproduce it (the seed
fixes every trigger and every worker's duration; the instant a kill lands still depends
on the machine's speed, so the finding also says what the kill left in progress); set
``SOAK_SEED`` to try another seed. ``pytest -s`` shows the figures.

The runstore processes get their own ``TMPDIR`` (a directory of the lane) so that scratch
directories a killed coordinator may leave (observation 5) stay out of /tmp; their number
is printed, not asserted (conformance/runner/test_worker_lifetime.py pins their removal).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest

from conformance.cli.soak_world import PHASES
from conformance.cli.soak_world import Holdings
from conformance.cli.soak_world import KillSite
from conformance.cli.soak_world import Ran
from conformance.cli.soak_world import Result
from conformance.cli.soak_world import Trigger
from conformance.cli.soak_world import checks
from conformance.cli.soak_world import drive
from conformance.cli.soak_world import holdings
from conformance.cli.soak_world import kill_site
from conformance.cli.soak_world import scratch_left
from conformance.cli.soak_world import write_campaign

SEED = os.environ.get("SOAK_SEED", "28")
RETRIES = 20  # --retry-failed: a slot interrupted by several kills is retried each time
RESUME_TIMEOUT = 90.0
# The figures printed and summed over lanes: kills (of a run or of a resume), resumes
# that had to finish and did, runs that finished before their trigger, accepted results,
# lost, doubled and left in progress; accepted slots whose selection is an earlier
# attempt's observation (SPEC 15.4 keeps a slot's earlier selection); scratch
# directories and other entries left in the lanes' TMPDIR.
FIGURES = (
    "kills",
    "resume_kills",
    "finishing_resumes",
    "missed",
    "accepted",
    "lost",
    "doubled",
    "in_progress",
    "kept",
    "scratch",
    "other_tmp",
)


@attrs.frozen(kw_only=True)
class Size:
    """``lanes`` side by side, ``rounds`` rounds each (each round: one kill followed by one
    resume that must finish), a fresh store every ``rounds_per_store`` rounds (so that
    ``validate`` and ``audit`` stay quick), ``candidates`` x ``problems`` new slots per
    round run ``jobs`` at a time; ``resume_kills``: the share of rounds whose first resume
    is killed too (an extra kill, followed by the one resume that must finish)."""

    lanes: int
    rounds: int
    rounds_per_store: int
    candidates: int
    problems: int
    jobs: int
    resume_kills: float


# The test command's size: 30 kills each followed by one finishing resume, plus about six
# kills of a resume; well under 90 s of wall time on two shared cores.
QUICK = Size(
    lanes=3, rounds=10, rounds_per_store=10, candidates=3, problems=2, jobs=3, resume_kills=0.2
)
# Nightly (the exhaustive marker): 200 such kills on bigger rounds and more jobs, with
# five fresh stores per lane (each store made by a killed run --init).
FULL = Size(
    lanes=4, rounds=50, rounds_per_store=10, candidates=4, problems=3, jobs=4, resume_kills=0.25
)


@attrs.define
class Round:
    """What one round did, for the figures and for a finding's reproduction."""

    lane: int
    index: int
    slots: int
    trigger: str = ""
    last_event: str = ""
    site: KillSite | None = None
    resume_trigger: str = ""
    resume_site: KillSite | None = None
    missed: int = 0  # runs that finished before their trigger (the round then grew again)
    resume_seconds: float = 0.0
    seconds: float = 0.0

    def where(self) -> str:
        return (
            f"SOAK_SEED={SEED} lane {self.lane} round {self.index} ({self.slots} slots): "
            f"run killed {self.trigger} (last line read: {self.last_event})"
        )


@attrs.define
class Lane:
    """One lane's tallies: its rounds, kills, findings and the figures the test asserts."""

    index: int
    rounds: list[Round] = attrs.Factory(list)
    kills: int = 0
    resume_kills: int = 0
    finishing_resumes: int = 0
    accepted: int = 0
    lost: set[str] = attrs.Factory(set)
    doubled: set[str] = attrs.Factory(set)
    in_progress: int = 0
    foreign_selections: set[str] = attrs.Factory(set)
    findings: list[str] = attrs.Factory(list)
    scratch: int = 0
    other_tmp: int = 0

    def figures(self) -> Counter[str]:
        """This lane's figures, named as in :data:`FIGURES`."""
        return Counter(
            kills=self.kills,
            resume_kills=self.resume_kills,
            finishing_resumes=self.finishing_resumes,
            missed=sum(record.missed for record in self.rounds),
            accepted=self.accepted,
            lost=len(self.lost),
            doubled=len(self.doubled),
            in_progress=self.in_progress,
            kept=len(self.foreign_selections),
            scratch=self.scratch,
            other_tmp=self.other_tmp,
        )


def run_trigger(rng: random.Random, new_slots: int, first: bool) -> Trigger:
    """A kill before the first JSON line (startup, opening, the store's creation on the
    first round, registration) a quarter of the time; otherwise after one of the lines a
    run prints for ``new_slots`` slots (campaign, planned, a start and a finish each)
    and a short delay, which spreads kills over starting, running and publishing."""
    if rng.random() < 0.25:
        return Trigger(events=0, delay=rng.uniform(0.0, 0.7 if first else 0.45))
    return Trigger(events=rng.randint(1, 2 * new_slots + 1), delay=rng.uniform(0.0, 0.12))


def soak_lane(size: Size, index: int, root: Path) -> Lane:
    lane = Lane(index=index)
    rng = random.Random(f"{SEED}/{index}")
    tmp = root / "tmp"
    tmp.mkdir(parents=True)
    env = {**os.environ, "TMPDIR": str(tmp), "COLUMNS": "200"}
    known: dict[str, Result] = {}  # slot -> its accepted result, as first seen
    acknowledged: dict[str, tuple[str, str]] = {}  # slot -> (attempt, where it was acknowledged)
    for round_index in range(1, size.rounds + 1):
        began = time.monotonic()
        epoch, step = divmod(round_index - 1, size.rounds_per_store)
        store = root / f"store-{epoch + 1}"
        first = step == 0
        if first:
            problems = 0
            known.clear()
            acknowledged.clear()
        init = ["--init"] if first else []
        common = ["--store", str(store), *init, "--jobs", str(size.jobs), "--json"]
        resume = ["--resume", "--retry-failed", str(RETRIES)]
        record = Round(lane=index, index=round_index, slots=0)
        lane.rounds.append(record)
        # The run to kill: grow the campaign until a kill lands in its work.
        for _ in range(5):
            problems += size.problems
            slots = size.candidates * problems
            campaign = write_campaign(
                store.with_suffix(".campaign"), size.candidates, problems, SEED
            )
            trigger = run_trigger(rng, size.candidates * size.problems, first)
            record.slots, record.trigger = slots, trigger.describe()
            ran = drive(
                ["run", str(campaign), *common, "--retry-failed", str(RETRIES)],
                env,
                root / "run.stderr",
                trigger,
                RESUME_TIMEOUT,
            )
            record.last_event = ran.last_event()
            acknowledge(acknowledged, ran, record.where())
            if ran.killed:
                break
            record.missed += 1
            if ran.status != 0 or ran.hung:
                lane.findings.append(f"{record.where()}: an unkilled run {exit_of(ran)}")
        else:
            lane.findings.append(f"{record.where()}: no kill landed in five runs")
            continue
        lane.kills += 1
        record.site = kill_site(store, slots)
        # Some rounds kill the first resume too, during its lease wait or after it.
        finishing: Ran | None = None
        if rng.random() < size.resume_kills:
            resume_trigger = Trigger(events=0, delay=rng.uniform(0.2, 3.2))
            record.resume_trigger = resume_trigger.describe()
            ran = drive(
                ["run", str(campaign), *common, *resume],
                env,
                root / "resume.stderr",
                resume_trigger,
                RESUME_TIMEOUT,
            )
            acknowledge(
                acknowledged, ran, f"{record.where()}, resume to kill {record.resume_trigger}"
            )
            if ran.killed:
                lane.kills += 1
                lane.resume_kills += 1
                record.resume_site = kill_site(store, slots)
            else:
                finishing = ran
        if finishing is None:
            finishing = drive(
                ["run", str(campaign), *common, *resume],
                env,
                root / "resume.stderr",
                None,
                RESUME_TIMEOUT,
            )
            acknowledge(acknowledged, finishing, f"{record.where()}, finishing resume")
        record.resume_seconds = finishing.seconds
        lane.finishing_resumes += 1
        accepted = check_round(lane, record, store, slots, finishing, known, acknowledged, env)
        record.seconds = time.monotonic() - began
        if step == size.rounds_per_store - 1 or round_index == size.rounds:
            lane.accepted += accepted
    lane.scratch, lane.other_tmp = scratch_left(tmp)
    return lane


def acknowledge(acknowledged: dict[str, tuple[str, str]], ran: Ran, where: str) -> None:
    for slot, attempt in ran.accepted().items():
        acknowledged.setdefault(slot, (attempt, where))


def exit_of(ran: Ran) -> str:
    tail = ran.stderr.strip().splitlines()[-3:]
    return f"{'hung' if ran.hung else f'exited {ran.status}'}: {' | '.join(tail) or 'no stderr'}"


def check_round(
    lane: Lane,
    record: Round,
    store: Path,
    slots: int,
    finishing: Ran,
    known: dict[str, Result],
    acknowledged: dict[str, tuple[str, str]],
    env: dict[str, str],
) -> int:
    """The finishing resume's promises, and the store's, after one round; returns the
    number of accepted attempts in the store."""
    where = record.where()
    if record.site is not None:
        where += f" at {record.site.describe()}"
    if record.resume_site is not None:
        where += f", resume killed {record.resume_trigger} at {record.resume_site.describe()}"
    found = lane.findings
    summary = finishing.summary()
    if finishing.status != 0 or finishing.hung:
        found.append(f"{where}: the resume {exit_of(finishing)}")
    if summary is None:
        found.append(f"{where}: the resume printed no summary")
    elif (summary.get("satisfied"), summary.get("unsatisfied"), summary.get("left")) != (
        slots,
        [],
        {},
    ):
        found.append(f"{where}: the resume's summary {dict(summary)} is not {slots} satisfied")
    held: Holdings = holdings(store)
    lane.in_progress += len(held.in_progress)
    if held.in_progress:
        found.append(f"{where}: left in progress after the resume: {held.in_progress}")
    if held.slots != slots or len(held.results) != slots:
        found.append(f"{where}: {len(held.results)} of {held.slots} slots accepted, not {slots}")
    if held.doubled_selections:
        found.append(f"{where}: {held.doubled_selections} observation slots selected twice")
    for slot, results in held.results.items():
        if len(results) > 1:
            lane.doubled.add(slot)
            found.append(f"{where}: slot {slot} holds {len(results)} accepted results")
        result = results[0]
        if result.observation is None:
            found.append(f"{where}: slot {slot}'s accepted {result.attempt} selects nothing")
        elif result.observation_attempt != result.attempt:
            lane.foreign_selections.add(slot)  # an earlier attempt's, kept (SPEC 15.4)
        before = known.setdefault(slot, result)
        if before != result:
            lane.lost.add(slot)
            found.append(f"{where}: slot {slot} held {before} before, now {result}")
    for slot, result in known.items():
        if slot not in held.results:
            lane.lost.add(slot)
            found.append(f"{where}: slot {slot}'s accepted {result.attempt} is gone")
    for slot, (attempt, seen) in acknowledged.items():
        now = held.results.get(slot, ())
        if [r.attempt for r in now] != [attempt]:
            lane.lost.add(slot)
            found.append(f"{where}: {attempt}, acknowledged ({seen}), is not {slot}'s result")
    for name, failure in checks(store, env, RESUME_TIMEOUT).items():
        found.append(f"{where}: {name} {failure}")
    return sum(len(results) for results in held.results.values())


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(QUICK, id="quick"),
        pytest.param(FULL, id="full", marks=pytest.mark.exhaustive),
    ],
)
def test_one_resume_after_each_kill_finishes_every_slot_and_keeps_every_result(
    size: Size, tmp_path: Path
) -> None:
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=size.lanes) as pool:
        futures = [
            pool.submit(soak_lane, size, lane, tmp_path / f"lane-{lane}")
            for lane in range(size.lanes)
        ]
        lanes = [future.result() for future in futures]
    wall = time.monotonic() - began
    rounds = [record for lane in lanes for record in lane.rounds]
    findings = [finding for lane in lanes for finding in lane.findings]
    figures: Counter[str] = sum((lane.figures() for lane in lanes), Counter())
    phases = Counter(r.site.phase for r in rounds if r.site is not None)
    resume_phases = Counter(r.resume_site.phase for r in rounds if r.resume_site is not None)
    seconds = [r.seconds for r in rounds if r.seconds] or [0.0]
    for record in rounds:
        site = record.site.describe() if record.site else "-"
        resumed = (
            f"; resume killed {record.resume_trigger} at {record.resume_site.describe()}"
            if record.resume_site
            else ""
        )
        print(
            f"soak lane {record.lane} round {record.index:>2}: {record.slots:>3} slots, "
            f"killed {record.trigger} at {site}{resumed}; missed {record.missed}; "
            f"resume {record.resume_seconds:.1f} s, round {record.seconds:.1f} s"
        )
    print(
        f"soak seed={SEED} lanes={size.lanes} rounds={len(rounds)} "
        + " ".join(f"{name}={figures[name]}" for name in FIGURES)
        + f" wall={wall:.1f}s round_mean={statistics.fmean(seconds):.1f}s"
        f" round_max={max(seconds):.1f}s"
    )
    print("soak kills by phase: " + ", ".join(f"{p} {phases[p]}" for p in PHASES))
    print("soak resume kills by phase: " + ", ".join(f"{p} {resume_phases[p]}" for p in PHASES))
    assert not findings, "\n".join(findings)
    assert (figures["lost"], figures["doubled"], figures["in_progress"]) == (0, 0, 0)
    assert figures["finishing_resumes"] == size.lanes * size.rounds
    assert figures["kills"] >= size.lanes * size.rounds
    # A soak whose kills never caught an attempt in progress tested nothing.
    assert phases["starting"] + phases["running"] + phases["publishing"] > 0, phases
