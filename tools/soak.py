#!/usr/bin/env python3
"""Kill the runner with SIGKILL at random moments, resume, and check nothing was lost.

Usage: python tools/soak.py [--kills 30] [--seed 1] [--jobs 4] [--keep DIR]

Writes a campaign of ``--candidates`` x ``--problems`` slots whose worker sleeps a seeded
0.05-0.6 s and reports a metric derived from its names; runs ``runstore run --resume
--retry-failed 1000 --json`` and SIGKILLs it after a random 0.2-2 s until it was killed
``--kills`` times (a run that finished first does not count; when every slot is done, the
campaign grows by ``--problems`` more problems, so kills land in real work), then lets a
last run finish. After every kill and at the end it checks, on the store
(read through a fresh read-only connection, never by a process holding it open):

* every result acknowledged before a kill (an ``attempt_finished`` line with state
  ``accepted``) is still the slot's accepted attempt;
* at the end, every slot has exactly one accepted attempt;
* SQLite's ``integrity_check`` is ``ok`` and ``foreign_key_check`` is empty;
* every accepted attempt's final artifact and observation artifact verify against their
  manifest, tree hash and address (read independently, through ``runstore.model.content``).

Prints ``kills=N slots=S accepted=A lost=L duplicates=D integrity=ok artifacts=ok``; exits 1
on any violation. Nightly CI runs it with ``--kills 30``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

WORKER = textwrap.dedent(
    """\
    import hashlib, json, os, random, sys, time
    parameters = json.loads(os.environ["RUNSTORE_PARAMETERS"])
    key = os.environ["RUNSTORE_CANDIDATE"] + "/" + os.environ["RUNSTORE_PROBLEM"]
    time.sleep(random.Random(key).uniform(0.05, 0.6))
    value = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    out = os.environ["RUNSTORE_OUTPUT_DIR"]
    with open(os.path.join(out, "result.json"), "w") as handle:
        json.dump({"metrics": {"value": value, "size": parameters["size"]}}, handle)
    """
)


def write_campaign(directory: Path, candidates: int, problems: int) -> Path:
    (directory / "worker.py").write_text(WORKER, encoding="utf-8")
    lines = [
        "[campaign]",
        'name = "soak"',
        "timeout_seconds = 30",
        "lease_seconds = 3",
    ]
    for index in range(candidates):
        lines += [
            "[[candidates]]",
            f'name = "c{index}"',
            'command = ["{python}", "worker.py"]',
            'files = ["worker.py"]',
        ]
    for index in range(problems):
        lines += ["[[problems]]", f'name = "p{index}"', f"parameters = {{ size = {index} }}"]
    path = directory / "campaign.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_once(
    campaign: Path, store: Path, jobs: int, kill_after: float | None
) -> tuple[dict[str, str], int]:
    """One ``runstore run``; returns the accepted results it acknowledged (slot ->
    attempt) and its exit status (-9 when killed)."""
    command = [
        sys.executable, "-m", "runstore.cli", "run", str(campaign), "--store", str(store),
        "--init", "--resume", "--retry-failed", "1000", "--jobs", str(jobs), "--json",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    acknowledged: dict[str, str] = {}

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            event = json.loads(line)
            if event.get("event") == "attempt_finished" and event.get("state") == "accepted":
                acknowledged[event["slot"]] = event["attempt"]

    reader = threading.Thread(target=read)
    reader.start()
    if kill_after is not None:
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
    status = process.wait()
    reader.join()
    assert process.stderr is not None
    errors = process.stderr.read().decode(errors="replace").strip()
    if status not in (0, 1, -signal.SIGKILL):
        raise SystemExit(f"runstore run exited {status}: {errors}")
    return acknowledged, status


def accepted(store: Path) -> dict[str, list[str]]:
    """Slot -> its accepted attempts; none while the database is not there yet (a kill
    before `runstore run` created the store). A database that disappears after results
    were accepted is still caught: those results are then missing."""
    if not (store / "run.sqlite3").exists():
        return {}
    rows = query(store, "SELECT slot_id, id FROM attempts WHERE state = 'accepted'")
    found: dict[str, list[str]] = {}
    for slot, attempt in rows:
        found.setdefault(str(slot), []).append(str(attempt))
    return found


def query(store: Path, sql: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(f"file:{store}/run.sqlite3?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def check_integrity(store: Path) -> list[str]:
    """SQLite's integrity and foreign-key checks of the store; nothing to check while the
    database is not there yet (a kill before ``runstore run`` created it: see
    :func:`accepted`, which still catches acknowledged results that went missing)."""
    if not (store / "run.sqlite3").exists():
        return []
    problems = []
    if query(store, "PRAGMA integrity_check") != [("ok",)]:
        problems.append("integrity_check failed")
    if query(store, "PRAGMA foreign_key_check"):
        problems.append("foreign_key_check found rows")
    return problems


def check_artifacts(store: Path) -> list[str]:
    """Each accepted attempt's final and observation artifacts verify independently."""
    from runstore.testing.disk import read_object

    rows = query(
        store,
        "SELECT r.path, r.content_sha256, r.manifest_sha256 FROM attempts AS a "
        "JOIN artifacts AS r ON r.id = a.final_artifact_id WHERE a.state = 'accepted' "
        "UNION SELECT r.path, r.content_sha256, r.manifest_sha256 FROM attempts AS a "
        "JOIN observations AS o ON o.attempt_id = a.id "
        "JOIN artifacts AS r ON r.id = o.artifact_id WHERE a.state = 'accepted'",
    )
    problems = []
    for path, content, manifest in rows:
        registration, _ = read_object(str(store), str(path))
        if registration is None or (registration.content_sha256, registration.manifest_sha256) != (
            content,
            manifest,
        ):
            problems.append(f"artifact {path} does not verify")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="Work in this (new) directory and keep it.")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    work = options.keep or Path(tempfile.mkdtemp(prefix="runstore-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    problems = options.problems
    campaign = write_campaign(work, options.candidates, problems)
    store = work / "store"
    began = time.monotonic()
    acknowledged: dict[str, str] = {}
    found: list[str] = []
    kills = rounds = 0
    while kills < options.kills and rounds < 4 * options.kills:
        rounds += 1
        if store.exists() and len(accepted(store)) == options.candidates * problems:
            # Everything is done: grow the campaign (new pairs never conflict) so that
            # the next kill lands in the middle of real work.
            problems += options.problems
            campaign = write_campaign(work, options.candidates, problems)
        seen, status = run_once(campaign, store, options.jobs, rng.uniform(0.2, 2.0))
        acknowledged.update(seen)
        kills += status == -signal.SIGKILL
        now = accepted(store)
        found += [f"lost {slot}" for slot, a in acknowledged.items() if now.get(slot) != [a]]
        found += check_integrity(store)
    _, status = run_once(campaign, store, options.jobs, None)
    final = accepted(store)
    slots = options.candidates * problems
    lost = sum(1 for slot, a in acknowledged.items() if final.get(slot) != [a])
    duplicates = sum(1 for attempts in final.values() if len(attempts) > 1)
    if status != 0 or len(final) != slots:
        found.append(f"the last run exited {status} with {len(final)}/{slots} accepted")
    found += check_integrity(store) + check_artifacts(store)
    print(
        f"kills={kills} rounds={rounds} slots={slots} accepted={len(final)} lost={lost} "
        f"duplicates={duplicates} integrity={'ok' if not check_integrity(store) else 'FAILED'} "
        f"artifacts={'ok' if not check_artifacts(store) else 'FAILED'} "
        f"seconds={time.monotonic() - began:.1f}"
    )
    for problem in sorted(set(found)):
        print(f"problem: {problem}")
    return 1 if found or lost or duplicates or kills < options.kills else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
