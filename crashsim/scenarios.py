"""The crash simulator's scenarios: initialization, every writer operation and both
publications (every terminal outcome, fresh and identical-content reuse).

Rules of this file: values and deterministic functions only (the scenario and step types
are :mod:`runstore.crashsim.scenario_types`'s, re-exported here). A ``Scenario`` is a
fixture recipe (``setup`` steps run once on a fresh store, which is then closed) plus the
``steps`` whose every boundary is a crash point; the harness opens the store before them
(the step "open") and closes it after. Each ``Step`` is a
:class:`~runstore.testing.script.Call`, written once as data so the same step runs on the
store and on the model; ``store_action`` exists only for the deliberately faulty scenarios
of :mod:`runstore.crashsim.faulty`. Guards flow between steps through a context dict. A
scenario with ``resume`` set is continued after a crash the way its user would: the
interrupted step is run again (a new stage), then the remaining steps and the ``finish``
steps (which take the attempt to where the scenario intends); see
:mod:`runstore.crashsim.continuation`. Publication payloads are small frozen values
(a nested file and an empty file included); the id of a payload's published object is
computed by the model's content module, so a reference to it is data too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from runstore.crashsim.exporting import EXPORT
from runstore.crashsim.scenario_types import Scenario as Scenario
from runstore.crashsim.scenario_types import Step as Step
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.model import content
from runstore.records import ArtifactRegistration
from runstore.requests import Accepted
from runstore.requests import Censored
from runstore.requests import Failed
from runstore.requests import FirstAttempt
from runstore.requests import Next
from runstore.requests import Reference
from runstore.requests import RetryAuthorization
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome
from runstore.testing import factories
from runstore.testing import fixtures as fx
from runstore.testing import script
from runstore.testing.publishing import ClockScript
from runstore.testing.publishing import Payload
from runstore.testing.publishing import at

FIXTURE: Final = fx.slot_fixture(name="main")
"""The one-shot slot every writer scenario registers."""
MEMBER: Final = FIXTURE.observation_slots[0]
EXPIRES: Final = 10_000
"""The expiry of every lease the scenarios request."""


# --- step builders over the one fixture slot ----------------------------------------------

A = "attempt-a"
B = "attempt-b"
RETRY = {A: 0, B: 1}
"""The retry index each handle's attempt has (A reserves first, B second)."""
OWNERS = {A: fx.OWNER, B: fx.OTHER_OWNER}


def register() -> Step:
    return Step(
        script.register_one_shot(FIXTURE.decision, FIXTURE.run, FIXTURE.attempt_slot, MEMBER)
    )


def reserve(name: str, authorization: RetryAuthorization, lease_id: str, now: int) -> Step:
    lease = fx.lease(lease_id, EXPIRES, OWNERS[name])
    return Step(script.reserve(name, FIXTURE.slot_id, authorization, lease, now))


def advance(name: str, phase: AttemptState, now: int) -> Step:
    return Step(script.advance(name, phase, now))


def path(name: str, phases: Sequence[AttemptState], now: int) -> tuple[Step, ...]:
    return tuple(advance(name, phase, now + offset) for offset, phase in enumerate(phases))


def renew(name: str, expires: int, now: int) -> Step:
    return Step(script.renew(name, expires, now))


def finalize(name: str, lease_id: str, now: int, expires: int = EXPIRES) -> Step:
    lease = fx.lease(lease_id, expires, OWNERS[name])
    return Step(script.begin_finalization(name, lease, now))


def observe(
    name: str, label: str, select: bool, now: int, artifact: ArtifactRegistration | None = None
) -> Step:
    """An observation of ``name``'s attempt whose directory (``artifact``; default a
    registration made up from ``label``, with no directory behind it) is also its metrics
    reference."""
    observation = factories.observation(
        MEMBER, FIXTURE.attempt_id(RETRY[name]), result={"score": 1}
    )
    artifact = artifact or fx.artifact(ArtifactKind.OBSERVATION, label)
    references = (Reference("metrics", artifact.id),)
    return Step(
        script.register_observation(name, observation, artifact, select, now, references=references)
    )


