"""The scenarios of ``test_backward_clocks.py``: one per operation that writes a time
column, each run with a clock that reads behind the attempt's last transition (or behind
an earlier sample of the same call).

Rules of this file: a scenario builds its state on the world it is given, runs its one
operation inside :func:`writing` (which collects, through the SQL seam, the time columns
the operation's statements write), and returns a :class:`Run`: for each column it pins,
the value read back through a fresh read-only connection and SPEC.md's effective value,
hand-pinned (sections 6, 11 and 14.1). Writer and publication calls run in lockstep with
the model; recovery, whose leftovers the model does not see, runs on the store alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
from runstore import Accepted
from runstore import ArtifactKind
from runstore import AttemptState
from runstore import Censored
from runstore import Next
from runstore import OwnedAttempt
from runstore import sql
from runstore.testing import fixtures as sc

from conformance.publication.world import DATA
from conformance.publication.world import EXPIRES
from conformance.publication.world import ClockScript
from conformance.publication.world import PublicationWorld
from conformance.recovery.world import FixedClock
from conformance.recovery.world import crash_artifact

S = AttemptState
Column = tuple[str, str]

BACK = 100
"""What the backward clock reads."""
LAST = 2_500
"""The attempt's last transition before the operation (the writer scenarios)."""
OWN = 50
"""The ``verified_at_ns`` of an artifact registration handed to the writer."""

# --- what an operation wrote ---------------------------------------------------------------

_INSERT = re.compile(r"INSERT INTO (\w+) \(([^)]*)\)")
_UPDATE = re.compile(r"UPDATE (\w+) SET (.*?) WHERE", re.DOTALL)


def time_columns_written(statement: str) -> set[Column]:
    """The time columns one INSERT or UPDATE statement writes."""
    found: set[Column] = set()
    for table, columns in _INSERT.findall(statement):
        found |= {(table, c.strip()) for c in columns.split(",")}
    for table, assignments in _UPDATE.findall(statement):
        found |= {(table, c) for c in re.findall(r"(\w+)\s*=", assignments)}
    return {column for column in found if column[1].endswith("_ns")}


@contextmanager
def writing() -> Iterator[set[Column]]:
    """The time columns the statements run inside the block write."""
    written: set[Column] = set()

    def observe(phase: str, statement: str) -> None:
        if phase == "before":
            written.update(time_columns_written(statement))

    previous = sql.install_observer(observe)
    try:
        yield written
    finally:
        sql.install_observer(previous)


@attrs.frozen
class Run:
    """An operation's scenario: each pinned column's ``(actual, expected)`` value, and the
    time columns its statements wrote."""

    pinned: dict[Column, tuple[object, object]]
    written: set[Column]


def values(world: PublicationWorld, query: str, *params: object) -> list[object]:
    """The first column of each row of ``query`` (through a fresh read-only connection)."""
    return [row[0] for row in world.rows(query, params)]


def last(world: PublicationWorld, table: str, column: str, attempt_id: str) -> object:
    """The newest row's ``column`` among the attempt's events or transitions."""
    key = "sequence" if table == "events" else "revision"
    return values(
        world, f"SELECT {column} FROM {table} WHERE attempt_id = ? ORDER BY {key} DESC", attempt_id
    )[0]


def lease(world: PublicationWorld, lease_id: str) -> tuple[object, ...]:
    """``(acquired_at_ns, expires_at_ns, released_at_ns)`` of a lease."""
    return world.lease(lease_id)[:3]


def finish(world: PublicationWorld, attempt_id: str) -> tuple[object, ...]:
    """The attempt's ``finished_at_ns`` and the one its record holds."""
    return world.rows(
        "SELECT finished_at_ns, json_extract(record_json, '$.finished_at_ns') FROM attempts "
        "WHERE id = ?",
        (attempt_id,),
    )[0]


def artifact_time(world: PublicationWorld, artifact_id: str) -> object:
    return values(world, "SELECT verified_at_ns FROM artifacts WHERE id = ?", artifact_id)[0]


# --- the writer's scenarios: the last transition at LAST, the clock reading BACK -----------


def moved(world: PublicationWorld) -> tuple[sc.SlotFixture, OwnedAttempt]:
    """A registered slot whose attempt (lease ``reservation-0``, reserved at 1_000,
    expiring at EXPIRES) moved to materializing at LAST."""
    fixture = world.registered()
    guard = world.start(fixture, "reservation-0", now=1_000, expires=EXPIRES)
    return fixture, world.advance(guard, S.MATERIALIZING, LAST)


def projection(
    world: PublicationWorld, attempt_id: str, at: object
) -> dict[Column, tuple[object, object]]:
    """The columns a step at ``at`` writes: the projection and its record (no finish time
    while the attempt is open), and the history."""
    updated, record, finished, finish_record = world.rows(
        "SELECT updated_at_ns, json_extract(record_json, '$.updated_at_ns'), finished_at_ns, "
        "json_extract(record_json, '$.finished_at_ns') FROM attempts WHERE id = ?",
        (attempt_id,),
    )[0]
    return {
        ("attempts", "updated_at_ns"): ((updated, record), (at, str(at))),
        ("attempts", "finished_at_ns"): ((finished, finish_record), (None, None)),
        ("attempt_transitions", "at_ns"): (
            last(world, "attempt_transitions", "at_ns", attempt_id),
            at,
        ),
        ("events", "at_ns"): (last(world, "events", "at_ns", attempt_id), at),
    }


