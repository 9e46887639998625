"""Fixtures for the project's own tests, crash scenarios and model transcripts: the owners,
the usual execution path, and thin builders over :mod:`runstore.testing.factories` whose
lease ids are exactly the names given.

Rules of this file: values only (no I/O, no store, no clock, no randomness), like the
factories it builds on; every function is pure, so equal arguments give equal records.
Unlike :func:`runstore.testing.factories.lease`, :func:`lease` derives nothing from its
arguments: the model's and the writer's tests address leases by these literal ids.
"""

from __future__ import annotations

import attrs
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import SlotRole
from runstore.receipts import OwnedAttempt
from runstore.records import ArtifactRegistration
from runstore.records import AttemptSlot
from runstore.records import Observation
from runstore.records import ObservationSlot
from runstore.requests import LeaseRequest
from runstore.testing import factories

OWNER = "owner-a"
"""The owner token of the scenarios' leases unless they name another."""
OTHER_OWNER = "owner-b"
"""A second owner token: a contender's, or a forged guard's."""
STAGE = "artifacts/.staging-0"

EXECUTION_PATH = (
    AttemptState.MATERIALIZING,
    AttemptState.STARTING,
    AttemptState.PREPARING,
    AttemptState.EXECUTING,
)

PHASE_PATHS: dict[AttemptState, tuple[AttemptState, ...]] = {
    AttemptState.RESERVED: (),
    AttemptState.MATERIALIZING: EXECUTION_PATH[:1],
    AttemptState.STARTING: EXECUTION_PATH[:2],
    AttemptState.PREPARING: EXECUTION_PATH[:3],
    AttemptState.EXECUTING: EXECUTION_PATH,
    AttemptState.CHECKPOINTING: (*EXECUTION_PATH, AttemptState.CHECKPOINTING),
    AttemptState.VALIDATING: (*EXECUTION_PATH, AttemptState.VALIDATING),
    AttemptState.EVALUATING: (*EXECUTION_PATH, AttemptState.VALIDATING, AttemptState.EVALUATING),
}
"""A path from ``reserved`` to each execution phase (every nonterminal state but
``finalizing``), by the legal edges of SPEC.md section 5."""

SlotFixture = factories.Slots
"""A decision, its run, one attempt slot and the observation slots it owns."""

digest = factories.digest


def artifact(kind: ArtifactKind, label: str, verified_at_ns: int = 0) -> ArtifactRegistration:
    """:func:`runstore.testing.factories.artifact`: content digest ``digest(label)``."""
    return factories.artifact(kind, label, verified_at_ns=verified_at_ns)


def lease(lease_id: str, expires_at_ns: int, owner: str = OWNER) -> LeaseRequest:
    """A lease request with exactly this id and owner token (a guard's ``owner_token`` gives
    a lease of its owner)."""
    return LeaseRequest(lease_id=lease_id, owner_token=owner, expires_at_ns=expires_at_ns)


def slot_fixture(
    kind: ExecutionKind = ExecutionKind.ONE_SHOT,
    role: SlotRole = SlotRole.MEASUREMENT,
    checkpoints: int = 2,
    name: str = "main",
) -> SlotFixture:
    """:func:`runstore.testing.factories.slots`: one result slot for one-shot and
    fresh-observation measurements, ``checkpoints`` checkpoint slots for a stream, none for
    a warm-up. Every fixture is in the one run of ``factories.decision()``."""
    return factories.slots(name, kind=kind, role=role, checkpoints=checkpoints)


def observation(
    slot: ObservationSlot,
    guard: OwnedAttempt,
    *,
    valid: bool = True,
    completion: Completion = Completion.REACHED,
    score: int = 1,
) -> Observation:
    """An observation of ``guard``'s attempt for ``slot`` with result ``{"score": score}``."""
    return factories.observation(
        slot, guard.attempt_id, valid=valid, completion=completion, result={"score": score}
    )


# --- the lockstep machines' slots -----------------------------------------------------------

LOCKSTEP_SLOTS = (
    slot_fixture(ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, name="a"),
    slot_fixture(ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, name="b"),
)
"""The two one-shot slots the lockstep machines (the writer's and the conformance kit's)
register."""
CONFLICTING = attrs.evolve(
    LOCKSTEP_SLOTS[0],
    attempt_slot=AttemptSlot(
        run_id=LOCKSTEP_SLOTS[0].run.id,
        logical_slot="a",
        execution_kind=ExecutionKind.ONE_SHOT,
        role=SlotRole.MEASUREMENT,
        specification={"variant": 2},
    ),
)
"""Same run and logical slot as ``LOCKSTEP_SLOTS[0]``, another record: registering it
conflicts."""
UNREGISTERED = slot_fixture(ExecutionKind.ONE_SHOT, SlotRole.MEASUREMENT, name="never")
"""A slot no machine registers (reserving it is ``unknown_slot``)."""
