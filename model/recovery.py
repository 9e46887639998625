"""Recovery in the model: which attempts are recoverable at time t, and the whole recovery
pass over the model's state and a description of the disk (SPEC.md section 14).

Rules of this file: pure functions; the disk is a :class:`~runstore.model.disk.DiskView`
the caller built, and "quarantining" a stage or "publishing" recovery's own failure object
is only reported or computed, never done. A pass decides, in the store's order: the stages
(busy, left, quarantined; abandoned staging leases released), the object each recoverable
attempt imports or the interrupted failure it commits instead, and the independent orphans
it registers. The checks of a candidate outcome live in :mod:`runstore.model.recovery_checks`.
The store's counterpart is :mod:`runstore.store.recovery.recover`.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence

import attrs
from runstore import arguments
from runstore import payloads
from runstore import recovery_report as codes
from runstore import rules
from runstore.enums import TERMINAL_STATES
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import LeasePurpose
from runstore.errors import RunStoreError
from runstore.model import content
from runstore.model.artifacts import with_artifact
from runstore.model.attempts import transition
from runstore.model.disk import DiskObject
from runstore.model.disk import DiskView
from runstore.model.disk import object_id
from runstore.model.finalization import finish
from runstore.model.outcome_document import outcome_document
from runstore.model.recovery_checks import cause_at
from runstore.model.recovery_checks import leased_roots
from runstore.model.recovery_checks import rejection
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import put
from runstore.model.state import refused
from runstore.outcome_json import OutcomeClaim
from runstore.outcome_json import read_outcome
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.recovery_report import RecoveryReport
from runstore.recovery_report import RejectedArtifact
from runstore.requests import interrupted_claims
from runstore.requests import interrupted_outcome
from runstore.shapes import references_refusal

OUTCOME_FILE = "outcome.json"


@attrs.frozen(kw_only=True)
class Recoverable:
    """A nonterminal attempt whose owner lost authority, and the first reason found."""

    attempt_id: str
    cause: str


def recoverable(state: ModelState, t_ns: int) -> tuple[Recoverable, ...]:
    """The nonterminal attempts, in attempt id order, whose reservation lease or owned
    claim lease is released or expired at ``max(t_ns, attempt.updated_at_ns)`` (expiry is
    exclusive: a lease expiring then is expired). The cause names the first of:
    reservation released, reservation expired, claim released, claim expired. Live owners
    are never recoverable.
    """
    found = []
    for attempt in sorted(state.attempts.values(), key=lambda row: row.id):
        if attempt.state in TERMINAL_STATES:
            continue
        cause = cause_at(state, attempt, rules.effective_now(t_ns, attempt.updated_at_ns))
        if cause is not None:
            found.append(Recoverable(attempt_id=attempt.id, cause=cause))
    return tuple(found)


# --- stages --------------------------------------------------------------------------------


def judged_at(state: ModelState, lease: LeaseRow, t_ns: int) -> int:
    """The time recovery judges a staging lease at: ``max(t, the attempt's updated_at_ns,
    the lease's acquired_at_ns)``."""
    attempt = state.attempts[lease.attempt_id]
    return max(rules.effective_now(t_ns, attempt.updated_at_ns), lease.acquired_at_ns)


def stage_lease(state: ModelState, path: str) -> LeaseRow | None:
    """The staging lease whose ``staging_path`` is ``path``, if any."""
    for lease in state.leases.values():
        if lease.purpose is LeasePurpose.STAGING and lease.staging_path == path:
            return lease
    return None


def deferred_attempts(state: ModelState, disk: DiskView) -> frozenset[str]:
    """The attempts a pass leaves entirely alone: those a staging lease of a held stage
    names (their publisher may still be working)."""
    found = set()
    for path, held in disk.stages.items():
        lease = stage_lease(state, path)
        if held and lease is not None:
            found.add(lease.attempt_id)
    return frozenset(found)


def abandoned(state: ModelState, lease: LeaseRow, t_ns: int) -> bool:
    """Whether the staging lease is unreleased but no longer live at its judging time."""
    when = judged_at(state, lease, t_ns)
    return lease.released_at_ns is None and not rules.lease_live(lease.expires_at_ns, False, when)


def settle_stages(
    state: ModelState, t_ns: int, disk: DiskView, deferred: frozenset[str]
) -> tuple[ModelState, list[str], list[str]]:
    """The stage step: ``(state, quarantined, busy)``.

    In path order: a held stage is busy; a free stage of a deferred attempt, or whose
    lease is unreleased and live at its judging time, is left; any other free stage is
    quarantined. Then the unreleased leases of the quarantined stages, and every
    abandoned staging lease (of an attempt not deferred) whose stage is missing, are
    released at their judging times. No transition or event.
    """
    quarantined, busy, releasing = [], [], []
    for path in sorted(disk.stages):
        lease = stage_lease(state, path)
        if disk.stages[path]:
            busy.append(path)
        elif lease is None:
            quarantined.append(path)
        elif lease.attempt_id in deferred:
            continue
        elif lease.released_at_ns is not None or abandoned(state, lease, t_ns):
            quarantined.append(path)
            if lease.released_at_ns is None:
                releasing.append(lease)
    for lease in sorted(state.leases.values(), key=lambda row: row.id):
        if (
            lease.purpose is LeasePurpose.STAGING
            and lease.staging_path not in disk.stages
            and lease.attempt_id not in deferred
            and abandoned(state, lease, t_ns)
        ):
            releasing.append(lease)
    leases = state.leases
    for lease in releasing:
        released = attrs.evolve(lease, released_at_ns=judged_at(state, lease, t_ns))
        leases = put(leases, lease.id, released)
    if releasing:
        state = attrs.evolve(state, leases=leases)
    return state, quarantined, busy


# --- objects -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Candidate:
    """An unregistered attempt object whose ``outcome.json`` names a recoverable attempt."""

    path: str
    registration: ArtifactRegistration
    data: bytes
    claim: OutcomeClaim


def reject(path: str, code: str, message: str) -> RejectedArtifact:
    return RejectedArtifact(path=path, code=code, message=message)


def read_claim(found: DiskObject) -> OutcomeClaim | None:
    """The claims of the object's ``outcome.json``, or None when it is not a canonical
    version-1 outcome document (including a dependency list a commit would refuse)."""
    assert found.outcome is not None
    try:
        claim = read_outcome(found.outcome)
    except RunStoreError:
        return None
    return None if references_refusal(claim.references) is not None else claim


@attrs.frozen(kw_only=True)
class Findings:
    """The pass's reading of the unregistered objects, against the state it started from."""

    candidates: Mapping[str, list[Candidate]]  # recoverable attempt id -> its candidates
    orphans: list[ArtifactRegistration]  # verified objects of other kinds
    rejected: list[RejectedArtifact]


def sort_objects(state: ModelState, disk: DiskView, recovering: frozenset[str]) -> Findings:
    """Sort every unregistered object (an object whose id has a row is passed over):

    * an ``attempt-*`` object is ``corrupt`` when it does not verify or has no
      ``outcome.json``, ``malformed_outcome``, ``unknown_attempt``, ``attempt_terminal``
      (terminal when the pass began), then a candidate of the attempt it names when that
      attempt is in ``recovering`` (recoverable, not deferred); one naming a live or
      deferred attempt is its owner's and is not listed;
    * an object of another kind is ``corrupt`` when it does not verify, else an orphan.
    """
    candidates: dict[str, list[Candidate]] = {attempt_id: [] for attempt_id in recovering}
    orphans, rejected = [], []
    for path in sorted(disk.objects):
        if object_id(path) in state.artifacts:
            continue
        found = disk.objects[path]
        if found.registration is None:
            rejected.append(reject(path, codes.CORRUPT, "it does not verify at its address"))
        elif found.registration.kind is not ArtifactKind.ATTEMPT:
            orphans.append(found.registration)
        elif found.outcome is None:
            rejected.append(reject(path, codes.CORRUPT, "it has no outcome.json"))
        elif (claim := read_claim(found)) is None:
            rejected.append(reject(path, codes.MALFORMED_OUTCOME, "not an outcome document"))
        elif (attempt := state.attempts.get(claim.attempt_id)) is None:
            rejected.append(reject(path, codes.UNKNOWN_ATTEMPT, f"{claim.attempt_id} is unknown"))
        elif attempt.state in TERMINAL_STATES:
            rejected.append(reject(path, codes.ATTEMPT_TERMINAL, f"the attempt is {attempt.state}"))
        elif attempt.id in recovering:
            candidate = Candidate(
                path=path, registration=found.registration, data=found.outcome, claim=claim
            )
            candidates[attempt.id].append(candidate)
    return Findings(candidates=candidates, orphans=orphans, rejected=rejected)


# --- attempts ------------------------------------------------------------------------------


def failure_object(document: bytes, t_ns: int) -> ArtifactRegistration:
    """The registration of recovery's own failure object: only ``outcome.json`` (and its
    manifest), verified at ``t_ns``."""
    completed = content.complete({}, {OUTCOME_FILE: document})
    assert not isinstance(completed, Refusal)
    _, tree_sha256, manifest_sha256 = completed
    return ArtifactRegistration(
        kind=ArtifactKind.ATTEMPT,
        path=f"artifacts/attempt-{tree_sha256}",
        content_sha256=tree_sha256,
        manifest_sha256=manifest_sha256,
        verified_at_ns=t_ns,
    )


def interrupted_failure(
    state: ModelState, item: Recoverable, t_ns: int, trail: list[ModelState]
) -> tuple[ModelState, TerminalAttempt]:
    """Commit the attempt's interrupted failure at its effective time ``e``: to finalizing
    first if needed (an ``attempt_finalizing`` event without a ``claim`` key), then
    ``Failed(interrupted_attempt)`` naming the cause and the state found, with recovery's
    own failure object and a ``leased_root`` reference to each artifact rooted under its
    leases; finished and committed at ``e``."""
    attempt = state.attempts[item.attempt_id]
    interrupted_state = attempt.state
    now = rules.effective_now(t_ns, attempt.updated_at_ns)
    if attempt.state is not AttemptState.FINALIZING:
        payload = payloads.finalizing_payload(attempt.state, attempt.revision + 1, None)
        state, attempt, _ = transition(
            state, attempt, now, AttemptState.FINALIZING, payloads.ATTEMPT_FINALIZING, payload
        )
        trail.append(state)
    roots = leased_roots(state, attempt.id)
    outcome = interrupted_outcome(item.cause, interrupted_state)
    document = outcome_document(state, attempt.id, outcome, roots, now)
    return finish(state, attempt, now, now, outcome, failure_object(document, t_ns), roots)


def recover_attempt(
    state: ModelState,
    item: Recoverable,
    candidates: Sequence[Candidate],
    t_ns: int,
    corrupt: frozenset[str],
    trail: list[ModelState],
) -> tuple[ModelState, TerminalAttempt, list[RejectedArtifact]]:
    """Finalize one recoverable attempt: import its one passing candidate, or commit its
    interrupted failure (no candidate passes, or several do: all ``ambiguous``). Among
    passing candidates recovery's own published failures take precedence (an earlier pass
    already judged the owner's outcomes); the other passing ones are then ``ambiguous``.
    Every candidate not imported is rejected with the first check it failed."""
    attempt = state.attempts[item.attempt_id]
    rejected, passing = [], []
    for candidate in candidates:
        failed = rejection(state, attempt, candidate.claim, candidate.data, corrupt)
        if failed is None:
            passing.append(candidate)
        else:
            rejected.append(reject(candidate.path, *failed))
    own = [c for c in passing if interrupted_claims(c.claim.outcome) is not None]
    considered = own or passing
    chosen_one = considered[0] if len(considered) == 1 else None
    rejected.extend(
        reject(other.path, codes.AMBIGUOUS, "another candidate passes too")
        for other in passing
        if other is not chosen_one
    )
    if chosen_one is None:
        new_state, receipt = interrupted_failure(state, item, t_ns, trail)
        trail.append(new_state)
        return new_state, receipt, rejected
    chosen = chosen_one
    finished = chosen.claim.finished_at_ns
    commit_ns = max(rules.effective_now(t_ns, attempt.updated_at_ns), finished)
    artifact = attrs.evolve(chosen.registration, verified_at_ns=t_ns)
    references = chosen.claim.references
    new_state, receipt = finish(
        state, attempt, finished, commit_ns, chosen.claim.outcome, artifact, references
    )
    trail.append(new_state)
    return new_state, receipt, rejected


# --- the pass ------------------------------------------------------------------------------


def register_orphans(
    state: ModelState, orphans: Sequence[ArtifactRegistration], t_ns: int
) -> tuple[ModelState, list[ArtifactRegistration]]:
    """Register each verified independent orphan as an artifact row only, verified at
    ``t_ns`` (its id holds its tree hash, so it cannot conflict)."""
    registered = []
    for orphan in orphans:
        artifact = attrs.evolve(orphan, verified_at_ns=t_ns)
        added = with_artifact(state, artifact)
        assert not isinstance(added, Refusal), added
        state = added
        registered.append(artifact)
    return state, registered


def recover(
    state: ModelState, t_ns: int, disk: DiskView, trail: list[ModelState] | None = None
) -> tuple[ModelState, RecoveryReport | Refusal]:
    """One recovery pass at ``t_ns`` over ``state`` and what ``disk`` says is on disk
    (SPEC.md section 14, "Order of a pass").

    1. A held stage defers the attempt its lease names (:func:`deferred_attempts`).
    2. Each attempt :func:`recoverable` at ``t_ns`` and not deferred, in id order: the
       one candidate that passes every check is imported as ``commit_finalization`` would
       (its outcome and finish time, its dependencies as references, the leases released
       at ``max(e, finish)``); otherwise the interrupted failure is committed at ``e``.
    3. Stages (:func:`settle_stages`), judged after the attempts' commits, so the stages
       of an attempt this pass finalized are quarantined by this pass.
    4. Independent orphans are registered as artifact rows.

    ``trail``, when given, receives the state after each transaction that changes
    something, in the store's order: per attempt the move to finalizing (if any) and the
    terminal commit, then the staging leases' release (if any), then the orphans (if any).

    Every artifact registered is verified at ``t_ns``. Check order: ``invalid_record``
    (``t_ns`` not an int, ``disk`` not a DiskView), ``out_of_range`` (``t_ns``). With
    nothing to resolve the very same state comes back with an empty report, so a second
    pass commits nothing and reports only what is still on disk (busy stages, rejected
    objects). Result: the :class:`~runstore.recovery_report.RecoveryReport`.
    """
    error = arguments.recover_arguments(t_ns, disk)
    if error is None:
        error = rules.range_refusal(ns=[("t_ns", t_ns)])
    if error is not None:
        return state, refused(error)
    deferred = deferred_attempts(state, disk)
    found = [item for item in recoverable(state, t_ns) if item.attempt_id not in deferred]
    objects = sort_objects(state, disk, frozenset(item.attempt_id for item in found))
    steps: list[ModelState] = [] if trail is None else trail
    work = state
    terminals, rejected = [], list(objects.rejected)
    for item in found:
        candidates = objects.candidates[item.attempt_id]
        work, receipt, refused_here = recover_attempt(
            work, item, candidates, t_ns, disk.corrupt, steps
        )
        terminals.append(receipt)
        rejected.extend(refused_here)
    settled, quarantined, busy = settle_stages(work, t_ns, disk, deferred)
    if settled is not work:
        work = settled
        steps.append(work)
    work, imported = register_orphans(work, objects.orphans, t_ns)
    if imported:
        steps.append(work)
    report = RecoveryReport(
        terminals=tuple(terminals),
        imported_artifacts=tuple(imported),
        quarantined_stages=tuple(quarantined),
        busy_stages=tuple(busy),
        rejected_artifacts=tuple(rejected),
    )
    return work, report