def conclude(
    name: str,
    outcome: TerminalOutcome,
    label: str,
    now: int,
    references: tuple[Reference, ...] = (),
) -> Step:
    """A terminal commit at ``now`` that finished 10 ns earlier."""
    artifact = fx.artifact(ArtifactKind.ATTEMPT, label)
    return Step(
        script.commit_finalization(
            name, outcome, artifact, references, now, finished_at_ns=now - 10
        )
    )


# --- publication steps --------------------------------------------------------------------

DATA: Final = Payload(
    files=(
        ("data.bin", b"\x00\x01dataset bytes\n"),
        ("empty.txt", b""),
        ("nested/inner/values.csv", b"a,b\n1,2\n"),
    )
)
"""The dataset payload: a nested file and an empty file among three."""
LOGS: Final = Payload(files=(("empty.log", b""), ("logs/stderr.log", b"worker output\n")))
"""What ``populate`` adds to each final artifact (beside the runtime's outcome.json)."""


def published(kind: ArtifactKind, payload: Payload) -> ArtifactRegistration:
    """The registration ``publish_artifact`` gives ``payload`` (its ``verified_at_ns`` 0:
    an identical registration reuses the row whatever its time), computed by the model's
    content module; for payloads of files only."""
    if payload.directories or payload.symlinks or payload.fifos:
        raise ValueError("published takes a payload of plain files only")
    tree = {
        name: content.File(data=data, executable=name in payload.executables)
        for name, data in payload.files
    }
    completed = content.complete(tree, {}, (content.MANIFEST,))
    if not isinstance(completed, tuple):
        raise ValueError(f"the payload is not publishable: {completed}")
    _, tree_sha256, manifest_sha256 = completed
    return ArtifactRegistration(
        kind=kind,
        path=f"artifacts/{kind.value}-{tree_sha256}",
        content_sha256=tree_sha256,
        manifest_sha256=manifest_sha256,
        verified_at_ns=0,
    )


def published_id(kind: ArtifactKind, payload: Payload) -> str:
    """The artifact id ``publish_artifact`` gives ``payload`` (``run-store-v1:<kind>-<tree
    sha256>``)."""
    return published(kind, payload).id


DATASET_ID: Final = published_id(ArtifactKind.DATASET, DATA)
DATASET_REFERENCE: Final = (Reference("dataset", DATASET_ID),)


def publish(
    name: str,
    now: int,
    payload: Payload = DATA,
    kind: ArtifactKind = ArtifactKind.DATASET,
    clock: ClockScript | None = None,
    refused: str | None = None,
) -> Step:
    """``publish_artifact`` of a dataset (or ``kind``) by ``name``'s attempt, its clock
    starting at ``now`` (or ``clock``); ``refused`` when the step is refused on purpose."""
    call = script.publish_artifact(name, kind, payload, clock or at(now))
    return Step(call, refused=refused)


def publish_final(
    name: str,
    outcome: TerminalOutcome,
    now: int,
    references: tuple[Reference, ...] = (),
    clock: ClockScript | None = None,
    refused: str | None = None,
) -> Step:
    """``publish_finalization`` of ``outcome`` by ``name``'s attempt (with :data:`LOGS`),
    its clock starting at ``now`` (or ``clock``); ``refused`` when refused on purpose."""
    call = script.publish_finalization(name, outcome, references, LOGS, clock or at(now))
    return Step(call, refused=refused)


RECOVER_STEP: Final = "recover"
"""The name of a recovery step (a sweep gives its crash points their own rule)."""


def recover(now: int) -> Step:
    """One recovery pass, its clock reading ``now``."""
    return Step(script.recover(at(now), name=RECOVER_STEP))


def dies_at(*samples: int) -> ClockScript:
    """A clock reading ``samples`` and then a negative time: the next sample is refused
    (``out_of_range``) on both sides, as if the publisher died there, leaving what a crash
    at that point leaves (a registered stage; after the rename, a verified orphan)."""
    return ClockScript(samples=(*samples, -1), step=0)


# --- the catalog --------------------------------------------------------------------------

EXECUTING = fx.EXECUTION_PATH
OBSERVATION_ID = fx.artifact(ArtifactKind.OBSERVATION, "result-a").id

