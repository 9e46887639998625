"""Finalization: begin_finalization (the slot's success claim), commit_finalization (the
terminal outcome), the acceptance rules, and the terminal commit shared with recovery.

Rules of this file: pure functions ``op(state, ...) -> (state, result | Refusal)``; a
refusal returns the input state object unchanged. Each operation runs the guarded check
sequence of :mod:`runstore.model.guard` (preceded by its own argument checks) and then its
own checks in the order its docstring gives. The leaf rules (edges, payloads, reference
shapes) are the value layer's, shared with the writer (:mod:`runstore.store.finalization`).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from runstore import arguments
from runstore import edges
from runstore import payloads
from runstore import rules
from runstore.enums import ArtifactKind
from runstore.enums import AttemptState
from runstore.enums import Completion
from runstore.enums import ExecutionKind
from runstore.enums import LeasePurpose
from runstore.enums import SlotRole
from runstore.errors import AcceptanceUnsatisfiedError
from runstore.errors import DuplicateLeaseError
from runstore.errors import IllegalTransitionError
from runstore.errors import InvalidRecordError
from runstore.errors import OwnerMismatchError
from runstore.errors import RegistrationConflictError
from runstore.errors import UnknownArtifactError
from runstore.model.artifacts import with_artifact
from runstore.model.attempts import transition
from runstore.model.guard import check_guard
from runstore.model.state import AttemptRow
from runstore.model.state import ClaimRow
from runstore.model.state import LeaseRow
from runstore.model.state import ModelState
from runstore.model.state import Refusal
from runstore.model.state import drop
from runstore.model.state import put
from runstore.model.state import refuse
from runstore.model.state import refused
from runstore.receipts import ClaimDisposition
from runstore.receipts import OwnedAttempt
from runstore.receipts import TerminalAttempt
from runstore.records import ArtifactRegistration
from runstore.requests import Accepted
from runstore.requests import LeaseRequest
from runstore.requests import Reference
from runstore.requests import Superseded
from runstore.requests import TerminalOutcome
from runstore.shapes import references_refusal


def begin_finalization(
    state: ModelState, guard: OwnedAttempt, lease: LeaseRequest, now_ns: int
) -> tuple[ModelState, ClaimDisposition | Refusal]:
    """Enter finalizing and decide the slot's success claim in the same step.

    This is the success contender's way into finalizing (every slot kind and role); an
    attempt that will fail or be censored enters through ``advance`` instead and contends
    for nothing. A contender that takes the claim releases it only by committing its
    outcome.

    Check order: the guarded sequence, then ``illegal_transition`` (the attempt is already
    finalizing), then the lease request: ``owner_mismatch`` (its owner token is not the
    guard's), ``duplicate_lease`` (its id exists), ``expiry_not_after_now`` (its expiry is
    at or before the effective now). The request is checked even when the decision turns
    out to be superseded.

    Decision: superseded when the slot already has an accepted attempt or another attempt
    holds the slot's claim (even an expired one: claims are never stolen); otherwise
    claimed. Commits the finalizing transition with an ``attempt_finalizing`` event whose
    ``claim`` is ``"claimed"`` or ``"superseded"``; when claimed, also the finalization
    lease (acquired at the effective now, next fencing token) and the claim row. A
    superseded decision creates no lease. Result: the disposition with the new guard.
    """
    error = arguments.begin_finalization_arguments(guard, lease, now_ns)
    if error is not None:
        return state, refused(error)
    checked = check_guard(state, guard, now_ns)
    if isinstance(checked, Refusal):
        return state, checked
    before = checked.attempt
    if not edges.can_finalize(before.state):
        return state, refuse(IllegalTransitionError, f"attempt is already {before.state.value}")
    if lease.owner_token != guard.owner_token:
        return state, refuse(OwnerMismatchError, "the finalization lease needs the same owner")
    if lease.lease_id in state.leases:
        return state, refuse(DuplicateLeaseError, f"lease {lease.lease_id} already exists")
    error = rules.expiry_refusal(lease.expires_at_ns, checked.now_ns)
    if error is not None:
        return state, refused(error)
    holder = state.claims.get(before.slot_id)
    claimed = holder is None and not state.slot_satisfied(before.slot_id)
    decision = payloads.CLAIMED if claimed else payloads.SUPERSEDED
    payload = payloads.finalizing_payload(before.state, before.revision + 1, decision)
    new_state, after, _ = transition(
        state, before, checked.now_ns, AttemptState.FINALIZING, payloads.ATTEMPT_FINALIZING, payload
    )
    if not claimed:
        return new_state, ClaimDisposition(
            attempt=guard.moved(after.state, after.revision, None), claimed=False
        )
    lease_row = LeaseRow(
        id=lease.lease_id,
        fencing_token=state.next_fencing_token(),
        owner_token=lease.owner_token,
        attempt_id=after.id,
        purpose=LeasePurpose.FINALIZATION,
        acquired_at_ns=checked.now_ns,
        expires_at_ns=lease.expires_at_ns,
    )
    claim = ClaimRow(
        slot_id=after.slot_id,
        attempt_id=after.id,
        lease_id=lease.lease_id,
        claimed_at_ns=checked.now_ns,
    )
    new_state = attrs.evolve(
        new_state,
        leases=put(new_state.leases, lease_row.id, lease_row),
        claims=put(new_state.claims, claim.slot_id, claim),
    )
    return new_state, ClaimDisposition(
        attempt=guard.moved(after.state, after.revision, lease.lease_id), claimed=True
    )


def acceptance_refusal(state: ModelState, attempt: AttemptRow) -> Refusal | None:
    """``acceptance_unsatisfied`` unless the attempt's slot may be accepted.

    * A warm-up slot needs nothing.
    * A stream slot needs a selection in every checkpoint slot it owns (possibly of
      observations from earlier attempts, possibly not_reached).
    * A one-shot or fresh-observation slot needs, for each observation slot it owns, a
      selection, and a valid observation with completion reached produced by this attempt
      (which need not be the selected one: an earlier selection is preserved).
    """
    slot = state.attempt_slots[attempt.slot_id]
    if slot.role is SlotRole.WARMUP:
        return None
    for member in state.member_slots(slot.id):
        if member.id not in state.selections:
            return refuse(
                AcceptanceUnsatisfiedError, f"slot {member.logical_slot} has no selection"
            )
        if slot.execution_kind is ExecutionKind.STREAM:
            continue
        if not any(
            row.observation.attempt_id == attempt.id
            and row.observation.slot_id == member.id
            and row.observation.valid
            and row.observation.completion is Completion.REACHED
            for row in state.observations.values()
        ):
            return refuse(
                AcceptanceUnsatisfiedError,
                f"the attempt produced no valid, complete observation for {member.logical_slot}",
            )
    return None


def finalizing_decision(state: ModelState, attempt: AttemptRow) -> str | None:
    """How the finalizing attempt entered finalizing: the ``claim`` of the event of its
    current (finalizing) transition, or None when it entered without contending."""
    for transition_row in reversed(state.transitions):
        if (transition_row.attempt_id, transition_row.revision) == (attempt.id, attempt.revision):
            claim = state.events[transition_row.event_sequence - 1].payload.get("claim")
            assert claim is None or isinstance(claim, str)
            return claim
    raise AssertionError(f"attempt {attempt.id} has no transition {attempt.revision}")


def finish(
    state: ModelState,
    attempt: AttemptRow,
    finished_at_ns: int,
    commit_ns: int,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
) -> tuple[ModelState, TerminalAttempt]:
    """The terminal commit (shared with recovery), after every check has passed.

    Registers the final artifact (the caller checked conflicts) and the references,
    appends the finalizing -> terminal transition and ``attempt_finished`` event at
    ``finished_at_ns`` (already effective), sets the terminal columns (finished then),
    deletes the claim the attempt holds, and releases every unreleased lease of the
    attempt at ``commit_ns`` (at or after the finish time), or at the lease's acquisition
    when that is later.
    """
    assert commit_ns >= finished_at_ns >= attempt.updated_at_ns
    registered = with_artifact(state, artifact)
    assert not isinstance(registered, Refusal)
    payload = payloads.finished_payload(outcome, attempt.revision + 1)
    new_state, after, sequence = transition(
        registered,
        attempt,
        finished_at_ns,
        outcome.state,
        payloads.ATTEMPT_FINISHED,
        payload,
        outcome=outcome,
        final_artifact_id=artifact.id,
    )
    leases = new_state.leases
    for lease in new_state.attempt_leases(attempt.id):
        if lease.released_at_ns is None:
            released_at = max(commit_ns, lease.acquired_at_ns)  # never before it began
            leases = put(leases, lease.id, attrs.evolve(lease, released_at_ns=released_at))
    claims = new_state.claims
    claim = new_state.owned_claim(attempt.id)
    if claim is not None:
        claims = drop(claims, claim.slot_id)
    new_state = attrs.evolve(
        new_state,
        leases=leases,
        claims=claims,
        attempt_artifacts=new_state.attempt_artifacts
        | {(attempt.id, *reference.pair) for reference in references},
    )
    receipt = TerminalAttempt(
        attempt_id=after.id,
        slot_id=after.slot_id,
        retry_index=after.retry_index,
        state=after.state,
        revision=after.revision,
        finished_at_ns=finished_at_ns,
        event_sequence=sequence,
    )
    return new_state, receipt


def commit_finalization(
    state: ModelState,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    finished_at_ns: int,
    now_ns: int,
) -> tuple[ModelState, TerminalAttempt | Refusal]:
    """Commit the attempt's terminal outcome with its published attempt artifact.

    ``finished_at_ns`` is the immutable finish time, clamped up to the preceding
    transition; ``now_ns`` is the commit time, clamped up to the finish time: the guarded
    sequence (lease and claim liveness) runs at the commit time and the leases are
    released then, while the terminal transition, event and finish column carry the
    finish time.

    Check order: ``invalid_record`` (argument types), ``out_of_range`` (``now_ns``, then
    ``finished_at_ns``), ``invalid_record`` (the artifact is not of kind attempt; then
    :func:`references_refusal`), the guarded sequence (so an expired claim refuses every
    outcome with ``claim_expired``), ``illegal_transition`` (the attempt is not
    finalizing), :func:`runstore.rules.outcome_refusal` against how the attempt entered
    finalizing (``claim_required`` for Accepted without the claim; ``outcome_not_permitted``
    for Superseded unless it lost the claim contest, and for anything else if it did), for
    ``Accepted`` :func:`acceptance_refusal`; then ``registration_conflict`` (the artifact
    id is registered with other digests) and ``unknown_artifact`` (a reference names an
    artifact that is neither registered nor the final artifact itself). ``registration_conflict``
    also refuses an artifact that is already another attempt's final artifact (one final
    artifact per attempt).

    Commits as :func:`finish`. Result: the terminal receipt.
    """
    error = arguments.commit_finalization_arguments(
        guard, outcome, artifact, references, finished_at_ns, now_ns
    )
    if error is not None:
        return state, refused(error)
    checked = check_commit(state, guard, outcome, artifact, references, finished_at_ns, now_ns)
    if isinstance(checked, Refusal):
        return state, checked
    attempt, finished, now = checked
    return finish(state, attempt, finished, now, outcome, artifact, references)


def check_commit(
    state: ModelState,
    guard: OwnedAttempt,
    outcome: TerminalOutcome,
    artifact: ArtifactRegistration,
    references: Sequence[Reference],
    finished_at_ns: int,
    now_ns: int,
) -> tuple[AttemptRow, int, int] | Refusal:
    """:func:`commit_finalization`'s checks after its argument types, in its order (the
    artifact's kind and the references' shape first, with the ranges); returns the attempt,
    the effective finish time and the effective commit time."""
    shape = None
    if artifact.kind is not ArtifactKind.ATTEMPT:
        shape = refuse(InvalidRecordError, "the final artifact must be of kind attempt")
    if shape is None and (error := references_refusal(references)) is not None:
        shape = refused(error)
    checked = check_guard(
        state,
        guard,
        now_ns,
        ns=[("finished_at_ns", finished_at_ns)],
        shape=shape,
        not_before_ns=finished_at_ns,
    )
    if isinstance(checked, Refusal):
        return checked
    attempt = checked.attempt
    unfinishable = finishing_refusal(state, attempt, outcome)
    if unfinishable is not None:
        return unfinishable
    registered = with_artifact(state, artifact)
    if isinstance(registered, Refusal):
        return registered
    if any(row.final_artifact_id == artifact.id for row in state.attempts.values()):
        return refuse(
            RegistrationConflictError, f"artifact {artifact.id} is another attempt's final one"
        )
    for role, artifact_id in (reference.pair for reference in references):
        if artifact_id not in registered.artifacts:
            return refuse(UnknownArtifactError, f"{role} artifact {artifact_id} is unknown")
    finished = rules.effective_now(finished_at_ns, attempt.updated_at_ns)
    return attempt, finished, checked.now_ns


def finishing_refusal(
    state: ModelState, attempt: AttemptRow, outcome: TerminalOutcome
) -> Refusal | None:
    """Whether ``attempt`` may finish with ``outcome`` now: ``illegal_transition`` (not
    finalizing), :func:`runstore.rules.outcome_refusal` against how it entered finalizing,
    and for ``Accepted`` :func:`acceptance_refusal`."""
    if attempt.state is not AttemptState.FINALIZING:
        return refuse(IllegalTransitionError, f"attempt is {attempt.state.value}, not finalizing")
    error = rules.outcome_refusal(
        finalizing_decision(state, attempt),
        isinstance(outcome, Accepted),
        isinstance(outcome, Superseded),
    )
    if error is not None:
        return refused(error)
    if isinstance(outcome, Accepted):
        return acceptance_refusal(state, attempt)
    return None
