"""The kill soak's world (conformance/cli/test_soak.py): a growing campaign whose worker
takes a short seeded time, ``runstore run`` driven as a subprocess and SIGKILLed on a
trigger, and the store read back through a fresh read-only connection (never by a
process that holds it open).

What this file knows: the campaign format (SPEC 15.1), the worker protocol (15.3), the
``--json`` lines of ``run`` (15.7) and the tables of schema v1 that hold attempts, leases
and selections. It judges nothing: the test decides what a finding is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import textwrap
import threading
import time
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path

import attrs
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState

from conformance.cli.world import RUNSTORE
from conformance.closed_store import rows

# Short sleeps, so that even a worker that outlived its killed coordinator (observation 5
# of issue 28, since fixed) would be done well within the next run's lease wait; a few
# extra files, so that publication takes a moment and some kills land in it. The attempt
# id goes into the output, so a result produced again by another attempt is a different
# artifact.
WORKER = textwrap.dedent(
    """\
    import hashlib, json, os, random, time
    key = os.environ["RUNSTORE_CANDIDATE"] + "/" + os.environ["RUNSTORE_PROBLEM"]
    attempt = os.environ["RUNSTORE_ATTEMPT"]
    pace = random.Random(os.environ["SOAK_SEED"] + attempt)
    time.sleep(pace.uniform(0.02, 0.3))
    out = os.environ["RUNSTORE_OUTPUT_DIR"]
    for index in range(pace.randrange(1, 4)):
        with open(os.path.join(out, f"part-{index}.txt"), "w") as handle:
            handle.write((attempt + "\\n") * 64)
    value = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    with open(os.path.join(out, "result.json"), "w") as handle:
        json.dump({"metrics": {"value": value}}, handle)
    """
)

NONTERMINAL = tuple(state.value for state in AttemptState if state not in TERMINAL_STATES)

# Where in an attempt's life a kill found it, by the state it was left in.
PHASE_OF_STATE = {
    "reserved": "starting",
    "materializing": "starting",
    "starting": "starting",
    "preparing": "starting",
    "executing": "running",
    "checkpointing": "running",
    "validating": "publishing",
    "evaluating": "publishing",
    "finalizing": "publishing",
}
# The phases a kill can find, in the order of an attempt's life: no database yet (or one
# without its schema), not every slot registered yet (startup, opening, recovery or
# registration itself), nothing in progress, then the furthest an attempt in progress got
# (an open staging lease counts as publishing).
PHASES = ("no store", "registration", "between attempts", "starting", "running", "publishing")


def write_campaign(directory: Path, candidates: int, problems: int, seed: str) -> Path:
    """``candidates`` x ``problems`` one-shot slots (names ``c<i>`` and ``p<j>``), the
    minimum lease (3 s, SPEC 15.1) so that a resume waits little for a dead owner."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "worker.py").write_text(WORKER, encoding="utf-8")
    lines = ["[campaign]", 'name = "soak"', "timeout_seconds = 30", "lease_seconds = 3"]
    for index in range(candidates):
        lines += [
            "[[candidates]]",
            f'name = "c{index}"',
            'command = ["{python}", "worker.py"]',
            'files = ["worker.py"]',
            f"env.SOAK_SEED = {json.dumps(seed)}",
        ]
    for index in range(problems):
        lines += ["[[problems]]", f'name = "p{index}"', f"parameters = {{ size = {index} }}"]
    path = directory / "campaign.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@attrs.frozen(kw_only=True)
class Trigger:
    """Kill once ``events`` JSON lines have been read and ``delay`` seconds more passed."""

    events: int
    delay: float

    def describe(self) -> str:
        if self.events:
            return f"after {self.events} events + {self.delay:.3f} s"
        return f"after {self.delay:.3f} s"


@attrs.frozen(kw_only=True)
class Ran:
    """One ``runstore`` process: its exit status (``-9`` when the trigger killed it), the
    JSON lines it printed, its stderr and how long it took."""

    status: int
    killed: bool
    hung: bool
    events: tuple[Mapping[str, object], ...]
    stderr: str
    seconds: float

    def summary(self) -> Mapping[str, object] | None:
        last = self.events[-1] if self.events else None
        return last if last is not None and last.get("event") == "summary" else None

    def accepted(self) -> dict[str, str]:
        """Slot -> attempt of every ``attempt_finished`` line with state ``accepted``:
        results the run acknowledged, which no later kill may take back."""
        return {
            str(event["slot"]): str(event["attempt"])
            for event in self.events
            if event.get("event") == "attempt_finished" and event.get("state") == "accepted"
        }

    def last_event(self) -> str:
        if not self.events:
            return "none"
        event = self.events[-1]
        where = "/".join(str(event[key]) for key in ("candidate", "problem") if key in event)
        return f"{event.get('event')} {where}".strip()


def drive(
    arguments: Sequence[str],
    env: Mapping[str, str],
    stderr_path: Path,
    trigger: Trigger | None,
    timeout: float,
) -> Ran:
    """Run the console script with ``arguments``; SIGKILL it on ``trigger`` (if it is
    still running then), or after ``timeout`` seconds (``hung``)."""
    began = time.monotonic()
    events: list[Mapping[str, object]] = []
    enough = threading.Event()  # set once the trigger's lines are read, or at the end
    if trigger is not None and trigger.events == 0:
        enough.set()
    with open(stderr_path, "w+", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [RUNSTORE, *arguments],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(env),
        )

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                with contextlib.suppress(ValueError):  # a line cut by the kill
                    events.append(json.loads(line))
                if trigger is not None and len(events) >= trigger.events:
                    enough.set()
            enough.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        hung = False
        if trigger is not None:
            enough.wait(timeout)
            try:
                process.wait(timeout=trigger.delay)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = True
            process.send_signal(signal.SIGKILL)
            status = process.wait()
        reader.join(timeout=10)
        stderr.seek(0)
        errors = stderr.read()
    return Ran(
        status=status,
        killed=status == -signal.SIGKILL and not hung,
        hung=hung,
        events=tuple(events),
        stderr=errors,
        seconds=time.monotonic() - began,
    )