REGISTERED = (register(),)
RESERVED = (*REGISTERED, reserve(A, FirstAttempt(), "reservation-a", 1_000))
RUNNING = (*RESERVED, *path(A, EXECUTING, 1_100))
CLAIMED = (*RUNNING, finalize(A, "claim-a", 1_200))
# A enters finalizing through advance, contending for nothing (it will fail or censor).
UNCLAIMED = (*RUNNING, advance(A, AttemptState.FINALIZING, 1_200))
OBSERVED = (*CLAIMED, observe(A, "result-a", True, 1_300))
# B (another owner, an explicitly authorized retry) claims first; A arrives second.
CONTENDED = (
    *RESERVED,
    reserve(B, Next(retry=True), "reservation-b", 1_010),
    *path(B, EXECUTING, 1_050),
    finalize(B, "claim-b", 1_090),
    *path(A, EXECUTING, 1_100),
)
# Every execution edge: R-M-S-P-E, E-C, C-V, V-Ev, Ev-E, E-V.
ALL_EDGES = (
    *EXECUTING,
    AttemptState.CHECKPOINTING,
    AttemptState.VALIDATING,
    AttemptState.EVALUATING,
    AttemptState.EXECUTING,
    AttemptState.VALIDATING,
)


REOPEN: Final = "reopen"
INIT_REGISTER: Final = "init_register"
INIT_ROOT: Final = "init_root"
"""``--init`` creating a missing root, then the new store's first registration (the
power-loss sweep's check that the root's entry in its parent is synced)."""
"""A store created by opening, then its first registration: the first acknowledged result
of a new store (the power-loss sweep's check that creating the database is durable)."""


def _scenario(
    name: str, setup: tuple[Step, ...], *steps: Step, unsynced: tuple[str, ...] = ()
) -> Scenario:
    return Scenario(name=name, setup=setup, steps=steps, unsynced=unsynced)


def _publication(
    name: str, setup: tuple[Step, ...], step: Step, finish: tuple[Step, ...] = ()
) -> Scenario:
    return Scenario(name=name, setup=setup, steps=(step,), resume=True, finish=finish)


