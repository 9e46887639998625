"""Registration races between processes (SPEC.md section 6, "Registration in batches", and
section 15.2): the conflict checks and the inserts of a batch see one snapshot, and a
runner's chunks are each checked against the records its plan was made from.

Two ``spawn``-started processes, each with its own ``RunStore`` handle on one root, are
released together by a barrier (a runner, once it has read the store). (1) Two
conflicting batches: exactly one is registered, whole, and the other is refused with
nothing of it written. (2) Two batches planned
against the same empty store (``held=0``) for one candidate, with no key in common:
exactly one is registered, the other refused by its held count. (3) Two runners
registering two different files of one campaign at once (each ``register`` in chunks of
two slots, so each runs several transactions): exactly one file is registered, every slot
of it and none of the other's; the other runner gets ``registration_conflict``. Each race
is repeated on a fresh store.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

from runstore import ExecutionKind
from runstore import RunStore
from runstore import RunStoreError
from runstore.registration_batch import Item
from runstore.testing import factories

from conformance.closed_store import rows

ROUNDS = 4


Barrier = multiprocessing.synchronize.Barrier


def _register_many(
    barrier: Barrier, root: str, items: list[Item], held: int | None
) -> tuple[str, Any]:
    with RunStore.open(root) as store:
        barrier.wait(timeout=60)
        return ("ok", store.register_many(items, candidate_ids=["candidate"], held=held))


def _register_campaign(barrier: Barrier, root: str, campaign_path: str) -> tuple[str, Any]:
    """``register`` in chunks of two slots; both runners read the store (and plan) before
    either registers anything, the interleaving that once mixed two files."""
    from runstore.runner import coordinator
    from runstore.runner.campaign_file import load_campaign

    coordinator.REGISTRATION_CHUNK = 2
    campaign = load_campaign(campaign_path)
    with RunStore.open(root) as store:
        read = store.registered_for
        reads = []

        def registered_for(candidate_ids: list[str]) -> Any:
            held = read(candidate_ids)
            reads.append(held)
            if len(reads) == 1:
                barrier.wait(timeout=60)
            return held

        store.registered_for = registered_for  # type: ignore[method-assign]
        _, new, _ = coordinator.register(store, campaign)
        return ("ok", new)


def _racer(
    barrier: Barrier,
    results: Queue[tuple[int, tuple[str, Any]]],
    index: int,
    call: str,
    args: tuple[Any, ...],
) -> None:
    try:
        outcome = {"many": _register_many, "campaign": _register_campaign}[call](barrier, *args)
    except RunStoreError as error:
        outcome = ("refused", error.code)
    except Exception as error:  # reported, so the parent never waits in vain
        outcome = ("error", repr(error))
    results.put((index, outcome))


def race(calls: list[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, Any]]:
    """Run each ``(call, args)`` in its own process, released together; outcomes in order."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(calls))
    results: Queue[tuple[int, tuple[str, Any]]] = context.Queue()
    processes = [
        context.Process(target=_racer, args=(barrier, results, index, call, args))
        for index, (call, args) in enumerate(calls)
    ]
    for process in processes:
        process.start()
    found = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    return [found[index] for index in range(len(calls))]


def fresh_root(tmp_path: Path, name: str) -> str:
    root = tmp_path / name
    root.mkdir()
    RunStore.open(str(root)).close()  # created once, before the racers open it
    return str(root)


def slot_ids(root: str) -> set[str]:
    return {row[0] for row in rows(str(Path(root) / "run.sqlite3"), "SELECT id FROM attempt_slots")}


def test_of_two_conflicting_batches_exactly_one_is_registered_whole(tmp_path: Path) -> None:
    one_shots = [factories.slots(f"s{n}").arguments() for n in range(6)]
    # the same run and logical slots as one_shots, other records
    streams = [factories.slots(f"s{n}", kind=ExecutionKind.STREAM).arguments() for n in range(6)]
    for round_ in range(ROUNDS):
        root = fresh_root(tmp_path, f"conflict-{round_}")
        outcomes = race([("many", (root, one_shots, None)), ("many", (root, streams[::-1], None))])
        assert sorted(kind for kind, _ in outcomes) == ["ok", "refused"], outcomes
        assert ("refused", "registration_conflict") in outcomes
        winner = one_shots if outcomes[0][0] == "ok" else streams
        assert slot_ids(root) == {item[2].id for item in winner}


def test_of_two_batches_planned_against_the_same_records_one_is_refused(tmp_path: Path) -> None:
    left = [factories.slots(f"left-{n}").arguments() for n in range(4)]
    right = [factories.slots(f"right-{n}", problem="q").arguments() for n in range(4)]
    for round_ in range(ROUNDS):
        root = fresh_root(tmp_path, f"held-{round_}")
        outcomes = race([("many", (root, left, 0)), ("many", (root, right, 0))])
        assert sorted(outcomes, key=str)[1] == ("refused", "registration_conflict"), outcomes
        winner = left if outcomes[0][0] == "ok" else right
        assert slot_ids(root) == {item[2].id for item in winner}


def campaign_file(directory: Path, script: str) -> str:
    directory.mkdir()
    path = directory / "campaign.toml"
    path.write_text(
        "[campaign]\n"
        'name = "race"\n'
        "repetitions = 2\n\n"
        "[[candidates]]\n"
        'name = "c"\n'
        f'command = ["{{python}}", "{script}"]\n'
        "grid = { level = [1, 2, 3] }\n\n"
        "[[problems]]\n"
        'name = "p"\n'
        "grid = { seed = [1, 2] }\n",
        encoding="utf-8",
    )
    return str(path)


def test_two_runners_registering_two_files_of_one_campaign_never_mix(tmp_path: Path) -> None:
    from runstore.runner.campaign_file import load_campaign
    from runstore.runner.plan import plan

    files = [campaign_file(tmp_path / name, f"{name}.py") for name in ("x", "y")]
    planned = [
        {slot.attempt_slot.id for slot in plan(load_campaign(path)) if slot.attempt_slot}
        for path in files
    ]
    assert len(planned[0]) == len(planned[1]) == 12 and not planned[0] & planned[1]
    for round_ in range(ROUNDS):
        root = fresh_root(tmp_path, f"campaign-{round_}")
        outcomes = race([("campaign", (root, files[0])), ("campaign", (root, files[1]))])
        assert sorted(outcomes) == [("ok", 12), ("refused", "registration_conflict")], outcomes
        winner = 0 if outcomes[0][0] == "ok" else 1
        assert slot_ids(root) == planned[winner]