def checks(store: Path, env: Mapping[str, str], timeout: float) -> dict[str, str]:
    """``runstore validate`` and ``runstore audit`` on ``store``, side by side: for each
    that did not exit 0, its output (empty when both passed)."""
    commands = {name: [RUNSTORE, name, "--store", str(store)] for name in ("validate", "audit")}
    started = {
        name: subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=dict(env),
        )
        for name, command in commands.items()
    }
    failed = {}
    for name, process in started.items():
        output, _ = process.communicate(timeout=timeout)
        if process.returncode != 0:
            failed[name] = f"exit {process.returncode}: {output.strip()[-2000:]}"
    return failed


@attrs.frozen(kw_only=True)
class KillSite:
    """What a kill left in the store: the phase (one of :data:`PHASES`), the states of
    the attempts left in progress, and how many staging leases were open."""

    phase: str
    states: Mapping[str, int]
    open_stages: int

    def describe(self) -> str:
        states = ", ".join(f"{state} {count}" for state, count in sorted(self.states.items()))
        stages = f"; {self.open_stages} stage(s) open" if self.open_stages else ""
        return f"{self.phase}{f' ({states})' if states else ''}{stages}"


def kill_site(store: Path, slots: int) -> KillSite:
    """Where the last kill landed, read from the store it left (``slots``: the campaign's
    slot count, to tell an unfinished registration)."""
    try:
        registered = rows(store, "SELECT count(*) FROM attempt_slots")[0][0]
        states: dict[str, int] = dict(
            rows(
                store,
                "SELECT state, count(*) FROM attempts WHERE state IN "
                f"({', '.join('?' * len(NONTERMINAL))}) GROUP BY state",
                NONTERMINAL,
            )
        )
        stages = rows(
            store,
            "SELECT count(*) FROM leases WHERE purpose = 'staging' AND released_at_ns IS NULL",
        )[0][0]
    except sqlite3.Error:  # no database yet, or one the kill left without its schema
        return KillSite(phase="no store", states={}, open_stages=0)
    if stages:
        phase = "publishing"
    elif states:
        phase = max((PHASE_OF_STATE[state] for state in states), key=PHASES.index)
    elif registered < slots:
        phase = "registration"
    else:
        phase = "between attempts"
    return KillSite(phase=phase, states=states, open_stages=stages)


@attrs.frozen(kw_only=True)
class Result:
    """One attempt slot's accepted result: the attempt, and the observation selected for
    the slot's result observation slot with its artifact (None when nothing is)."""

    attempt: str
    observation: str | None
    artifact: str | None
    observation_attempt: str | None


@attrs.frozen(kw_only=True)
class Holdings:
    """The store's results after a run: every accepted result per attempt slot (a list, so
    a doubled one shows), the registered slots, the attempts left in progress and the
    observation slots that hold more than one selection."""

    results: Mapping[str, tuple[Result, ...]]
    slots: int
    in_progress: Mapping[str, str]
    doubled_selections: int


def holdings(store: Path) -> Holdings:
    """Read the store through fresh read-only connections (closed before returning); call
    it only while no process writes the store."""
    found: dict[str, list[Result]] = {}
    for slot, attempt, observation, artifact, owner in rows(
        store,
        "SELECT a.slot_id, a.id, sel.observation_id, o.artifact_id, o.attempt_id "
        "FROM attempts AS a "
        "LEFT JOIN attempt_observation_slots AS aos ON aos.attempt_slot_id = a.slot_id "
        "LEFT JOIN selected_observations AS sel ON sel.slot_id = aos.observation_slot_id "
        "LEFT JOIN observations AS o ON o.id = sel.observation_id "
        "WHERE a.state = 'accepted' ORDER BY a.slot_id, a.id",
    ):
        result = Result(
            attempt=attempt, observation=observation, artifact=artifact, observation_attempt=owner
        )
        found.setdefault(slot, []).append(result)
    in_progress = dict(
        rows(
            store,
            f"SELECT id, state FROM attempts WHERE state IN ({', '.join('?' * len(NONTERMINAL))})",
            NONTERMINAL,
        )
    )
    doubled = rows(
        store,
        "SELECT count(*) FROM (SELECT slot_id FROM selected_observations "
        "GROUP BY slot_id HAVING count(*) > 1)",
    )[0][0]
    return Holdings(
        results={slot: tuple(results) for slot, results in found.items()},
        slots=rows(store, "SELECT count(*) FROM attempt_slots")[0][0],
        in_progress=in_progress,
        doubled_selections=doubled,
    )


def scratch_left(tmp: Path) -> tuple[int, int]:
    """Scratch directories (``runstore-work-*``) and other entries left in ``tmp``."""
    names = os.listdir(tmp) if tmp.is_dir() else []
    scratch = sum(1 for name in names if name.startswith("runstore-work-"))
    return scratch, len(names) - scratch