# After publishing the dataset, the attempt claims, selects an observation and publishes
# its acceptance with the dataset as a reference: the published root is then retained.
ACCEPT_WITH_DATASET = (
    finalize(A, "claim-a", 1_200),
    observe(A, "result-a", True, 1_300),
    publish_final(A, Accepted(), 1_400, DATASET_REFERENCE),
)
# B (an authorized retry of the same slot, another owner) publishes the identical dataset
# first; A then finds its address taken and verifies it.
REUSED = (
    *RESERVED,
    reserve(B, Next(retry=True), "reservation-b", 1_010),
    *path(B, EXECUTING, 1_050),
    publish(B, 1_080),
    *path(A, EXECUTING, 1_100),
)
RESULT: Final = Payload(files=(("result.json", b'{"score":1}\n'),))
"""An observation's directory, published for real (so an outcome naming it verifies)."""
RESULT_ARTIFACT: Final = published(ArtifactKind.OBSERVATION, RESULT)
LINKED: Final = Payload(files=(("data.bin", b"data"),), symlinks=(("link", "data.bin"),))
"""A payload the publisher refuses after registering its stage (``unsafe_entry``)."""
PUBLISHED_OBSERVED = (
    *RUNNING,
    publish(A, 1_150),
    publish(A, 1_160, RESULT, ArtifactKind.OBSERVATION),
    finalize(A, "claim-a", 1_200),
    observe(A, "result-a", True, 1_300, RESULT_ARTIFACT),
)
# The recovery scenarios: what a dead publisher leaves (made by a step refused on purpose
# at the point a crash would stop it), then recovery itself is the crash-tested step.
DIED_AFTER_RENAME = publish_final(
    A,
    Accepted(),
    1_400,
    DATASET_REFERENCE,
    clock=dies_at(1_400, 1_401, 1_402),
    refused="out_of_range",
)
DIED_ORPHAN = publish(A, 1_150, clock=dies_at(1_150, 1_151), refused="out_of_range")
"""A dataset publisher that died after its rename: a verified, unregistered orphan."""
ABANDONED_STAGE = publish(A, 1_160, LINKED, refused="unsafe_entry")
"""A publisher refused after registering its stage: a stage for recovery to quarantine."""
UNSYNCED_OBJECT: Final = "artifacts/{kind}-*"
UNSYNCED_STAGE: Final = "artifacts/.staging-*/*"
"""The stage's contents: its directory is never synced (only its entry in artifacts/)."""
RECOVERIES: Final = (
    _scenario("recover_expired_reservation", (*RUNNING, publish(A, 1_150)), recover(20_000)),
    _scenario(
        "recover_expired_claim",
        (*RUNNING, publish(A, 1_150), finalize(A, "claim-a", 1_200, expires=5_000)),
        recover(6_000),
    ),
    _scenario(
        "recover_accepted_import",
        (*PUBLISHED_OBSERVED, DIED_AFTER_RENAME),
        recover(20_000),
        unsynced=(UNSYNCED_OBJECT.format(kind="attempt"),),
    ),
    _scenario(
        "recover_orphan_import",
        (*RUNNING, DIED_ORPHAN),
        recover(5_000),  # A's reservation still live: the pass imports the orphan alone
        unsynced=(UNSYNCED_OBJECT.format(kind="dataset"),),
    ),
    _scenario(
        "recover_stage_quarantine",
        (*RUNNING, publish(A, 1_150, LINKED, refused="unsafe_entry")),
        recover(20_000),
        unsynced=(UNSYNCED_STAGE,),
    ),
    _scenario("recover_unpublished", RUNNING, recover(20_000)),
    _scenario(
        "recover_second_pass",
        (*RUNNING, DIED_ORPHAN, ABANDONED_STAGE),
        recover(20_000),
        recover(20_001),
        unsynced=(UNSYNCED_OBJECT.format(kind="dataset"),),
    ),
)
"""Recovery crashed at each of its boundaries: an expired reservation (interrupted failure
published with a retained root), an expired claim, the import of an accepted outcome, an
independent orphan (alone: nothing else in the pass syncs ``artifacts/``), the quarantine
of a registered stage, a pass over a store where nothing was ever published (it creates
the recovery lock and ``artifacts/``), and a pass doing all of those kinds of work
followed by a second pass (whose cuts check that the first pass's results are durable
once it returned). A dead publisher's object, and a stage's contents, are not durable at
the start (``unsynced``): recovery's own syncs must make what it registers durable."""
PUBLICATIONS: Final = (
    _publication("publish_artifact", RUNNING, publish(A, 1_150), ACCEPT_WITH_DATASET),
    _publication("publish_artifact_reuse", REUSED, publish(A, 1_150), ACCEPT_WITH_DATASET),
    _publication(
        "publish_finalization_accepted",
        PUBLISHED_OBSERVED,
        publish_final(A, Accepted(), 1_400, DATASET_REFERENCE),
    ),
    _publication(
        "publish_finalization_censored",
        CLAIMED,
        publish_final(A, Censored(reason="budget"), 1_400),
    ),
    _publication(
        "publish_finalization_superseded",
        (*CONTENDED, finalize(A, "claim-a", 1_200)),
        publish_final(A, Superseded(), 1_400),
    ),
    _publication(
        "publish_finalization_failed",
        UNCLAIMED,
        publish_final(A, Failed(code="worker_exit", details={"exit": 1}), 1_400),
    ),
)
"""The publication scenarios: a publication is the crash-tested step."""


def batched(name: str, setup: tuple[Step, ...], *steps: Step) -> Scenario:
    """A scenario whose one step is a write batch of ``steps`` (SPEC.md section 8, "Write
    batches"): a crash anywhere in it leaves the store before its first step or after its
    last."""
    return _scenario(name, setup, Step(script.batch([step.call for step in steps])))


