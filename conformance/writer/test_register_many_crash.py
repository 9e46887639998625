"""A batch registration killed at every SQL boundary (SPEC.md section 6, "Registration in
batches": crash and recovery).

A forked child opens its own handle and runs one ``register_many`` batch (two new runs,
every slot kind, an exclusion, an item already registered) with an observer on the SQL
seam that ends the process with ``os._exit`` just before or just after its n-th statement.
For every such point the store, read through a fresh connection, holds either exactly
what it held before (any point up to and including "before COMMIT") or exactly what the
model holds after the whole batch (after COMMIT): never a part of the batch. The store
then opens normally and the batch registers (again) to the same state.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from runstore import ExecutionKind
from runstore import RunStore
from runstore import SlotRole
from runstore import model as m
from runstore import sql
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.testing import factories

BASELINE = factories.slots("registered")
BATCH = [
    factories.slots("a").arguments(),
    factories.slots("b", kind=ExecutionKind.STREAM, checkpoints=3).arguments(),
    factories.slots("w", role=SlotRole.WARMUP).arguments(),
    factories.slots("o", candidate="other", problem="q").arguments(),
    factories.decision("other", "elsewhere", applicable=False),
    BASELINE.arguments(),
]
CANDIDATES = ["candidate", "other"]


def run_batch(root: str, stop_at: tuple[int, str] | None) -> list[tuple[str, str]]:
    """In a forked child: the batch, ended by ``os._exit`` at ``stop_at`` (the statement's
    index and phase), or run whole to return what the seam saw (in the parent, for the
    count). The child never returns."""
    seen: list[tuple[str, str]] = []

    def observer(phase: sql.Phase, statement: str) -> None:
        if stop_at == (len(seen), phase):
            os._exit(0)
        if phase == "after":
            seen.append((phase, statement.split()[0]))

    with RunStore.open(root) as store:
        previous = sql.install_observer(observer)
        try:
            store.register_many(BATCH, candidate_ids=CANDIDATES, held=2)
        finally:
            sql.install_observer(previous)
    return seen


def held_by(state: m.ModelState) -> int:
    return sum(d.candidate_id in CANDIDATES for d in state.decisions.values()) + sum(
        r.candidate_id in CANDIDATES for r in state.runs.values()
    )


def test_a_batch_killed_at_any_statement_is_all_or_nothing(tmp_path: Path) -> None:
    state, _ = m.register_slots(m.ModelState(), *BASELINE.arguments())
    before = model_projection(state)
    after_state, ids = m.register_many(state, BATCH, CANDIDATES, 2)
    assert isinstance(ids, tuple)
    after = model_projection(after_state)

    probe = tmp_path / "probe"
    probe.mkdir()
    with RunStore.open(str(probe)) as store:
        store.register_slots(*BASELINE.arguments())
    statements = run_batch(str(probe), None)  # with no stop: the whole batch, for the count
    assert statements[0] == ("after", "BEGIN") and statements[-1] == ("after", "COMMIT")
    assert store_projection(str(probe / "run.sqlite3")) == after

    for index in range(len(statements)):
        for phase in ("before", "after"):
            root = tmp_path / f"{index}-{phase}"
            root.mkdir()
            with RunStore.open(str(root)) as store:
                store.register_slots(*BASELINE.arguments())
            pid = os.fork()
            if pid == 0:  # the child: crash at the point, or fail loudly if it never came
                try:
                    run_batch(str(root), (index, phase))
                finally:
                    os._exit(3)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, (index, phase)
            committed = index == len(statements) - 1 and phase == "after"
            found = store_projection(str(root / "run.sqlite3"))
            assert found == (after if committed else before), (index, phase, statements[index])
            held = held_by(after_state if committed else state)
            with RunStore.open(str(root)) as store:
                assert store.register_many(BATCH, candidate_ids=CANDIDATES, held=held) == ids
            assert store_projection(str(root / "run.sqlite3")) == after


@pytest.mark.parametrize("phase", ["before", "after"])
def test_the_count_of_points_covers_every_statement(tmp_path: Path, phase: str) -> None:
    """The sweep above reaches its last point: a stop past the last statement never fires
    (the child completes the batch and exits 3)."""
    with RunStore.open(str(tmp_path)) as store:
        store.register_slots(*BASELINE.arguments())
    pid = os.fork()
    if pid == 0:
        try:
            run_batch(str(tmp_path), (10_000, phase))
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3