def reserve(world: PublicationWorld) -> Run:
    """A retry reserved with a clock behind its sibling's last transition: ``reserve`` has
    no predecessor and uses ``now_ns`` as it is."""
    fixture, _ = moved(world)
    with writing() as written:
        retry = world.reserve(
            fixture.slot_id, Next(retry=True), sc.lease("reservation-1", 5_000), BACK
        )
    started = values(world, "SELECT started_at_ns FROM attempts WHERE id = ?", retry.attempt_id)[0]
    pinned = projection(world, retry.attempt_id, BACK)
    pinned[("attempts", "started_at_ns")] = (started, BACK)
    pinned[("leases", "acquired_at_ns")] = (lease(world, "reservation-1")[0], BACK)
    pinned[("leases", "expires_at_ns")] = (lease(world, "reservation-1")[1], 5_000)
    return Run(pinned, written)


def advance(world: PublicationWorld) -> Run:
    _, guard = moved(world)
    with writing() as written:
        world.advance(guard, S.STARTING, BACK)
    return Run(projection(world, guard.attempt_id, LAST), written)


def renew(world: PublicationWorld) -> Run:
    """The requested expiry is written as it is; whether it is after now is judged at the
    effective time (an expiry after BACK but not after LAST is refused)."""
    _, guard = moved(world)
    world.refused("expiry_not_after_now", lambda: world.renew(guard, LAST, BACK))
    with writing() as written:
        world.renew(guard, 12_000, BACK)
    return Run({("leases", "expires_at_ns"): (lease(world, "reservation-0")[1], 12_000)}, written)


def begin_finalization(world: PublicationWorld) -> Run:
    _, guard = moved(world)
    with writing() as written:
        world.claim(guard, "claim-0", BACK, expires=12_000)
    claimed = values(world, "SELECT claimed_at_ns FROM finalization_claims")
    pinned = projection(world, guard.attempt_id, LAST)
    pinned[("finalization_claims", "claimed_at_ns")] = (claimed, [LAST])
    pinned[("leases", "acquired_at_ns")] = (lease(world, "claim-0")[0], LAST)
    pinned[("leases", "expires_at_ns")] = (lease(world, "claim-0")[1], 12_000)
    return Run(pinned, written)


def claimed(world: PublicationWorld) -> tuple[sc.SlotFixture, OwnedAttempt]:
    """:func:`moved`, then the claim taken at LAST."""
    fixture, guard = moved(world)
    return fixture, world.claim(guard, "claim-0", LAST, expires=12_000).attempt


def register_observation(world: PublicationWorld) -> Run:
    """The observation, its selection and its event at the effective time; its directory's
    registration keeps its own ``verified_at_ns`` (OWN, behind both clocks)."""
    fixture, guard = claimed(world)
    observation = sc.observation(fixture.observation_slots[0], guard)
    directory = sc.artifact(ArtifactKind.OBSERVATION, "result-0", verified_at_ns=OWN)
    with writing() as written:
        world.observe(guard, observation, directory, True, BACK)
    return Run(
        {
            ("observations", "registered_at_ns"): (
                values(world, "SELECT registered_at_ns FROM observations"),
                [LAST],
            ),
            ("selected_observations", "selected_at_ns"): (
                values(world, "SELECT selected_at_ns FROM selected_observations"),
                [LAST],
            ),
            ("events", "at_ns"): (last(world, "events", "at_ns", guard.attempt_id), LAST),
            ("artifacts", "verified_at_ns"): (artifact_time(world, directory.id), OWN),
        },
        written,
    )


def commit_finalization(world: PublicationWorld) -> Run:
    """Finished at BACK and committed at BACK - 10: the finish time is clamped up to the
    last transition, the commit time up to the finish time; every lease is released then."""
    fixture, guard = claimed(world)
    world.publish(guard, fixture.observation_slots[0], "result-0", LAST)
    final = sc.artifact(ArtifactKind.ATTEMPT, "attempt-0", verified_at_ns=OWN)
    with writing() as written:
        world.conclude(guard, Accepted(), final, [], BACK - 10, finished=BACK)
    pinned = projection(world, guard.attempt_id, LAST)
    pinned[("attempts", "finished_at_ns")] = (finish(world, guard.attempt_id), (LAST, str(LAST)))
    pinned[("leases", "released_at_ns")] = (
        (lease(world, "reservation-0")[2], lease(world, "claim-0")[2]),
        (LAST, LAST),
    )
    pinned[("artifacts", "verified_at_ns")] = (artifact_time(world, final.id), OWN)
    return Run(pinned, written)