LIFECYCLE: Final = (
    reserve(A, FirstAttempt(), "reservation-a", 1_000),
    *path(A, (*EXECUTING, AttemptState.VALIDATING), 1_100),
    finalize(A, "claim-a", 1_200),
    observe(A, "result-a", True, 1_300),
    conclude(A, Accepted(), "attempt-a", 1_400, (Reference("evidence", OBSERVATION_ID),)),
)
BATCHES: Final = (
    batched("batch_start", REGISTERED, *LIFECYCLE[:5]),  # the runner's start
    batched("batch_contend", RUNNING, *LIFECYCLE[5:8]),  # validating, claim, observation
    # B's unauthorized retry refused (to its savepoint), its advance refused by dependency,
    # A's renewals around them committed
    batched(
        "batch_refused_step",
        RUNNING,
        renew(A, 15_000, 1_150),
        reserve(B, Next(retry=False), "reservation-b", 1_160),
        advance(B, AttemptState.MATERIALIZING, 1_170),
        renew(A, 20_000, 1_180),
    ),
    batched("batch_lifecycle", REGISTERED, *LIFECYCLE),  # one accepted lifecycle, one commit
)
"""Write batches, crashed at every boundary of their one transaction (the savepoints
included)."""

SCENARIOS: Final[dict[str, Scenario]] = {
    scenario.name: scenario
    for scenario in (
        Scenario(name="init", setup=(), steps=(), initialized=False),
        Scenario(name=REOPEN, setup=PUBLISHED_OBSERVED, steps=()),
        Scenario(name=INIT_REGISTER, setup=(), steps=(register(),), initialized=False),
        Scenario(
            name=INIT_ROOT,
            setup=(),
            steps=(register(),),
            initialized=False,
            creates_root=True,
            parent=True,
        ),
        Scenario(name=EXPORT, setup=PUBLISHED_OBSERVED, steps=(), exports=True, parent=True),
        _scenario("register_one_shot", (), register()),
        _scenario("reserve", REGISTERED, reserve(A, FirstAttempt(), "reservation-a", 1_000)),
        _scenario("advance", RESERVED, *path(A, ALL_EDGES, 1_100)),
        _scenario("renew", RUNNING, renew(A, 20_000, 1_150)),
        _scenario("renew_claimed", CLAIMED, renew(A, 20_000, 1_250)),
        _scenario("begin_finalization_claimed", RUNNING, finalize(A, "claim-a", 1_200)),
        _scenario("begin_finalization_superseded", CONTENDED, finalize(A, "claim-a", 1_200)),
        _scenario("register_observation_selected", CLAIMED, observe(A, "result-a", True, 1_300)),
        _scenario("register_observation_unselected", RUNNING, observe(A, "result-a", False, 1_300)),
        _scenario(
            "commit_accepted",
            OBSERVED,
            conclude(A, Accepted(), "attempt-a", 1_400, (Reference("evidence", OBSERVATION_ID),)),
        ),
        _scenario("commit_censored", CLAIMED, conclude(A, Censored(reason="budget"), "a", 1_400)),
        _scenario(
            "commit_superseded",
            (*CONTENDED, finalize(A, "claim-a", 1_200)),
            conclude(A, Superseded(), "attempt-a", 1_400),
        ),
        _scenario(
            "commit_failed",
            OBSERVED,
            conclude(A, Failed(code="worker_crashed", details={"exit": 3}), "attempt-a", 1_400),
        ),
        _scenario("advance_finalizing", RUNNING, advance(A, AttemptState.FINALIZING, 1_200)),
        _scenario(
            "commit_failed_unclaimed",
            UNCLAIMED,
            conclude(A, Failed(code="worker_exit", details={"exit": 1}), "attempt-a", 1_400),
        ),
        _scenario(
            "commit_censored_unclaimed",
            UNCLAIMED,
            conclude(A, Censored(reason="deadline"), "attempt-a", 1_400),
        ),
        *PUBLICATIONS,
        *RECOVERIES,
        *BATCHES,
    )
}
"""Every scenario of the catalog, by name."""

FULL_IN_SUBSET: Final = ("init", INIT_ROOT, "commit_accepted", "batch_lifecycle")
"""The scenarios the representative subset crashes at every boundary of their steps (and
of opening for ``init`` and ``init_root``, which create a store; see
:mod:`runstore.crashsim.suite`)."""
OPENING_SCENARIOS: Final = ("init", INIT_ROOT, REOPEN)
"""The scenarios whose sweeps crash opening: creating a store (``init``) and opening an
existing one that holds attempts, artifacts and objects (``reopen``). Every other sweep
crashes only its steps: opening an existing store is the same path whatever the store
holds (it reads and writes nothing of the store's content), so crashing it once is
enough."""