# --- publication: clocks that step back after the stage's acquisition ---------------------

STAGE = f"staging-{1:032x}"


def publish_artifact(world: PublicationWorld) -> Run:
    """Staged at 2_000 (after the last transition, 1_103), then the clock reads 1_500 and
    1_000: verification and the stage's release are clamped up to the acquisition; the
    stage inherits the reservation's expiry."""
    guard = world.executing(sc.slot_fixture())
    with writing() as written:
        published = world.publish_artifact(
            guard, ArtifactKind.DATASET, DATA, ClockScript((2_000, 1_500, 1_000))
        )
    return Run(
        {
            ("leases", "acquired_at_ns"): (lease(world, STAGE)[0], 2_000),
            ("leases", "expires_at_ns"): (lease(world, STAGE)[1], EXPIRES),
            ("leases", "released_at_ns"): (lease(world, STAGE)[2], 2_000),
            ("artifacts", "verified_at_ns"): (artifact_time(world, published.artifact.id), 2_000),
        },
        written,
    )


def publish_finalization(world: PublicationWorld) -> Run:
    """Finalizing at 1_300, staged at 2_000, then the clock reads 1_900, 1_800, 1_700: the
    finish time, verification and the commit are all clamped up to 2_000."""
    guard = world.finalizing(world.executing(sc.slot_fixture()), 1_300)
    with writing() as written:
        published = world.publish_finalization(
            guard, Censored(reason="budget"), (), DATA, ClockScript((2_000, 1_900, 1_800, 1_700))
        )
    pinned = projection(world, guard.attempt_id, 2_000)
    pinned[("attempts", "finished_at_ns")] = (finish(world, guard.attempt_id), (2_000, "2000"))
    pinned[("leases", "acquired_at_ns")] = (lease(world, STAGE)[0], 2_000)
    pinned[("leases", "expires_at_ns")] = (lease(world, STAGE)[1], EXPIRES)
    pinned[("leases", "released_at_ns")] = (
        (lease(world, "reservation-0")[2], lease(world, STAGE)[2]),
        (2_000, 2_000),
    )
    pinned[("artifacts", "verified_at_ns")] = (artifact_time(world, published.artifact.id), 2_000)
    return Run(pinned, written)


# --- recovery: a pass whose clock reads behind one owner's last transition ----------------


def recover(world: PublicationWorld) -> Run:
    """Two owners: ``a`` expired at 2_000; ``b`` moved to validating at LAST and, its
    clock ahead, left an orphan staged at 2_600. A pass at t = 2_000 fails ``a`` at
    ``max(t, 1_103)`` = 2_000; judges ``b`` at ``max(t, LAST)`` = LAST, where its owner is
    live, and writes nothing of it; and registers the orphan at t, behind its publisher's
    clock."""
    expired = world.executing(sc.slot_fixture(name="a"), "reservation-0", expires=2_000)
    live = world.executing(sc.slot_fixture(name="b"), "reservation-1")
    live = world.advance(live, S.VALIDATING, LAST)
    orphan = crash_artifact(world, live, ArtifactKind.DATASET, start=2_600)
    with writing() as written:
        report = world.store.recover(FixedClock(2_000))
    (terminal,) = report.terminals
    final = values(world, "SELECT final_artifact_id FROM attempts WHERE id = ?", expired.attempt_id)
    rows = world.rows(
        "SELECT updated_at_ns, finished_at_ns FROM attempts WHERE id IN (?, ?) ORDER BY id = ?",
        (expired.attempt_id, live.attempt_id, live.attempt_id),
    )
    history = (
        last(world, "attempt_transitions", "at_ns", expired.attempt_id),
        last(world, "attempt_transitions", "at_ns", live.attempt_id),
    )
    return Run(
        {
            ("attempts", "updated_at_ns"): ([row[0] for row in rows], [2_000, LAST]),
            ("attempts", "finished_at_ns"): ([row[1] for row in rows], [2_000, None]),
            ("attempt_transitions", "at_ns"): (history, (2_000, LAST)),
            ("events", "at_ns"): (
                values(
                    world,
                    "SELECT at_ns FROM events WHERE attempt_id = ? AND sequence >= ?",
                    expired.attempt_id,
                    terminal.event_sequence - 1,
                ),
                [2_000, 2_000],  # attempt_finalizing and attempt_finished
            ),
            ("leases", "released_at_ns"): (
                [lease(world, name)[2] for name in ("reservation-0", "reservation-1", STAGE)],
                [2_000, None, None],
            ),
            ("artifacts", "verified_at_ns"): (
                (
                    artifact_time(world, str(final[0])),
                    artifact_time(world, f"run-store-v1:{orphan.name}"),
                ),
                (2_000, 2_000),
            ),
        },
        written,
    )


SCENARIOS: dict[str, Callable[[PublicationWorld], Run]] = {
    operation.__name__: operation
    for operation in (
        reserve,
        advance,
        renew,
        begin_finalization,
        register_observation,
        commit_finalization,
        publish_artifact,
        publish_finalization,
        recover,
    )
}
